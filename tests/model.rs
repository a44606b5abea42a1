//! The TAT-schedule algorithms (GCRA, the leaky-bucket meter and shaper, credit reservations)
//! against a reference model (`tests/common/models/schedule.rs`: a plain, non-atomic GCRA with
//! slack in 128-bit arithmetic), driven by the same random sequences of clock moves (forward,
//! zero, backward, anywhere up to the 584-year horizon) and requests. Every answer must be identical: the decision, `remaining`,
//! `limit`, `retry_after`, `reset_after`, `delay`, and the "never" error.

use std::time::Duration;

use flowgate::algorithm::{Credit, LeakyBucket};
use flowgate::clock::{Clock, ManualClock};
use flowgate::{
    Algorithm, Allowed, Gcra, Initial, InsufficientCapacity, Quota, RateLimiter, Receipt, Refused,
};
use proptest::prelude::*;

mod common;
use common::models::schedule::{Kind, Model};
use common::models::Op;
use common::{answer_of, nanos, Answer, Lagging, Receipts};

/// Any of the schedule algorithms, behind one `check_n`/`peek`/... surface.
enum Limiter {
    Gcra(RateLimiter<Lagging, Gcra>),
    Leaky(RateLimiter<Lagging, LeakyBucket>),
    Credit(RateLimiter<Lagging, Credit>),
}

type Decision = Result<Result<Allowed, Refused>, InsufficientCapacity>;

macro_rules! each {
    ($self:expr, $l:ident => $e:expr) => {
        match $self {
            Limiter::Gcra($l) => $e,
            Limiter::Leaky($l) => $e,
            Limiter::Credit($l) => $e,
        }
    };
}

impl Limiter {
    fn new(kind: Kind, q: &Quota, clock: &Lagging) -> Self {
        let c = clock.clone();
        match kind {
            Kind::Gcra => Self::Gcra(RateLimiter::with_algorithm(Gcra::new(q), c)),
            Kind::Meter => Self::Leaky(RateLimiter::with_algorithm(LeakyBucket::meter(q), c)),
            Kind::Shaper(s) => Self::Leaky(RateLimiter::with_algorithm(
                LeakyBucket::shaper(q, Duration::from_nanos(s)).unwrap(),
                c,
            )),
            Kind::Credit(s) => Self::Credit(RateLimiter::with_algorithm(
                Credit::new(q, Duration::from_nanos(s)).unwrap(),
                c,
            )),
        }
    }
    fn check_n(&self, n: u32) -> Decision {
        each!(self, l => l.check_n(n))
    }
    fn reserve(&self, n: u32) -> common::Reserved {
        each!(self, l => l.reserve(n))
    }
    fn give_back(&self, receipt: Receipt) -> bool {
        each!(self, l => l.give_back(receipt))
    }
    fn peek(&self, n: u32) -> Decision {
        each!(self, l => l.peek(n))
    }
    fn reset(&self) {
        each!(self, l => l.reset())
    }
    fn available(&self) -> u32 {
        each!(self, l => l.available())
    }
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
            let q = Quota::new(count, core::time::Duration::from_nanos(period))
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
        3 => any::<u8>().prop_map(Op::GiveBack),
        1 => Just(Op::Reset),
        1 => Just(Op::Available),
    ]
}

fn kind() -> impl Strategy<Value = Kind> {
    let slack = prop_oneof![
        Just(0u64),
        0u64..=10_000_000_000,
        Just(flowgate::Quota::MAX_WINDOW_NANOS)
    ];
    prop_oneof![
        3 => Just(Kind::Gcra),
        1 => Just(Kind::Meter),
        2 => slack.clone().prop_map(Kind::Shaper),
        2 => slack.prop_map(Kind::Credit),
    ]
}

