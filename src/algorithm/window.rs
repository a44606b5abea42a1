//! Window arithmetic shared by the window counters: which window a reading falls in, and
//! where a stored window stands relative to it, with window indices kept modulo 2^`bits`.
//!
//! A word has no room for a full 64-bit window index, so counters store the index modulo
//! 2^`bits` and compare indices by their wrapping distance: a stored window 1 to `max_ahead`
//! windows after the reading's is in the future (the reading is stale, or the clock stepped
//! back), any other nonzero distance is in the past. With the minimum window length each
//! counter enforces, the ambiguity needs a bucket left idle for a long time (stated per
//! counter), and it is conservative: old cells are counted, never new cells freed.

use crate::quota::{Quota, QuotaError};

/// Fixed-length windows of `length` ns, counted from the clock's origin, with indices modulo
/// 2^`bits`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Windows {
    length: u64,
    bits: u32,
    max_ahead: u64,
}

/// Where a stored window stands relative to the window of a reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Position {
    /// The reading's own window.
    Current,
    /// `n ≥ 1` windows before the reading's.
    Past(u64),
    /// `1 ≤ n ≤ max_ahead` windows after the reading's: a stale reading or a clock that
    /// stepped back.
    Ahead(u64),
}

impl Windows {
    /// Windows of `length` ns, indices modulo 2^`bits`, a stored index at most `max_ahead`
    /// (< 2^`bits`) windows after a reading's taken as ahead of it.
    pub(crate) const fn new(length: u64, bits: u32, max_ahead: u64) -> Self {
        Self {
            length,
            bits,
            max_ahead,
        }
    }

    /// The window length in ns.
    #[inline(always)]
    pub(crate) fn length(&self) -> u64 {
        self.length
    }

    #[inline(always)]
    fn mask(&self) -> u64 {
        (1 << self.bits) - 1
    }

    /// The index (modulo 2^bits) of the window `now` falls in, and how far into it `now` is.
    #[inline(always)]
    pub(crate) fn locate(&self, now: u64) -> (u64, u64) {
        ((now / self.length) & self.mask(), now % self.length)
    }

    /// Where the stored window `stored` stands relative to the window `index`.
    #[inline(always)]
    pub(crate) fn position(&self, stored: u64, index: u64) -> Position {
        let ahead = stored.wrapping_sub(index) & self.mask();
        if ahead == 0 {
            Position::Current
        } else if ahead <= self.max_ahead {
            Position::Ahead(ahead)
        } else {
            Position::Past(index.wrapping_sub(stored) & self.mask())
        }
    }

    /// Nanoseconds from a reading `offset` ns into its window to the end of the window `ahead`
    /// windows later (saturating).
    #[inline(always)]
    pub(crate) fn until_end(&self, offset: u64, ahead: u64) -> u64 {
        (self.length - offset).saturating_add(ahead.saturating_mul(self.length))
    }
}

/// The window length of a window algorithm's quota, validated: a burst of at most `max_burst`
/// and a period of at least `min_window` ns.
pub(crate) fn window_length(
    quota: &Quota,
    max_burst: u32,
    min_window: u64,
) -> Result<u64, QuotaError> {
    if quota.burst() > max_burst {
        return Err(QuotaError::LimitTooLarge { max: max_burst });
    }
    let window = u64::try_from(quota.period().as_nanos()).map_err(|_| QuotaError::PeriodTooLong)?;
    if window < min_window {
        return Err(QuotaError::WindowTooShort {
            min_nanos: min_window,
        });
    }
    Ok(window)
}

/// Checks that `quota` has no burst separate from its count, as window counters require.
pub(crate) fn no_burst(quota: &Quota) -> Result<(), QuotaError> {
    if quota.burst() == quota.count() {
        Ok(())
    } else {
        Err(QuotaError::BurstNotSupported)
    }
}
