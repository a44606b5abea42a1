//! `check_up_to` against the reference models (`tests/common/models/`), for every one-word
//! algorithm: a `RateLimiter` over an `AnyAlgorithm` and its model see the same clock moves,
//! `check_n`s, give-backs and `check_up_to`s. The model's answer to "up to `n`" is worked out from
//! the model alone: the most `k ≤ n` its `check` would admit (asked through its `peek`, from `n`
//! down), then its `check` of `k`, or of one cell when none is admitted. Every answer
//! must match: the count taken and the decision with all its numbers. The keyed limiter's
//! `check_key_up_to` must answer as a single limiter per key does.

use std::time::Duration;

use flowgate::algorithm::{
    Algorithm, AnyAlgorithm, Credit, FixedWindow, Gcra, IntervalRefill, LeakyBucket, SlidingWindow,
};
use flowgate::clock::ManualClock;
use flowgate::{Allowed, Initial, KeyedRateLimiter, Quota, RateLimiter, Refused};
use proptest::prelude::*;

mod common;
use common::models::schedule::{self, Kind};
use common::models::{sliding_window, stepped, AnyModel};
use common::{answer_of, Answer, Receipts};

/// "Up to `n`" from the model alone: the most `k` its `check` admits (asked on copies through
/// `peek`), then that check, or a check of one cell when none is admitted.
fn model_up_to(model: &mut AnyModel, now: u64, n: u32, capacity: u32) -> (u32, Answer) {
    if n == 0 {
        return (0, model.peek(now, 0));
    }
    let admitted = (1..=n.min(capacity))
        .rev()
        .find(|&k| matches!(model.peek(now, k), Answer::Allowed(..)));
    match admitted {
        Some(k) => (k, model.check(now, now, k)),
        None => (0, model.check(now, now, 1)),
    }
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Advance(u64),
    Check(u32),
    UpTo(u32),
    /// Gives back the `k`-th newest admission's receipt (`check_n`'s).
    GiveBack(u8),
}

/// The algorithm (`kind`: 0–6, as the fuzz target numbers them) for `quota`, and its model.
fn build(kind: u8, quota: &Quota, slack: u64, now: u64) -> Option<(AnyAlgorithm, AnyModel)> {
    let delay = Duration::from_nanos(slack);
    let at = u128::from(now);
    let schedule = |k| AnyModel::Schedule(schedule::Model::new(k, quota, at));
    Some(match kind {
        0 => (Gcra::new(quota).into(), schedule(Kind::Gcra)),
        1 => (LeakyBucket::meter(quota).into(), schedule(Kind::Meter)),
        2 => (
            LeakyBucket::shaper(quota, delay).ok()?.into(),
            schedule(Kind::Shaper(slack)),
        ),
        3 => (
            Credit::new(quota, delay).ok()?.into(),
            schedule(Kind::Credit(slack)),
        ),
        4 => (
            IntervalRefill::new(quota).ok()?.into(),
            AnyModel::Stepped(stepped::Model::new(quota, at)),
        ),
        5 => (
            FixedWindow::new(quota).ok()?.into(),
            AnyModel::Stepped(stepped::Model::new(quota, at)),
        ),
        _ => (
            SlidingWindow::new(quota).ok()?.into(),
            AnyModel::Sliding(sliding_window::Model::new(quota, at)),
        ),
    })
}

fn quota() -> impl Strategy<Value = Quota> {
    (1u32..=12, 1u64..=4, 0u32..=16, 0u8..4).prop_filter_map(
        "a valid quota",
        |(count, period_ms, burst, initial)| {
            let burst = if burst == 0 { count } else { burst };
            let initial = match initial {
                0 => Initial::Full,
                1 => Initial::Empty,
                _ => Initial::Cells(u32::from(initial) % (burst + 1)),
            };
            Quota::new(
                count,
                core::time::Duration::from_nanos(period_ms * 1_000_000),
            )
            .ok()?
            .with_burst(burst)
            .ok()?
            .with_initial(initial)
            .ok()
        },
    )
}

fn op(unit: u64) -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..=unit.saturating_mul(3)).prop_map(Op::Advance),
        3 => (0u32..=20).prop_map(Op::Check),
        6 => prop_oneof![0u32..=20, Just(u32::MAX)].prop_map(Op::UpTo),
        1 => any::<u8>().prop_map(Op::GiveBack),
    ]
}

