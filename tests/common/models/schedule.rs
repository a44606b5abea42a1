//! The reference model of the TAT-schedule algorithms (GCRA, the leaky-bucket meter and
//! shaper, credit reservations): a plain, non-atomic GCRA with slack in 128-bit arithmetic.

use flowgate::Quota;

use super::Answer;

const MAX: u128 = u64::MAX as u128;

/// Which schedule algorithm, and its slack (maximum delay or debt) in ns.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    Gcra,
    Meter,
    Shaper(u64),
    Credit(u64),
}

/// GCRA written the obvious way: a theoretical arrival time, wide integers, no shortcuts; with
/// a slack beyond the burst admitted with a delay (shaper: until the request conforms; credit:
/// until the debt before it is paid).
#[derive(Clone, PartialEq)]
pub struct Model {
    tat: u128,
    interval: u128,
    burst: u128,
    window: u128,
    lead: u128,
    capacity: u128,
    credit: bool,
}

impl Model {
    /// The model computes its interval from the rate as configured, `⌈period / count⌉`, not
    /// from the limiter's own figure.
    pub fn new(kind: Kind, q: &Quota, now: u128) -> Self {
        let (count, period) = (u128::from(q.count()), q.period().as_nanos());
        let interval = period.div_ceil(count);
        let burst = u128::from(q.burst());
        let slack = match kind {
            Kind::Gcra | Kind::Meter => 0,
            Kind::Shaper(s) | Kind::Credit(s) => u128::from(s),
        };
        let window = burst * interval;
        let credit = matches!(kind, Kind::Credit(_));
        let mut model = Self {
            tat: 0,
            interval,
            burst,
            window,
            lead: window + slack,
            // Credit lends: one request may take whatever fits in τ + slack from empty.
            capacity: if credit {
                ((window + slack) / interval).min(u32::MAX.into())
            } else {
                burst
            },
            credit,
        };
        model.reset(q, now);
        model
    }

    /// Back to the quota's initial fill as of `now`.
    pub fn reset(&mut self, q: &Quota, now: u128) {
        let missing = self.burst - u128::from(q.initial_cells());
        // A full bucket is stored as 0, "full at every reading".
        self.tat = if missing == 0 {
            0
        } else {
            (now + missing * self.interval).min(MAX)
        };
    }

    /// A schedule more than `τ + slack` ahead of `now` can only come from a clock that stepped
    /// back: it is treated as a fully booked bucket as of `now`.
    pub fn clamped(&self, now: u128) -> u128 {
        self.tat.min((now + self.lead).min(MAX))
    }

    pub fn remaining(&self, debt: u128) -> u128 {
        self.burst.saturating_sub(debt.div_ceil(self.interval))
    }

    pub fn decide(&self, now: u128, n: u128) -> Answer {
        if n > self.capacity {
            return Answer::Never(n, self.capacity);
        }
        let tat = self.clamped(now);
        let debt = tat.saturating_sub(now);
        if n == 0 {
            return Answer::Allowed(self.remaining(debt), self.burst, debt, 0);
        }
        let new_tat = tat.max(now) + n * self.interval;
        if new_tat <= MAX && new_tat - now <= self.lead {
            let debt = new_tat - now;
            let delay = if self.credit {
                (tat.max(now) - now).saturating_sub(self.window)
            } else {
                debt.saturating_sub(self.window)
            };
            return Answer::Allowed(self.remaining(debt), self.burst, debt, delay);
        }
        // The first time t at which max(tat, t) + n·T − t ≤ τ + slack; none before the horizon
        // if even the TAT it would produce does not fit in 64 bits.
        let retry = if new_tat > MAX {
            MAX
        } else {
            new_tat - self.lead - now
        };
        // A request that can never conform sees no usable cells.
        let remaining = if retry == MAX {
            0
        } else {
            self.remaining(debt)
        };
        Answer::Refused(remaining, self.burst, retry, debt)
    }

    /// Decides at `at` (the reading passed in, possibly stale). A refusal against a schedule
    /// more than a window ahead of the clock's *fresh* reading `fresh` clamps it to `fresh + τ`;
    /// a stale `at` alone never does.
    pub fn check(&mut self, at: u128, fresh: u128, n: u128) -> Answer {
        let answer = self.decide(at, n);
        match answer {
            Answer::Allowed(_, _, debt, _) if n > 0 => self.tat = at + debt,
            Answer::Refused(..) => self.tat = self.clamped(fresh),
            _ => {}
        }
        answer
    }
}
