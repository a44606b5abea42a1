//! The reference models of the one-word algorithms, and the plain numbers they answer in.
//!
//! Shared by the property tests (`tests/model.rs`, `stepped.rs`, `sliding_window.rs`, through
//! `tests/common`) and the differential fuzz target (`fuzz/fuzz_targets/algorithms.rs`), so
//! that both hold the limiters to one model each. Nothing here depends on proptest.
#![allow(dead_code)]

pub mod schedule;
pub mod sliding_window;
pub mod stepped;

use std::ops::Deref;
use std::sync::{Arc, Mutex};

use flowgate::clock::{Clock, ManualClock};
use flowgate::{Allowed, InsufficientCapacity, Receipt, Refused};

/// A [`ManualClock`] whose next reading can be stale: after [`stale`](Self::stale)`(at)` the
/// next `now()` answers `at` (a thread preempted between its clock read and its decision), and
/// every later one, a clamp's fresh reading included, the manual clock's own. Dereferences to
/// the manual clock, which sets and moves the time.
#[derive(Debug, Clone, Default)]
pub struct Lagging {
    clock: ManualClock,
    next: Arc<Mutex<Option<u64>>>,
}

impl Lagging {
    pub fn starting_at(nanos: u64) -> Self {
        Self {
            clock: ManualClock::starting_at(nanos),
            next: Arc::default(),
        }
    }

    /// The next reading answers `at`.
    pub fn stale(&self, at: u64) {
        *self.next.lock().unwrap() = Some(at);
    }
}

impl Clock for Lagging {
    fn now(&self) -> u64 {
        self.next
            .lock()
            .unwrap()
            .take()
            .unwrap_or_else(|| self.clock.now())
    }

    fn sleep(&self, duration: std::time::Duration) {
        self.clock.sleep(duration);
    }
}

impl Deref for Lagging {
    type Target = ManualClock;

    fn deref(&self) -> &ManualClock {
        &self.clock
    }
}

/// One step of a differential run: what the property test (`tests/model.rs`) draws and the
/// fuzz target (`fuzz/fuzz_targets/algorithms.rs`) decodes, each then applied to a limiter and
/// its model alike.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(fuzzing, derive(arbitrary::Arbitrary))]
pub enum Op {
    Advance(u64),
    Rewind(u64),
    Set(u64),
    Check(u32),
    /// `reserve(n)` reading `now − behind` while the clock reads `now` ([`Lagging::stale`]).
    CheckAt(u32, u64),
    Peek(u32),
    /// Gives back the receipt of the `k`-th newest admission (modulo how many there were).
    GiveBack(u8),
    Reset,
    Available,
}

/// An operation's answer, as numbers a model can produce independently.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// (remaining, limit, reset_after, delay)
    Allowed(u128, u128, u128, u128),
    /// (remaining, limit, retry_after, reset_after)
    Refused(u128, u128, u128, u128),
    /// (requested, capacity): can never succeed.
    Never(u128, u128),
    /// Cells available.
    Available(u128),
    /// Whether a give-back gave the cells back.
    GaveBack(bool),
    /// An operation without an answer (a reset).
    Done,
}

/// The answer of a `check_n` or `peek`.
pub fn answer_of(r: Result<Result<Allowed, Refused>, InsufficientCapacity>) -> Answer {
    match r {
        Ok(Ok(a)) => Answer::Allowed(
            a.remaining().into(),
            a.limit().into(),
            a.reset_after().as_nanos(),
            a.delay().as_nanos(),
        ),
        Ok(Err(r)) => Answer::Refused(
            r.remaining().into(),
            r.limit().into(),
            r.retry_after().as_nanos(),
            r.reset_after().as_nanos(),
        ),
        Err(e) => Answer::Never(e.requested.into(), e.burst.into()),
    }
}

