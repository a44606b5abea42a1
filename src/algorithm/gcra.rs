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
//! # Clock steps
//! A TAT more than `τ` ahead of `now` can only come from a clock that stepped back. It is clamped
//! to `now + τ` (empty as of now) and written back, so the lockout after a backward step is at
//! most one window `τ`, and admissions never exceed what the rate allows in real time.

use crate::cell::Step;
use crate::decision::{Allowed, Refused};
use crate::quota::Quota;

/// The GCRA parameters of one quota, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gcra {
    interval: u64,
    window: u64,
    burst: u32,
}

impl Gcra {
    /// The parameters of `quota`.
    pub fn new(quota: &Quota) -> Self {
        Self {
            interval: quota.interval_nanos(),
            window: quota.window_nanos(),
            burst: quota.burst(),
        }
    }

    /// The bucket's capacity.
    #[inline(always)]
    pub fn burst(&self) -> u32 {
        self.burst
    }

    /// The emission interval `T`.
    #[inline(always)]
    pub fn interval(&self) -> u64 {
        self.interval
    }

    /// The word of a bucket created at `now` holding `cells` cells (`cells ≤ burst`).
    pub fn initial_word(&self, now: u64, cells: u32) -> u64 {
        let missing = u64::from(self.burst.saturating_sub(cells)) * self.interval;
        if missing == 0 {
            0
        } else {
            now.saturating_add(missing)
        }
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

    /// Takes `n` cells (`1 ≤ n ≤ burst`) from the bucket `tat` at `now`.
    ///
    /// Writes the new TAT when admitted; when refused, writes only a clamped TAT (see the module
    /// docs) and otherwise leaves the word alone.
    #[inline(always)]
    pub fn check(&self, tat: u64, now: u64, n: u32) -> Step<Result<Allowed, Refused>> {
        match self.decide(tat, now, n) {
            (answer, word, true) => Step::Write(word, answer),
            (answer, _, false) => Step::Keep(answer),
        }
    }

    /// The decision [`check`](Self::check) would make, without any write.
    #[inline]
    pub fn peek(&self, tat: u64, now: u64, n: u32) -> Result<Allowed, Refused> {
        self.decide(tat, now, n).0
    }

    /// The decision, the word to store, and whether that word must be written on refusal.
    #[inline(always)]
    fn decide(&self, tat: u64, now: u64, n: u32) -> (Result<Allowed, Refused>, u64, bool) {
        let base = if tat > now { tat } else { now };
        // n ≤ burst and burst·T ≤ 2^63: no overflow.
        let cost = u64::from(n) * self.interval;
        if let Some(new_tat) = base.checked_add(cost) {
            // new_tat ≥ base ≥ now.
            let debt = new_tat - now;
            if debt <= self.window {
                let allowed = Allowed {
                    debt,
                    interval: self.interval,
                    burst: self.burst,
                };
                return (Ok(allowed), new_tat, true);
            }
        }
        // A TAT more than τ ahead of now refuses every n ≥ 1, so the clamp of a clock that
        // stepped back is needed on this path only.
        let (tat, clamped) = self.clamp(tat, now);
        (Err(self.refused(tat, now, cost)), tat, clamped)
    }

    /// The refusal of a request costing `cost` against the (clamped) `tat`.
    #[inline(always)]
    fn refused(&self, tat: u64, now: u64, cost: u64) -> Refused {
        // The request conforms at the first t ≥ now with max(tat, t) + cost − t ≤ τ, that is
        // t = tat + cost − τ (> now, or it would have been admitted). Past the 584-year horizon:
        // never, u64::MAX.
        let wait = match tat.checked_add(cost) {
            Some(end) => end.saturating_sub(self.window).saturating_sub(now).max(1),
            None => u64::MAX,
        };
        Refused {
            debt: tat.saturating_sub(now),
            wait,
            interval: self.interval,
            burst: self.burst,
        }
    }

    /// Gives `n` cells back to the bucket `tat` at `now`, never above `burst`.
    #[inline]
    pub fn refund(&self, tat: u64, now: u64, n: u32) -> Step<()> {
        let (clamped_tat, clamped) = self.clamp(tat, now);
        let cost = u64::from(n.min(self.burst)) * self.interval;
        let new_tat = clamped_tat.saturating_sub(cost).max(now).min(clamped_tat);
        if new_tat == tat && !clamped {
            Step::Keep(())
        } else {
            Step::Write(new_tat, ())
        }
    }

    /// Cells available at `now` in the bucket `tat`.
    #[inline]
    pub fn available(&self, tat: u64, now: u64) -> u32 {
        let (tat, _) = self.clamp(tat, now);
        let debt = tat.saturating_sub(now);
        Allowed {
            debt,
            interval: self.interval,
            burst: self.burst,
        }
        .remaining()
    }
}
