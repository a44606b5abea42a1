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
    /// Takes `n` cells, sleeping (through the clock) until they are available, within
    /// `options` (a bound, jitter on retries): see the [`wait` module docs](crate::wait) for the
    /// two disciplines.
    ///
    /// ```
    /// use core::time::Duration;
    /// use flowgate::{clock::ManualClock, Quota, RateLimiter, WaitOptions};
    ///
    /// let clock = ManualClock::new();
    /// let limiter = RateLimiter::with_clock(Quota::per_second(2)?, clock.clone());
    /// limiter.wait(2, WaitOptions::new())?; // the burst, at once
    /// limiter.wait(1, WaitOptions::new())?; // half a second later: a manual clock moves
    /// assert_eq!(clock.get(), Duration::from_millis(500).as_nanos() as u64);
    /// // The next cell is half a second away: past a bound of 100 ms, refused at once.
    /// let bounded = WaitOptions::new().at_most(Duration::from_millis(100));
    /// assert!(limiter.wait(1, bounded).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::Capacity`] if `n` exceeds the burst; [`Error::Refused`] when the wait would
    /// exceed the bound (at once, taking nothing), if the cells would only come back past the
    /// clock's horizon, or when a shaping algorithm's queue is full.
    pub fn wait(&self, n: u32, options: WaitOptions) -> Result<Allowed, Error> {
        block(self.clock(), options, |now, left| {
            self.attempt(n, now, left)
        })
    }

    /// [`wait`](Self::wait) without blocking a thread: sleeps through `sleep` (any async
    /// timer: `tokio::time::sleep`, `async_io::Timer::after`, …), which must agree with the
    /// limiter's clock. Cancellation-safe (see the
    /// [module docs](crate::wait#cancellation-asynchronous-waits)).
    ///
    // Compiled with the `tokio` feature only.
    #[cfg_attr(feature = "tokio", doc = "```")]
    #[cfg_attr(not(feature = "tokio"), doc = "```ignore")]
    /// use flowgate::{clock::TokioClock, Quota, RateLimiter, WaitOptions};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let runtime = tokio::runtime::Builder::new_current_thread()
    /// #     .enable_time()
    /// #     .start_paused(true)
    /// #     .build()?;
    /// # runtime.block_on(async {
    /// let limiter = RateLimiter::with_clock(Quota::per_second(1)?, TokioClock::new());
    /// let start = tokio::time::Instant::now();
    /// let wait = || limiter.until_ready(1, WaitOptions::new(), tokio::time::sleep);
    /// wait().await?; // at once
    /// wait().await?; // a second later, on tokio's (here paused) clock
    /// assert_eq!(start.elapsed(), std::time::Duration::from_secs(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })
    /// # }
    /// ```
    ///
    /// # Errors
    /// As [`wait`](Self::wait).
    pub fn until_ready<'a, F: Future<Output = ()> + 'a>(
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

    fn attempt(&self, n: u32, now: u64, left: u64) -> Attempt<(&Self, Receipt), Allowed, Error> {
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
