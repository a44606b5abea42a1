//! [`Gcra`], the generic cell rate algorithm: a token bucket whose whole state is one timestamp.
//!
//! The arithmetic (the word, overflow at the horizon, clock steps) is the TAT schedule's,
//! documented in `algorithm::schedule`; GCRA is that schedule with no slack: a request is
//! admitted at once or refused.

use super::schedule::{advance, Schedule};
use super::Step;
use crate::outcome::Gauge;
use crate::quota::Quota;

/// GCRA for one quota: the default algorithm, a token bucket with lazy refill.
///
/// | | |
/// |---|---|
/// | burst | up to `burst` cells at once, then one per interval |
/// | boundary effect | none: no window edges |
/// | precision | exact to the nanosecond (interval rounded up) |
/// | bytes per bucket | 8 (the TAT) |
/// | cost per decision | one load, one CAS, no division |
///
/// # Word layout
/// The whole word is the **theoretical arrival time** (TAT): nanoseconds since the clock's
/// origin at which the bucket is full again; `0` means full at every reading. The cells
/// available at `now` are `burst − ⌈(TAT − now) / T⌉`.
///
/// # Limits
/// Every valid [`Quota`] is a valid GCRA: `burst × interval ≤ 2⁶³ − 1` ns is checked there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gcra {
    pub(super) schedule: Schedule,
}

impl Gcra {
    /// GCRA for `quota`. Every valid quota is a valid GCRA.
    pub fn new(quota: &Quota) -> Self {
        Self {
            schedule: Schedule::gcra(quota),
        }
    }

    /// The emission interval `T`: one cell returns every `T` ns.
    #[inline(always)]
    pub fn interval(&self) -> u64 {
        self.schedule.interval()
    }
}

super::delegate_algorithm!(Gcra, schedule);

/// GCRA's numbers alone (the emission interval, the burst window and the burst): what a caller
/// that keeps many quotas and decides on several at once (a policy set) reads in place of the
/// whole algorithm when a quota decides as GCRA does (see `AnyAlgorithm::rule`). The admission
/// is [`Schedule::check`]'s, on the same `advance`; refusals are left to the full algorithm.
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
}
