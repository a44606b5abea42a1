//! [`SlidingWindow`]: the sliding window counter, which weights the previous window's count by
//! its overlap with the sliding window.

use super::window::{no_burst, utc_offset, window_length, Position, Windows};
use super::Step;
use crate::outcome::{Allowed, Gauge, Refused};
use crate::quota::{Quota, QuotaError};

/// Bits of each count field.
const COUNT_BITS: u32 = 18;
/// Mask of a count field.
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;
/// Shift of the previous window's count.
const PREV_SHIFT: u32 = COUNT_BITS;
/// Shift of the window index.
const INDEX_SHIFT: u32 = 2 * COUNT_BITS;
/// Bits of the window index (modulo 2^28).
const INDEX_BITS: u32 = 64 - INDEX_SHIFT;
/// A stored window up to half the index range after a reading's is taken as ahead of it (a
/// stale reading or a clock that stepped back), never as past: an old reading must not empty
/// the bucket.
const MAX_AHEAD: u64 = 1 << (INDEX_BITS - 1);
/// Weights are computed on window lengths scaled to at most this many bits, so that
/// `count × weight` fits in 64 bits.
const WEIGHT_BITS: u32 = 42;

/// The sliding window counter: a request is admitted when
/// `⌈previous × (W − elapsed) / W⌉ + current + n ≤ limit`, where `current` counts the present
/// fixed window, `previous` the one before, and `elapsed` is how far into the present window
/// the reading is. The previous window's count is assumed spread evenly over it.
///
/// This smooths the fixed window's edge (the seeds' boundary example admits 136 requests instead
/// of 200, see `tests/boundary.rs`) in 8 bytes per bucket, at the price of an
/// approximation:
/// requests bunched at the end of a window are under-weighted, so a span of one window length
/// may see up to `2 × limit` in the worst case (never more: each fixed window counts at most
/// `limit`). Use [`SlidingLog`](crate::SlidingLog) when the bound must be exact.
///
/// | | |
/// |---|---|
/// | burst | the whole limit at once |
/// | boundary effect | smoothed; worst case `2 × limit` in one window span if traffic bunches at window ends |
/// | precision | approximate (the previous window's count weighted linearly) |
/// | bytes per bucket | 8 |
/// | cost per decision | one load, one CAS, one 64-bit division |
///
/// # Word layout
/// `index << 36 | previous << 18 | current`: bits 63–36 hold the present window's index (the
/// reading plus the UTC offset, divided by the window length, modulo 2^28), bits 35–18
/// the previous window's count, bits 17–0 the present window's. `0` is window 0 with nothing
/// counted; a new bucket holds the index of its creation window.
///
/// Window indices compare by wrapping distance: a stored window up to 2^27 windows after the
/// reading's is taken as ahead (a stale reading or a clock that stepped back: counted against
/// conservatively, then corrected with a fresh reading as for [`FixedWindow`](super::FixedWindow));
/// one up to 2^27 − 1 windows before it as past. A stale reading therefore never empties the
/// bucket. The price is paid by a bucket left idle for 2^27 windows or more (37 hours of 1 ms
/// windows, 4.2 years of 1 s windows): it may be read as ahead, or current, and its old counts
/// then still count, conservatively, for at most two windows.
///
/// # Limits
/// At most 262 143 per window ([`QuotaError::LimitTooLarge`]), windows of at least 1 ms
/// ([`QuotaError::WindowTooShort`]), and no burst separate from the count
/// ([`QuotaError::BurstNotSupported`]). Windows longer than 2^42 ns (73 minutes) weight the
/// previous count at a resolution of `W / 2^41` (relative error below 10⁻¹²).
///
/// ```
/// use std::time::Duration;
/// use flowgate::{algorithm::SlidingWindow, clock::ManualClock, RateLimiter};
///
/// let clock = ManualClock::new();
/// let limiter = RateLimiter::with_algorithm(SlidingWindow::new(&"10/s".parse()?)?, clock.clone());
/// assert!(limiter.check_n(10).is_ok_and(|r| r.is_ok()));
/// clock.advance(Duration::from_millis(1_500)); // half of the full window still weighs: 5
/// assert_eq!(limiter.available(), 5);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlidingWindow {
    windows: Windows,
    /// Weights are `(W − elapsed) >> shift` out of `W >> shift`.
    shift: u32,
    limit: u32,
    /// The windows' UTC offset in minutes.
    offset: i16,
    quota: Quota,
}

