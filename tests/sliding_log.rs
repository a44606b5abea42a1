//! The sliding log against a reference model (every admitted time kept in a list), the exact
//! bound under threads, and clock steps.

use std::sync::Arc;
use std::time::Duration;

use flowgate::clock::{Clock, ManualClock};
use flowgate::{Initial, Quota, QuotaError, SlidingLog};
use proptest::prelude::*;

mod common;
use common::{answer_of, Answer};

/// The documented rule, on a clock that runs forwards: times rounded up to 4 ns; a request of n
/// is admitted iff the requests still in the window (time + W > now) number at most limit − n.
struct Model {
    window: u128,
    limit: u128,
    times: Vec<u128>,
}

fn round(t: u128) -> u128 {
    t.div_ceil(4).max(1) * 4
}

impl Model {
    fn new(q: &Quota, now: u128) -> Self {
        let limit = u128::from(q.count());
        let used = limit - u128::from(q.initial_cells());
        Self {
            window: q.period().as_nanos(),
            limit,
            times: vec![round(now); used as usize],
        }
    }

    fn in_window(&self, now: u128) -> Vec<u128> {
        let mut live: Vec<u128> = self
            .times
            .iter()
            .copied()
            .filter(|t| t + self.window > now)
            .collect();
        live.sort_unstable();
        live
    }

    fn check(&mut self, now: u128, n: u128) -> Answer {
        if n > self.limit {
            return Answer::Never(n, self.limit);
        }
        let live = self.in_window(now);
        let count = live.len() as u128;
        let reset =
            |newest: Option<&u128>| newest.map_or(0, |t| (t + self.window).saturating_sub(now));
        if n == 0 {
            return Answer::Allowed(self.limit - count, self.limit, reset(live.last()), 0);
        }
        if count + n <= self.limit {
            for _ in 0..n {
                self.times.push(round(now));
            }
            let newest = round(now);
            return Answer::Allowed(
                self.limit - count - n,
                self.limit,
                newest + self.window - now,
                0,
            );
        }
        // The (count + n − limit)-th oldest must leave first.
        let leaving = live[(count + n - self.limit - 1) as usize];
        Answer::Refused(
            self.limit - count,
            self.limit,
            leaving + self.window - now,
            reset(live.last()),
        )
    }
}

fn scenario() -> impl Strategy<Value = (Quota, u64, Vec<(u64, u32)>)> {
    let window = prop_oneof![
        Just(1_000u64),
        1_000u64..=10_000_000_000,
        Just(86_400_000_000_000)
    ];
    (window, prop_oneof![1u32..=8, 1u32..=300], any::<u32>())
        .prop_filter_map("invalid", |(window, limit, cells)| {
            let q = Quota::new(limit, core::time::Duration::from_nanos(window)).ok()?;
            q.with_initial(Initial::Cells(cells % (limit + 1))).ok()
        })
        .prop_flat_map(|q| {
            let w = q.period().as_nanos() as u64;
            let l = q.count();
            let step = prop_oneof![4 => 0..=w / 4, 2 => 0..=w * 2, 1 => Just(0u64)];
            let n = prop_oneof![4 => 1u32..=2, 2 => 0..=l + 1];
            (
                Just(q),
                0u64..1 << 50,
                prop::collection::vec((step, n), 1..120),
            )
        })
}

proptest! {
    #![proptest_config(common::config())]

    #[test]
    fn sliding_log_matches_the_model((quota, start, ops) in scenario()) {
        let clock = ManualClock::starting_at(start);
        let log = SlidingLog::with_clock(quota, clock.clone()).unwrap();
        let mut model = Model::new(&quota, start.into());
        for (i, &(step, n)) in ops.iter().enumerate() {
            clock.advance(Duration::from_nanos(step));
            let now = clock.get();
            prop_assert_eq!(
                answer_of(log.check_n(n)),
                model.check(now.into(), n.into()),
                "op #{} n={} at {}", i, n, now
            );
        }
    }
}

