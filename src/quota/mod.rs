//! [`Quota`]: a validated rate (`count` cells per `period`), a burst, and the initial fill of a
//! fresh bucket; with the errors that reject invalid ones.
//!
//! A quota is the only place where user numbers become the integers the algorithms run on: the
//! **emission interval** `T` (nanoseconds between two cells at the sustained rate) and the
//! **burst window** `τ = burst × T` (how far ahead of the clock a bucket may be booked). Every
//! bound that keeps the decision arithmetic from overflowing is checked here, once, so the hot
//! path can use plain integer operations.
//!
//! # Rounding
//! `T = ⌈period / count⌉` in whole nanoseconds, rounded **up**: the effective rate is never above
//! the configured one. For rates up to 10⁶/s the difference is below 0.1 %; near 10⁹/s it is large
//! (3·10⁸/s has `T` = 4 ns, i.e. 2.5·10⁸/s). [`Quota::interval`] reports the `T` in force.
//! Rates above 10⁹/s (an interval below 1 ns) are rejected.

mod error;
mod parse;

use core::fmt;
use core::time::Duration;

pub use error::{ParseQuotaError, ParseQuotaErrorKind, QuotaError};
pub use parse::parse_duration;
pub(crate) use parse::{parse_spec, write_duration, write_utc_offset, Named};

const NANOS_PER_SEC: u64 = 1_000_000_000;

/// How full a bucket is when it is created (or reset to its initial state).
///
/// A bucket that starts full admits `burst` cells at once, then the sustained rate; one that
/// starts with fewer cells cannot be used for an initial spike (it bounds what a fresh bucket
/// admits in its first period).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Initial {
    /// `burst` cells: everything is available at once (the default, as in governor).
    #[default]
    Full,
    /// No cells: the first cell arrives one interval after creation.
    Empty,
    /// This many cells (at most `burst`).
    Cells(u32),
}

/// A validated rate limit: `count` cells per `period`, at most `burst` at once.
///
/// # Construction
/// ```
/// use core::time::Duration;
/// use flowgate::Quota;
///
/// let q = Quota::per_second(100)?.with_burst(20)?;
/// assert_eq!(q.interval(), Duration::from_millis(10));
/// assert_eq!(q.burst(), 20);
///
/// // The same quota, as written in a config file:
/// assert_eq!("100/s burst 20".parse::<Quota>()?, q);
/// assert_eq!(q.to_string(), "100/s burst 20");
///
/// // Invalid input is an error, never a panic:
/// assert!(Quota::per_second(0).is_err());
/// assert!(Quota::from_rate(f64::NAN).is_err());
/// assert!("-5/s".parse::<Quota>().is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// See [`Quota::from_str`](#impl-FromStr-for-Quota) for the string grammar.
#[must_use = "a quota does nothing until a limiter or a policy is given it"]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Quota {
    count: u32,
    period: u64,
    interval: u64,
    burst: u32,
    initial: Initial,
}

impl Quota {
    /// The largest burst window (`burst × interval`) a quota may have: 2⁶³ − 1 ns, about 292 years.
    ///
    /// Bucket state is a 64-bit count of nanoseconds since the Unix epoch (see [`crate::clock`]),
    /// which lasts until the year 2554. Keeping the window to half of that range means a bucket can
    /// always be booked a whole window ahead until the year 2262; beyond the horizon every request
    /// is refused (see [`crate::RateLimiter`]).
    pub const MAX_WINDOW_NANOS: u64 = u64::MAX >> 1;

    /// `count` cells per `period`, with a burst of `count`.
    ///
    /// # Errors
    /// [`QuotaError`] if `count` or `period` is zero, the rate is above 10⁹/s, the period does
    /// not fit in 584 years of nanoseconds, or `count × interval` exceeds [`MAX_WINDOW_NANOS`](Self::MAX_WINDOW_NANOS).
    pub fn new(count: u32, period: Duration) -> Result<Self, QuotaError> {
        let period = u64::try_from(period.as_nanos()).map_err(|_| QuotaError::PeriodTooLong)?;
        Self::from_nanos(count, period)
    }