fn scenario() -> impl Strategy<Value = (u8, Quota, u64, Vec<Op>)> {
    (0u8..7, quota(), prop_oneof![Just(0u64), 0u64..=6_000_000]).prop_flat_map(
        |(kind, quota, slack)| {
            (
                Just(kind),
                Just(quota),
                Just(slack),
                prop::collection::vec(op(quota.period().as_nanos() as u64), 1..80),
            )
        },
    )
}

fn up_to_answer(answer: Result<(u32, Allowed), Refused>) -> (u32, Answer) {
    match answer {
        Ok((k, allowed)) => (k, answer_of(Ok(Ok(allowed)))),
        Err(refused) => (0, answer_of(Ok(Err(refused)))),
    }
}

proptest! {
    #![proptest_config(common::config())]

    #[test]
    fn check_up_to_matches_the_model((kind, quota, slack, ops) in scenario()) {
        let start = 1_000_000_000;
        let Some((algorithm, mut model)) = build(kind, &quota, slack, start) else {
            return Ok(());
        };
        let clock = ManualClock::starting_at(start);
        let limiter = RateLimiter::with_algorithm(algorithm, clock.clone());
        let capacity = limiter.algorithm().capacity();
        let mut receipts = Receipts::new();
        for (i, op) in ops.iter().enumerate() {
            let now = clock.get();
            let (got, want) = match *op {
                Op::Advance(d) => {
                    clock.advance(Duration::from_nanos(d));
                    continue;
                }
                Op::Check(n) => {
                    let before = model.clone();
                    let reserved = limiter.reserve(n);
                    let want = model.check(now, now, n);
                    ((n, receipts.note(reserved, before, &model)), (n, want))
                }
                Op::UpTo(n) => (up_to_answer(limiter.check_up_to(n)), model_up_to(&mut model, now, n, capacity)),
                Op::GiveBack(k) => {
                    let (got, want) = receipts.give_back(k, |r| limiter.give_back(r), &mut model);
                    ((0, got), (0, want))
                }
            };
            // `check_n` above the capacity answers "never", which the model does not know.
            if matches!(got.1, Answer::Never(..)) {
                prop_assert!(matches!(*op, Op::Check(n) if n > capacity));
                continue;
            }
            prop_assert_eq!(got, want, "op #{} {:?} at {}, {} as {}", i, op, now, quota, algorithm);
        }
    }

    /// A keyed limiter answers `check_key_up_to` as one single limiter per key does, new keys
    /// (created by the call) and known ones alike, on a table with room for every key.
    #[test]
    fn keyed_up_to_matches_single_limiters(
        (kind, quota, slack, ops) in scenario(),
        keys in prop::collection::vec(0u8..4, 80),
    ) {
        // Full buckets: a single limiter built at 0 then answers as a keyed bucket created at
        // the key's first request does (a full bucket is a new one).
        let quota = quota.with_initial(Initial::Full).unwrap();
        let Some((algorithm, _)) = build(kind, &quota, slack, 0) else {
            return Ok(());
        };
        let clock = ManualClock::new();
        let keyed = KeyedRateLimiter::<u8, _, _>::builder_with_clock(algorithm, clock.clone())
            .max_keys(16)
            .hash_seed(1)
            .build()
            .unwrap();
        let singles: Vec<_> = (0..4)
            .map(|_| RateLimiter::with_algorithm(algorithm, clock.clone()))
            .collect();
        for (op, key) in ops.iter().zip(&keys) {
            let single = &singles[usize::from(*key)];
            match *op {
                Op::Advance(d) => clock.advance(Duration::from_nanos(d)),
                Op::Check(n) => prop_assert_eq!(
                    answer_of(keyed.check_key_n(key, n)),
                    answer_of(single.check_n(n))
                ),
                Op::UpTo(n) => prop_assert_eq!(
                    up_to_answer(keyed.check_key_up_to(key, n)),
                    up_to_answer(single.check_up_to(n)),
                    "{:?} on key {}", op, key
                ),
                Op::GiveBack(_) => {}
            }
        }
    }
}
