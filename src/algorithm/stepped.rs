//! The arithmetic of a bucket refilled in steps, shared by [`FixedWindow`](super::FixedWindow)
//! and [`IntervalRefill`](super::IntervalRefill): at each window boundary (windows counted from
//! the Unix epoch, shifted by a UTC offset: `algorithm::window`) `refill` cells come back, up to
//! `burst`.
//!
//! # The word
//! `index << 24 | used`: bits 63–24 hold the index of the window the bucket last counted in
//! (the reading plus the offset, divided by the window length, modulo 2^40), bits 23–0 how many
//! of its `burst` cells were in use then. At a later window `d` steps on, `used` has
//! dropped by `d × refill` (never below 0). A new bucket holds the index of its creation window.
//! Window indices compare by wrapping distance (`algorithm::window`): with windows of at least
//! 1 ms, a stored window is mistaken for a current one only after 2^39 ms (17 years) idle, and
//! then conservatively (old cells still counted).
//!
//! # Stale readings and clock steps
//! A reading whose window is before the stored one (a stale reading, or a clock that stepped
//! back) is counted against the stored window: conservative, never an extra cell. If it is
//! refused there, the limiter re-checks with a fresh reading and, if the clock really is behind,
//! moves the count to the fresh reading's window ([`Stepped::catch_up`]): the lockout after a
//! backward step is at most one window. As for GCRA, a clock that then returns gives back at
//! most one burst per round trip.

use super::window::{utc_offset, window_length, Position, Windows};
use super::Step;
use crate::outcome::{Allowed, Gauge, Refused};
use crate::quota::{Quota, QuotaError};

/// Bits of the word holding the cells in use.
const USED_BITS: u32 = 24;
/// Mask of the `used` field.
const USED_MASK: u64 = (1 << USED_BITS) - 1;
/// Bits of the word holding the window index (modulo 2^40).
const INDEX_BITS: u32 = 64 - USED_BITS;
/// A stored window up to half the index range after a reading's is taken as ahead of it.
const MAX_AHEAD: u64 = 1 << (INDEX_BITS - 1);

/// A bucket of `burst` cells refilled by `refill` at each window boundary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stepped {
    windows: Windows,
    refill: u32,
    burst: u32,
    /// The windows' UTC offset in minutes.
    offset: i16,
    quota: Quota,
}

/// Where a word stands at a reading.
struct Counted {
    /// The window counted in.
    index: u64,
    /// Cells in use there.
    used: u32,
    /// Offset of the reading into its window.
    offset: u64,
    /// How many windows the counted one is ahead of the reading's (0 unless stale or behind).
    ahead: u64,
}

impl Stepped {
    /// The largest burst the `used` field holds.
    pub(crate) const MAX_BURST: u32 = USED_MASK as u32;
    /// The shortest window: 1 ms.
    pub(crate) const MIN_WINDOW_NANOS: u64 = 1_000_000;

    /// `refill` cells per `quota.period()`, up to `quota.burst()`.
    pub(crate) fn new(quota: &Quota, refill: u32) -> Result<Self, QuotaError> {
        let length = window_length(quota, Self::MAX_BURST, Self::MIN_WINDOW_NANOS)?;
        Ok(Self {
            windows: Windows::new(length, INDEX_BITS, MAX_AHEAD, 0),
            refill,
            burst: quota.burst(),
            offset: 0,
            quota: *quota,
        })
    }

    /// The same counter, its windows starting where a reading plus `minutes` is a multiple of
    /// the window length.
    ///
    /// # Errors
    /// [`QuotaError::UtcOffsetOutOfRange`] beyond a day either side of UTC.
    pub(crate) fn with_utc_offset(self, minutes: i16) -> Result<Self, QuotaError> {
        let offset = utc_offset(minutes)?;
        Ok(Self {
            windows: Windows::new(self.windows.length(), INDEX_BITS, MAX_AHEAD, offset),
            offset,
            ..self
        })
    }

    /// The windows' UTC offset in minutes.
    pub(crate) fn utc_offset(&self) -> i16 {
        self.offset
    }

    pub(crate) fn quota(&self) -> &Quota {
        &self.quota
    }

    #[inline(always)]
    pub(crate) fn capacity(&self) -> u32 {
        self.burst
    }

    /// The window length in ns.
    pub(crate) fn window(&self) -> u64 {
        self.windows.length()
    }

