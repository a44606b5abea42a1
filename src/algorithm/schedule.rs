//! The arithmetic of a schedule of theoretical arrival times, shared by [`Gcra`](super::Gcra),
//! [`LeakyBucket`](super::LeakyBucket) and [`Credit`](super::Credit): one timestamp per bucket,
//! three ways of admitting against it.
//!
//! # The word
//! The word is the bucket's **theoretical arrival time** (TAT): the time, in nanoseconds since
//! the Unix epoch, at which the bucket will be full (a leaky bucket: empty) again. `0` means
//! "fresh": full at every reading. With emission interval `T` and burst `b`, the cells
//! available at `now` are `b − ⌈(TAT − now) / T⌉` (all of them when `TAT ≤ now`). Taking `n`
//! cells moves the TAT to `max(TAT, now) + n·T`; the *debt* is how far that lies ahead of `now`.
//!
//! * debt `≤ τ = b·T`: admitted at once (GCRA, the leaky-bucket meter);
//! * debt `≤ τ + slack`: admitted **with a delay** (the leaky-bucket shaper, whose slack is its
//!   maximum queueing delay, and credit reservations, whose slack is their maximum debt);
//! * beyond: refused, and nothing is written.
//!
//! The two shaping modes differ only in the delay they report: a shaper's request waits until
//! *it* conforms (`debt − τ`); a credit reservation waits only for the debt left by the
//! requests before it (`max(TAT, now) − now − τ`), and its own cost is paid by whoever comes
//! next (Guava's `RateLimiter` model).
//!
//! # Overflow and the horizon
//! `n ≤ capacity` is checked by the caller and `capacity·T ≤ τ + slack ≤ 2⁶⁴ − 1` by
//! construction, so `n·T` never overflows. `max(TAT, now) + n·T` is checked: past `u64::MAX`
//! (the year 2554 in Unix time) the request is refused. It never wraps into admitting.
//!
//! # Clock steps and stale readings
//! A TAT more than `τ + slack` ahead of `now` comes from a clock that stepped back or from a
//! stale reading. The decision treats such a bucket as fully booked (refused), writes nothing,
//! and flags the refusal. The limiter then loads the word again (`Acquire`), reads the clock
//! *after* that load, and only if the TAT is more than `τ + slack + skew` ahead of this fresh
//! reading clamps it to `fresh + τ + slack` ([`Schedule::catch_up`]). The fresh reading is no
//! earlier than the one that booked the bucket (less the clock's declared skew), so a stale
//! reading never frees a cell, while a clock that really stepped back locks a bucket out for at
//! most `τ + slack + skew`.
//!
//! The clamp takes the stepped-back reading as the truth. If the clock later returns to its old
//! timeline, the time it repeats counts as refill: each such round trip can give back at most one
//! burst. No one-word bucket can do better without locking keys out for as long as the step.

use crate::outcome::{Allowed, Gauge, Refused};
use crate::quota::{Quota, QuotaError};

use super::Step;

/// The TAT after booking `cost` ns of cells on the bucket `tat` at `now`: `max(TAT, now) + cost`,
/// at least `now`; `None` past the clock's horizon. The debt is the result minus `now`: the
/// caller compares it with what it admits (`τ` for GCRA).
#[inline(always)]
fn advance(tat: u64, now: u64, cost: u64) -> Option<u64> {
    let base = if tat > now { tat } else { now };
    base.checked_add(cost)
}

/// What a request admitted beyond the burst waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Delay {
    /// Until the request itself conforms: `debt − τ` (a shaper).
    Own,
    /// Until the debt of earlier requests is paid: `max(TAT, now) − now − τ` (credit).
    Queue,
}

/// A TAT schedule: GCRA with an optional slack beyond the burst, admitted with a delay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Schedule {
    interval: u64,
    /// `τ = burst·T`: the debt admitted at once.
    window: u64,
    /// `τ + slack`: the largest debt admitted at all.
    lead: u64,
    burst: u32,
    capacity: u32,
    delay: Delay,
    quota: Quota,
}

impl Schedule {
    /// The schedule of `quota` with `slack` ns of debt beyond the burst admitted with a delay.
    pub(crate) fn new(quota: &Quota, slack: u64, delay: Delay) -> Result<Self, QuotaError> {
        if slack > Quota::MAX_WINDOW_NANOS {
            return Err(QuotaError::DelayTooLong {
                max_nanos: Quota::MAX_WINDOW_NANOS,
            });
        }
        Ok(Self::with_slack(quota, slack, delay))
    }

    /// The schedule of plain GCRA: no slack.
    pub(crate) fn gcra(quota: &Quota) -> Self {
        Self::with_slack(quota, 0, Delay::Own)
    }

