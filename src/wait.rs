//! Waiting for cells instead of being refused: blocking waits on a [`RateLimiter`].
//!
//! # Two disciplines, chosen by the limiter's algorithm
//! * **Retry** (every algorithm that refuses: [`Gcra`](crate::Gcra), the windows, …): a refused
//!   caller sleeps for the refusal's [`retry_after`](Refused::retry_after), then asks again.
//!   Under contention another caller may take the cell first; the waiter then sleeps again, so
//!   waiters are not served in arrival order.
//! * **Reservation** (the shaping algorithms,
//!   [`LeakyBucket::shaper`](crate::algorithm::LeakyBucket::shaper) and
//!   [`Credit`](crate::algorithm::Credit)): a caller books its slot on arrival, in one
//!   compare-and-swap, and sleeps for the [`delay`](Allowed::delay) it was given. Waiters are
//!   served in the order they booked (first in, first out), nobody is overtaken, and the queue
//!   is bounded by the algorithm's maximum delay: a caller who would wait longer is refused at
//!   once and books nothing.
//!
//! # Bounded waits
//! [`RateLimiter::try_wait_for`] never sleeps only to fail when it can know in advance: a
//! refusal whose `retry_after`, or a reservation whose delay, exceeds what is left of
//! `max_wait` returns [`WaitError::TooLong`] at once. A reservation found too long is given back
//! by an exact compare-and-swap from the word it wrote to the word it replaced; if another
//! caller booked after it in the meantime, it gives way and the slot stays booked (unused: at
//! most `n` cells of under-admission, never more admitted). Under the retry discipline a waiter
//! that is overtaken while asleep can still run out of time after sleeping.
//!
//! # Time
//! Waits sleep through the limiter's clock ([`Clock::sleep`]): a [`ManualClock`] moves itself
//! forwards instead of sleeping, so tests of waits take no real time.
//!
//! [`ManualClock`]: crate::clock::ManualClock

use core::fmt;
use core::time::Duration;

use crate::algorithm::Algorithm;
use crate::clock::Clock;
use crate::decision::{Allowed, InsufficientCapacity, Refused};
use crate::limiter::RateLimiter;

/// Why a wait ended without cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitError {
    /// More cells than the bucket holds: the request can never succeed.
    Capacity(InsufficientCapacity),
    /// The wait would be longer than allowed (the `max_wait` of
    /// [`try_wait_for`](RateLimiter::try_wait_for), or never, past the clock's 584-year
    /// horizon). The refusal says how long it would have been; nothing was taken.
    TooLong(Refused),
}

impl fmt::Display for WaitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaitError::Capacity(capacity) => capacity.fmt(f),
            WaitError::TooLong(refused) => {
                write!(f, "the wait would take {:?}", refused.retry_after())
            }
        }
    }
}

impl std::error::Error for WaitError {}

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
    /// [`WaitError::Capacity`] if `n` exceeds the burst; [`WaitError::TooLong`] if the cells
    /// would only come back past the clock's horizon, or (reservation) the wait exceeds the
    /// algorithm's maximum delay.
    pub fn wait(&self, n: u32) -> Result<Allowed, WaitError> {
        self.wait_within(n, u64::MAX)
    }

    /// [`wait`](Self::wait), but for at most `max_wait`: a wait known to be longer returns
    /// [`WaitError::TooLong`] at once, taking nothing.
    ///
    /// # Errors
    /// As [`wait`](Self::wait), and [`WaitError::TooLong`] when the wait would exceed
    /// `max_wait`.
    pub fn try_wait_for(&self, n: u32, max_wait: Duration) -> Result<Allowed, WaitError> {
        self.wait_within(n, u64::try_from(max_wait.as_nanos()).unwrap_or(u64::MAX))
    }

    fn wait_within(&self, n: u32, max_wait: u64) -> Result<Allowed, WaitError> {
        let clock = self.clock();
        let start = clock.now();
        if n == 0 {
            // Takes nothing, never waits: the bucket as it is.
            return match self.check_n_at(0, start).map_err(WaitError::Capacity)? {
                Ok(state) => Ok(state),
                Err(refused) => Err(WaitError::TooLong(refused)),
            };
        }
        loop {
            let now = clock.now();
            // A clock that steps back counts as no time spent.
            let left = max_wait.saturating_sub(now.saturating_sub(start));
            let mut wrote = None;
            let answer = self
                .check_recording(n, now, &mut wrote)
                .map_err(WaitError::Capacity)?;
            match answer {
                Ok(allowed) => {
                    let delay = allowed.delay_nanos();
                    if delay > left {
                        // A reservation beyond the budget: give it back (or give way).
                        if let Some((before, after)) = wrote {
                            self.restore(before, after);
                        }
                        return Err(WaitError::TooLong(Refused::new(allowed.gauge(), delay)));
                    }
                    if delay > 0 {
                        clock.sleep(Duration::from_nanos(delay));
                    }
                    return Ok(allowed);
                }
                Err(refused) => {
                    let wait = refused.retry_after_nanos();
                    // A shaping algorithm refuses only when its queue is full: at once.
                    let queue_full = self.algorithm().max_delay_nanos() > 0;
                    if queue_full || wait == u64::MAX || wait > left {
                        return Err(WaitError::TooLong(refused));
                    }
                    clock.sleep(Duration::from_nanos(wait));
                }
            }
        }
    }
}
