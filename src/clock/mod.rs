//! Where time comes from: the [`Clock`] trait and the clocks flowgate ships.
//!
//! A clock returns **nanoseconds since the Unix epoch** as a `u64` (up to the year 2554). A
//! limiter stores its bucket state in the same unit, and window counters count their windows
//! from the epoch: a daily window ends at midnight UTC (or, with a UTC offset, at midnight in
//! that zone; see [`FixedWindow::with_utc_offset`](crate::algorithm::FixedWindow::with_utc_offset)),
//! whichever process decides and whether it decides in process or in Redis, whose scripts count
//! from the server's Unix time.
//!
//! The shipped clocks read the wall clock once per process (the first time any of them is
//! made) and are monotonic from there on: a reading is that wall-clock instant plus the
//! monotonic time elapsed since, never a fresh read of a wall clock that NTP may step. Two
//! processes therefore agree on window boundaries as closely as their hosts' clocks did when
//! they started. A clock of your own ([`FnClock`], [`ManualClock`]) may read anything; windows
//! are aligned to its 0, so read Unix time for windows aligned as Redis aligns them
//! ([`ManualClock`] at 0 is the epoch itself).
//!
//! | clock | cost of `now()` | precision | use |
//! |---|---|---|---|
//! | [`QuantaClock`] (default) | one `rdtsc` + a multiply | ~ns | everything |
//! | [`CoarseClock`] | one relaxed load | the update period you choose | very hot paths |
//! | [`StdClock`] | `Instant::now()` (vDSO) | ~ns | distrust of the TSC |
//! | [`ManualClock`] | one relaxed load | exact | tests, simulations |
//! | [`FnClock`] | your function | yours | a time source of your own, without `std` |
//!
//! Without the `std` feature only [`FnClock`], [`ManualClock`] (with `alloc`) and clocks of
//! your own exist, and [`DefaultClock`] is an [`FnClock`].
//!
//! # Readings that go backwards
//! A clock is expected to be monotonic, but flowgate does not rely on it. Readings can step back
//! (a [`ManualClock`] set back, a custom clock over wall time corrected by NTP), lag a little
//! (counters on two cores a few cycles apart, governor#299), or be stale (a thread preempted
//! between its clock read and its update). flowgate keeps no global "latest reading", which
//! would put one contended cache line under every limiter. Instead:
//!
//! * **No panic, no wrap.** Every subtraction of times saturates or is guarded.
//! * **An early reading refuses more, never less.** A GCRA decision is monotone in `now`.
//! * **Lag and staleness free nothing.** A refusal against a bucket booked more than one window
//!   (`burst × interval`) ahead of its reading makes the limiter load the bucket again and read
//!   the clock *after* that load (release/acquire ordering carries the booking's reading, see
//!   `cell`), and clamp only if the bucket is still more than a window plus the clock's
//!   [`Clock::skew_nanos`] ahead of this fresh reading. A reading that is merely stale or lags
//!   within the declared skew never triggers it.
//! * **Bounded lockout after a real step back.** The clamp sets the bucket to "empty as of the
//!   fresh reading", so after a backward step of any size a key waits at most one window plus
//!   the clock's skew, not as long as the step.
//! * **The price of that bound.** The clamp takes the stepped-back reading as the truth. If the
//!   clock later returns to where it was, the time it repeats counts as refill: each round trip
//!   back by δ (beyond the skew) and forwards again can give back up to `⌈δ / interval⌉` cells,
//!   never more than one burst. A one-word bucket cannot tell a clock that stepped back for
//!   good from one that will return; the alternative, governor's, is a lockout as long as the
//!   step. A single step back, without return, never admits more than the rate allows from the
//!   new reading on.

#[cfg(feature = "std")]
mod coarse;
mod function;
#[cfg(feature = "alloc")]
mod manual;
#[cfg(feature = "std")]
mod quanta;
#[cfg(feature = "std")]
mod std_clock;
#[cfg(feature = "tokio")]
mod tokio_clock;

#[cfg(feature = "std")]
pub use self::coarse::CoarseClock;
pub use self::function::FnClock;
#[cfg(feature = "alloc")]
pub use self::manual::ManualClock;
#[cfg(feature = "std")]
pub use self::quanta::QuantaClock;
#[cfg(feature = "std")]
pub use self::std_clock::StdClock;
#[cfg(feature = "tokio")]
pub use self::tokio_clock::TokioClock;

