//! The reference models of the one-word algorithms, and the plain numbers they answer in.
//!
//! Shared by the property tests (`tests/model.rs`, `stepped.rs`, `sliding_window.rs`, through
//! `tests/common`) and the differential fuzz target (`fuzz/fuzz_targets/algorithms.rs`), so
//! that both hold the limiters to one model each. Nothing here depends on proptest.
#![allow(dead_code)]

pub mod schedule;
pub mod sliding_window;
pub mod stepped;

use flowgate::{Allowed, InsufficientCapacity, Refused};

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
    /// `check_n_at(n, now − behind)`: a stale reading while the clock reads `now`.
    CheckAt(u32, u64),
    Peek(u32),
    Refund(u32),
    /// `refund_at(n, now − behind)`.
    RefundAt(u32, u64),
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
    /// An operation without an answer (refund, reset).
    Done,
}

/// The answer of a `check_n` or `peek`.
pub fn answer_of(r: Result<Result<Allowed, Refused>, InsufficientCapacity>) -> Answer {
    match r {
        Ok(Ok(a)) => Answer::Allowed(
            a.remaining().into(),
            a.limit().into(),
            a.reset_after_nanos().into(),
            a.delay_nanos().into(),
        ),
        Ok(Err(r)) => Answer::Refused(
            r.remaining().into(),
            r.limit().into(),
            r.retry_after_nanos().into(),
            r.reset_after_nanos().into(),
        ),
        Err(e) => Answer::Never(e.requested.into(), e.burst.into()),
    }
}

/// A window algorithm's reference model.
pub trait WindowModel {
    /// Decides `n` at the reading `at`, the clock's fresh reading being `fresh`.
    fn check(&mut self, at: u128, fresh: u128, n: u128) -> Answer;
    /// Gives back `n` at `now`.
    fn refund(&mut self, now: u128, n: u128) -> Answer;
}
