//! The limiter against a reference model: a plain, non-atomic GCRA in 128-bit arithmetic, driven
//! by the same random sequences of clock moves (forward, zero, backward, anywhere up to the
//! 584-year horizon) and requests. Every answer must be identical: the decision, `remaining`,
//! `limit`, `retry_after`, `reset_after`, and the "never" error.

use flowgate::clock::ManualClock;
use flowgate::{Initial, Quota, RateLimiter};
use proptest::prelude::*;

mod common;
use common::{answer_of, Answer};

const MAX: u128 = u64::MAX as u128;

/// GCRA written the obvious way: a theoretical arrival time, wide integers, no shortcuts.
struct Model {
    tat: u128,
    interval: u128,
    burst: u128,
    window: u128,
}

impl Model {
    /// The model computes its interval from the rate as configured, `⌈period / count⌉`, not
    /// from the limiter's own figure.
    fn new(q: &Quota, now: u128) -> Self {
        let (count, period) = (u128::from(q.count()), q.period().as_nanos());
        let interval = period.div_ceil(count);
        let burst = u128::from(q.burst());
        let mut model = Self {
            tat: 0,
            interval,
            burst,
            window: burst * interval,
        };
        model.reset(q, now);
        model
    }

    /// Back to the quota's initial fill as of `now`.
    fn reset(&mut self, q: &Quota, now: u128) {
        let missing = self.burst - u128::from(q.initial_cells());
        // A full bucket is stored as 0, "full at every reading".
        self.tat = if missing == 0 {
            0
        } else {
            (now + missing * self.interval).min(MAX)
        };
    }

    /// A schedule more than one window ahead of `now` can only come from a clock that stepped
    /// back: it is treated as an empty bucket as of `now`.
    fn clamped(&self, now: u128) -> u128 {
        self.tat.min((now + self.window).min(MAX))
    }

    fn remaining(&self, debt: u128) -> u128 {
        self.burst - debt.div_ceil(self.interval)
    }

    fn decide(&self, now: u128, n: u128) -> Answer {
        if n > self.burst {
            return Answer::Never(n, self.burst);
        }
        let tat = self.clamped(now);
        let debt = tat.saturating_sub(now);
        if n == 0 {
            return Answer::Allowed(self.remaining(debt), self.burst, debt);
        }
        let new_tat = tat.max(now) + n * self.interval;
        if new_tat <= MAX && new_tat - now <= self.window {
            let debt = new_tat - now;
            return Answer::Allowed(self.remaining(debt), self.burst, debt);
        }
        // The first time t at which max(tat, t) + n·T − t ≤ τ; none before the horizon if even
        // the TAT it would produce does not fit in 64 bits.
        let retry = if new_tat > MAX {
            MAX
        } else {
            new_tat - self.window - now
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
    fn check(&mut self, at: u128, fresh: u128, n: u128) -> Answer {
        let answer = self.decide(at, n);
        match answer {
            Answer::Allowed(_, _, debt) if n > 0 => self.tat = at + debt,
            Answer::Refused(..) => self.tat = self.clamped(fresh),
            _ => {}
        }
        answer
    }

    /// Moves the schedule back by at most n cells, never below `now` (never above the burst).
    fn refund(&mut self, now: u128, n: u128) -> Answer {
        if self.tat > now {
            let back = n.min(self.burst) * self.interval;
            self.tat = self.tat.saturating_sub(back).max(now);
        }
        Answer::Done
    }
}

#[derive(Debug, Clone)]
enum Op {
    Advance(u64),
    Rewind(u64),
    Set(u64),
    Check(u32),
    /// `check_n_at(n, now − behind)`: a stale reading while the clock reads `now`.
    CheckAt(u32, u64),
    Peek(u32),
    Refund(u32),
    /// `refund_at(n, now − behind)`.
    RefundAt(u32, u64),
    Reset,
    Available,
}

fn quota() -> impl Strategy<Value = Quota> {
    let period = prop_oneof![
        1u64..=10,
        1u64..=1_000_000,
        Just(86_400_000_000_000u64),
        1u64..=1_000_000_000_000_000,
    ];
    let count = prop_oneof![Just(1u32), 1u32..=7, 1u32..=1_000_000];
    (period, count, 1u32..=64, any::<u32>(), 0u8..4).prop_filter_map(
        "invalid quota",
        |(period, count, burst, cells, initial)| {
            let q = Quota::from_nanos(count, period)
                .ok()?
                .with_burst(burst)
                .ok()?;
            let initial = match initial {
                0 => Initial::Full,
                1 => Initial::Empty,
                _ => Initial::Cells(cells % (burst + 1)),
            };
            q.with_initial(initial).ok()
        },
    )
}

fn op(interval: u64) -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..=interval.saturating_mul(3)).prop_map(Op::Advance),
        1 => Just(Op::Advance(0)),
        1 => any::<u64>().prop_map(Op::Advance),
        2 => (0..=interval.saturating_mul(3)).prop_map(Op::Rewind),
        1 => any::<u64>().prop_map(Op::Rewind),
        1 => prop_oneof![any::<u64>(), (u64::MAX - 1_000_000_000)..=u64::MAX].prop_map(Op::Set),
        8 => prop_oneof![0u32..=4, 0u32..=70, Just(u32::MAX)].prop_map(Op::Check),
        3 => (0u32..=70, prop_oneof![0..=interval.saturating_mul(3), any::<u64>()])
            .prop_map(|(n, behind)| Op::CheckAt(n, behind)),
        2 => (0u32..=70).prop_map(Op::Peek),
        1 => (prop_oneof![0u32..=4, Just(u32::MAX)], 0..=interval.saturating_mul(3))
            .prop_map(|(n, behind)| Op::RefundAt(n, behind)),
        2 => prop_oneof![0u32..=4, Just(u32::MAX)].prop_map(Op::Refund),
        1 => Just(Op::Reset),
        1 => Just(Op::Available),
    ]
}