    /// The word of a bucket counting `used` cells in window `index` (any index: it is kept
    /// modulo 2^40), as a counter elsewhere (a Redis script) hands its state over.
    pub(crate) fn word_at(index: u64, used: u32) -> u64 {
        Self::pack(index & ((1 << INDEX_BITS) - 1), used)
    }

    #[inline(always)]
    fn pack(index: u64, used: u32) -> u64 {
        index << USED_BITS | u64::from(used)
    }

    #[inline(always)]
    fn unpack(word: u64) -> (u64, u32) {
        (word >> USED_BITS, (word & USED_MASK) as u32)
    }

    #[inline(always)]
    fn counted(&self, word: u64, now: u64) -> Counted {
        let (index, offset) = self.windows.locate(now);
        let (stored, used) = Self::unpack(word);
        let (index, used, ahead) = match self.windows.position(stored, index) {
            Position::Current => (stored, used, 0),
            // steps < 2^40 and refill < 2^32: the product saturates rather than wraps.
            Position::Past(steps) => (
                index,
                u64::from(used).saturating_sub(steps.saturating_mul(u64::from(self.refill))) as u32,
                0,
            ),
            Position::Ahead(steps) => (stored, used, steps),
        };
        Counted {
            index,
            used,
            offset,
            ahead,
        }
    }

    /// Nanoseconds from the reading until `cells` more cells have come back (`cells ≥ 1`): the
    /// end of the counted window, then one window per further refill.
    #[inline(always)]
    fn until_refilled(&self, c: &Counted, cells: u32) -> u64 {
        let steps = if cells <= self.refill {
            1
        } else {
            cells.div_ceil(self.refill)
        };
        self.windows
            .until_end(c.offset, c.ahead)
            .saturating_add(u64::from(steps - 1).saturating_mul(self.windows.length()))
    }

    /// The gauge of `used` cells: full again once they have all come back.
    #[inline(always)]
    fn gauge(&self, c: &Counted, used: u32) -> Gauge {
        let reset = if used == 0 {
            0
        } else {
            self.until_refilled(c, used)
        };
        Gauge::new(u64::from(used), 1, self.burst, reset)
    }

    pub(crate) fn initial_word(&self, now: u64) -> u64 {
        let (index, _) = self.windows.locate(now);
        Self::pack(index, self.burst - self.quota.initial_cells())
    }

    #[inline(always)]
    pub(crate) fn check(&self, word: u64, now: u64, n: u32) -> Step<Result<Allowed, Refused>> {
        let c = self.counted(word, now);
        // used ≤ burst < 2^24 and n ≤ burst: no overflow.
        let after = c.used + n;
        if after <= self.burst {
            return Step::Write(
                Self::pack(c.index, after),
                Ok(Allowed::new(self.gauge(&c, after))),
            );
        }
        // `after − burst` cells must come back first; n ≤ burst, so they do.
        let refused = Refused::new(
            self.gauge(&c, c.used),
            self.until_refilled(&c, after - self.burst),
        );
        Step::Keep(Err(if c.ahead > 0 {
            refused.behind_clock()
        } else {
            refused
        }))
    }

    pub(crate) fn state(&self, word: u64, now: u64) -> Allowed {
        let c = self.counted(word, now);
        Allowed::new(self.gauge(&c, c.used))
    }

    /// Admits at once or refuses: no delay.
    pub(crate) fn max_delay_nanos(&self) -> u64 {
        0
    }

    /// Full at `now`: nothing in use once the refills are counted, and the stored window not
    /// ahead of the reading's (an ahead window is judged conservatively, as in use).
    pub(crate) fn is_idle(&self, word: u64, now: u64) -> bool {
        let c = self.counted(word, now);
        c.used == 0 && c.ahead == 0
    }

    /// After a refusal against a window ahead of the reading: if the stored window is still
    /// ahead of `fresh + skew`, the clock stepped back; count on in `fresh`'s window.
    pub(crate) fn catch_up(&self, word: u64, fresh: u64, skew: u64) -> Option<u64> {
        let (stored, used) = Self::unpack(word);
        let (latest, _) = self.windows.locate(fresh.saturating_add(skew));
        match self.windows.position(stored, latest) {
            Position::Ahead(_) => Some(Self::pack(self.windows.locate(fresh).0, used)),
            _ => None,
        }
    }
}