/// Defines [`DefaultClock`] as `$clock`, with its docs written once for both builds.
macro_rules! default_clock {
    ($clock:ty) => {
        /// The clock a limiter's type names when it does not say: [`QuantaClock`] with the
        /// `std` feature, and without it [`FnClock`] (over a plain `fn() -> u64`), as flowgate
        /// knows no time source of its own there.
        ///
        /// Code that must build both ways names its clock rather than relying on this default:
        /// a dependency turning `std` on changes it (features add up across a build).
        pub type DefaultClock = $clock;
    };
}

/// Nanoseconds since the Unix epoch at `instant`: the wall clock as it read when the process
/// first asked (once, whatever the clock), plus the monotonic time from then to `instant`
/// (0 for an earlier instant). A wall clock before the epoch reads as the epoch.
#[cfg(feature = "std")]
pub(crate) fn unix_nanos(instant: std::time::Instant) -> u64 {
    use std::time::{Instant, SystemTime};
    static ORIGIN: std::sync::OnceLock<(Instant, u64)> = std::sync::OnceLock::new();
    let (origin, unix) = ORIGIN.get_or_init(|| {
        let wall = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH);
        (Instant::now(), wall.map_or(0, nanos))
    });
    unix.saturating_add(nanos(instant.saturating_duration_since(*origin)))
}

/// A duration in nanoseconds, saturating at `u64::MAX`.
#[cfg(feature = "std")]
pub(crate) fn nanos(duration: core::time::Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(feature = "std")]
default_clock!(QuantaClock);
#[cfg(not(feature = "std"))]
default_clock!(FnClock);

/// A source of time for limiters: nanoseconds since the Unix epoch (see the
/// [module docs](self) for what a reading means and what a clock of your own should read).
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
    /// Nanoseconds since the Unix epoch (or, for a clock of your own, since the origin it
    /// chooses: window counters count their windows from it).
    fn now(&self) -> u64;

    /// How far a reading may trail a reading that another thread took *earlier* (for example
    /// counters on two cores that are a few cycles apart). Backward steps up to this size are
    /// never treated as clock steps, so such lag can never free booked cells; the price is that
    /// after a real backward step a bucket may stay locked out this much longer than one window.
    ///
    /// The default, 0, is right for clocks whose readings travel through memory with
    /// release/acquire ordering (like [`ManualClock`] and [`CoarseClock`]) and for clocks that are
    /// monotonic across threads.
    fn skew_nanos(&self) -> u64 {
        0
    }

    /// Blocks the calling thread until `duration` of this clock's time has passed (the blocking
    /// waits, `RateLimiter::wait`, sleep through this). The default sleeps the thread with the
    /// `std` feature, and without it spins until [`now`](Self::now) has moved on by `duration`
    /// (give a clock of your own a `sleep` that idles the core, if it can);
    /// `ManualClock` moves itself forwards instead, so that a test's waits take no real time.
    fn sleep(&self, duration: core::time::Duration) {
        #[cfg(feature = "std")]
        std::thread::sleep(duration);
        #[cfg(not(feature = "std"))]
        {
            let nanos = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
            let until = self.now().saturating_add(nanos);
            while self.now() < until {
                core::hint::spin_loop();
            }
        }
    }
}

impl<C: Clock + ?Sized> Clock for &C {
    #[inline(always)]
    fn now(&self) -> u64 {
        (**self).now()
    }

    fn skew_nanos(&self) -> u64 {
        (**self).skew_nanos()
    }

    fn sleep(&self, duration: core::time::Duration) {
        (**self).sleep(duration);
    }
}

#[cfg(feature = "alloc")]
impl<C: Clock + ?Sized> Clock for alloc::sync::Arc<C> {
    #[inline(always)]
    fn now(&self) -> u64 {
        (**self).now()
    }

    fn skew_nanos(&self) -> u64 {
        (**self).skew_nanos()
    }

    fn sleep(&self, duration: core::time::Duration) {
        (**self).sleep(duration);
    }
}
