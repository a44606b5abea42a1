//! Windows start at the same instants whichever backend decides: in process on any shipped
//! clock and in Redis on the server's `TIME`, a daily window ends at midnight UTC, or at
//! midnight in the zone of the window's UTC offset. The same requests across a day boundary get
//! the same answers in process (a `ManualClock` at Unix time) and through a real `redis-server`
//! (the same readings passed to the script).

#[path = "support/redis_server.rs"]
mod redis_server;

use std::time::{Duration, SystemTime};

use flowgate::algorithm::AnyAlgorithm;
use flowgate::clock::{Clock, ManualClock, TokioClock};
use flowgate::policy::{Policies, Policy};
use flowgate_redis::BuildRedis as _;
use flowgate_redis::{RedisLimiter, Source};
use redis_server::RedisServer;

const SECOND: u64 = 1_000_000_000;
const DAY: u64 = 86_400 * SECOND;
/// 2026-03-01 00:00 UTC, in ns since the Unix epoch.
const MIDNIGHT_UTC: u64 = 1_772_323_200 * SECOND;

/// The zones the tests run in: the suffix of the algorithms' text, and the offset east of UTC
/// in seconds.
const ZONES: [(&str, i64); 3] = [("", 0), (" utc+02:00", 7_200), (" utc-05:30", -19_800)];

/// A window counter of each kind, in the zone of `suffix`: five a day, a burst of four with two
/// back each day, and a sliding eight a day.
fn algorithms(suffix: &str) -> [AnyAlgorithm; 3] {
    ["5/day fixed", "2/day burst 4 interval", "8/day sliding"]
        .map(|text| format!("{text}{suffix}").parse().unwrap())
}

fn policies(algorithm: AnyAlgorithm) -> flowgate::policy::PoliciesBuilder<str> {
    Policies::<str>::builder().policy(Policy::global("daily").quota_with(algorithm))
}

/// Midnight in the zone `offset` seconds east of UTC that follows the Unix instant `now` (ns).
fn next_midnight(now: u64, offset: i64) -> u64 {
    let local = now.checked_add_signed(offset * SECOND as i64).unwrap();
    now + (DAY - local % DAY)
}

/// `d` in whole nanoseconds (a wait is at most `u64::MAX` ns).
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).expect("a flowgate wait fits in u64 ns")
}

