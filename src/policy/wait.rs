//! Waiting on a [`Policies`] set: as a single limiter waits (see the
//! [`wait` module docs](crate::wait)), on every quota that applies at once. A refusal is waited
//! out for its [`retry_after`](Refused::retry_after), which covers every refusing quota
//! and carries the refusing policy's jitter; an admission with a delay (a shaping quota) is a
//! reservation on every quota it took from, given back whole if the wait is abandoned.

use core::future::Future;
use core::time::Duration;

use super::layer::Place;
use super::report::UndoLog;
use super::report::{Report, Summary, Tightest};
use super::Policies;
use super::{Allowed, Error, Refused};
use crate::algorithm::{Algorithm, AnyAlgorithm};
use crate::clock::Clock;
use crate::outcome::Gauge;
use crate::quota::Quota;
use crate::wait::{as_is, block, judge, until, Attempt, GiveBack, WaitOptions};

/// A booking ahead on a policy set (an admission a shaping quota delays), which a wait gives
/// back whole, write by write, if it is dropped before the booking's time: what the in-process
/// [`Backend`](crate::backend::Backend)'s waits hold.
pub struct Booked<'p, R: ?Sized, C: Clock> {
    set: &'p Policies<R, C>,
    undo: UndoLog<'p>,
}

impl<R: ?Sized, C: Clock> GiveBack for Booked<'_, R, C> {
    fn give_back(mut self) {
        self.set.undo(&mut self.undo, 0);
    }
}

/// The admission, and the writes it made (for a reservation that may be given back).
struct Reserving(Tightest);

impl<'p> Report<'p> for Reserving {
    type Output = (Allowed, UndoLog<'p>);

    #[inline(always)]
    fn taken(
        &mut self,
        place: &'p Place,
        state: impl Fn() -> (Gauge, Quota),
        next: impl Fn() -> u64,
    ) {
        self.0.taken(place, state, next);
    }

    fn finish(self, summary: Summary<'_, 'p>) -> Self::Output {
        let undo = summary.undo.iter().copied().collect();
        (self.0.finish(summary), undo)
    }
}

/// # Waiting
impl<R: ?Sized, C: Clock> Policies<R, C> {
    /// Takes `n` cells from every quota that applies to `request`, sleeping (through the clock)
    /// until all are available at once, within `options` (a bound, jitter on retries on top of
    /// the policies' own).
    ///
    /// # Errors
    /// [`Error::Capacity`] if `n` exceeds an enforcing quota's capacity (naming it);
    /// [`Error::Refused`] when the wait would exceed the bound (at once, taking nothing), past
    /// the clock's horizon, or when a shaping quota's queue is full.
    pub fn wait(&self, request: &R, n: u32, options: WaitOptions) -> Result<Allowed, Error> {
        block(self.clock(), options, |now, left| {
            self.attempt(request, n, now, left)
        })
    }

    /// [`wait`](Self::wait) without blocking a thread, sleeping through `sleep` (any async
    /// timer: `tokio::time::sleep`, `async_io::Timer::after`, …). Cancellation-safe: between
    /// attempts it holds nothing, and a reservation it sleeps on is given back if it is
    /// dropped.
    ///
    /// # Errors
    /// As [`wait`](Self::wait).
    pub async fn until_ready<F: Future<Output = ()>>(
        &self,
        request: &R,
        n: u32,
        options: WaitOptions,
        sleep: impl FnMut(Duration) -> F,
    ) -> Result<Allowed, Error> {
        let attempt = |now, left| self.attempt(request, n, now, left);
        until(self.clock(), options, attempt, sleep).await
    }

    pub(crate) fn attempt(
        &self,
        request: &R,
        n: u32,
        now: u64,
        left: u64,
    ) -> Attempt<Booked<'_, R, C>> {
        if n == 0 {
            return as_is(self.check_n_at(request, 0, now));
        }
        let answer = match self.decide(request, n, || now, Reserving(Tightest::default())) {
            Ok(answer) => answer,
            Err(capacity) => return Attempt::Fail(Error::Capacity(capacity)),
        };
        let (answer, reserved) = match answer {
            Ok((allowed, undo)) => (Ok(allowed), Some(Booked { set: self, undo })),
            Err(refused) => (Err(refused), None),
        };
        judge(answer, reserved, left, |refused| self.queue_full(refused))
    }

    /// Whether `refused` came from a shaping quota, whose refusal means its queue is full.
    fn queue_full(&self, refused: &Refused) -> bool {
        let Some(by) = refused.by() else {
            return false;
        };
        let layer = &self.layers[by.policy_index()];
        let algorithm = |rules: &[_]| layer.algorithms(rules).get(by.quota_index()).copied();
        let algorithm = self.rules.with(algorithm);
        algorithm.is_some_and(|a: AnyAlgorithm| a.max_delay_nanos() > 0)
    }
}