/// Where a word stands at a reading.
struct Counted {
    /// The window counted in.
    index: u64,
    previous: u32,
    current: u32,
    /// The reading's offset into the counted window (0 if the counted window is ahead).
    offset: u64,
    /// Nanoseconds from the reading to that offset (0 unless the counted window is ahead).
    lead: u64,
}

impl SlidingWindow {
    /// The most cells one window can count.
    pub const MAX_LIMIT: u32 = COUNT_MASK as u32;
    /// The shortest window: 1 ms.
    pub const MIN_WINDOW_NANOS: u64 = 1_000_000;

    /// At most about `quota.count()` cells in any `quota.period()`.
    ///
    /// # Errors
    /// [`QuotaError::BurstNotSupported`], [`QuotaError::LimitTooLarge`] or
    /// [`QuotaError::WindowTooShort`].
    pub fn new(quota: &Quota) -> Result<Self, QuotaError> {
        no_burst(quota)?;
        let length = window_length(quota, Self::MAX_LIMIT, Self::MIN_WINDOW_NANOS)?;
        let bits = u64::BITS - length.leading_zeros();
        Ok(Self {
            windows: Windows::new(length, INDEX_BITS, MAX_AHEAD, 0),
            shift: bits.saturating_sub(WEIGHT_BITS),
            limit: quota.count(),
            offset: 0,
            quota: *quota,
        })
    }

    /// The same counter with its windows starting at the boundaries of a zone `minutes` east
    /// of UTC, as [`FixedWindow::with_utc_offset`](super::FixedWindow::with_utc_offset).
    ///
    /// # Errors
    /// [`QuotaError::UtcOffsetOutOfRange`] if `minutes` is a day or more either side of UTC.
    pub fn with_utc_offset(self, minutes: i16) -> Result<Self, QuotaError> {
        let offset = utc_offset(minutes)?;
        Ok(Self {
            windows: Windows::new(self.windows.length(), INDEX_BITS, MAX_AHEAD, offset),
            offset,
            ..self
        })
    }

    /// The windows' UTC offset in minutes east of UTC (0 unless set).
    pub fn utc_offset(&self) -> i16 {
        self.offset
    }

    /// The window's length in ns.
    pub(crate) fn window(&self) -> u64 {
        self.windows.length()
    }

    /// How far the previous window's weights are shifted: `(W − elapsed) >> shift` out of
    /// `W >> shift` (what a counter elsewhere, a Redis script, weighs with).
    pub fn weight_shift(&self) -> u32 {
        self.shift
    }

    /// The word of a bucket counting `previous` and `current` cells with `index` the present
    /// window (any index: it is kept modulo 2^28), as a counter elsewhere (a Redis script)
    /// hands its state over.
    pub fn word_at(index: u64, previous: u32, current: u32) -> u64 {
        Self::pack(index & ((1 << INDEX_BITS) - 1), previous, current)
    }

    #[inline(always)]
    fn pack(index: u64, previous: u32, current: u32) -> u64 {
        index << INDEX_SHIFT | u64::from(previous) << PREV_SHIFT | u64::from(current)
    }

    #[inline(always)]
    fn unpack(word: u64) -> (u64, u32, u32) {
        (
            word >> INDEX_SHIFT,
            ((word >> PREV_SHIFT) & COUNT_MASK) as u32,
            (word & COUNT_MASK) as u32,
        )
    }

    #[inline(always)]
    fn counted(&self, word: u64, now: u64) -> Counted {
        let (index, offset) = self.windows.locate(now);
        let (stored, previous, current) = Self::unpack(word);
        let (index, previous, current, offset, lead) = match self.windows.position(stored, index) {
            Position::Current => (stored, previous, current, offset, 0),
            Position::Past(1) => (index, current, 0, offset, 0),
            Position::Past(_) => (index, 0, 0, offset, 0),
            // Judged from the start of the stored window: the previous count weighs fully.
            Position::Ahead(n) => (
                stored,
                previous,
                current,
                0,
                self.windows.until_end(offset, n - 1),
            ),
        };
        Counted {
            index,
            previous,
            current,
            offset,
            lead,
        }
    }

    /// The scaled window length: the unit of the weighted count.
    #[inline(always)]
    fn unit(&self) -> u64 {
        self.windows.length() >> self.shift
    }