    /// The schedule of `quota` with a validated `slack` (at most `Quota::MAX_WINDOW_NANOS`).
    fn with_slack(quota: &Quota, slack: u64, delay: Delay) -> Self {
        let interval = quota.interval_nanos();
        // Quota guarantees burst·T ≤ Quota::MAX_WINDOW_NANOS, so lead ≤ 2·(2^63 − 1) < 2^64.
        let window = quota.window_nanos();
        let lead = window + slack;
        let capacity = match delay {
            // A shaper's request must fit in the bucket: no more than its burst.
            Delay::Own => quota.burst(),
            // Credit lends up to the slack: from an empty bucket, n·T ≤ τ + slack.
            Delay::Queue => u32::try_from(lead / interval).unwrap_or(u32::MAX),
        };
        Self {
            interval,
            window,
            lead,
            burst: quota.burst(),
            capacity,
            delay,
            quota: *quota,
        }
    }

    pub(crate) fn quota(&self) -> &Quota {
        &self.quota
    }

    /// The slack beyond the burst, in ns.
    pub(crate) fn slack(&self) -> u64 {
        self.lead - self.window
    }

    /// The longest delay an admission carries: the slack (0 for GCRA).
    pub(crate) fn max_delay_nanos(&self) -> u64 {
        self.slack()
    }

    #[inline(always)]
    pub(crate) fn capacity(&self) -> u32 {
        self.capacity
    }

    /// A bucket whose schedule runs `debt` ns ahead of now: full again in `debt` ns.
    #[inline(always)]
    fn gauge(&self, debt: u64) -> Gauge {
        Gauge::new(debt, self.interval, self.burst, debt)
    }

    /// The TAT clamped against `now + τ + slack` (a clock that stepped back), and whether it
    /// was.
    #[inline(always)]
    fn clamp(&self, tat: u64, now: u64) -> (u64, bool) {
        let latest = now.saturating_add(self.lead);
        if tat > latest {
            (latest, true)
        } else {
            (tat, false)
        }
    }

    pub(crate) fn initial_word(&self, now: u64) -> u64 {
        let missing = self.burst - self.quota.initial_cells();
        if missing == 0 {
            // 0: full at every reading.
            0
        } else {
            now.saturating_add(u64::from(missing) * self.interval)
        }
    }

    /// Takes `n` cells (`1 ≤ n ≤ capacity`) from the bucket `tat` at `now`.
    ///
    /// Writes the new TAT when admitted; a refusal writes nothing. A refusal whose TAT was more
    /// than `τ + slack` ahead of `now` says so ([`Refused::behind_clock`]); the caller then
    /// clamps with a fresh reading ([`Schedule::catch_up`]).
    #[inline(always)]
    pub(crate) fn check(&self, tat: u64, now: u64, n: u32) -> Step<Result<Allowed, Refused>> {
        self.check_as::<true>(tat, now, n)
    }

    /// [`check`](Self::check) for a schedule known to have no slack (GCRA's): one bound, and no
    /// delayed admission to consider.
    #[inline(always)]
    pub(crate) fn check_exact(&self, tat: u64, now: u64, n: u32) -> Step<Result<Allowed, Refused>> {
        debug_assert_eq!(self.lead, self.window, "a schedule with slack");
        self.check_as::<false>(tat, now, n)
    }

    /// [`check`](Self::check); `SLACK = false` only for a schedule without slack.
    #[inline(always)]
    fn check_as<const SLACK: bool>(
        &self,
        tat: u64,
        now: u64,
        n: u32,
    ) -> Step<Result<Allowed, Refused>> {
        // Without slack, τ + slack is τ.
        let lead = if SLACK { self.lead } else { self.window };
        // n ≤ capacity and capacity·T ≤ τ + slack < 2^64: no overflow.
        let cost = u64::from(n) * self.interval;
        let (booked, wait, behind) = match advance(tat, now, cost) {
            Some(new_tat) => {
                // new_tat ≥ now + cost (see `advance`).
                let debt = new_tat - now;
                // The larger bound first: a refusal is then one comparison.
                if debt <= lead {
                    if !SLACK || debt <= self.window {
                        return Step::Write(new_tat, Ok(Allowed::new(self.gauge(debt))));
                    }
                    return Step::Write(new_tat, Ok(self.delayed(tat.max(now), now, debt)));
                }
                // Refused. What is booked now, max(tat, now) − now, is debt − cost; more than
                // τ + slack of it is a clock that stepped back (the clamp, off this path).
                let booked = debt - cost;
                if booked > lead {
                    self.refusal(tat, now, cost)
                } else {
                    // What `refusal` answers unclamped: max(tat, now) + cost − now − (τ + slack),
                    // at least 1 since debt > τ + slack.
                    (booked, debt - lead, false)
                }
            }
            None => self.refusal(tat, now, cost),
        };
        let refused = Refused::new(self.gauge(booked), wait);
        Step::Keep(Err(if behind {
            refused.behind_clock()
        } else {
            refused
        }))
    }