/// One decision of `n` cells on both backends at the clock's reading: the same answer (admitted
/// or refused, the gauge, the wait), which it returns as `Ok(remaining)` or `Err(retry_after)`.
async fn both(
    redis: &RedisLimiter<str, ManualClock>,
    local: &Policies<str, ManualClock>,
    n: u32,
    context: &str,
) -> Result<u32, u64> {
    let remote = redis.check_n("", n).await.expect("within the burst");
    assert_eq!(remote.source(), Source::Buckets, "{context}");
    match (
        remote.outcome(),
        local.check_n("", n).expect("within the burst"),
    ) {
        (Ok(remote), Ok(local)) => {
            assert_eq!(remote.gauge(), local.gauge(), "{context}");
            Ok(local.remaining())
        }
        (Err(remote), Err(local)) => {
            assert_eq!(remote.gauge(), local.gauge(), "{context}");
            let wait = local.retry_after();
            assert_eq!(remote.retry_after(), wait, "{context}");
            Err(nanos(wait))
        }
        (remote, local) => panic!("{context}: Redis {remote:?}, in process {local:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_day_boundary_is_crossed_alike_in_process_and_in_redis() {
    let server = RedisServer::start();
    let mut runs = 0;
    for (zone, (suffix, offset)) in ZONES.into_iter().enumerate() {
        // Midnight in the zone: 22:00 UTC the day before in UTC+02:00, 05:30 UTC in UTC-05:30.
        let midnight = next_midnight(MIDNIGHT_UTC - DAY, offset);
        for (kind, algorithm) in algorithms(suffix).into_iter().enumerate() {
            let context = format!("{algorithm}, midnight at {midnight}");
            let clock = ManualClock::starting_at(midnight - 20 * SECOND);
            // Without the shield: every decision is compared as Redis makes it.
            let backend = server
                .backend()
                .prefix(format!("utc{zone}{kind}"))
                .client_time(true)
                .shield(0);
            let redis = policies(algorithm)
                .clock(clock.clone())
                .build_redis(backend)
                .unwrap();
            assert_eq!(redis.algorithms("daily").unwrap(), [algorithm], "{context}");
            let local = policies(algorithm).clock(clock.clone()).build().unwrap();
            // Until the last microsecond of the day: the window fills, and the counters that
            // give cells back at the boundary say so to the nanosecond.
            let mut refused = 0;
            for step in 0..19 {
                clock.advance(Duration::from_secs(1));
                let answer = both(&redis, &local, 1, &format!("{context}, step {step}")).await;
                refused += usize::from(answer.is_err());
            }
            assert!(refused > 0, "{context}: the window never filled");
            clock.set(midnight - 1_000);
            let last = both(&redis, &local, 1, &format!("{context}, a µs before")).await;
            clock.set(midnight);
            let first = both(&redis, &local, 1, &format!("{context}, at midnight")).await;
            if !matches!(algorithm, AnyAlgorithm::SlidingWindow(_)) {
                assert_eq!(last, Err(1_000), "{context}: refused until midnight");
                assert!(first.is_ok(), "{context}: admitted at midnight");
            }
            // Into the new day, two cells now and then.
            for step in 0..20u64 {
                clock.advance(Duration::from_millis(1_300 + step * 37));
                let n = 1 + u32::from(step % 3 == 0);
                let context = format!("{context}, step {step} after");
                let _ = both(&redis, &local, n, &context).await;
            }
            runs += 1;
        }
    }
    assert_eq!(runs, 9);
}

/// The shipped clocks read Unix time, and the server's `TIME` is Unix time: a daily window
/// decided in process on the default clock and one decided in Redis end at the same instant,
/// the next midnight in their zone, whenever the process started.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_clock_and_the_servers_time_end_a_day_at_the_same_midnight() {
    let server = RedisServer::start();
    let unix = || u64::try_from(SystemTime::UNIX_EPOCH.elapsed().unwrap().as_nanos()).unwrap();
    let tokio = TokioClock::new().now();
    assert!(tokio.abs_diff(unix()) < SECOND, "TokioClock reads {tokio}");
    for (zone, (suffix, offset)) in ZONES.into_iter().enumerate() {
        let algorithm: AnyAlgorithm = format!("1/day fixed{suffix}").parse().unwrap();
        // A second try with fresh buckets if midnight passed between a day's two requests.
        let mut refusals = None;
        for attempt in 0..2 {
            let prefix = format!("time{zone}-{attempt}");
            let redis = policies(algorithm)
                .build_redis(server.backend().prefix(prefix).shield(0))
                .unwrap();
            let local = policies(algorithm).build().unwrap();
            assert!(redis.check("").await.unwrap().outcome().is_ok());
            assert!(local.check("").is_ok());
            let remote = redis.check("").await.unwrap().outcome();
            if let (Err(remote), Err(in_process)) = (remote, local.check("")) {
                refusals = Some((remote, in_process));
                break;
            }
        }
        let (remote, in_process) = refusals.expect("a day's second request refused");
        let expected = next_midnight(unix(), offset) - unix();
        for (backend, wait) in [
            ("Redis", nanos(remote.retry_after())),
            ("in process", nanos(in_process.retry_after())),
        ] {
            // Modulo a day: midnight may pass between the decision and the expectation.
            let gap = wait.abs_diff(expected) % DAY;
            assert!(
                gap.min(DAY - gap) < 2 * SECOND,
                "{algorithm} {backend}: a wait of {wait} ns, {expected} ns to midnight"
            );
        }
    }
}
