//! [`IntervalRefill`]: a token bucket refilled in batches at interval boundaries.

use super::stepped::Stepped;
use crate::quota::{Quota, QuotaError};

/// A token bucket with **stepwise ("interval") refill**: a whole batch of `count` tokens
/// arrives at each boundary of `period` (boundaries aligned on the Unix epoch, or on a UTC offset:
/// [`with_utc_offset`](Self::with_utc_offset)), up to
/// `burst` tokens. This is .NET's `TokenBucketRateLimiter` (`TokensPerPeriod`,
/// `ReplenishmentPeriod`, `TokenLimit`) computed lazily: no timer, the refill of every elapsed
/// boundary is added when the bucket is next used.
///
/// Compared with [`Gcra`](super::Gcra) (a token every `period / count`), refill arrives in
/// lumps: a client waits for the next boundary even when a fraction of a batch would already
/// be due.
///
/// | | |
/// |---|---|
/// | burst | `burst` tokens at once |
/// | boundary effect | `count` tokens appear at each boundary; over a span just past one boundary, `burst + count` pass |
/// | precision | exact count per interval |
/// | bytes per bucket | 8 |
/// | cost per decision | one load, one CAS, one 64-bit division |
///
/// # Word layout
/// `index << 24 | used`: bits 63–24 hold the index of the interval the bucket last counted in
/// (the reading plus the UTC offset, divided by `period`, modulo 2^40), bits 23–0 the tokens
/// in use then; `d` intervals later, `used` has dropped by `d × count`. A new bucket holds the
/// index of its creation interval (`0` is: interval 0, full). With intervals of at least 1 ms,
/// an index is mistaken for a current one only after 2^39 ms (17 years) idle, conservatively.
///
/// # Limits
/// `burst` at most 16 777 215 ([`QuotaError::LimitTooLarge`]); `period` at least 1 ms
/// ([`QuotaError::WindowTooShort`]).
///
/// ```
/// use std::time::Duration;
/// use flowgate::{algorithm::IntervalRefill, clock::ManualClock, RateLimiter};
///
/// // 5 tokens every second, at most 10 held.
/// let clock = ManualClock::new();
/// let bucket = IntervalRefill::new(&"5/s burst 10".parse()?)?;
/// let limiter = RateLimiter::with_algorithm(bucket, clock.clone());
/// assert!(limiter.check_n(10).is_ok_and(|r| r.is_ok()));
/// clock.advance(Duration::from_millis(999));
/// assert_eq!(limiter.available(), 0); // nothing trickles in...
/// clock.advance(Duration::from_millis(1));
/// assert_eq!(limiter.available(), 5); // ...the batch arrives at the boundary
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntervalRefill {
    pub(super) stepped: Stepped,
}

impl IntervalRefill {
    /// The most tokens a bucket can hold.
    pub const MAX_BURST: u32 = Stepped::MAX_BURST;
    /// The shortest interval: 1 ms.
    pub const MIN_INTERVAL_NANOS: u64 = Stepped::MIN_WINDOW_NANOS;

    /// `quota.count()` tokens at each boundary of `quota.period()`, up to `quota.burst()`.
    ///
    /// # Errors
    /// [`QuotaError::LimitTooLarge`] or [`QuotaError::WindowTooShort`].
    pub fn new(quota: &Quota) -> Result<Self, QuotaError> {
        Ok(Self {
            stepped: Stepped::new(quota, quota.count())?,
        })
    }

    /// The same bucket with its boundaries those of a zone `minutes` east of UTC, as
    /// [`FixedWindow::with_utc_offset`](super::FixedWindow::with_utc_offset).
    ///
    /// # Errors
    /// [`QuotaError::UtcOffsetOutOfRange`] if `minutes` is a day or more either side of UTC.
    pub fn with_utc_offset(self, minutes: i16) -> Result<Self, QuotaError> {
        Ok(Self {
            stepped: self.stepped.with_utc_offset(minutes)?,
        })
    }

    /// The boundaries' UTC offset in minutes east of UTC (0 unless set).
    pub fn utc_offset(&self) -> i16 {
        self.stepped.utc_offset()
    }

    /// The word of a bucket counting `used` cells in window `index` (any index: it is kept
    /// modulo 2^40), as a counter elsewhere (a Redis script) hands its state over.
    pub fn word_at(index: u64, used: u32) -> u64 {
        Stepped::word_at(index, used)
    }
}

super::delegate_algorithm!(IntervalRefill, stepped);
