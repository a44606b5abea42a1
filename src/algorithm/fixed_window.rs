//! [`FixedWindow`]: at most `limit` cells per window of fixed length, counted from the clock's
//! origin.

use super::window::{Position, Windows};
use super::{Algorithm, Step};
use crate::decision::{Allowed, Gauge, Refused};
use crate::quota::{Quota, QuotaError};

/// Bits of the word holding the count of the current window.
const COUNT_BITS: u32 = 24;
/// Mask of the count field.
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;
/// Bits of the word holding the window index (modulo 2^40).
const INDEX_BITS: u32 = 64 - COUNT_BITS;

/// A fixed window counter: at most `count` cells in each window of `period`, the windows
/// aligned on the clock's origin.
///
/// The simplest limiter, and the one the users' articles warn about: a client can spend one
/// window's limit at its end and the next window's at its start, so up to **2 × limit** pass in
/// a span just over one window long (see the boundary test in `tests/algorithms.rs`).
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
/// `index << 24 | count`: bits 63–24 hold the window's index (nanoseconds since the clock's
/// origin divided by the window length, modulo 2^40), bits 23–0 how many cells it has counted.
/// A new bucket holds the index of its creation window. Indices are compared by wrapping
/// distance (see `algorithm::window`): with windows of at least 1 ms, a stored window is
/// mistaken for the current one only after 2^39 ms (17 years) of idleness, and then only
/// conservatively (old cells still counted).
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
    windows: Windows,
    limit: u32,
    quota: Quota,
}

impl FixedWindow {
    /// The most cells one window can count.
    pub const MAX_LIMIT: u32 = COUNT_MASK as u32;
    /// The shortest window: 1 ms.
    pub const MIN_WINDOW_NANOS: u64 = 1_000_000;

    /// `quota.count()` cells per `quota.period()`.
    ///
    /// # Errors
    /// [`QuotaError::LimitTooLarge`], [`QuotaError::WindowTooShort`] or
    /// [`QuotaError::BurstNotSupported`].
    pub fn new(quota: &Quota) -> Result<Self, QuotaError> {
        let (limit, window) = window_quota(quota, Self::MAX_LIMIT, Self::MIN_WINDOW_NANOS)?;
        Ok(Self {
            windows: Windows::new(window, INDEX_BITS),
            limit,
            quota: *quota,
        })
    }

    #[inline(always)]
    fn pack(index: u64, count: u32) -> u64 {
        index << COUNT_BITS | u64::from(count)
    }

    #[inline(always)]
    fn unpack(word: u64) -> (u64, u32) {
        (word >> COUNT_BITS, (word & COUNT_MASK) as u32)
    }

    /// The window the bucket counts in at `now`, its count, the time to its end, and whether it
    /// is ahead of `now`'s window.
    #[inline(always)]
    fn counted(&self, word: u64, now: u64) -> (u64, u32, u64, bool) {
        let (index, offset) = self.windows.locate(now);
        let (stored, count) = Self::unpack(word);
        match self.windows.position(stored, index) {
            Position::Current => (stored, count, self.windows.until_end(offset, 0), false),
            Position::Past(_) => (index, 0, self.windows.until_end(offset, 0), false),
            Position::Ahead(n) => (stored, count, self.windows.until_end(offset, n), true),
        }
    }

    #[inline(always)]
    fn gauge(&self, count: u32, until_end: u64) -> Gauge {
        Gauge::new(u64::from(count), 1, self.limit, until_end)
    }
}

/// The (limit, window) of a window counter's quota, validated.
pub(crate) fn window_quota(
    quota: &Quota,
    max_limit: u32,
    min_window: u64,
) -> Result<(u32, u64), QuotaError> {
    if quota.burst() != quota.count() {
        return Err(QuotaError::BurstNotSupported);
    }
    if quota.count() > max_limit {
        return Err(QuotaError::LimitTooLarge { max: max_limit });
    }
    let window = u64::try_from(quota.period().as_nanos()).map_err(|_| QuotaError::PeriodTooLong)?;
    if window < min_window {
        return Err(QuotaError::WindowTooShort {
            min_nanos: min_window,
        });
    }
    Ok((quota.count(), window))
}

impl Algorithm for FixedWindow {
    fn quota(&self) -> &Quota {
        &self.quota
    }

    #[inline(always)]
    fn capacity(&self) -> u32 {
        self.limit
    }

    fn initial_word(&self, now: u64) -> u64 {
        let (index, _) = self.windows.locate(now);
        Self::pack(index, self.limit - self.quota.initial_cells())
    }

    #[inline(always)]
    fn check(&self, word: u64, now: u64, n: u32) -> Step<Result<Allowed, Refused>> {
        let (index, count, until_end, ahead) = self.counted(word, now);
        // count ≤ limit < 2^24 and n ≤ limit: no overflow.
        let after = count + n;
        if after <= self.limit {
            return Step::Write(
                Self::pack(index, after),
                Ok(Allowed::new(self.gauge(after, until_end))),
            );
        }
        // The next window starts empty and n ≤ limit: the request conforms when it starts.
        let refused = Refused::new(self.gauge(count, until_end), until_end);
        Step::Keep(Err(if ahead {
            refused.behind_clock()
        } else {
            refused
        }))
    }

    fn state(&self, word: u64, now: u64) -> Allowed {
        let (_, count, until_end, _) = self.counted(word, now);
        Allowed::new(self.gauge(count, until_end))
    }

    fn refund(&self, word: u64, now: u64, n: u32) -> Step<()> {
        let (stored, count) = Self::unpack(word);
        let (index, _) = self.windows.locate(now);
        // A past window's cells are gone anyway; refund into the current (or a future) one.
        if matches!(self.windows.position(stored, index), Position::Past(_)) || count == 0 {
            return Step::Keep(());
        }
        Step::Write(Self::pack(stored, count.saturating_sub(n)), ())
    }

    fn catch_up(&self, word: u64, fresh: u64, skew: u64) -> Option<u64> {
        let (stored, count) = Self::unpack(word);
        let (latest, _) = self.windows.locate(fresh.saturating_add(skew));
        match self.windows.position(stored, latest) {
            // Still ahead of the freshest reading: the clock stepped back. Count on in the
            // fresh reading's window, which ends within one window.
            Position::Ahead(_) => Some(Self::pack(self.windows.locate(fresh).0, count)),
            _ => None,
        }
    }
}
