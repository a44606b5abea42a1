//! Window arithmetic shared by the window counters: which window a reading falls in, and
//! where a stored window stands relative to it, with window indices kept modulo 2^`bits`.
//!
//! Windows are counted from the clock's 0, the Unix epoch (see [`crate::clock`]), shifted by a
//! UTC offset: with an offset of `o` east of UTC, a window starts wherever `now + o` is a
//! multiple of the length, so a daily window starts at midnight in that zone. The Redis
//! scripts count the same windows from the server's Unix time (`redis::quota`). The offset is
//! kept as its remainder modulo the length (the phase): never negative, below one window.
//!
//! A word has no room for a full 64-bit window index, so counters store the index modulo
//! 2^`bits` and compare indices by their wrapping distance: a stored window 1 to `max_ahead`
//! windows after the reading's is in the future (the reading is stale, or the clock stepped
//! back), any other nonzero distance is in the past. With the minimum window length each
//! counter enforces, the ambiguity needs a bucket left idle for a long time (stated per
//! counter), and it is conservative: old cells are counted, never new cells freed.

use crate::quota::{Quota, QuotaError};

/// The largest UTC offset a window counter takes, in minutes (either side of UTC): a day less
/// one minute.
pub(crate) const MAX_UTC_OFFSET_MINUTES: i16 = 24 * 60 - 1;

/// Fixed-length windows of `length` ns, counted from the clock's 0 shifted by a UTC offset,
/// with indices modulo 2^`bits`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Windows {
    length: u64,
    bits: u32,
    max_ahead: u64,
    /// The UTC offset modulo the length: `0 ≤ phase < length`.
    phase: u64,
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
    /// Windows of `length` ns starting where a reading plus `offset` minutes is a multiple of
    /// `length`, indices modulo 2^`bits`, a stored index at most `max_ahead` (< 2^`bits`)
    /// windows after a reading's taken as ahead of it.
    #[inline(always)]
    pub(crate) fn new(length: u64, bits: u32, max_ahead: u64, offset: i16) -> Self {
        Self {
            length,
            bits,
            max_ahead,
            phase: phase(offset, length, 60_000_000_000),
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
        // Saturating: readings less than a window before the clock's end (the year 2554) all
        // fall in its last window.
        let shifted = now.saturating_add(self.phase);
        ((shifted / self.length) & self.mask(), shifted % self.length)
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

/// An offset of `minutes` (east of UTC) modulo `length`, in a unit of which a minute is
/// `per_minute`: the phase of windows of that length (windows counted from the Unix epoch, moved by the offset).
#[inline(always)]
pub fn phase(minutes: i16, length: u64, per_minute: u64) -> u64 {
    if minutes == 0 {
        return 0;
    }
    // |minutes| < 2^15: the product stays far below 2^64 for any unit up to a nanosecond.
    let rest = u64::from(minutes.unsigned_abs()) * per_minute % length;
    if minutes > 0 || rest == 0 {
        rest
    } else {
        length - rest
    }
}

/// Checks a UTC offset in minutes (see [`MAX_UTC_OFFSET_MINUTES`]).
pub(crate) fn utc_offset(minutes: i16) -> Result<i16, QuotaError> {
    if minutes.unsigned_abs() <= MAX_UTC_OFFSET_MINUTES.unsigned_abs() {
        Ok(minutes)
    } else {
        Err(QuotaError::UtcOffsetOutOfRange)
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

#[cfg(all(test, not(flowgate_loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_utc_offset_shifts_every_boundary_by_itself() {
        const MINUTE: u64 = 60_000_000_000;
        const DAY: u64 = 24 * 60 * MINUTE;
        // 2026-03-01 00:00 UTC.
        let midnight = 20_513 * DAY;
        for (minutes, boundary) in [
            (0, midnight),
            (120, midnight - 120 * MINUTE),
            (-330, midnight + 330 * MINUTE),
            (MAX_UTC_OFFSET_MINUTES, midnight - DAY + MINUTE),
            (-MAX_UTC_OFFSET_MINUTES, midnight + DAY - MINUTE),
        ] {
            let days = Windows::new(DAY, 40, 1 << 39, minutes);
            let (index, into) = days.locate(boundary);
            assert_eq!(into, 0, "{minutes}");
            assert_eq!(
                days.locate(boundary - 1),
                ((index - 1) & days.mask(), DAY - 1)
            );
            assert_eq!(days.locate(boundary + DAY - 1), (index, DAY - 1));
        }
        // A phase of a window's length or more wraps: 90 minutes east in windows of an hour
        // is 30 minutes east.
        let hours = |minutes| Windows::new(60 * MINUTE, 40, 1 << 39, minutes);
        assert_eq!(hours(90).locate(midnight).1, hours(30).locate(midnight).1);
        assert_eq!(hours(-90).locate(midnight).1, 30 * MINUTE);
        // At both ends of the clock: no overflow, indices in range.
        for minutes in [-MAX_UTC_OFFSET_MINUTES, -1, 0, 1, MAX_UTC_OFFSET_MINUTES] {
            for now in [0, 1, u64::MAX - 1, u64::MAX] {
                let (index, into) = Windows::new(DAY, 40, 1 << 39, minutes).locate(now);
                assert!(index < 1 << 40 && into < DAY);
            }
        }
        assert_eq!(utc_offset(1_440), Err(QuotaError::UtcOffsetOutOfRange));
        assert_eq!(utc_offset(-1_440), Err(QuotaError::UtcOffsetOutOfRange));
    }
}
