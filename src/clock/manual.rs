//! [`ManualClock`]: time that moves only when a test says so.

use alloc::sync::Arc;
use core::time::Duration;

use super::Clock;
use crate::primitive::{AtomicU64, Ordering};

/// A clock that reads whatever it was last set to: for tests, simulations and replays.
///
/// Clones share the same time, so a test keeps one handle and gives another to the limiter.
/// It can move forwards, stand still, and step backwards, which is how flowgate's tests check
/// what a limiter does when a real clock misbehaves.
///
/// ```
/// use core::time::Duration;
/// use flowgate::{clock::ManualClock, Quota, RateLimiter};
///
/// let clock = ManualClock::new();
/// let limiter = RateLimiter::with_clock(Quota::per_second(1)?, clock.clone());
/// assert!(limiter.check().is_ok());
/// assert!(limiter.check().is_err());
/// clock.advance(Duration::from_secs(1));
/// assert!(limiter.check().is_ok());
/// # Ok::<(), flowgate::QuotaError>(())
/// ```
#[derive(Debug, Clone)]
pub struct ManualClock {
    now: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock reading 0: the Unix epoch, 1970-01-01 00:00 UTC.
    pub fn new() -> Self {
        Self::starting_at(0)
    }

    /// A clock reading `nanos`: nanoseconds since the Unix epoch, so that window counters on it
    /// count windows as they do on the shipped clocks and in Redis.
    pub fn starting_at(nanos: u64) -> Self {
        Self {
            now: Arc::new(AtomicU64::new(nanos)),
        }
    }

    /// Sets the reading to `nanos`, forwards or backwards.
    pub fn set(&self, nanos: u64) {
        // Release: a thread that reads this value and books a bucket with it publishes it on
        // (see `cell`'s "Orderings"); pairs with the Acquire in `get`.
        self.now.store(nanos, Ordering::Release);
    }

    /// Moves the reading forwards by `by`, saturating at `u64::MAX`.
    pub fn advance(&self, by: Duration) {
        let by = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        self.set(self.get().saturating_add(by));
    }

    /// Moves the reading backwards by `by`, saturating at 0: a clock step back.
    pub fn rewind(&self, by: Duration) {
        let by = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        self.set(self.get().saturating_sub(by));
    }

    /// The current reading.
    pub fn get(&self) -> u64 {
        // Acquire: pairs with `set`, so a reading is never older than one that happened before.
        self.now.load(Ordering::Acquire)
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for ManualClock {
    #[inline]
    fn now(&self) -> u64 {
        self.get()
    }

    /// Moves the clock forwards by `duration` at once (no real time passes): a blocking wait on
    /// a manual clock is a step of the simulation. Several threads sleeping on one manual clock
    /// each move it, so such waits suit single-threaded simulations.
    fn sleep(&self, duration: Duration) {
        self.advance(duration);
    }
}