/// The answer of a `reserve`, without its receipt.
pub fn answer_of_reserved(
    r: &Result<Result<(Allowed, Receipt), Refused>, InsufficientCapacity>,
) -> Answer {
    answer_of(match r {
        Ok(Ok((allowed, _))) => Ok(Ok(*allowed)),
        Ok(Err(refused)) => Ok(Err(*refused)),
        Err(capacity) => Err(*capacity),
    })
}

/// The admissions of a scenario not given back yet, each with its receipt and the model as it
/// was before and after it: what a give-back is checked against. The model gives back exactly
/// as the limiter must: it returns to its state before the admission only if it is still in its
/// state after.
pub struct Receipts<M>(Vec<(Receipt, M, M)>);

impl<M: Clone + PartialEq> Receipts<M> {
    pub fn new() -> Self {
        Self(Vec::new())
    }

    /// The answer of `reserved`, keeping its receipt (if it admitted) with the model `before`
    /// and `after` it.
    pub fn note(
        &mut self,
        reserved: Result<Result<(Allowed, Receipt), Refused>, InsufficientCapacity>,
        before: M,
        after: &M,
    ) -> Answer {
        let answer = answer_of_reserved(&reserved);
        if let Ok(Ok((_, receipt))) = reserved {
            self.0.push((receipt, before, after.clone()));
        }
        answer
    }

    /// Gives back the receipt of the `k`-th newest admission not given back yet (modulo how
    /// many) through `give_back`, and to `model`: the limiter's answer and the model's.
    pub fn give_back(
        &mut self,
        k: u8,
        give_back: impl FnOnce(Receipt) -> bool,
        model: &mut M,
    ) -> (Answer, Answer) {
        if self.0.is_empty() {
            return (
                Answer::GaveBack(give_back(Receipt::default())),
                Answer::GaveBack(false),
            );
        }
        let at = self.0.len() - 1 - usize::from(k) % self.0.len();
        let (receipt, before, after) = self.0.remove(at);
        let want = !receipt.is_empty() && *model == after;
        let got = give_back(receipt);
        if want {
            *model = before;
        }
        (Answer::GaveBack(got), Answer::GaveBack(want))
    }
}

/// A window algorithm's reference model.
pub trait WindowModel: Clone + PartialEq {
    /// Decides `n` at the reading `at`, the clock's fresh reading being `fresh`.
    fn check(&mut self, at: u128, fresh: u128, n: u128) -> Answer;
}

/// Any one-word algorithm's model behind one surface: the schedule's (GCRA, the leaky bucket,
/// credit), the stepped counter's (the interval refill, the fixed window) or the sliding
/// window counter's. Shared by the fuzz target and `tests/up_to.rs`.
#[derive(Clone, PartialEq)]
pub enum AnyModel {
    Schedule(schedule::Model),
    Stepped(stepped::Model),
    Sliding(sliding_window::Model),
}

impl AnyModel {
    /// Decides `n` at the reading `at`, the clock's fresh reading being `fresh`.
    pub fn check(&mut self, at: u64, fresh: u64, n: u32) -> Answer {
        let (at, fresh, n) = (at.into(), fresh.into(), n.into());
        match self {
            Self::Schedule(m) => m.check(at, fresh, n),
            Self::Stepped(m) => m.check(at, fresh, n),
            Self::Sliding(m) => m.check(at, fresh, n),
        }
    }

    /// What `check` would answer, changing nothing.
    pub fn peek(&self, now: u64, n: u32) -> Answer {
        match self {
            Self::Schedule(m) => m.decide(now.into(), n.into()),
            _ => self.clone().check(now, now, n),
        }
    }

    /// The cells available at `now`.
    pub fn available(&self, now: u64) -> Answer {
        match self {
            Self::Schedule(m) => {
                let now = now.into();
                Answer::Available(m.remaining(m.clamped(now).saturating_sub(now)))
            }
            _ => match self.peek(now, 0) {
                Answer::Allowed(remaining, ..) => Answer::Available(remaining),
                other => other,
            },
        }
    }
}