    /// [`Algorithm::take`](super::Algorithm::take): without slack (GCRA, a leaky-bucket meter)
    /// [`take_exact`](Self::take_exact); with slack, what [`check`](Self::check) answers.
    #[inline(always)]
    pub(crate) fn take(&self, tat: u64, now: u64, n: u32) -> Step<Option<u64>> {
        if self.lead == self.window {
            return self.take_exact(tat, now, n);
        }
        super::delay_of(self.check(tat, now, n))
    }

    /// [`take`](Self::take) for a schedule known to have no slack (GCRA's): one bound, and
    /// nothing delayed, in registers.
    #[inline(always)]
    pub(crate) fn take_exact(&self, tat: u64, now: u64, n: u32) -> Step<Option<u64>> {
        debug_assert_eq!(self.lead, self.window, "a schedule with slack");
        // n ≤ capacity and capacity·T ≤ τ: no overflow.
        let cost = u64::from(n) * self.interval;
        match advance(tat, now, cost) {
            // `advance` answers at least `now`.
            Some(new_tat) if new_tat - now <= self.window => Step::Write(new_tat, Some(0)),
            _ => Step::Keep(None),
        }
    }

    /// An admission beyond the burst (`τ < debt ≤ τ + slack`), with the delay of its mode.
    #[inline]
    fn delayed(&self, base: u64, now: u64, debt: u64) -> Allowed {
        let delay = match self.delay {
            Delay::Own => debt - self.window,
            Delay::Queue => (base - now).saturating_sub(self.window),
        };
        Allowed::delayed(self.gauge(debt), delay)
    }

    /// The refusal of a request costing `cost` against the bucket `tat` at `now`: what is booked
    /// (ns), the wait (≥ 1 ns, `u64::MAX` for never) and whether the TAT is more than `τ + slack`
    /// ahead of `now`. The general case, which [`check`](Self::check) takes out of line for a
    /// clamp or the horizon only.
    #[cold]
    #[inline(never)]
    fn refusal(&self, tat: u64, now: u64, cost: u64) -> (u64, u64, bool) {
        // A TAT more than τ + slack ahead of now refuses every n ≥ 1, so the clamp of a clock
        // that stepped back is needed on this path only.
        let (tat, clock_behind) = self.clamp(tat, now);
        // The request is admitted at the first t ≥ now with max(tat, t) + cost − t ≤ τ + slack,
        // that is t = max(tat, now) + cost − τ − slack (cost ≤ τ + slack, so then t ≤ tat),
        // after now since it was refused. Past the clock's horizon it never is: u64::MAX.
        let base = if tat > now { tat } else { now };
        let wait = match base.checked_add(cost) {
            Some(end) => {
                debug_assert!(end - now > self.lead, "refused a conforming request");
                (end - now).saturating_sub(self.lead).max(1)
            }
            None => u64::MAX,
        };
        (tat.saturating_sub(now), wait, clock_behind)
    }

    /// The TAT to write after a backward clock step: `fresh + τ + slack` (fully booked as of
    /// `fresh`) if `tat` is more than that plus `skew` ahead, otherwise nothing.
    ///
    /// `fresh` must be read after `tat` was loaded (see `Cell::clamp`): a stale reading cannot
    /// be told from a clock that stepped back, and clamping against one would free cells that
    /// were legitimately booked.
    #[inline]
    pub(crate) fn catch_up(&self, tat: u64, fresh: u64, skew: u64) -> Option<u64> {
        let latest = fresh.saturating_add(self.lead);
        (tat > latest.saturating_add(skew)).then_some(latest)
    }

    /// Full at `now`: the TAT is not after it (0, a new full bucket's word, is idle at every
    /// reading). The TAT only moves forwards when something is taken, so the bucket stays full.
    #[inline]
    pub(crate) fn is_idle(&self, tat: u64, now: u64) -> bool {
        tat <= now
    }

    /// The bucket `tat` as seen at `now`, taking nothing.
    #[inline]
    pub(crate) fn state(&self, tat: u64, now: u64) -> Allowed {
        let (tat, _) = self.clamp(tat, now);
        Allowed::new(self.gauge(tat.saturating_sub(now)))
    }
}