#[test]
fn limits_are_validated() {
    let q = |s: &str| s.parse::<Quota>().unwrap();
    let clock = ManualClock::new();
    let log = |s: &str| SlidingLog::with_clock(q(s), clock.clone()).map(|l| l.quota().count());
    assert_eq!(
        log("65537/s"),
        Err(QuotaError::LimitTooLarge { max: 65_536 })
    );
    assert_eq!(log("65536/s"), Ok(65_536));
    assert_eq!(
        log("1/999ns"),
        Err(QuotaError::WindowTooShort { min_nanos: 1_000 })
    );
    assert_eq!(log("100/min burst 20"), Err(QuotaError::BurstNotSupported));
    let big = SlidingLog::with_clock(q("1000/s"), clock).unwrap();
    assert!(
        big.memory_bytes() >= 8_000 && big.memory_bytes() <= 8_100,
        "{}",
        big.memory_bytes()
    );
}

/// A manual clock that notes, per thread, the last reading it gave: the time a decision used.
#[derive(Clone, Default)]
struct Noting(ManualClock);

std::thread_local!(static LAST: std::cell::Cell<u64> = const { std::cell::Cell::new(0) });

impl Clock for Noting {
    fn now(&self) -> u64 {
        let now = self.0.now();
        LAST.with(|last| last.set(now));
        now
    }
}

/// Threads race on one log while the clock moves; every admitted time is recorded by the
/// admitting thread. No interval of one window may hold more than the limit.
#[test]
fn exact_bound_under_threads() {
    const LIMIT: usize = 5;
    const WINDOW: u64 = 1_000;
    let clock = Noting::default();
    let log = Arc::new(
        SlidingLog::with_clock(
            Quota::new(LIMIT as u32, core::time::Duration::from_nanos(WINDOW)).unwrap(),
            clock.clone(),
        )
        .unwrap(),
    );
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let (log, clock) = (log.clone(), clock.clone());
            std::thread::spawn(move || {
                let mut admitted = Vec::new();
                for i in 0..20_000u64 {
                    if t == 0 && i % 8 == 0 {
                        clock.0.advance(Duration::from_nanos(37));
                    }
                    let n = 1 + (i % 3 == 0) as u32;
                    if let Ok(Ok(_)) = log.check_n(n) {
                        let now = LAST.with(std::cell::Cell::get);
                        admitted.extend(std::iter::repeat_n(now, n as usize));
                    }
                }
                admitted
            })
        })
        .collect();
    let mut times: Vec<u64> = threads
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    times.sort_unstable();
    assert!(times.len() > 100, "only {} admitted", times.len());
    // Readings can be stale by the time they are recorded, so compare recorded readings (rounded
    // to 4 ns as the log does): any LIMIT + 1 consecutive ones span at least one window.
    let rounded: Vec<u64> = times.iter().map(|t| t.div_ceil(4).max(1) * 4).collect();
    for pair in rounded.windows(LIMIT + 1) {
        assert!(
            pair[LIMIT] - pair[0] >= WINDOW,
            "{} requests within {} ns",
            LIMIT + 1,
            pair[LIMIT] - pair[0]
        );
    }
}

/// After the clock steps back, the log is locked out for at most one window (plus the skew of
/// the clock, 0 for the manual clock).
#[test]
fn a_backward_step_locks_out_at_most_one_window() {
    let s = 1_000_000_000u64;
    let clock = ManualClock::starting_at(100 * s);
    let log = SlidingLog::with_clock("2/s".parse().unwrap(), clock.clone()).unwrap();
    assert!(log.check_n(2).is_ok_and(|r| r.is_ok()));
    clock.set(10 * s); // 90 s back
    let refused = log.check().unwrap_err();
    assert!(
        refused.retry_after() > Duration::from_nanos(s),
        "judged against the recorded times"
    );
    // The refusal moved the recorded times back to the fresh reading.
    clock.set(11 * s);
    assert!(log.check_n(2).is_ok_and(|r| r.is_ok()));
}

/// A stale reading (older than the recorded times) is refused, and frees nothing.
#[test]
fn a_stale_reading_frees_nothing() {
    let clock = common::Lagging::starting_at(5_000);
    let log = SlidingLog::with_clock(
        Quota::new(1, core::time::Duration::from_nanos(1_000)).unwrap(),
        clock.clone(),
    )
    .unwrap();
    assert!(log.check().is_ok());
    clock.stale(4_000);
    assert!(log.check().is_err());
    assert!(
        log.check().is_err(),
        "the fresh reading still sees the request"
    );
    clock.set(6_000);
    assert!(log.check().is_ok());
}
