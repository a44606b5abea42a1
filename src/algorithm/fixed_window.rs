//! [`FixedWindow`]: at most `limit` cells per window of fixed length, counted from the Unix
//! epoch.

use super::stepped::Stepped;
use super::window::no_burst;
use crate::quota::{Quota, QuotaError};

/// A fixed window counter: at most `count` cells in each window of `period`, the windows
/// aligned on the Unix epoch (a reading of 0, see [`crate::clock`]): a daily window starts at
/// midnight UTC, in process as in Redis, unless a UTC offset moves it
/// ([`with_utc_offset`](Self::with_utc_offset)).
///
/// The simplest limiter, and the one with a known weakness: a client can spend one
/// window's limit at its end and the next window's at its start, so up to **2 × limit** pass in
/// a span just over one window long (see the boundary tests in `tests/boundary.rs`).
///
/// | | |
/// |---|---|
/// | burst | the whole limit at once, at any point of a window |
/// | boundary effect | up to 2 × limit around a window edge |
/// | precision | exact count per window |
/// | bytes per bucket | 8 |
/// | cost per decision | one load, one CAS, one 64-bit division |
///
/// # Word layout
/// `index << 24 | count`: bits 63–24 hold the window's index (the reading plus the UTC offset,
/// divided by the window length, modulo 2^40), bits 23–0 how many cells it has counted;
/// a word whose index is of an earlier window counts 0. A new bucket holds the index of its
/// creation window. With windows of at least 1 ms, a stored window is mistaken for the current
/// one only after 2^39 ms (17 years) of idleness, and then only conservatively (old cells still
/// counted). This is the layout of [`IntervalRefill`](super::IntervalRefill) with the whole
/// limit coming back at each boundary.
///
/// # Limits
/// At most 16 777 215 cells per window ([`QuotaError::LimitTooLarge`]), windows of at least
/// 1 ms ([`QuotaError::WindowTooShort`]), and no burst separate from the count
/// ([`QuotaError::BurstNotSupported`]).
///
/// # Stale readings and clock steps
/// A reading whose window is before the stored one (a stale reading, or a clock that stepped
/// back) is counted against the stored window: conservative, never an extra cell. If it is
/// refused there, the limiter re-checks with a fresh reading and, if the clock really is
/// behind, moves the count to the fresh reading's window: the lockout after a backward step is
/// at most one window. As for GCRA, a clock that then returns gives back at most one limit per
/// round trip.
///
/// ```
/// use flowgate::{algorithm::FixedWindow, clock::ManualClock, RateLimiter};
///
/// let clock = ManualClock::new();
/// let limiter = RateLimiter::with_algorithm(FixedWindow::new(&"3/s".parse()?)?, clock.clone());
/// assert_eq!((0..5).filter(|_| limiter.check().is_ok()).count(), 3);
/// clock.advance(std::time::Duration::from_secs(1)); // next window
/// assert!(limiter.check().is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedWindow {
    pub(super) stepped: Stepped,
}

impl FixedWindow {
    /// The most cells one window can count.
    pub const MAX_LIMIT: u32 = Stepped::MAX_BURST;
    /// The shortest window: 1 ms.
    pub const MIN_WINDOW_NANOS: u64 = Stepped::MIN_WINDOW_NANOS;

    /// `quota.count()` cells per `quota.period()`.
    ///
    /// # Errors
    /// [`QuotaError::BurstNotSupported`], [`QuotaError::LimitTooLarge`] or
    /// [`QuotaError::WindowTooShort`].
    pub fn new(quota: &Quota) -> Result<Self, QuotaError> {
        no_burst(quota)?;
        Ok(Self {
            stepped: Stepped::new(quota, quota.count())?,
        })
    }

    /// The same counter with its windows starting at the boundaries of a zone `minutes` east
    /// of UTC (negative: west): a window starts wherever the reading plus `minutes` is a
    /// multiple of the window length, so that a daily window starts at midnight in that zone.
    /// The Redis backend counts the same windows. In the quota grammar: `"20000/day fixed
    /// utc+02:00"`.
    ///
    /// ```
    /// use flowgate::{algorithm::FixedWindow, clock::ManualClock, RateLimiter};
    ///
    /// // 2026-03-01 21:59:59 UTC, a second before midnight in UTC+02:00.
    /// let clock = ManualClock::starting_at(1_772_402_399_000_000_000);
    /// let daily = FixedWindow::new(&"2/day".parse()?)?.with_utc_offset(120)?;
    /// let limiter = RateLimiter::with_algorithm(daily, clock.clone());
    /// assert!(limiter.check_n(2).is_ok_and(|r| r.is_ok()));
    /// assert_eq!(limiter.check().unwrap_err().retry_after().as_secs(), 1);
    /// clock.advance(std::time::Duration::from_secs(1)); // midnight in UTC+02:00
    /// assert!(limiter.check_n(2).is_ok_and(|r| r.is_ok()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`QuotaError::UtcOffsetOutOfRange`] if `minutes` is a day or more either side of UTC.
    pub fn with_utc_offset(self, minutes: i16) -> Result<Self, QuotaError> {
        Ok(Self {
            stepped: self.stepped.with_utc_offset(minutes)?,
        })
    }

    /// The windows' UTC offset in minutes east of UTC (0 unless set).
    pub fn utc_offset(&self) -> i16 {
        self.stepped.utc_offset()
    }

    /// The word of a bucket counting `used` cells in window `index` (any index: it is kept
    /// modulo 2^40), as a counter elsewhere (a Redis script) hands its state over.
    pub fn word_at(index: u64, used: u32) -> u64 {
        Stepped::word_at(index, used)
    }
}

super::delegate_algorithm!(FixedWindow, stepped);
