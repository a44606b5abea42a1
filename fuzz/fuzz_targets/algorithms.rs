//! Every one-word algorithm against its reference model: a `RateLimiter` over an
//! `AnyAlgorithm` on a manual clock, and the models the property tests use
//! (`tests/common/models/`: the TAT schedule for GCRA, the leaky bucket's meter and
//! shaper and
//! credit; the stepped counter for the interval refill and the fixed window; the sliding window
//! counter), driven by the same operations: clock moves forwards, backwards and anywhere,
//! `check_n` at the clock's reading and `reserve` at stale ones, peeks, give-backs of any
//! earlier admission's receipt (exact: only while the bucket is as that admission left it),
//! resets, and the cells available.
//!
//! Asserts: every answer is the model's (decision, remaining, limit, retry-after, reset-after,
//! delay, and the "never" error), as 64 bits report it (times saturate at the 584-year
//! horizon, where a refusal has no usable cells); nothing panics. The window counters keep every reading
//! within the span their word tells apart without ambiguity (2^38 windows for the stepped
//! counters' 40-bit indices, 2^26 for the sliding window's 28-bit ones), as their docs state;
//! the schedules take any reading up to the 584-year horizon.
#![no_main]

use std::time::Duration;

use arbitrary::Arbitrary;
use flowgate::algorithm::{
    Algorithm, AnyAlgorithm, Credit, FixedWindow, Gcra, IntervalRefill, LeakyBucket, SlidingWindow,
};
use flowgate::{Initial, Quota, RateLimiter};
use libfuzzer_sys::fuzz_target;

#[path = "../../tests/common/models/mod.rs"]
mod models;

use models::schedule::{self, Kind};
use models::{answer_of, sliding_window, stepped, Answer, AnyModel, Lagging, Op, Receipts};

#[derive(Arbitrary, Debug)]
struct Spec {
    kind: u8,
    count: u32,
    period: u64,
    burst: u32,
    initial: u32,
    slack: u64,
}

#[derive(Arbitrary, Debug)]
struct Input {
    spec: Spec,
    start: u64,
    ops: Vec<Op>,
}

/// Where the clock may read: `base + offset`, `offset ≤ span`.
struct Span {
    base: u64,
    span: u64,
}

impl Span {
    fn new(windows: u64, length: u64, start: u64) -> Self {
        let span = windows.saturating_mul(length);
        let base = start % (u64::MAX - span).saturating_add(1);
        Self { base, span }
    }

    /// `t` moved into the span.
    fn clamp(&self, t: u64) -> u64 {
        t.clamp(self.base, self.base.saturating_add(self.span))
    }

    /// The reading `t` names: `t` itself, or for a narrower span, `t` wrapped into it.
    fn at(&self, t: u64) -> u64 {
        match self.span.checked_add(1) {
            Some(len) => self.base + t % len,
            None => t,
        }
    }
}

fuzz_target!(|input: Input| {
    let Some((algorithm, quota, kind)) = algorithm(&input.spec) else {
        return;
    };
    let unit = match kind {
        Family::Schedule(_) => u64::try_from(quota.interval().as_nanos()).unwrap_or(u64::MAX),
        Family::Stepped | Family::Sliding => quota.period().as_nanos() as u64,
    };
    let span = match kind {
        Family::Schedule(_) => Span {
            base: 0,
            span: u64::MAX,
        },
        Family::Stepped => Span::new(1 << 38, unit, input.start),
        Family::Sliding => Span::new(1 << 26, unit, input.start),
    };
    let start = span.at(input.start);
    let clock = Lagging::starting_at(start);
    let limiter = RateLimiter::with_algorithm(algorithm, clock.clone());
    let fresh = |now: u64| match kind {
        Family::Schedule(kind) => {
            AnyModel::Schedule(schedule::Model::new(kind, &quota, now.into()))
        }
        Family::Stepped => AnyModel::Stepped(stepped::Model::new(&quota, now.into())),
        Family::Sliding => AnyModel::Sliding(sliding_window::Model::new(&quota, now.into())),
    };
    let mut model = fresh(start);
    let mut receipts = Receipts::new();
    let capacity = limiter.algorithm().capacity();
    for (i, &op) in input.ops.iter().take(512).enumerate() {
        let op = scaled(op, unit, capacity);
        let now = clock.get();
        let moved = match op {
            Op::Advance(d) => Some(now.saturating_add(d)),
            Op::Rewind(d) => Some(now.saturating_sub(d)),
            Op::Set(t) => Some(span.at(t)),
            _ => None,
        };
        if let Some(t) = moved {
            clock.set(span.clamp(t));
            continue;
        }
        let stale = |behind: u64| span.clamp(now.saturating_sub(behind));
        let (got, want) = match op {
            Op::Check(n) => (answer_of(limiter.check_n(n)), model.check(now, now, n)),
            Op::CheckAt(n, behind) => {
                let at = stale(behind);
                let before = model.clone();
                clock.stale(at);
                let reserved = limiter.reserve(n);
                let want = model.check(at, now, n);
                (receipts.note(reserved, before, &model), want)
            }
            Op::Peek(n) => (answer_of(limiter.peek(n)), model.peek(now, n)),
            Op::GiveBack(k) => receipts.give_back(k, |r| limiter.give_back(r), &mut model),
            Op::Reset => {
                limiter.reset();
                model = fresh(now);
                (Answer::Done, Answer::Done)
            }
            Op::Available => (
                Answer::Available(limiter.available().into()),
                model.available(now),
            ),
            Op::Advance(_) | Op::Rewind(_) | Op::Set(_) => unreachable!(),
        };
        let want = reported(want);
        assert_eq!(
            got,
            want,
            "op #{i} {op:?} at {now}, {quota} as {}",
            limiter.algorithm()
        );
    }
});

