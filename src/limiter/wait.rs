//! Waiting on a [`RateLimiter`]: blocking, and asynchronous on any timer (or tokio's). See the
//! [`wait` module docs](crate::wait) for the two disciplines, bounds and cancellation.

use core::future::Future;
use core::time::Duration;

use super::RateLimiter;
use crate::algorithm::Algorithm;
use crate::cell::Receipt;
use crate::clock::Clock;
use crate::outcome::{Allowed, Error};
use crate::wait::{block, judge_reservation, until, Attempt, GiveBack, WaitOptions};

impl<C: Clock, A: Algorithm> GiveBack for (&RateLimiter<C, A>, Receipt) {
    fn give_back(self) {
        self.0.give_back(self.1);
    }
}

/// # Waiting
impl<C: Clock, A: Algorithm> RateLimiter<C, A> {
    /// Takes `n` cells, sleeping (through the clock) until they are available: see the
    /// [`wait` module docs](crate::wait) for the two disciplines.
    ///
    /// ```
    /// use core::time::Duration;
    /// use flowgate::{clock::ManualClock, Quota, RateLimiter};
    ///
    /// let clock = ManualClock::new();
    /// let limiter = RateLimiter::with_clock(Quota::per_second(2)?, clock.clone());
    /// limiter.wait(2)?; // the burst, at once
    /// limiter.wait(1)?; // half a second later: a manual clock moves instead of sleeping
    /// assert_eq!(clock.get(), Duration::from_millis(500).as_nanos() as u64);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::Capacity`] if `n` exceeds the burst; [`Error::Refused`] if the cells would only
    /// come back past the clock's horizon, or a shaping algorithm's queue is full.
    pub fn wait(&self, n: u32) -> Result<Allowed, Error> {
        self.wait_with(n, WaitOptions::new())
    }

    /// [`wait`](Self::wait) as `options` say (a bound, jitter on retries).
    ///
    /// # Errors
    /// As [`try_wait_for`](Self::try_wait_for).
    pub fn wait_with(&self, n: u32, options: WaitOptions) -> Result<Allowed, Error> {
        block(self.clock(), options, |now, left| {
            self.attempt(n, now, left)
        })
    }

    /// [`wait`](Self::wait), but for at most `max_wait`: a wait known to be longer returns
    /// [`Error::Refused`] at once, taking nothing.
    ///
    /// # Errors
    /// As [`wait`](Self::wait), and [`Error::Refused`] when the wait would exceed `max_wait`.
    pub fn try_wait_for(&self, n: u32, max_wait: Duration) -> Result<Allowed, Error> {
        self.wait_with(n, WaitOptions::new().at_most(max_wait))
    }

    /// [`wait_with`](Self::wait_with) without blocking a thread: sleeps through `sleep` (any
    /// async timer: `tokio::time::sleep`, `async_io::Timer::after`, …). Cancellation-safe (see
    /// the [module docs](crate::wait#cancellation-asynchronous-waits)).
    ///
    /// # Errors
    /// As [`try_wait_for`](Self::try_wait_for).
    pub fn until_ready_with<'a, F: Future<Output = ()> + 'a>(
        &'a self,
        n: u32,
        options: WaitOptions,
        sleep: impl FnMut(Duration) -> F + 'a,
    ) -> impl Future<Output = Result<Allowed, Error>> + 'a {
        until(
            self.clock(),
            options,
            move |now, left| self.attempt(n, now, left),
            sleep,
        )
    }

    fn attempt(&self, n: u32, now: u64, left: u64) -> Attempt<(&Self, Receipt)> {
        // The receipt is kept whatever the algorithm says of itself: any admission with a delay
        // is a reservation that may have to be given back. A shaping algorithm refuses on its
        // quota only when its queue is full.
        let shaping = self.algorithm.max_delay_nanos() > 0;
        judge_reservation(
            self.reserve_at(n, now),
            |receipt| (self, receipt),
            left,
            shaping,
        )
    }
}

/// # Waiting on tokio's timer (feature `tokio`)
#[cfg(feature = "tokio")]
impl<C: Clock, A: Algorithm> RateLimiter<C, A> {
    /// [`until_ready_with`](Self::until_ready_with) on `tokio::time::sleep`, with no bound.
    ///
    /// ```
    /// use flowgate::{clock::TokioClock, Quota, RateLimiter};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let runtime = tokio::runtime::Builder::new_current_thread()
    /// #     .enable_time()
    /// #     .start_paused(true)
    /// #     .build()?;
    /// # runtime.block_on(async {
    /// let clock = TokioClock::new();
    /// let limiter = RateLimiter::with_clock(Quota::per_second(1)?, clock);
    /// let start = tokio::time::Instant::now();
    /// limiter.until_ready(1).await?; // at once
    /// limiter.until_ready(1).await?; // a second later, on tokio's (here paused) clock
    /// assert_eq!(start.elapsed(), std::time::Duration::from_secs(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })
    /// # }
    /// ```
    ///
    /// # Errors
    /// As [`wait`](Self::wait).
    pub fn until_ready(&self, n: u32) -> impl Future<Output = Result<Allowed, Error>> + '_ {
        self.until_ready_with(n, WaitOptions::new(), tokio::time::sleep)
    }

    /// [`until_ready`](Self::until_ready) for at most `max_wait`.
    ///
    /// # Errors
    /// As [`try_wait_for`](Self::try_wait_for).
    pub fn until_ready_within(
        &self,
        n: u32,
        max_wait: Duration,
    ) -> impl Future<Output = Result<Allowed, Error>> + '_ {
        self.until_ready_with(n, WaitOptions::new().at_most(max_wait), tokio::time::sleep)
    }
}
