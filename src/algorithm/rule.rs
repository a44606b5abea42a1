//! [`Rule`]: GCRA's numbers alone, what a policy's fast path decides with, and [`advance`],
//! the booking arithmetic it shares with the TAT schedule (`algorithm::schedule`).

use super::Step;
use crate::outcome::Gauge;

/// The TAT after booking `cost` ns of cells on the bucket `tat` at `now`: `max(TAT, now) + cost`,
/// at least `now`; `None` past the clock's horizon. The debt is the result minus `now`: the
/// caller compares it with what it admits (`τ` for GCRA).
#[inline(always)]
pub(super) fn advance(tat: u64, now: u64, cost: u64) -> Option<u64> {
    let base = if tat > now { tat } else { now };
    base.checked_add(cost)
}

/// GCRA's numbers alone (the emission interval, the burst window and the burst): what a caller
/// that keeps many quotas and decides on several at once (a policy set) reads in place of the
/// whole algorithm when a quota decides as GCRA does (see `AnyAlgorithm::rule`). The admission
/// is [`Schedule::check`](super::schedule::Schedule::check)'s, on the same [`advance`];
/// refusals are left to the full algorithm. [`Schedule::take`](super::schedule::Schedule::take)
/// runs it for a schedule without slack, so a policy's fast path and GCRA's
/// [`Algorithm::take`](super::Algorithm::take) are one code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rule {
    interval: u64,
    /// `τ = burst·T`: the largest debt admitted.
    window: u64,
    burst: u32,
}

impl Rule {
    /// The rule of GCRA on a quota of this `interval` and `burst`.
    #[inline(always)]
    pub(crate) fn new(interval: u64, burst: u32) -> Self {
        Self {
            interval,
            // A valid quota's burst·T is at most MAX_WINDOW_NANOS.
            window: interval * u64::from(burst),
            burst,
        }
    }

    /// The most cells one request may take.
    #[inline(always)]
    pub(crate) fn capacity(&self) -> u32 {
        self.burst
    }

    /// Takes `n` cells (`1 ≤ n ≤ burst`) from the bucket `tat` at `now` as
    /// [`Algorithm::take`](super::Algorithm::take) does: `Some(debt)` if admitted (the new TAT
    /// is `now + debt`), `None` if refused.
    #[inline(always)]
    pub(crate) fn take(&self, tat: u64, now: u64, n: u32) -> Step<Option<u64>> {
        // n ≤ burst and burst·T ≤ 2^63 − 1: no overflow.
        let cost = u64::from(n) * self.interval;
        match advance(tat, now, cost) {
            // `advance` answers at least `now`.
            Some(new_tat) if new_tat - now <= self.window => {
                Step::Write(new_tat, Some(new_tat - now))
            }
            _ => Step::Keep(None),
        }
    }

    /// The gauge of a bucket booked `debt` ns ahead: full again in `debt` ns.
    #[inline(always)]
    pub(crate) fn gauge(&self, debt: u64) -> Gauge {
        Gauge::new(debt, self.interval, self.burst, debt)
    }

    /// Nanoseconds until a bucket booked `debt` ns ahead holds one more cell than now (0 if it
    /// is full): `debt` less the whole intervals still booked after that one.
    #[inline]
    pub(crate) fn next_cell(&self, debt: u64) -> u64 {
        if debt == 0 {
            return 0;
        }
        (debt - 1) % self.interval + 1
    }
}