/// The model's answer as a limiter reports it in 64 bits: times past `u64::MAX` ns saturate
/// there, and a refusal that cannot conform before that horizon has no usable cells
/// (`Refused::conforms_after`, `Refused::remaining`). The window models count in 128 bits
/// without a horizon; the schedule model has it already.
fn reported(answer: Answer) -> Answer {
    const MAX: u128 = u64::MAX as u128;
    match answer {
        Answer::Allowed(remaining, limit, reset, delay) => {
            Answer::Allowed(remaining, limit, reset.min(MAX), delay.min(MAX))
        }
        Answer::Refused(remaining, limit, retry, reset) => {
            let retry = retry.min(MAX);
            let remaining = if retry == MAX { 0 } else { remaining };
            Answer::Refused(remaining, limit, retry, reset.min(MAX))
        }
        other => other,
    }
}

/// Which model an algorithm answers to.
#[derive(Clone, Copy)]
enum Family {
    Schedule(Kind),
    Stepped,
    Sliding,
}

fn algorithm(spec: &Spec) -> Option<(AnyAlgorithm, Quota, Family)> {
    let count = match spec.count >> 30 {
        0 => 1 + spec.count % 8,
        1 => 1 + spec.count % 1_000_000,
        _ => spec.count,
    };
    let period = match spec.period >> 62 {
        0 => 1 + spec.period % 1_000,
        1 => (1 + spec.period % 100_000) * 1_000_000,
        _ => spec.period,
    };
    let burst = match spec.burst >> 30 {
        0 => count,
        1 => 1 + spec.burst % 64,
        _ => spec.burst,
    };
    let initial = match spec.initial % 4 {
        0 => Initial::Full,
        1 => Initial::Empty,
        _ => Initial::Cells(spec.initial / 4 % burst.saturating_add(1)),
    };
    let quota = Quota::new(count, core::time::Duration::from_nanos(period))
        .ok()?
        .with_burst(burst)
        .ok()?
        .with_initial(initial)
        .ok()?;
    let slack = match spec.slack >> 62 {
        0 => spec.slack % 10_000_000_000,
        1 => flowgate::Quota::MAX_WINDOW_NANOS,
        _ => spec.slack,
    };
    let delay = Duration::from_nanos(slack);
    Some(match spec.kind % 7 {
        0 => (
            Gcra::new(&quota).into(),
            quota,
            Family::Schedule(Kind::Gcra),
        ),
        1 => (
            LeakyBucket::meter(&quota).into(),
            quota,
            Family::Schedule(Kind::Meter),
        ),
        2 => (
            LeakyBucket::shaper(&quota, delay).ok()?.into(),
            quota,
            Family::Schedule(Kind::Shaper(slack)),
        ),
        3 => (
            Credit::new(&quota, delay).ok()?.into(),
            quota,
            Family::Schedule(Kind::Credit(slack)),
        ),
        4 => (
            IntervalRefill::new(&quota).ok()?.into(),
            quota,
            Family::Stepped,
        ),
        5 => (
            FixedWindow::new(&quota).ok()?.into(),
            quota,
            Family::Stepped,
        ),
        _ => (
            SlidingWindow::new(&quota).ok()?.into(),
            quota,
            Family::Sliding,
        ),
    })
}

/// `op` with its numbers brought near the scale of the quota (`unit`: the interval, or the
/// window) most of the time, and left whole otherwise.
fn scaled(op: Op, unit: u64, capacity: u32) -> Op {
    let time = |t: u64| match t >> 62 {
        0 => t % unit.saturating_mul(3).saturating_add(1),
        1 => t % unit.saturating_mul(1_100).saturating_add(1),
        _ => t,
    };
    let cells = |n: u32| match n >> 30 {
        0 => n % 8,
        1 => n % capacity.saturating_add(3),
        _ => n,
    };
    match op {
        Op::Advance(d) => Op::Advance(time(d)),
        Op::Rewind(d) => Op::Rewind(time(d)),
        Op::Set(t) => Op::Set(t),
        Op::Check(n) => Op::Check(cells(n)),
        Op::CheckAt(n, behind) => Op::CheckAt(cells(n), time(behind)),
        Op::Peek(n) => Op::Peek(cells(n)),
        Op::GiveBack(_) | Op::Reset | Op::Available => op,
    }
}