fn scenario() -> impl Strategy<Value = (Quota, u64, Vec<Op>)> {
    quota().prop_flat_map(|q| {
        let start = prop_oneof![
            0u64..1_000_000,
            any::<u64>(),
            (u64::MAX - 1_000_000)..=u64::MAX
        ];
        (
            Just(q),
            start,
            prop::collection::vec(op(q.interval_nanos()), 1..60),
        )
    })
}

proptest! {
    #![proptest_config(common::config())]

    #[test]
    fn limiter_matches_the_model((quota, start, ops) in scenario()) {
        let clock = ManualClock::starting_at(start);
        let limiter = RateLimiter::with_clock(quota, clock.clone());
        let mut model = Model::new(&quota, u128::from(start));
        for (i, op) in ops.iter().enumerate() {
            match *op {
                Op::Advance(d) => clock.advance_nanos(d),
                Op::Rewind(d) => clock.set(clock.get().saturating_sub(d)),
                Op::Set(t) => clock.set(t),
                _ => {}
            }
            let now = u128::from(clock.get());
            let (got, want) = match *op {
                Op::Check(n) => (answer_of(limiter.check_n(n)), model.check(now, now, n.into())),
                Op::CheckAt(n, behind) => {
                    let at = clock.get().saturating_sub(behind);
                    (answer_of(limiter.check_n_at(n, at)), model.check(at.into(), now, n.into()))
                }
                Op::RefundAt(n, behind) => {
                    let at = clock.get().saturating_sub(behind);
                    limiter.refund_at(n, at);
                    (Answer::Done, model.refund(at.into(), n.into()))
                }
                Op::Peek(n) => (answer_of(limiter.peek(n)), model.decide(now, n.into())),
                Op::Refund(n) => {
                    limiter.refund(n);
                    (Answer::Done, model.refund(now, n.into()))
                }
                Op::Reset => {
                    limiter.reset();
                    model.reset(&quota, now);
                    (Answer::Done, Answer::Done)
                }
                Op::Available => (
                    Answer::Available(limiter.available().into()),
                    Answer::Available(model.remaining(model.clamped(now).saturating_sub(now))),
                ),
                _ => continue,
            };
            prop_assert_eq!(got, want, "op #{} {:?} at now={}", i, op, now);
        }
    }
}

/// The rate itself, checked independently of any model: on a clock that only moves forwards,
/// the cells admitted between any two admissions never exceed burst + elapsed × count / period
/// (the configured rate, exactly, in rational arithmetic).
fn forward_run() -> impl Strategy<Value = (Quota, Vec<(u64, u32)>)> {
    quota().prop_flat_map(|q| {
        let step = q.interval_nanos().saturating_mul(2);
        let ops = prop::collection::vec((0..=step, 1u32..=q.burst().min(8)), 1..200);
        (Just(q), ops)
    })
}

proptest! {
    #![proptest_config(common::config())]

    #[test]
    fn never_above_the_configured_rate((quota, ops) in forward_run()) {
        let clock = ManualClock::starting_at(1 << 20);
        let limiter = RateLimiter::with_clock(quota, clock.clone());
        // (time, cells) of every admission.
        let mut admitted: Vec<(u128, u128)> = Vec::new();
        for &(step, n) in &ops {
            clock.advance_nanos(step);
            if let Ok(Ok(_)) = limiter.check_n(n) {
                admitted.push((clock.get().into(), n.into()));
            }
        }
        let (count, period) = (u128::from(quota.count()), quota.period().as_nanos());
        let burst = u128::from(quota.burst());
        for i in 0..admitted.len() {
            let mut cells = 0;
            for j in i..admitted.len() {
                cells += admitted[j].1;
                let elapsed = admitted[j].0 - admitted[i].0;
                // cells ≤ burst + elapsed × count / period, without division.
                prop_assert!(
                    cells <= burst || (cells - burst) * period <= elapsed * count,
                    "{} cells in {} ns, burst {}, rate {}/{} ns", cells, elapsed, burst, count, period
                );
            }
        }
    }
}
