//! Where time comes from: the [`Clock`] trait and the clocks flowgate ships.
//!
//! A clock returns **nanoseconds since its own origin** as a `u64` (584 years of range). A limiter
//! stores its bucket state in the same unit, so the origin of the limiter's clock is the
//! limiter's epoch. Limiters built with clones of one clock share an epoch, which is what lets
//! one reading serve several of them through the `*_at(now)` methods.
//!
//! | clock | cost of `now()` | precision | use |
//! |---|---|---|---|
//! | [`QuantaClock`] (default) | one `rdtsc` + a multiply | ~ns | everything |
//! | [`CoarseClock`] | one relaxed load | the update period you choose | very hot paths |
//! | [`StdClock`] | `Instant::now()` (vDSO) | ~ns | distrust of the TSC |
//! | [`ManualClock`] | one relaxed load | exact | tests, simulations |
//!
//! # Readings that go backwards
//! A clock is expected to be monotonic, but flowgate does not rely on it. Readings can step back
//! (a [`ManualClock`] set back, a TSC read on another core that lags by a few cycles —
//! governor#299 — or a custom clock over wall time). flowgate keeps no global "latest reading"
//! (that would put one contended cache line under every limiter); instead the decision math is
//! built to be safe for any sequence of readings:
//!
//! * **No panic, no wrap.** Every subtraction of times saturates or is guarded.
//! * **Never over-admits.** A GCRA decision is monotone in `now`: an earlier reading can only
//!   refuse what a later one would admit, never the reverse.
//! * **Bounded lockout.** A bucket's state is never more than one full window (`burst ×
//!   interval`) ahead of the reading it is judged against; a state further ahead (booked before
//!   the clock stepped back) is clamped to "empty as of now" and written back, so after a
//!   backward step of any size a key waits at most one full refill.

mod coarse;
mod manual;
mod quanta;
mod std_clock;

pub use self::coarse::CoarseClock;
pub use self::manual::ManualClock;
pub use self::quanta::QuantaClock;
pub use self::std_clock::StdClock;

/// A source of time for limiters: nanoseconds since the clock's origin.
///
/// Implementations should be monotonic and cheap; see the [module docs](self) for what flowgate
/// does when a reading goes backwards.
///
/// # Example
/// A clock over a time source of your own:
/// ```
/// use flowgate::{clock::Clock, Quota, RateLimiter};
///
/// struct Frozen(u64);
/// impl Clock for Frozen {
///     fn now(&self) -> u64 {
///         self.0
///     }
/// }
///
/// let limiter = RateLimiter::with_clock(Quota::per_second(2)?, Frozen(5));
/// assert!(limiter.check().is_ok());
/// assert!(limiter.check().is_ok());
/// assert!(limiter.check().is_err());
/// # Ok::<(), flowgate::QuotaError>(())
/// ```
pub trait Clock {
    /// Nanoseconds since this clock's origin.
    fn now(&self) -> u64;
}

impl<C: Clock + ?Sized> Clock for &C {
    #[inline(always)]
    fn now(&self) -> u64 {
        (**self).now()
    }
}

impl<C: Clock + ?Sized> Clock for std::sync::Arc<C> {
    #[inline(always)]
    fn now(&self) -> u64 {
        (**self).now()
    }
}