fn scenario() -> impl Strategy<Value = (Kind, Quota, u64, Vec<Op>)> {
    (kind(), quota()).prop_flat_map(|(kind, q)| {
        let start = prop_oneof![
            0u64..1_000_000,
            any::<u64>(),
            (u64::MAX - 1_000_000)..=u64::MAX
        ];
        (
            Just(kind),
            Just(q),
            start,
            prop::collection::vec(op(nanos(q.interval())), 1..60),
        )
    })
}

proptest! {
    #![proptest_config(common::config())]

    #[test]
    fn limiter_matches_the_model((kind, quota, start, ops) in scenario()) {
        let clock = Lagging::starting_at(start);
        let limiter = Limiter::new(kind, &quota, &clock);
        let mut model = Model::new(kind, &quota, u128::from(start));
        let mut receipts = Receipts::new();
        for (i, op) in ops.iter().enumerate() {
            match *op {
                Op::Advance(d) => clock.advance(Duration::from_nanos(d)),
                Op::Rewind(d) => clock.set(clock.get().saturating_sub(d)),
                Op::Set(t) => clock.set(t),
                _ => {}
            }
            let now = u128::from(clock.get());
            let (got, want) = match *op {
                Op::Check(n) => (answer_of(limiter.check_n(n)), model.check(now, now, n.into())),
                Op::CheckAt(n, behind) => {
                    let at = clock.get().saturating_sub(behind);
                    let before = model.clone();
                    clock.stale(at);
                    let reserved = limiter.reserve(n);
                    let want = model.check(at.into(), now, n.into());
                    (receipts.note(reserved, before, &model), want)
                }
                Op::Peek(n) => (answer_of(limiter.peek(n)), model.decide(now, n.into())),
                Op::GiveBack(k) => receipts.give_back(k, |r| limiter.give_back(r), &mut model),
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
        let step = nanos(q.interval()).saturating_mul(2);
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
            clock.advance(Duration::from_nanos(step));
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

/// The shaping algorithms' promise, checked independently of any model: on a clock that only
/// moves forwards, requests *released* (decision time + delay) between any two releases never
/// exceed burst + elapsed × count / period; for credit, plus the cells of the last request,
/// which go first and are paid for by the callers after it. No delay exceeds the slack.
fn shaped_run() -> impl Strategy<Value = (Kind, Quota, Vec<(u64, u32)>)> {
    let slack = prop_oneof![Just(0u64), 0u64..=10_000_000_000];
    let kind = prop_oneof![
        slack.clone().prop_map(Kind::Shaper),
        slack.prop_map(Kind::Credit)
    ];
    (kind, quota()).prop_flat_map(|(kind, q)| {
        let step = nanos(q.interval()).saturating_mul(2);
        let ops = prop::collection::vec((0..=step, 1u32..=q.burst().min(8)), 1..200);
        (Just(kind), Just(q), ops)
    })
}

proptest! {
    #![proptest_config(common::config())]

    #[test]
    fn releases_never_above_the_configured_rate((kind, quota, ops) in shaped_run()) {
        let clock = Lagging::starting_at(1 << 20);
        let limiter = Limiter::new(kind, &quota, &clock);
        let (Kind::Shaper(slack) | Kind::Credit(slack)) = kind else { unreachable!() };
        // (release time, cells) of every admission.
        let mut released: Vec<(u128, u128)> = Vec::new();
        for &(step, n) in &ops {
            clock.advance(Duration::from_nanos(step));
            if let Ok(Ok(a)) = limiter.check_n(n) {
                prop_assert!(nanos(a.delay()) <= slack, "delay {} beyond slack {}", nanos(a.delay()), slack);
                released.push((u128::from(clock.now()) + a.delay().as_nanos(), n.into()));
            }
        }
        let (count, period) = (u128::from(quota.count()), quota.period().as_nanos());
        let burst = u128::from(quota.burst());
        for i in 0..released.len() {
            let mut cells = 0;
            for j in i..released.len() {
                cells += released[j].1;
                prop_assert!(released[j].0 >= released[i].0, "releases out of order");
                let elapsed = released[j].0 - released[i].0;
                let own = if matches!(kind, Kind::Credit(_)) { released[j].1 } else { 0 };
                let allowed = burst + own;
                prop_assert!(
                    cells <= allowed || (cells - allowed) * period <= elapsed * count,
                    "{} cells released in {} ns, burst {}, rate {}/{} ns", cells, elapsed, burst, count, period
                );
            }
        }
    }
}

#[test]
fn delays_beyond_the_horizon_are_typed_errors() {
    let q = Quota::per_second(10).unwrap();
    let max = Duration::from_nanos(flowgate::Quota::MAX_WINDOW_NANOS);
    let too_long = flowgate::QuotaError::DelayTooLong {
        max_nanos: flowgate::Quota::MAX_WINDOW_NANOS,
    };
    assert_eq!(
        LeakyBucket::shaper(&q, Duration::MAX).unwrap_err(),
        too_long
    );
    assert_eq!(
        Credit::new(&q, max + Duration::from_nanos(1)).unwrap_err(),
        too_long
    );
    assert_eq!(LeakyBucket::shaper(&q, max).unwrap().max_delay(), max);
    // The largest debt and the finest interval: capacity saturates at u32::MAX, nothing wraps.
    let fine = Quota::new(1, core::time::Duration::from_nanos(1)).unwrap();
    let credit = Credit::new(&fine, max).unwrap();
    assert_eq!(credit.capacity(), u32::MAX);
    let clock = ManualClock::starting_at(u64::MAX - 10);
    let limiter = RateLimiter::with_algorithm(credit, clock);
    assert!(
        matches!(limiter.check_n(u32::MAX), Ok(Err(_))),
        "past the horizon: refused"
    );
}

/// `Algorithm::take`, the method a policy set's decision calls (specialised for the schedules:
/// GCRA's rule without slack), answers what `check` answers: the same word written, the same
/// delay, nothing written on a refusal.
fn take_agrees_with_check<A: Algorithm>(algorithm: &A, word: u64, now: u64, n: u32) {
    use flowgate::algorithm::Step;
    let n = n.clamp(1, algorithm.capacity());
    let expected = match algorithm.check(word, now, n) {
        Step::Write(new, Ok(allowed)) => Some((Some(new), nanos(allowed.delay()))),
        Step::Keep(Ok(allowed)) => Some((None, nanos(allowed.delay()))),
        Step::Write(_, Err(_)) | Step::Keep(Err(_)) => None,
    };
    let taken = match algorithm.take(word, now, n) {
        Step::Write(new, Some(delay)) => Some((Some(new), delay)),
        Step::Keep(Some(delay)) => Some((None, delay)),
        Step::Keep(None) => None,
        Step::Write(_, None) => panic!("a refusal wrote a word"),
    };
    assert_eq!(taken, expected, "word {word}, now {now}, n {n}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10_000))]

    #[test]
    fn take_answers_as_check(
        kind in kind(),
        quota in quota(),
        now in prop_oneof![0u64..1_000_000_000, any::<u64>()],
        ahead in prop_oneof![0u64..1_000_000_000_000, any::<u64>()],
        behind in any::<bool>(),
        n in 1u32..=70,
    ) {
        let word = if behind { now.saturating_sub(ahead) } else { now.saturating_add(ahead) };
        match kind {
            Kind::Gcra => take_agrees_with_check(&Gcra::new(&quota), word, now, n),
            Kind::Meter => take_agrees_with_check(&LeakyBucket::meter(&quota), word, now, n),
            Kind::Shaper(s) => {
                let shaper = LeakyBucket::shaper(&quota, Duration::from_nanos(s)).unwrap();
                take_agrees_with_check(&shaper, word, now, n)
            }
            Kind::Credit(s) => {
                let credit = Credit::new(&quota, Duration::from_nanos(s)).unwrap();
                take_agrees_with_check(&credit, word, now, n)
            }
        }
    }
}