    /// `count` cells per `period_nanos` nanoseconds, with a burst of `count`.
    ///
    /// # Errors
    /// As [`Quota::new`].
    pub(crate) fn from_nanos(count: u32, period_nanos: u64) -> Result<Self, QuotaError> {
        if count == 0 {
            return Err(QuotaError::ZeroCount);
        }
        if period_nanos == 0 {
            return Err(QuotaError::ZeroPeriod);
        }
        if period_nanos < u64::from(count) {
            return Err(QuotaError::IntervalBelowOneNanosecond);
        }
        // Rounded up: the effective rate is never above the configured one.
        let interval = period_nanos.div_ceil(u64::from(count));
        Self::validated(count, period_nanos, interval, count, Initial::Full)
    }

    /// `count` cells per second, burst `count`.
    ///
    /// # Errors
    /// As [`Quota::new`]; notably `count` = 0 or above 10⁹.
    pub fn per_second(count: u32) -> Result<Self, QuotaError> {
        Self::from_nanos(count, NANOS_PER_SEC)
    }

    /// `count` cells per minute, burst `count`.
    ///
    /// # Errors
    /// As [`Quota::new`].
    pub fn per_minute(count: u32) -> Result<Self, QuotaError> {
        Self::from_nanos(count, 60 * NANOS_PER_SEC)
    }

    /// `count` cells per hour, burst `count`.
    ///
    /// # Errors
    /// As [`Quota::new`].
    pub fn per_hour(count: u32) -> Result<Self, QuotaError> {
        Self::from_nanos(count, 3_600 * NANOS_PER_SEC)
    }

    /// `count` cells per day (86 400 s), burst `count`.
    ///
    /// # Errors
    /// As [`Quota::new`].
    pub fn per_day(count: u32) -> Result<Self, QuotaError> {
        Self::from_nanos(count, 86_400 * NANOS_PER_SEC)
    }

    /// One cell every `interval`, burst 1.
    ///
    /// # Errors
    /// As [`Quota::new`].
    pub fn with_period(interval: Duration) -> Result<Self, QuotaError> {
        Self::new(1, interval)
    }

    /// `rate` cells per second, where `rate` may be fractional (`0.5` is one cell every 2 s),
    /// burst 1. The interval is `⌈10⁹ / rate⌉` ns.
    ///
    /// # Errors
    /// [`QuotaError::NotFinite`] for NaN and infinities, [`QuotaError::NotPositive`] for zero
    /// and negative rates, and the errors of [`Quota::new`].
    pub fn from_rate(rate: f64) -> Result<Self, QuotaError> {
        if !rate.is_finite() {
            return Err(QuotaError::NotFinite);
        }
        if rate <= 0.0 {
            return Err(QuotaError::NotPositive);
        }
        let interval = nanos_per_cell(rate)?;
        Self::from_nanos(1, interval)
    }

    /// The same rate with a burst of `burst` cells.
    ///
    /// # Errors
    /// [`QuotaError::ZeroBurst`], [`QuotaError::WindowTooLong`], or
    /// [`QuotaError::InitialAboveBurst`] if an initial fill was set above the new burst.
    pub fn with_burst(self, burst: u32) -> Result<Self, QuotaError> {
        Self::validated(self.count, self.period, self.interval, burst, self.initial)
    }

    /// The same quota, with fresh buckets starting as `initial` says.
    ///
    /// # Errors
    /// [`QuotaError::InitialAboveBurst`] if `Initial::Cells(n)` has `n > burst`.
    pub fn with_initial(self, initial: Initial) -> Result<Self, QuotaError> {
        // One spelling for "no cells". (Equality stays structural otherwise: `Cells(burst)` is
        // not normalized to `Full`, since a later `with_burst` would change its meaning.)
        let initial = match initial {
            Initial::Cells(0) => Initial::Empty,
            other => other,
        };
        Self::validated(self.count, self.period, self.interval, self.burst, initial)
    }

    fn validated(
        count: u32,
        period: u64,
        interval: u64,
        burst: u32,
        initial: Initial,
    ) -> Result<Self, QuotaError> {
        if burst == 0 {
            return Err(QuotaError::ZeroBurst);
        }
        let max_burst = Self::MAX_WINDOW_NANOS / interval;
        if u64::from(burst) > max_burst {
            return Err(QuotaError::WindowTooLong { max_burst });
        }
        if let Initial::Cells(cells) = initial {
            if cells > burst {
                return Err(QuotaError::InitialAboveBurst {
                    initial: cells,
                    burst,
                });
            }
        }
        Ok(Self {
            count,
            period,
            interval,
            burst,
            initial,
        })
    }

