//! [`FnClock`]: a clock over a function of the caller's, for targets where flowgate knows no
//! time source (a build without `std`: a hardware timer, an RTOS tick counter).

use core::fmt;

use super::Clock;

/// A clock that reads a function: nanoseconds since an origin of the function's choosing, the
/// Unix epoch if it can (window counters count their windows from the origin, see the
/// [module docs](super)).
///
/// The function should be monotonic and cheap, as every decision calls it once; see the
/// [module docs](super) for what a limiter does when it is not. Without the `std` feature this
/// is [`DefaultClock`](super::DefaultClock), the clock a `RateLimiter` names when its type does
/// not say: a plain function pointer, so the type can be written out (`RateLimiter<FnClock>`)
/// and the limiter can be a `static`.
///
/// ```
/// use core::sync::atomic::{AtomicU64, Ordering};
/// use flowgate::{clock::FnClock, Quota, RateLimiter};
///
/// // A timer the application keeps (here a counter it sets; on a microcontroller, a read of
/// // its timer's register scaled to nanoseconds).
/// static TICKS: AtomicU64 = AtomicU64::new(0);
/// fn now() -> u64 {
///     // Acquire: pairs with the Release store below.
///     TICKS.load(Ordering::Acquire)
/// }
///
/// let limiter: RateLimiter<FnClock> = RateLimiter::with_clock(Quota::per_second(1)?, FnClock::new(now));
/// assert!(limiter.check().is_ok());
/// assert!(limiter.check().is_err());
/// // Release: a decision that reads this time sees what came before it.
/// TICKS.store(1_000_000_000, Ordering::Release); // one second later
/// assert!(limiter.check().is_ok());
/// # Ok::<(), flowgate::QuotaError>(())
/// ```
#[derive(Clone, Copy)]
pub struct FnClock<F = fn() -> u64> {
    read: F,
    skew: u64,
}

impl<F: Fn() -> u64> FnClock<F> {
    /// A clock reading `read()`, with no skew between threads (see [`Clock::skew_nanos`]).
    pub const fn new(read: F) -> Self {
        Self { read, skew: 0 }
    }

    /// The same clock, declaring that a reading may trail one taken earlier on another thread
    /// by up to `nanos` (per-core counters that are not synchronized): see
    /// [`Clock::skew_nanos`].
    #[must_use]
    pub fn with_skew(self, nanos: u64) -> Self {
        Self {
            read: self.read,
            skew: nanos,
        }
    }
}

impl<F: Fn() -> u64> Clock for FnClock<F> {
    #[inline(always)]
    fn now(&self) -> u64 {
        (self.read)()
    }

    fn skew_nanos(&self) -> u64 {
        self.skew
    }
}

impl<F> fmt::Debug for FnClock<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FnClock")
            .field("skew", &self.skew)
            .finish_non_exhaustive()
    }
}
