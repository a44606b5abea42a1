//! The pure half of the sliding log: what a ring slot's 64-bit value means, and when a
//! recorded request leaves the window. No atomics, no clock.
//!
//! # Slot values
//! * bit 63 set: **pending**, bits 62–0 hold the sequence number of the request claiming the
//!   slot; its time is not written yet.
//! * bit 63 clear: **done**; bit 62 is the parity of the lap (`sequence / limit`) that wrote
//!   it, bits 61–0 the request's time in units of 4 ns, rounded up (`0`: no request, free at
//!   any time). The parity makes the value of one lap differ from the next lap's even when the
//!   times are equal, so a compare-and-swap against a stale value cannot succeed (no ABA).
//!
//! Times are rounded *up* to 4 ns: a recorded request leaves the window at most 3 ns late,
//! never early, so the bound "at most `limit` in any window" stays exact.

/// The pending flag.
const PENDING: u64 = 1 << 63;
/// The lap-parity bit of a done slot.
const PARITY: u64 = 1 << 62;
/// The time field of a done slot.
const TIME_MASK: u64 = PARITY - 1;
/// Nanoseconds per time unit, as a shift.
const UNIT_SHIFT: u32 = 2;

/// A slot value, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    /// Claimed by request `seq`, time not yet written.
    Pending(u64),
    /// Free from `free_at` ns on (the recorded time plus the window); 0 for never used.
    Done { free_at: u64 },
}

/// The value of a slot claimed by request `seq`.
#[inline(always)]
pub(crate) fn pending(seq: u64) -> u64 {
    PENDING | seq
}

/// The value recording a request of lap `lap` at `now`.
#[inline(always)]
pub(crate) fn done(now: u64, lap: u64) -> u64 {
    // ⌈now / 4⌉ ≥ 1 so that 0 keeps meaning "never used"; ≤ 2^62 − 1 always.
    let units = (now >> UNIT_SHIFT) + u64::from(now & ((1 << UNIT_SHIFT) - 1) != 0);
    parity(lap) | units.clamp(1, TIME_MASK)
}

/// The value of a free slot of lap `lap` (a claim rolled back).
#[inline(always)]
pub(crate) fn free(lap: u64) -> u64 {
    parity(lap)
}

#[inline(always)]
fn parity(lap: u64) -> u64 {
    (lap & 1) << 62
}

/// Decodes `value` for a window of `window` ns.
#[inline(always)]
pub(crate) fn decode(value: u64, window: u64) -> Slot {
    if value & PENDING != 0 {
        return Slot::Pending(value & !PENDING);
    }
    let units = value & TIME_MASK;
    if units == 0 {
        return Slot::Done { free_at: 0 };
    }
    // units < 2^62, so units·4 < 2^64; the sum saturates at the horizon (never frees).
    Slot::Done {
        free_at: (units << UNIT_SHIFT).saturating_add(window),
    }
}

/// The time (ns, rounded up to 4) a done slot recorded; 0 for never used. `None` if pending.
#[inline]
pub(crate) fn recorded(value: u64) -> Option<u64> {
    (value & PENDING == 0).then_some((value & TIME_MASK) << UNIT_SHIFT)
}

/// A done slot's value with its time moved back to `now` (after a backward clock step),
/// keeping its lap parity.
#[inline]
pub(crate) fn restamped(value: u64, now: u64) -> u64 {
    let lap_parity = value & PARITY;
    lap_parity | (done(now, 0) & TIME_MASK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_up_and_never_read_as_never_used() {
        let w = 1_000;
        assert_eq!(decode(done(0, 0), w), Slot::Done { free_at: 4 + w });
        assert_eq!(decode(done(5, 0), w), Slot::Done { free_at: 8 + w });
        assert_eq!(decode(done(8, 1), w), Slot::Done { free_at: 8 + w });
        assert_eq!(
            decode(done(u64::MAX, 0), w),
            Slot::Done { free_at: u64::MAX }
        );
        assert_eq!(decode(free(3), w), Slot::Done { free_at: 0 });
        assert_eq!(decode(pending(42), w), Slot::Pending(42));
    }

    #[test]
    fn laps_of_equal_times_differ() {
        assert_ne!(done(100, 6), done(100, 7));
        assert_eq!(done(100, 6), done(100, 8));
        assert_ne!(free(6), free(7));
        assert_eq!(restamped(done(900, 7), 100), done(100, 7));
    }
}