    /// The previous window's weight at `offset`, in units of [`unit`](Self::unit).
    #[inline(always)]
    fn weight(&self, offset: u64) -> u64 {
        (self.windows.length() - offset) >> self.shift
    }

    #[inline(always)]
    fn gauge(&self, c: &Counted, current: u32) -> Gauge {
        let until_end = c.lead.saturating_add(self.windows.length() - c.offset);
        let reset = if current > 0 {
            until_end.saturating_add(self.windows.length())
        } else if c.previous > 0 {
            until_end
        } else {
            0
        };
        // previous, current < 2^18 and weight ≤ unit < 2^42: the sum is below 2^61.
        let used = u64::from(c.previous) * self.weight(c.offset) + u64::from(current) * self.unit();
        Gauge::new(used, self.unit(), self.limit, reset)
    }

    /// The first offset into a window at which `previous` weighted cells leave room for
    /// `free` units' worth: the smallest `o` with `previous × ((W − o) >> shift) ≤ free`.
    #[inline]
    fn room_at(&self, previous: u32, free: u64) -> u64 {
        let length = self.windows.length();
        if previous == 0 {
            return 0;
        }
        // Weights never exceed `unit`, so a bound of `unit` or more is met from offset 0.
        let previous = u64::from(previous);
        let bound = if free < previous {
            0 // a full window: no division
        } else {
            (free / previous).min(self.unit())
        };
        // (W − o) >> shift ≤ bound ⇔ W − o < (bound + 1) << shift.
        (length + 1).saturating_sub((bound + 1) << self.shift)
    }

    /// Nanoseconds until a request of `n` cells, refused at `c`, conforms.
    #[inline]
    fn retry(&self, c: &Counted, n: u32) -> u64 {
        let length = self.windows.length();
        let wait = if c.current + n <= self.limit {
            // Later in this window, as the previous window's weight falls.
            let free = u64::from(self.limit - c.current - n) * self.unit();
            self.room_at(c.previous, free).saturating_sub(c.offset)
        } else {
            // In the next window, where this window's count becomes the previous one.
            let free = u64::from(self.limit - n) * self.unit();
            (length - c.offset) + self.room_at(c.current, free)
        };
        c.lead.saturating_add(wait.max(1))
    }
}

impl super::Algorithm for SlidingWindow {
    fn quota(&self) -> &Quota {
        &self.quota
    }

    #[inline(always)]
    fn capacity(&self) -> u32 {
        self.limit
    }

    fn initial_word(&self, now: u64) -> u64 {
        let (index, _) = self.windows.locate(now);
        Self::pack(index, 0, self.limit - self.quota.initial_cells())
    }

    #[inline(always)]
    fn check(&self, word: u64, now: u64, n: u32) -> Step<Result<Allowed, Refused>> {
        let c = self.counted(word, now);
        // current ≤ limit < 2^18, n ≤ limit: no overflow; admitted iff
        // ⌈previous × weight / unit⌉ + current + n ≤ limit.
        let after = c.current + n;
        if after <= self.limit
            && u64::from(c.previous) * self.weight(c.offset)
                <= u64::from(self.limit - after) * self.unit()
        {
            return Step::Write(
                Self::pack(c.index, c.previous, after),
                Ok(Allowed::new(self.gauge(&c, after))),
            );
        }
        let refused = Refused::new(self.gauge(&c, c.current), self.retry(&c, n));
        Step::Keep(Err(if c.lead > 0 {
            refused.behind_clock()
        } else {
            refused
        }))
    }

    fn state(&self, word: u64, now: u64) -> Allowed {
        let c = self.counted(word, now);
        Allowed::new(self.gauge(&c, c.current))
    }

    /// Full at `now`: nothing counted in the reading's window or the one before it (so no
    /// weight is left to fall), and the stored window not ahead of the reading's.
    fn is_idle(&self, word: u64, now: u64) -> bool {
        let c = self.counted(word, now);
        c.previous == 0 && c.current == 0 && c.lead == 0
    }

    fn catch_up(&self, word: u64, fresh: u64, skew: u64) -> Option<u64> {
        let (stored, previous, current) = Self::unpack(word);
        let (latest, _) = self.windows.locate(fresh.saturating_add(skew));
        match self.windows.position(stored, latest) {
            Position::Ahead(_) => Some(Self::pack(self.windows.locate(fresh).0, previous, current)),
            _ => None,
        }
    }
}
