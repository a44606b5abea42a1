//! GCRA, the generic cell rate algorithm: a token bucket whose whole state is one timestamp.
//!
//! # The word
//! The word is the bucket's **theoretical arrival time** (TAT): the time, in nanoseconds since
//! the clock's origin, at which the bucket will be full again. `0` means "fresh": full at every
//! reading. The cells available at `now` are `burst − ⌈(TAT − now) / T⌉` (all of them when
//! `TAT ≤ now`); taking `n` cells moves the TAT to `max(TAT, now) + n·T`, which is allowed when
//! the result is at most `τ = burst·T` ahead of `now`.
//!
//! # Overflow and the horizon
//! `n ≤ burst` is checked by the caller and `burst·T ≤ 2⁶³` by [`Quota`], so `n·T` never
//! overflows. `max(TAT, now) + n·T` is checked: if it would pass `u64::MAX` (584 years after the
//! clock's origin) the request is refused. Near the horizon the bucket thus shrinks to nothing;
//! it never wraps into admitting.
//!
//! # Clock steps and stale readings
//! A TAT more than `τ` ahead of `now` comes from a clock that stepped back, or from a reading
//! that is stale (taken before another thread's later reading booked the bucket). The decision
//! treats such a bucket as empty (refused), writes nothing, and flags the refusal. The limiter
//! then loads the word again (`Acquire`), reads the clock *after* that load, and only if the TAT
//! is more than `τ + skew` ahead of this fresh reading, clamps it to `fresh + τ`
//! ([`Gcra::catch_up`]). The fresh reading is no earlier than the one that booked the bucket
//! (less the clock's declared skew), so a stale reading never frees a cell, while a clock that
//! really stepped back locks a bucket out for at most `τ + skew`.
//!
//! The clamp takes the stepped-back reading as the truth. If the clock later returns to its old
//! timeline, the time it repeats counts as refill: each such round trip can give back at most one
//! burst. No one-word bucket can do better without locking keys out for as long as the step.

use super::{Algorithm, Step};
use crate::decision::{Allowed, Gauge, Refused};
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gcra {
    interval: u64,
    window: u64,
    burst: u32,
    quota: Quota,
}

impl Gcra {
    /// GCRA for `quota`. Every valid quota is a valid GCRA.
    pub fn new(quota: &Quota) -> Self {
        Self {
            interval: quota.interval_nanos(),
            window: quota.window_nanos(),
            burst: quota.burst(),
            quota: *quota,
        }
    }

    /// A bucket whose schedule runs `debt` ns ahead of now: full again in `debt` ns.
    #[inline(always)]
    fn gauge(&self, debt: u64) -> Gauge {
        Gauge::new(debt, self.interval, self.burst, debt)
    }

    /// The emission interval `T`.
    #[inline(always)]
    pub fn interval(&self) -> u64 {
        self.interval
    }

    /// The TAT clamped against `now + τ` (a clock that stepped back), and whether it was.
    #[inline(always)]
    fn clamp(&self, tat: u64, now: u64) -> (u64, bool) {
        let latest = now.saturating_add(self.window);
        if tat > latest {
            (latest, true)
        } else {
            (tat, false)
        }
    }

    /// The refusal of a request costing `cost` against the bucket `tat` at `now`, flagged if
    /// the TAT is more than `τ` ahead of `now` (a clock that stepped back, or a stale reading).
    #[inline(always)]
    fn refused(&self, tat: u64, now: u64, cost: u64) -> Refused {
        // A TAT more than τ ahead of now refuses every n ≥ 1, so the clamp of a clock that
        // stepped back is needed on this path only.
        let (tat, clock_behind) = self.clamp(tat, now);
        // The request conforms at the first t ≥ now with max(tat, t) + cost − t ≤ τ, that is
        // t = max(tat, now) + cost − τ, which is after now since it was refused. If
        // max(tat, now) + cost passes the 584-year horizon it never conforms: u64::MAX.
        let base = if tat > now { tat } else { now };
        let wait = match base.checked_add(cost) {
            Some(end) => {
                debug_assert!(end - now > self.window, "refused a conforming request");
                (end - now).saturating_sub(self.window).max(1)
            }
            None => u64::MAX,
        };
        Refused {
            gauge: self.gauge(tat.saturating_sub(now)),
            wait,
            clock_behind,
        }
    }
}

impl Algorithm for Gcra {
    fn quota(&self) -> &Quota {
        &self.quota
    }

    #[inline(always)]
    fn capacity(&self) -> u32 {
        self.burst
    }

    fn initial_word(&self, now: u64) -> u64 {
        let missing = self.burst - self.quota.initial_cells();
        if missing == 0 {
            // 0: full at every reading.
            0
        } else {
            now.saturating_add(u64::from(missing) * self.interval)
        }
    }

    /// Takes `n` cells (`1 ≤ n ≤ burst`) from the bucket `tat` at `now`.
    ///
    /// Writes the new TAT when admitted; a refusal writes nothing. A refusal whose TAT was more
    /// than `τ` ahead of `now` says so ([`Refused::behind_clock`]); the caller then clamps with
    /// a fresh reading ([`Gcra::catch_up`]).
    #[inline(always)]
    fn check(&self, tat: u64, now: u64, n: u32) -> Step<Result<Allowed, Refused>> {
        let base = if tat > now { tat } else { now };
        // n ≤ burst and burst·T ≤ 2^63: no overflow.
        let cost = u64::from(n) * self.interval;
        if let Some(new_tat) = base.checked_add(cost) {
            // new_tat ≥ base ≥ now.
            let debt = new_tat - now;
            if debt <= self.window {
                return Step::Write(new_tat, Ok(Allowed::new(self.gauge(debt))));
            }
        }
        Step::Keep(Err(self.refused(tat, now, cost)))
    }

    /// The TAT to write after a backward clock step: `fresh + τ` (empty as of `fresh`) if `tat`
    /// is more than `τ + skew` ahead of `fresh`, otherwise nothing.
    ///
    /// `fresh` must be read after `tat` was loaded (see `Cell::clamp`): a stale reading cannot
    /// be told from a clock that stepped back, and clamping against one would free cells that
    /// were legitimately booked. `skew` is the clock's
    /// [`skew_nanos`](crate::clock::Clock::skew_nanos).
    #[inline]
    fn catch_up(&self, tat: u64, fresh: u64, skew: u64) -> Option<u64> {
        let latest = fresh.saturating_add(self.window);
        (tat > latest.saturating_add(skew)).then_some(latest)
    }

    /// The bucket `tat` as seen at `now`, without taking anything (what `n = 0` reports).
    #[inline]
    fn state(&self, tat: u64, now: u64) -> Allowed {
        let (tat, _) = self.clamp(tat, now);
        Allowed::new(self.gauge(tat.saturating_sub(now)))
    }

    /// Gives `n` cells back to the bucket `tat` at `now`, never above `burst`.
    ///
    /// The TAT moves back by at most `n·T` and never below `now`: a refund can free no more than
    /// the `n` cells it returns, whatever `now` is (no clamp here, so a stale reading is harmless).
    #[inline]
    fn refund(&self, tat: u64, now: u64, n: u32) -> Step<()> {
        if tat <= now {
            return Step::Keep(());
        }
        let cost = u64::from(n.min(self.burst)) * self.interval;
        let new_tat = tat.saturating_sub(cost).max(now);
        if new_tat == tat {
            Step::Keep(())
        } else {
            Step::Write(new_tat, ())
        }
    }
}