    /// Cells per period, as configured (the rate's numerator).
    pub fn count(&self) -> u32 {
        self.count
    }

    /// The period, as configured (the rate's denominator).
    pub fn period(&self) -> Duration {
        Duration::from_nanos(self.period)
    }

    /// The emission interval in force: `⌈period / count⌉`, whole nanoseconds.
    pub fn interval(&self) -> Duration {
        Duration::from_nanos(self.interval)
    }

    /// The emission interval in nanoseconds.
    pub(crate) fn interval_nanos(&self) -> u64 {
        self.interval
    }

    /// The most cells available at once (the bucket's capacity).
    pub fn burst(&self) -> u32 {
        self.burst
    }

    /// `burst × interval` in nanoseconds: the time an empty bucket takes to become full.
    pub(crate) fn window_nanos(&self) -> u64 {
        // Cannot overflow: checked against MAX_WINDOW_NANOS at construction.
        u64::from(self.burst) * self.interval
    }

    /// How a fresh bucket starts.
    pub fn initial(&self) -> Initial {
        self.initial
    }

    /// The number of cells a fresh bucket starts with.
    pub fn initial_cells(&self) -> u32 {
        match self.initial {
            Initial::Full => self.burst,
            Initial::Empty => 0,
            Initial::Cells(n) => n,
        }
    }
}

/// `⌈10⁹ / rate⌉` for a finite positive `rate`, in integers: the float is taken apart into its
/// integer mantissa and power of two, so nothing rounds (a build without `std` has no float
/// ceiling, and a float quotient past 2^53 is already rounded).
fn nanos_per_cell(rate: f64) -> Result<u64, QuotaError> {
    const SECOND: u128 = 1_000_000_000;
    let bits = rate.to_bits();
    let exponent = ((bits >> 52) & 0x7ff) as i32;
    let fraction = bits & ((1 << 52) - 1);
    // rate = mantissa × 2^shift, so 10⁹ / rate = (10⁹ × 2^-shift) / mantissa.
    let (mantissa, shift) = if exponent == 0 {
        (fraction, -1074)
    } else {
        (fraction | 1 << 52, exponent - 1075)
    };
    if shift >= 0 {
        // rate ≥ 2^52 per second.
        return Err(QuotaError::IntervalBelowOneNanosecond);
    }
    let down = shift.unsigned_abs();
    if down > 87 {
        // (10⁹ × 2^88) / 2^53 is past 2^64.
        return Err(QuotaError::PeriodTooLong);
    }
    // Below 2^117: no overflow.
    let numerator = SECOND << down;
    let mantissa = u128::from(mantissa);
    if numerator < mantissa {
        return Err(QuotaError::IntervalBelowOneNanosecond);
    }
    u64::try_from(numerator.div_ceil(mantissa)).map_err(|_| QuotaError::PeriodTooLong)
}

impl fmt::Display for Quota {
    /// Writes the quota in the grammar [`Quota::from_str`](#impl-FromStr-for-Quota) reads,
    /// omitting the burst when it equals the count and the initial fill when it is full.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/", self.count)?;
        parse::write_period(f, self.period)?;
        if self.burst != self.count {
            write!(f, " burst {}", self.burst)?;
        }
        match self.initial {
            Initial::Full => Ok(()),
            Initial::Empty => f.write_str(" initial 0"),
            Initial::Cells(n) => write!(f, " initial {n}"),
        }
    }
}

#[cfg(test)]
mod tests;

/// A quota is written as its string (`"200/10s"`, `"100/s burst 20"`) in serde formats.
#[cfg(feature = "serde")]
impl serde::Serialize for Quota {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// A quota is read from its string (see [`Quota::from_str`](#impl-FromStr-for-Quota)); an
/// invalid one is an error that says why.
#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for Quota {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        text.parse()
            .map_err(|e| serde::de::Error::custom(format_args!("invalid quota {text:?}: {e}")))
    }
}
