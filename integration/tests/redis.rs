//! The Redis limiter against a real `redis-server` on a free loopback port: the same answers as
//! the in-process limiter, one round trip per decision, reloads, repairs, faults (kill and
//! restart, `SCRIPT FLUSH`, `FLUSHALL`, `DEBUG SLEEP` against the timeout), concurrent clients
//! on one key, and the over-admission bound of leases.

#[path = "support/redis_server.rs"]
mod redis_server;

use std::sync::Arc;
use std::time::{Duration, Instant};

use flowgate::clock::ManualClock;
use flowgate::policy::{BuildError, Policies, PoliciesBuilder, Policy};
use flowgate::{Algorithm, Cause, Quota};
use flowgate_redis::BuildRedis as _;
use flowgate_redis::{
    Breaker, Failure, OnFailure, RedisBackend, RedisConfigError, RedisLimiter, Source, Verdict,
};
use redis_server::RedisServer;

/// A request with a user (keyed levels) and an endpoint.
#[derive(Debug, Clone)]
struct Request {
    user: String,
    endpoint: &'static str,
}

fn request(user: &str, endpoint: &'static str) -> Request {
    Request {
        user: user.to_owned(),
        endpoint,
    }
}

fn allowed(verdict: &Verdict) -> flowgate::policy::Allowed {
    verdict.outcome().expect("admitted")
}

fn refused(verdict: &Verdict) -> flowgate::policy::Refused {
    verdict.outcome().expect_err("refused")
}

/// The policy and quota (their places) an outcome names.
fn quota_of(verdict: &Verdict) -> Option<(usize, usize)> {
    let by = match verdict.outcome() {
        Ok(allowed) => allowed.by(),
        Err(refused) => refused.by(),
    };
    by.map(|by| (by.policy_index(), by.quota_index()))
}

/// A policy with one bucket per string key.
fn per_key(name: &str) -> Policy<str> {
    Policy::keyed(name, |key: &str| key)
}

/// Builds a limiter that decides at `clock`'s readings instead of the server's `TIME`.
trait OnClock<R: ?Sized> {
    fn on(self, backend: RedisBackend, clock: &ManualClock) -> RedisLimiter<R, ManualClock>;
}

impl<R: ?Sized + 'static> OnClock<R> for PoliciesBuilder<R> {
    fn on(self, backend: RedisBackend, clock: &ManualClock) -> RedisLimiter<R, ManualClock> {
        let backend = backend.client_time(true);
        self.clock(clock.clone()).build_redis(backend).unwrap()
    }
}

/// A deterministic generator for request sequences.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decides_exactly_like_the_in_process_limiter() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(1_000_000_000_000);
    // Windows of minutes to hours: the keys' PX expiry (real time) never ends a bucket the
    // test's clock still sees as booked.
    let global = [Quota::per_minute(40).unwrap()];
    let endpoint = [Quota::per_minute(12).unwrap().with_burst(6).unwrap()];
    let user = [
        Quota::per_second(1).unwrap().with_burst(4).unwrap(),
        Quota::per_hour(30).unwrap(),
        Quota::per_second(3).unwrap(), // 333 333.3 µs: rounded up to 333 334 µs
    ];
    let user_key = |r: &Request, key: &mut flowgate::policy::Key| {
        if r.user == "anonymous" {
            key.skip();
        } else {
            key.add(&r.user);
        }
    };
    let limiter = Policies::<Request>::builder()
        .policy(Policy::global("global").quotas(global))
        .policy(Policy::keyed("endpoint", |r: &Request| r.endpoint).quotas(endpoint))
        .policy(Policy::keyed_with("user", user_key).quotas(user))
        .on(server.backend().prefix("conformance"), &clock);
    // The in-process twin runs the quotas exactly as Redis enforces them (µs intervals).
    let twin = Policies::<Request>::builder()
        .clock(clock.clone())
        .policy(Policy::global("global").quotas(limiter.quotas("global").unwrap()))
        .policy(
            Policy::keyed("endpoint", |r: &Request| r.endpoint)
                .quotas(limiter.quotas("endpoint").unwrap()),
        )
        .policy(Policy::keyed_with("user", user_key).quotas(limiter.quotas("user").unwrap()))
        .build()
        .unwrap();
    assert_ne!(
        limiter.quotas("user").unwrap()[2],
        user[2],
        "the test covers a rounded quota"
    );

    let users = ["alice", "bob", "anonymous"];
    let endpoints = ["/search", "/upload"];
    conform(&limiter, &twin, &clock, 1_500_000, |random| {
        let r = request(
            users[random.below(3) as usize],
            endpoints[random.below(2) as usize],
        );
        // 0 (a look) to 4 (above the 4-cell burst: never)
        (r, random.below(5) as u32)
    })
    .await;
}

/// The one-bucket call, which the script answers with one integer, conforms as well.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decides_exactly_like_the_in_process_limiter_on_one_bucket() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(1_000_000_000_000);
    // 333 333.3 µs, rounded up to 333 334 µs; a burst of 5.
    let quota = Quota::per_second(3).unwrap().with_burst(5).unwrap();
    let limiter = Policies::<str>::builder()
        .policy(per_key("solo").quota(quota))
        .on(server.backend().prefix("conformance"), &clock);
    let twin = Policies::<str>::builder()
        .clock(clock.clone())
        .policy(
            Policy::keyed_with("solo", |r: &str, key| {
                key.add(r);
            })
            .quotas(limiter.quotas("solo").unwrap()),
        )
        .build()
        .unwrap();
    let users = ["alice", "bob"];
    conform(&limiter, &twin, &clock, 400_000, |random| {
        // 0 (a look) to 6 (above the burst: never)
        (
            users[random.below(2) as usize].to_owned(),
            random.below(7) as u32,
        )
    })
    .await;
}

/// Dry-run policies (before, between and after enforcing ones, one of them small enough for
/// some requests never to fit) and jitter decide alike too: the same dry-run report, the same
/// retry-after with the same draw of jitter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_runs_and_jitter_decide_exactly_like_the_in_process_limiter() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(1_000_000_000_000);
    let per_second = |n: u32, burst: u32| Quota::per_second(n).unwrap().with_burst(burst).unwrap();
    let policies = |quotas: [Vec<Quota>; 4]| {
        let [first, user, endpoint, global] = quotas;
        Policies::<Request>::builder()
            .policy(
                Policy::keyed("trial-user", |r: &Request| &r.user)
                    .quotas(first)
                    .dry_run(true),
            )
            .policy(
                Policy::keyed("user", |r: &Request| &r.user)
                    .quotas(user)
                    .jitter(Duration::from_millis(1), Duration::from_millis(9)),
            )
            .policy(
                Policy::keyed("trial-endpoint", |r: &Request| r.endpoint)
                    .quotas(endpoint)
                    .dry_run(true),
            )
            .policy(Policy::global("global").quotas(global))
    };
    let limiter = policies([
        vec![per_second(1, 2), Quota::per_minute(20).unwrap()],
        vec![per_second(2, 3)],
        vec![per_second(3, 3)],
        vec![Quota::per_minute(200).unwrap()],
    ])
    .on(server.backend().prefix("dry"), &clock);
    let rounded = |name: &str| limiter.quotas(name).unwrap();
    let twin = policies([
        rounded("trial-user"),
        rounded("user"),
        rounded("trial-endpoint"),
        rounded("global"),
    ])
    .clock(clock.clone())
    .build()
    .unwrap();
    let users = ["alice", "bob"];
    let endpoints = ["/search", "/upload"];
    conform(&limiter, &twin, &clock, 600_000, |random| {
        let r = request(
            users[random.below(2) as usize],
            endpoints[random.below(2) as usize],
        );
        // 1 to 3: 3 is above the trial user's burst of 2 (a dry run that never fits).
        (r, 1 + random.below(3) as u32)
    })
    .await;
}

/// The shaping algorithms run in Redis too, decision for decision: a leaky-bucket shaper
/// (admissions queued with a delay, up to its bound), credit (a request that borrows, the
/// next caller waits), and a meter, beside GCRA, with delays whose bounds are not whole µs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shapers_and_credit_decide_exactly_like_the_in_process_limiter() {
    use flowgate::algorithm::AnyAlgorithm;

    let server = RedisServer::start();
    let clock = ManualClock::starting_at(1_000_000_000_000);
    let algorithm = |text: &str| text.parse::<AnyAlgorithm>().unwrap();
    let policies = |shaped: Vec<AnyAlgorithm>, credit: Vec<AnyAlgorithm>| {
        let mut user = Policy::keyed("shaped", |r: &Request| &r.user);
        for a in shaped {
            user = user.quota_with(a);
        }
        let mut endpoint = Policy::keyed("credit", |r: &Request| r.endpoint);
        for a in credit {
            endpoint = endpoint.quota_with(a);
        }
        Policies::<Request>::builder().policy(user).policy(endpoint)
    };
    let limiter = policies(
        vec![
            algorithm("5/s burst 2 shaper 900000500ns"),
            algorithm("300/min leaky"),
        ],
        vec![algorithm("20/s burst 3 credit 400ms"), algorithm("30/s")],
    )
    .on(server.backend().prefix("shapers"), &clock);
    let twin = policies(
        limiter.algorithms("shaped").unwrap(),
        limiter.algorithms("credit").unwrap(),
    )
    .clock(clock.clone())
    .build()
    .unwrap();
    // The shaper's bound of 900 ms and 500 ns runs as 900 ms (never a longer queue).
    assert_eq!(
        twin.algorithms("shaped").unwrap()[0].max_delay_nanos(),
        900_000_000
    );
    let users = ["alice", "bob"];
    let endpoints = ["/search", "/upload"];
    conform(&limiter, &twin, &clock, 120_000, |random| {
        let r = request(
            users[random.below(2) as usize],
            endpoints[random.below(2) as usize],
        );
        // Mostly 1 or 2; now and then 3, above the shaper's burst of 2 (never).
        let n = if random.below(10) == 0 {
            3
        } else {
            1 + random.below(2)
        };
        (r, n as u32)
    })
    .await;
}

/// The window counters run in Redis too, decision for decision: a fixed window, an interval
/// refill (a burst above its refill), and sliding windows (one weighed at a coarser scale: a
/// day long), beside GCRA, across many window boundaries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn window_counters_decide_exactly_like_the_in_process_limiter() {
    use flowgate::algorithm::AnyAlgorithm;

    let server = RedisServer::start();
    let clock = ManualClock::starting_at(1_000_000_000_000);
    let algorithm = |text: &str| text.parse::<AnyAlgorithm>().unwrap();
    let policies = |user: Vec<AnyAlgorithm>, endpoint: Vec<AnyAlgorithm>| {
        let mut per_user = Policy::keyed("windows", |r: &Request| &r.user);
        for a in user {
            per_user = per_user.quota_with(a);
        }
        let mut per_endpoint = Policy::keyed("sliding", |r: &Request| r.endpoint);
        for a in endpoint {
            per_endpoint = per_endpoint.quota_with(a);
        }
        Policies::<Request>::builder()
            .policy(per_user)
            .policy(per_endpoint)
    };
    let limiter = policies(
        vec![
            algorithm("4/s fixed"),
            algorithm("2/700ms burst 5 interval"),
            algorithm("20/min"),
        ],
        vec![algorithm("6/1500ms sliding"), algorithm("400/day sliding")],
    )
    .on(server.backend().prefix("windows"), &clock);
    let twin = policies(
        limiter.algorithms("windows").unwrap(),
        limiter.algorithms("sliding").unwrap(),
    )
    .clock(clock.clone())
    .build()
    .unwrap();
    let users = ["alice", "bob"];
    let endpoints = ["/search", "/upload"];
    conform(&limiter, &twin, &clock, 300_000, |random| {
        let r = request(
            users[random.below(2) as usize],
            endpoints[random.below(2) as usize],
        );
        // 0 (a look) to 2, now and then 6 (above a burst: never).
        let n = if random.below(12) == 0 {
            6
        } else {
            random.below(3)
        };
        (r, n as u32)
    })
    .await;
}

/// Runs 600 random steps, 0 to `gap` µs apart, through `limiter` and its in-process `twin`,
/// requiring the same verdicts: admission or refusal, the tightest or refusing quota, its
/// gauge, the wait with its jitter (both drawn from the same seed), and the dry-run report;
/// then one round trip per decision and no failures.
async fn conform<R, Q>(
    limiter: &RedisLimiter<R, ManualClock>,
    twin: &Policies<R, ManualClock>,
    clock: &ManualClock,
    gap: u64,
    mut next: impl FnMut(&mut Lcg) -> (Q, u32),
) where
    R: ?Sized + std::fmt::Debug,
    Q: std::borrow::Borrow<R>,
{
    let mut random = Lcg(7);
    let (mut admitted, mut refusals, mut dry_runs, mut delayed) = (0, 0, 0, 0);
    for step in 0..600 {
        clock.advance(Duration::from_micros(random.below(gap)));
        let (r, n) = next(&mut random);
        let r = r.borrow();
        // Both draw their jitter on this thread (the test's own, which runs this future).
        flowgate::policy::seed_jitter(step);
        let remote = limiter.check_n(r, n).await;
        flowgate::policy::seed_jitter(step);
        let local = twin.check_n(r, n);
        let context = format!("step {step}: {r:?} n={n}");
        match (remote, local) {
            (Err(never), Err(oversized)) => assert_eq!(
                (never.requested, never.burst),
                (oversized.requested, oversized.burst),
                "{context}"
            ),
            (Ok(verdict), Ok(Ok(admission))) => {
                assert_eq!(verdict.source(), Source::Buckets, "{context}");
                let a = allowed(&verdict);
                let tightest = admission.by().expect("an enforcing policy applied");
                assert_eq!(a.gauge(), admission.gauge(), "{context}");
                assert!(std::ptr::eq(a.by().unwrap(), tightest), "{context}");
                assert_eq!(a.dry_run(), admission.dry_run(), "{context}");
                assert_eq!(a.delay(), admission.delay(), "{context}");
                delayed += usize::from(a.delay() > Duration::ZERO);
                dry_runs += usize::from(a.dry_run().is_some());
                admitted += 1;
            }
            // The shield refuses only what Redis would, and says so no later than Redis would
            // admit (the bucket it reports is as Redis last did).
            (Ok(verdict), Ok(Err(rejection))) if verdict.source() == Source::Shield => {
                let r = refused(&verdict);
                assert!(
                    r.conforms_after() <= rejection.conforms_after(),
                    "{context}: {r:?} against {rejection:?}"
                );
                refusals += 1;
            }
            (Ok(verdict), Ok(Err(rejection))) => {
                let r = refused(&verdict);
                assert_eq!(r.retry_after(), rejection.retry_after(), "{context}");
                let by = rejection.by().expect("a policy refused");
                assert_eq!(r.gauge(), rejection.gauge(), "{context}");
                assert!(std::ptr::eq(r.by().unwrap(), by), "{context}");
                assert_eq!(r.dry_run(), rejection.dry_run(), "{context}");
                dry_runs += usize::from(r.dry_run().is_some());
                refusals += 1;
            }
            (remote, local) => panic!("{context}: Redis {remote:?}, in-process {local:?}"),
        }
    }
    assert!(
        admitted > 100 && refusals > 100,
        "{admitted} admitted, {refusals} refused"
    );
    let shapes = twin.names().any(|name| {
        let algorithms = twin.algorithms(name).unwrap();
        algorithms.iter().any(|a| a.max_delay_nanos() > 0)
    });
    assert_eq!(delayed > 20, shapes, "{delayed} admissions carried a delay");
    let has_dry_runs = twin.stats().iter().any(|policy| policy.dry_run);
    assert_eq!(
        dry_runs > 50,
        has_dry_runs,
        "{dry_runs} decisions reported a dry run"
    );
    let stats = limiter.stats();
    assert!(stats.shielded > 0, "the shield refused nothing: {stats:?}");
    // One round trip per decision, and one more the first time: the server did not know the
    // script (NOSCRIPT), so its source went along once.
    assert_eq!(stats.reloads, 1);
    assert_eq!(
        stats.round_trips,
        stats.decisions + 1 - stats.shielded,
        "one round trip per decision the shield did not refuse"
    );
    assert_eq!(
        (
            stats.timeouts,
            stats.connection_failures,
            stats.reply_failures
        ),
        (0, 0, 0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_request_takes_nothing_and_keys_expire_when_full_again() {
    let server = RedisServer::start();
    let start = Instant::now();
    let limiter = Policies::<str>::builder()
        .policy(
            per_key("user").quotas([Quota::per_second(2).unwrap(), Quota::per_minute(3).unwrap()]),
        )
        .build_redis(server.backend())
        .unwrap();
    assert!(limiter.check("carol").await.unwrap().is_allowed());
    assert!(limiter.check("carol").await.unwrap().is_allowed());
    // The per-second quota (burst 2) refuses: nothing is taken from the per-minute one.
    let no = limiter.check("carol").await.unwrap();
    assert_eq!(quota_of(&no), Some((0, 0)));
    let wait = refused(&no).retry_after();
    assert!(
        wait > Duration::ZERO && wait <= Duration::from_millis(500),
        "{wait:?}"
    );
    // Keys expire once their bucket is full again, and at most two 10 ms grid cells (and the
    // rounding to whole ms) later. Seen from here: the TTL plus the time since before the first
    // call covers the schedule, and the TTL exceeds it by 21 ms at most.
    for (bucket, full) in [(1, 40_000), (0, 1_000)] {
        let ttl: i64 =
            server.command(redis::cmd("PTTL").arg(format!("{{flowgate:carol}}:user:{bucket}")));
        let elapsed = start.elapsed().as_millis() as i64 + 1;
        assert!(
            ttl + elapsed >= full && ttl <= full + 21,
            "bucket {bucket} holds 2 cells, full in {full} ms: not a TTL of {ttl} ms"
        );
    }
    // Oversized requests are refused before any round trip.
    let trips = limiter.stats().round_trips;
    let never = limiter.check_n("carol", 3).await.unwrap_err();
    assert_eq!((never.requested, never.burst), (3, 2));
    assert_eq!(limiter.stats().round_trips, trips);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_keeps_its_ttl_within_a_grid_cell_and_gets_a_new_one_past_it() {
    let server = RedisServer::start();
    // 10^9 µs is on the 10 ms grid.
    let clock = ManualClock::starting_at(1_000_000_000_000);
    let (slow, fast) = (
        Quota::per_second(10).unwrap(),
        Quota::per_second(1_000_000).unwrap(),
    );
    let limiter = |policy: Policy<str>| {
        Policies::<str>::builder()
            .policy(policy)
            .on(server.backend(), &clock)
    };
    // Both quotas on one key (the script's general path), and each alone (its one-bucket path).
    let both = [limiter(per_key("k").quotas([slow, fast]))];
    let alone = [
        limiter(per_key("s").quota(slow)),
        limiter(per_key("f").quota(fast)),
    ];
    for (limiters, keys) in [(&both[..], ["k:0", "k:1"]), (&alone[..], ["s:0", "f:0"])] {
        let ttl = |bucket: usize| -> i64 {
            server.command(redis::cmd("PTTL").arg(format!("{{flowgate:a}}:{}", keys[bucket])))
        };
        let admit = || async {
            for limiter in limiters {
                assert!(limiter.check("a").await.unwrap().is_allowed());
            }
        };
        // Time stands still on the manual clock, so each TTL below is exact up to the real
        // time the test takes, which only lowers it: T = 100 ms puts the TAT 100 ms ahead,
        // expiring on the grid two cells later (120 ms); the 1 µs bucket expires 20 ms ahead.
        admit().await;
        let (slow, fast) = (ttl(0), ttl(1));
        assert!((100..=120).contains(&slow), "{keys:?}: {slow}");
        assert!((1..=20).contains(&fast), "{keys:?}: {fast}");
        // Mark both TTLs: a write that stays within its cell keeps the mark, one that enters a
        // new cell replaces it.
        for key in keys {
            let _: i64 = server.command(
                redis::cmd("PEXPIRE")
                    .arg(format!("{{flowgate:a}}:{key}"))
                    .arg(1_000_000),
            );
        }
        admit().await;
        let (slow, fast) = (ttl(0), ttl(1));
        assert!(
            (200..=220).contains(&slow),
            "{keys:?}: the TAT moved 100 ms: {slow}"
        );
        assert!(
            fast > 900_000,
            "{keys:?}: the TAT moved 1 µs within its cell: {fast}"
        );
        // 10 ms later the fast bucket's schedule starts in the next cell.
        clock.advance(Duration::from_millis(10));
        admit().await;
        let fast = ttl(1);
        assert!((1..=20).contains(&fast), "{keys:?}: {fast}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn script_flush_and_flushall_mid_run() {
    let server = RedisServer::start();
    // Without the shield: FLUSHALL resets every bucket behind its back (as a reset in another
    // process would), and this test asks Redis after it.
    let limiter = Policies::<str>::builder()
        .policy(per_key("k").quota(Quota::per_hour(3).unwrap()))
        .build_redis(server.backend().shield(0))
        .unwrap();
    assert_eq!(allowed(&limiter.check("a").await.unwrap()).remaining(), 2);
    assert_eq!(
        limiter.stats().reloads,
        1,
        "a new server does not know the script yet"
    );
    let _: () = server.command(redis::cmd("SCRIPT").arg("FLUSH"));
    // NOSCRIPT: the source is sent once more, and the decision continues from the same state.
    let verdict = limiter.check("a").await.unwrap();
    assert_eq!(allowed(&verdict).remaining(), 1);
    assert_eq!(limiter.stats().reloads, 2);
    assert_eq!(limiter.stats().round_trips, 4);
    assert_eq!(allowed(&limiter.check("a").await.unwrap()).remaining(), 0);
    assert!(!limiter.check("a").await.unwrap().is_allowed());
    // FLUSHALL forgets every bucket: the key starts full again, without any failure.
    let _: () = server.command(&mut redis::cmd("FLUSHALL"));
    assert_eq!(allowed(&limiter.check("a").await.unwrap()).remaining(), 2);
    let stats = limiter.stats();
    assert_eq!(
        (
            stats.reloads,
            stats.timeouts,
            stats.connection_failures,
            stats.reply_failures
        ),
        (2, 0, 0, 0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_overwritten_by_something_else_are_repaired_never_admitting() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(1_000_000_000_000);
    let limiter = Policies::<str>::builder()
        .policy(per_key("k").quota(Quota::per_second(10).unwrap()))
        .on(server.backend(), &clock);
    let _: () = server.command(
        redis::cmd("SET")
            .arg("{flowgate:text}:k:0")
            .arg("not a time"),
    );
    let _: () = server.command(
        redis::cmd("SET")
            .arg("{flowgate:huge}:k:0")
            .arg("123456789012345678901234"),
    );
    let _: () = server.command(redis::cmd("SET").arg("{flowgate:signed}:k:0").arg("-5"));
    // Digits, but not as Redis writes an integer: INCRBY would fail on it.
    let _: () = server.command(redis::cmd("SET").arg("{flowgate:padded}:k:0").arg("0999"));
    // Sixteen digits past 2^53: not exact in Lua, so not a schedule the script wrote.
    let _: () = server.command(
        redis::cmd("SET")
            .arg("{flowgate:inexact}:k:0")
            .arg("9999999999999999"),
    );
    let _: i64 = server.command(
        redis::cmd("HSET")
            .arg("{flowgate:hash}:k:0")
            .arg("f")
            .arg("v"),
    );
    for key in ["text", "huge", "signed", "padded", "inexact", "hash"] {
        // Taken as fully booked: refused, counted, and rewritten as a schedule.
        let verdict = limiter.check(key).await.unwrap();
        assert_eq!(
            refused(&verdict).retry_after(),
            Duration::from_millis(100),
            "{key}"
        );
        let value: String =
            server.command(redis::cmd("GET").arg(format!("{{flowgate:{key}}}:k:0")));
        assert_eq!(value, "1001000000", "{key}: now + τ in µs");
    }
    assert_eq!(limiter.stats().repaired, 6);
    assert_eq!(limiter.stats().reply_failures, 0);
    clock.advance(Duration::from_millis(100));
    assert!(limiter.check("hash").await.unwrap().is_allowed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clock_that_stepped_back_locks_out_for_one_window_at_most() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(1_000_000_000_000);
    let limiter = Policies::<str>::builder()
        .policy(per_key("k").quota(Quota::per_second(2).unwrap()))
        .on(server.backend(), &clock);
    assert!(limiter.check("k").await.unwrap().is_allowed());
    clock.rewind(Duration::from_secs(3_600));
    // Booked an hour ahead of the new reading: clamped to one window (1 s), never an hour.
    let start = Instant::now();
    let wait = refused(&limiter.check("k").await.unwrap()).retry_after();
    assert_eq!(wait, Duration::from_millis(500));
    // The clamped schedule gets a TTL of its own (a window, 1 s), not the 500 ms one the key
    // had under the old reading, which would end the bucket early.
    let ttl: i64 = server.command(redis::cmd("PTTL").arg("{flowgate:k}:k:0"));
    let elapsed = start.elapsed().as_millis() as i64 + 1;
    assert!(ttl + elapsed >= 1_000 && ttl <= 1_021, "{ttl}");
    clock.advance(Duration::from_millis(500));
    assert!(limiter.check("k").await.unwrap().is_allowed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_server_times_out_and_the_call_is_not_replayed() {
    let server = RedisServer::start();
    let limiter = Policies::<str>::builder()
        .policy(per_key("k").quota(Quota::per_hour(3).unwrap()))
        .build_redis(
            server
                .backend()
                .timeout(Duration::from_millis(100))
                .on_failure(OnFailure::Closed {
                    retry_after: Duration::from_secs(2),
                }),
        )
        .unwrap();
    assert_eq!(
        allowed(&limiter.check("slow").await.unwrap()).remaining(),
        2
    );
    let sleeper = {
        let client = server.client();
        std::thread::spawn(move || {
            let mut connection = client.get_connection().unwrap();
            let _: () = redis::cmd("DEBUG")
                .arg("SLEEP")
                .arg("0.6")
                .query(&mut connection)
                .unwrap();
        })
    };
    // Wait until the server is asleep: a PING on another connection goes unanswered.
    let deadline = Instant::now() + Duration::from_secs(5);
    while server.pings() {
        assert!(Instant::now() < deadline, "DEBUG SLEEP never took hold");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let started = Instant::now();
    let verdict = limiter.check("slow").await.unwrap();
    assert!(
        started.elapsed() < Duration::from_millis(400),
        "bounded by the timeout"
    );
    assert_eq!(verdict.source(), Source::FailedClosed(Failure::Timeout));
    assert_eq!(refused(&verdict).retry_after(), Duration::from_secs(2));
    sleeper.join().unwrap();
    // The timed-out call ran once the server woke (it was already sent) and took its cell; it
    // was not sent again, so exactly one cell is left now.
    let verdict = limiter.check("slow").await.unwrap();
    assert_eq!(verdict.source(), Source::Buckets);
    assert_eq!(allowed(&verdict).remaining(), 0);
    // Three decisions, one round trip each, and the script's first load.
    let stats = limiter.stats();
    assert_eq!(
        (stats.timeouts, stats.failed_closed, stats.round_trips),
        (1, 1, 4)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_falls_back_to_the_local_share_and_service_resumes_after_restart() {
    let mut server = RedisServer::start();
    let local = Policies::<str>::builder()
        .policy(per_key("k").quota(Quota::per_hour(10).unwrap()))
        .build_redis(
            server
                .backend()
                .prefix("local")
                .timeout(Duration::from_millis(200))
                .on_failure(OnFailure::Local { share: 0.3 }),
        )
        .unwrap();
    let open = Policies::<str>::builder()
        .policy(per_key("k").quota(Quota::per_hour(1).unwrap()))
        .build_redis(
            server
                .backend()
                // A restarted server is empty (every bucket reset): asked again at once.
                .shield(0)
                .prefix("open")
                .timeout(Duration::from_millis(200)),
        )
        .unwrap();
    assert_eq!(local.check("k").await.unwrap().source(), Source::Buckets);
    assert_eq!(open.check("k").await.unwrap().source(), Source::Buckets);
    assert!(!open.check("k").await.unwrap().is_allowed());

    server.kill();
    // The local share: 30 % of a burst of 10 is 3 cells, then refusals.
    let mut sources = Vec::new();
    for _ in 0..5 {
        let verdict = local.check("k").await.unwrap();
        assert!(
            matches!(verdict.source(), Source::Local(_)),
            "{:?}",
            verdict.source()
        );
        sources.push(verdict.is_allowed());
    }
    assert_eq!(sources, [true, true, true, false, false]);
    let verdict = open.check("k").await.unwrap();
    assert!(verdict.is_allowed());
    assert!(matches!(verdict.source(), Source::FailedOpen(_)));

    server.restart();
    // The connection manager reconnects in the background; decisions come from Redis again
    // within a bounded number of tries. The restarted server is empty: the bucket is full.
    let deadline = Instant::now() + Duration::from_secs(10);
    let verdict = loop {
        let verdict = local.check("k").await.unwrap();
        if verdict.source() == Source::Buckets || Instant::now() > deadline {
            break verdict;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(verdict.source(), Source::Buckets);
    assert_eq!(allowed(&verdict).remaining(), 9);
    let stats = local.stats();
    let failed = stats.connection_failures + stats.timeouts;
    assert_eq!(stats.local, failed + stats.breaker_refused);
    assert!(stats.local >= 5);
    // The default breaker opened at the third failure: the other two did not call.
    assert!(failed >= 3 && stats.breaker_refused >= 2, "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_server_at_all_fails_as_configured() {
    let client = redis_server::nobody();
    let limiter = Policies::<str>::builder()
        .policy(per_key("k").quota(Quota::per_second(1).unwrap()))
        .build_redis(RedisBackend::new(client).on_failure(OnFailure::Closed {
            retry_after: Duration::from_millis(250),
        }))
        .unwrap();
    for _ in 0..3 {
        let verdict = limiter.check("k").await.unwrap();
        assert!(matches!(verdict.source(), Source::FailedClosed(_)));
        let refused = refused(&verdict);
        assert_eq!(refused.retry_after(), Duration::from_millis(250));
        // Told apart from a quota's refusal: no quota was asked, and none is named.
        assert_eq!((refused.cause(), refused.by()), (Cause::Unavailable, None));
        assert!(verdict
            .to_string()
            .starts_with("refused: the rate limiter is unavailable"));
    }
    let stats = limiter.stats();
    assert_eq!(stats.failed_closed, 3);
    assert_eq!(stats.refused, 3);
    assert_eq!(stats.connection_failures + stats.timeouts, 3);
}

/// `tasks` tasks per limiter, each sending `requests` checks of the key "shared" one after
/// another; the requests admitted in all.
async fn clients(limiters: &[RedisLimiter<str>], tasks: usize, requests: usize) -> u32 {
    let mut handles = Vec::new();
    for limiter in limiters {
        for _ in 0..tasks {
            let limiter = limiter.clone();
            handles.push(tokio::spawn(async move {
                let mut admitted = 0;
                for _ in 0..requests {
                    admitted += u32::from(limiter.check("shared").await.unwrap().is_allowed());
                }
                admitted
            }));
        }
    }
    let mut admitted = 0;
    for handle in handles {
        admitted += handle.await.unwrap();
    }
    admitted
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_clients_on_one_key_never_exceed_the_quota() {
    let server = RedisServer::start();
    // Four "processes" (own connections), eight tasks each, on one key with no refill in the
    // test's time: exactly the burst is admitted, however the calls interleave.
    let limiters: Vec<_> = (0..4)
        .map(|_| {
            Policies::<str>::builder()
                .policy(per_key("k").quota(Quota::per_hour(100).unwrap()))
                .build_redis(server.backend().timeout(Duration::from_secs(2)))
                .unwrap()
        })
        .collect();
    let admitted = clients(&limiters, 8, 20).await;
    assert_eq!(admitted, 100, "640 requests against a burst of 100");
    let failures: u64 = limiters.iter().map(|l| l.stats().failed_open).sum();
    assert_eq!(failures, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leased_clients_never_exceed_the_quota_and_unused_cells_are_accounted_for() {
    let server = RedisServer::start();
    let limiters: Vec<_> = (0..3)
        .map(|_| {
            Policies::<str>::builder()
                .policy(per_key("k").quota(Quota::per_hour(100).unwrap()))
                .build_redis(
                    server
                        .backend()
                        .timeout(Duration::from_secs(2))
                        .lease(16, Duration::from_secs(3_600)),
                )
                .unwrap()
        })
        .collect();
    let admitted = clients(&limiters, 4, 10).await;
    // 120 requests; leases hold back at most 3 × 16 cells, never more than the burst in total.
    assert!((100 - 48..=100).contains(&admitted), "{admitted}");
    let returned: u64 = {
        let mut sum = 0;
        for limiter in &limiters {
            sum += limiter.return_leases().await;
        }
        sum
    };
    // A lease's rest goes back only if no other lease was taken on top of it; the rest stays
    // booked (dropped). Every cell is one of the three.
    let dropped: u64 = limiters.iter().map(|l| l.stats().dropped_cells).sum();
    assert_eq!(
        u64::from(admitted) + returned + dropped,
        100,
        "every cell admitted, given back or dropped"
    );
    // What was given back is available to anyone now.
    let fresh = Policies::<str>::builder()
        .policy(per_key("k").quota(Quota::per_hour(100).unwrap()))
        .build_redis(server.backend())
        .unwrap();
    let mut more = 0u32;
    while fresh.check("shared").await.unwrap().is_allowed() {
        more += 1;
    }
    assert_eq!(u64::from(more), returned);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_save_round_trips_and_stay_within_their_bound() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(1_000_000_000_000);
    // Three processes leasing 20 cells for 200 ms from 100/s, burst 50.
    let (burst, per_cell, lease) = (50u64, 10_000_000u64, 20u64);
    let limiters: Vec<_> = (0..3)
        .map(|_| {
            Policies::<str>::builder()
                .policy(per_key("k").quota(Quota::per_second(100).unwrap().with_burst(50).unwrap()))
                .on(
                    server
                        .backend()
                        .lease(lease as u32, Duration::from_millis(200)),
                    &clock,
                )
        })
        .collect();
    let mut random = Lcg(11);
    let mut admissions = Vec::new(); // times of admitted requests, in ns
    for _ in 0..6_000 {
        clock.advance(Duration::from_micros(
            random.below(2 * per_cell / 3 / 1_000),
        ));
        let limiter = &limiters[random.below(3) as usize];
        if limiter.check("hot").await.unwrap().is_allowed() {
            admissions.push(clock.get());
        }
    }
    // Offered about 300/s against 100/s: plenty refused, and every window within the bound:
    // at most burst + w / T + the leases outstanding when it began (3 × 20).
    let span = admissions.last().unwrap() - admissions.first().unwrap();
    for window in [100_000_000u64, 500_000_000, 2_000_000_000] {
        for (i, &start) in admissions.iter().enumerate() {
            let inside = admissions[i..]
                .iter()
                .take_while(|&&t| t < start + window)
                .count() as u64;
            let bound = burst + window / per_cell + 1 + 3 * lease;
            assert!(
                inside <= bound,
                "{inside} admitted in {window} ns from {start} (bound {bound})"
            );
        }
    }
    let over_all = admissions.len() as u64;
    assert!(
        over_all <= burst + span / per_cell + 1 + 3 * lease,
        "{over_all} over {span} ns"
    );
    assert!(
        over_all >= span / per_cell / 2,
        "leasing must not starve: {over_all} over {span} ns"
    );
    let stats: Vec<_> = limiters.iter().map(|l| l.stats()).collect();
    let decisions: u64 = stats.iter().map(|s| s.decisions).sum();
    let admitted: u64 = stats.iter().map(|s| s.admitted).sum();
    let round_trips: u64 = stats.iter().map(|s| s.round_trips).sum();
    let lease_admitted: u64 = stats.iter().map(|s| s.lease_admitted).sum();
    assert_eq!(admitted, over_all);
    // Under overload a drained bucket grants small leases, and each refusal costs a round trip:
    // the saving is smaller here than with room (next test), but there is one.
    let reloads: u64 = stats.iter().map(|s| s.reloads).sum();
    assert_eq!(reloads, 1, "the first call loads the script for everyone");
    assert!(lease_admitted > 0);
    let shielded: u64 = stats.iter().map(|s| s.shielded).sum();
    assert_eq!(round_trips - reloads + lease_admitted + shielded, decisions);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_cut_round_trips_tenfold_when_the_quota_has_room() {
    let server = RedisServer::start();
    let limiter = Policies::<str>::builder()
        .policy(
            per_key("k").quota(
                Quota::per_second(1_000_000)
                    .unwrap()
                    .with_burst(1_000)
                    .unwrap(),
            ),
        )
        .build_redis(server.backend().lease(100, Duration::from_secs(60)))
        .unwrap();
    for _ in 0..2_000 {
        assert!(limiter.check("roomy").await.unwrap().is_allowed());
    }
    let stats = limiter.stats();
    assert_eq!(stats.decisions, 2_000);
    assert!(
        stats.round_trips * 10 <= stats.decisions,
        "{} round trips",
        stats.round_trips
    );
    assert_eq!(stats.lease_admitted + stats.leases, 2_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_configurations_are_errors() {
    let backend = || RedisBackend::new(redis::Client::open("redis://127.0.0.1:1/").unwrap());
    let per_key = || per_key("k").quota(Quota::per_second(1).unwrap());
    let err = |b: PoliciesBuilder<str>, backend: RedisBackend| b.build_redis(backend).unwrap_err();
    // The set's own rules, as in process.
    assert_eq!(
        err(Policies::builder(), backend()),
        RedisConfigError::Policy(BuildError::NoPolicies)
    );
    assert!(matches!(
        err(Policies::builder().policy(self::per_key("k")), backend()),
        RedisConfigError::Policy(BuildError::NoQuotas { .. })
    ));
    assert!(matches!(
        err(
            Policies::builder().policy(per_key()).policy(per_key()),
            backend()
        ),
        RedisConfigError::Policy(BuildError::DuplicateName { .. })
    ));
    // What keys cannot hold, and what the script cannot run.
    assert!(matches!(
        err(
            Policies::builder().policy(per_key()),
            backend().prefix("a{b}")
        ),
        RedisConfigError::BadName { what: "prefix", .. }
    ));
    assert!(matches!(
        err(
            Policies::builder().policy(self::per_key("a:b").quota(Quota::per_second(1).unwrap())),
            backend()
        ),
        RedisConfigError::BadName { what: "policy", .. }
    ));
    // A sliding window is weighed in nanoseconds in the script: at most 2^53 ns (104 days).
    let sliding = "10/200day sliding";
    let sliding = sliding
        .parse::<flowgate::algorithm::AnyAlgorithm>()
        .unwrap();
    assert!(matches!(
        err(
            Policies::builder().policy(per_key().quota_with(sliding)),
            backend()
        ),
        RedisConfigError::WindowTooLong { quota: 1, .. }
    ));
    assert!(matches!(
        err(
            Policies::builder().policy(per_key()),
            backend().timeout(Duration::ZERO)
        ),
        RedisConfigError::Timeout
    ));
    // A breaker that opens after no failure, or for no time: `Breaker::off()` is the way.
    for breaker in [
        Breaker::new(0, Duration::from_secs(1)),
        Breaker::new(3, Duration::ZERO),
    ] {
        assert_eq!(
            err(
                Policies::builder().policy(per_key()),
                backend().breaker(breaker)
            ),
            RedisConfigError::Breaker
        );
    }
    for share in [0.0, -1.0, 1.5, f64::NAN] {
        assert!(matches!(
            err(
                Policies::builder().policy(per_key()),
                backend().on_failure(OnFailure::Local { share })
            ),
            RedisConfigError::Share(_)
        ));
    }
    // A share in (0, 1] so small that a quota's interval overflows: named, with a short float.
    let tiny = err(
        Policies::builder().policy(per_key()),
        backend().on_failure(OnFailure::Local { share: 1e-300 }),
    );
    assert!(
        matches!(&tiny, RedisConfigError::ShareTooSmall { quota, share, .. }
            if quota == "1/s" && *share == 1e-300),
        "{tiny:?}"
    );
    let message = tiny.to_string();
    assert!(
        message.contains("1e-300") && message.len() < 120,
        "{message}"
    );
    assert!(err(
        Policies::builder().policy(per_key()),
        backend().on_failure(OnFailure::Local { share: -1e-300 }),
    )
    .to_string()
    .contains("local share -1e-300 is not in (0, 1]"));
    assert!(matches!(
        err(
            Policies::builder().policy(per_key()),
            backend().lease(0, Duration::from_secs(1))
        ),
        RedisConfigError::Lease
    ));
    assert!(matches!(
        err(
            Policies::builder().policy(per_key()),
            backend().lease(5, Duration::ZERO)
        ),
        RedisConfigError::Lease
    ));
    // Outside a runtime: an error, not tokio's panic.
    let outside = std::thread::spawn(move || {
        Policies::<str>::builder()
            .policy(per_key())
            .build_redis(backend())
            .unwrap_err()
    });
    assert_eq!(outside.join().unwrap(), RedisConfigError::NoRuntime);
}

#[test]
fn verdicts_and_limiters_can_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<RedisLimiter<str>>();
    send_sync::<RedisLimiter<Request, ManualClock>>();
    send_sync::<Verdict>();
    let _ = Arc::new(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limiters_with_different_policy_names_never_share_buckets() {
    let server = RedisServer::start();
    // Same default prefix, same key: a tight login limit and a loose API limit.
    let logins = Policies::<str>::builder()
        .policy(per_key("login").quota(Quota::per_hour(3).unwrap()))
        .build_redis(server.backend())
        .unwrap();
    let api = Policies::<str>::builder()
        .policy(per_key("api").quota(Quota::per_second(1_000).unwrap()))
        .build_redis(server.backend())
        .unwrap();
    let mut admitted = Vec::new();
    for _ in 0..5 {
        admitted.push(logins.check("mallory").await.unwrap().is_allowed());
        assert!(api.check("mallory").await.unwrap().is_allowed());
    }
    assert_eq!(admitted, [true, true, true, false, false]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_is_spent_locally_until_it_expires_then_its_rest_goes_back() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(1_000_000_000_000);
    // 10/s, burst 10 (T = 100 ms, τ = 1 s); leases of 5 cells for 300 ms.
    let limiter = Policies::<str>::builder()
        .policy(per_key("k").quota(Quota::per_second(10).unwrap()))
        .on(
            server.backend().lease(5, Duration::from_millis(300)),
            &clock,
        );
    let first = limiter.check("leased").await.unwrap();
    assert_eq!(first.source(), Source::Buckets);
    assert_eq!(allowed(&first).remaining(), 5, "the lease booked 5 of 10");
    for _ in 0..4 {
        assert_eq!(
            limiter.check("leased").await.unwrap().source(),
            Source::Lease
        );
    }
    // Empty: the next lease takes the 5 cells left in the bucket.
    let second = limiter.check("leased").await.unwrap();
    assert_eq!(second.source(), Source::Buckets);
    assert_eq!(allowed(&second).remaining(), 0);
    assert_eq!(limiter.stats().lease_admitted, 4);
    // Past the lease's lifetime its 4 unused cells are not spent here: they go back with the
    // next call (TAT 1 s − 4 × 100 ms = 600 ms ahead of the start, 250 ms ahead of now), which
    // takes a new lease of 5 from the 7 cells then free: 2 remain.
    clock.advance(Duration::from_millis(350));
    let third = limiter.check("leased").await.unwrap();
    assert_eq!(third.source(), Source::Buckets);
    assert_eq!(allowed(&third).remaining(), 2);
    let stats = limiter.stats();
    assert_eq!(
        (stats.returned_cells, stats.lease_admitted, stats.leases),
        (4, 4, 3)
    );
    assert_eq!(limiter.return_leases().await, 4);
}

/// A lease's unused cells go back only while its buckets hold what the lease wrote. At 1/min
/// with a burst of 2: a lease of 2 at 0 min (1 spent), another process's cell at 2 min on top
/// of it, the lease returned at 2.5 min: nothing comes back, so at 2.5 min one more request is
/// admitted, not two (an arithmetic give-back freed the other's cell: 3 admissions in half a
/// minute). Minutes, so that no key outlives the manual clock in real time however slow the
/// machine (a key's TTL is the time to refill, in real milliseconds).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_is_given_back_only_if_nothing_was_decided_on_top_of_it() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(1_000_000_000_000);
    let quota = Quota::per_minute(1).unwrap().with_burst(2).unwrap();
    let backend = || server.backend();
    let leased = Policies::<str>::builder()
        .policy(per_key("k").quota(quota))
        .on(backend().lease(2, Duration::from_secs(60)), &clock);
    let plain = Policies::<str>::builder()
        .policy(per_key("k").quota(quota))
        .on(backend(), &clock);
    let admitted = |outcomes: Vec<Verdict>| outcomes.iter().filter(|v| v.is_allowed()).count();

    // Nothing on top: the unused cell comes back, and the bucket is as if only one was taken.
    assert_eq!(leased.check("a").await.unwrap().source(), Source::Buckets);
    assert_eq!(leased.return_leases().await, 1);
    assert_eq!(allowed(&plain.check("a").await.unwrap()).remaining(), 0);

    assert_eq!(leased.check("b").await.unwrap().source(), Source::Buckets);
    clock.advance(Duration::from_secs(120));
    assert!(plain.check("b").await.unwrap().is_allowed());
    clock.advance(Duration::from_secs(30));
    assert_eq!(leased.return_leases().await, 0);
    let mut after = Vec::new();
    for _ in 0..3 {
        after.push(plain.check("b").await.unwrap());
    }
    assert_eq!(admitted(after), 1);
    let stats = leased.stats();
    assert_eq!((stats.returned_cells, stats.dropped_cells), (1, 1));
}

/// A reset starts a key over in this process too: a lease taken from its buckets is forgotten
/// (its cells were booked on buckets that start over; spent on top of the fresh bucket they
/// would admit more than its burst), and so are the key's buckets in the local fallback, even
/// when Redis does not answer the reset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_forgets_the_keys_lease_and_local_buckets() {
    use flowgate::backend::Backend as _;

    let server = RedisServer::start();
    let clock = ManualClock::starting_at(1_000_000_000_000);
    let quota = Quota::per_minute(1).unwrap().with_burst(4).unwrap();
    let leased = Policies::<str>::builder()
        .policy(per_key("k").quota(quota))
        .on(
            // A timeout long enough that a busy machine cannot turn a call into a fallback.
            server
                .backend()
                .lease(4, Duration::from_secs(60))
                .timeout(Duration::from_secs(10))
                .on_failure(OnFailure::Closed {
                    retry_after: Duration::from_secs(1),
                }),
            &clock,
        );
    let admitted = |limiter: &RedisLimiter<str, ManualClock>| {
        let limiter = limiter.clone();
        async move {
            let mut admitted = 0;
            for _ in 0..10 {
                admitted += usize::from(limiter.check("a").await.unwrap().is_allowed());
            }
            admitted
        }
    };
    // One cell taken, three held in the lease; the reset deletes the bucket.
    assert!(leased.check("a").await.unwrap().is_allowed());
    leased.reset("a").await.unwrap();
    assert_eq!(
        admitted(&leased).await,
        4,
        "a fresh bucket's burst, no lease cell on top"
    );
    assert_eq!(leased.stats().dropped_cells, 3);

    // Redis away: the local share decides, and a reset empties its bucket for the key.
    let local = Policies::<str>::builder()
        .policy(per_key("k").quota(quota))
        .on(
            RedisBackend::new(redis_server::nobody())
                .breaker(Breaker::off())
                .on_failure(OnFailure::Local { share: 1.0 }),
            &clock,
        );
    assert_eq!(admitted(&local).await, 4);
    assert!(local.reset("a").await.is_err(), "Redis does not answer");
    assert_eq!(admitted(&local).await, 4, "the local bucket started over");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn returning_leases_with_the_server_gone_costs_one_failed_call() {
    let mut server = RedisServer::start();
    let clock = ManualClock::starting_at(1_000_000_000_000);
    let limiter = Policies::<str>::builder()
        .policy(per_key("k").quota(Quota::per_second(10).unwrap()))
        .on(
            server
                .backend()
                .lease(5, Duration::from_secs(60))
                .timeout(Duration::from_millis(200)),
            &clock,
        );
    // Five keys, each with a lease of 5 cells of which 4 are unused.
    for key in ["a", "b", "c", "d", "e"] {
        assert_eq!(limiter.check(key).await.unwrap().source(), Source::Buckets);
    }
    server.kill();
    let trips = limiter.stats().round_trips;
    assert_eq!(limiter.return_leases().await, 0);
    let stats = limiter.stats();
    // The first call fails; the four other leases are dropped without one.
    assert_eq!(stats.round_trips, trips + 1);
    assert_eq!((stats.dropped_cells, stats.returned_cells), (20, 0));
    assert_eq!(stats.timeouts + stats.connection_failures, 1);
}

/// Redis 7.2.0–7.2.4 write a Lua number that is a multiple of 10^8 as "1e+08" (redis/redis#13113),
/// which neither the script's reader nor INCRBY accepts: the script formats such numbers itself.
/// On the 7.0 this suite installs, this covers the formatting branch (a wrong format fails here
/// too); on 7.2.0–7.2.4 it fails without the branch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multiples_of_ten_to_the_eighth_are_written_as_integers() {
    let server = RedisServer::start();
    // 10^9 µs, and T = 100 s = 10^8 µs: every TAT is a multiple of 10^8.
    let clock = ManualClock::starting_at(1_000_000_000_000);
    let quota = Quota::with_period(Duration::from_secs(100))
        .unwrap()
        .with_burst(5)
        .unwrap();
    let get = |key: &str| -> String { server.command(redis::cmd("GET").arg(key)) };
    let plain = Policies::<str>::builder()
        .policy(per_key("p").quota(quota))
        .on(server.backend(), &clock);
    assert!(plain.check("a").await.unwrap().is_allowed());
    assert_eq!(get("{flowgate:a}:p:0"), "1100000000");
    // A lease of 3 cells, 2 left unused and given back with the next call.
    let leased = Policies::<str>::builder()
        .policy(per_key("l").quota(quota))
        .on(server.backend().lease(3, Duration::from_millis(10)), &clock);
    assert!(leased.check("a").await.unwrap().is_allowed());
    assert_eq!(get("{flowgate:a}:l:0"), "1300000000");
    clock.advance(Duration::from_millis(20));
    assert!(leased.check("a").await.unwrap().is_allowed());
    let stats = leased.stats();
    assert_eq!((stats.returned_cells, stats.reply_failures), (2, 0));
    // Given back 2 (undo.lua, from 1.3·10^9 to 1.1·10^9), then a new lease of 3: 1.4·10^9.
    assert_eq!(get("{flowgate:a}:l:0"), "1400000000");
    // Its 2 unused cells given back alone, the TTL kept.
    assert_eq!(leased.return_leases().await, 2);
    assert_eq!(get("{flowgate:a}:l:0"), "1200000000");
    assert_eq!(leased.stats().reply_failures, 0);
}

/// The sliding log in Redis decides as the in-process log does, request for request (the same
/// admissions, waits, cells left and resets), two processes on one name share it, and the
/// bound holds in every window: at most the limit in any interval of the window's length.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sliding_log_in_redis_is_exact_in_every_window() {
    use flowgate::SlidingLog;
    use flowgate_redis::RedisSlidingLog;

    let server = RedisServer::start();
    let clock = ManualClock::starting_at(1_000_000_000_000);
    let quota: Quota = "5/2s".parse().unwrap();
    let backend = || server.backend().prefix("logs").client_time(true);
    let remote = RedisSlidingLog::with_clock(backend(), "api", quota, clock.clone()).unwrap();
    let other = RedisSlidingLog::with_clock(backend(), "api", quota, clock.clone()).unwrap();
    let twin = SlidingLog::with_clock(quota, clock.clone()).unwrap();
    let mut random = Lcg(5);
    let mut admitted_at = Vec::new();
    let (mut admitted, mut refused) = (0, 0);
    for step in 0..500 {
        clock.advance(Duration::from_micros(random.below(400_000)));
        let n = random.below(4) as u32; // 0 (a look) to 3
        let log = if random.below(2) == 0 {
            &remote
        } else {
            &other
        };
        let there = log.check_n("k", n).await.unwrap();
        let here = twin.check_n(n).unwrap();
        assert_eq!(there.source(), Source::Buckets);
        match (there.outcome(), here) {
            (Ok(a), Ok(b)) => {
                assert_eq!(
                    (a.remaining(), a.reset_after()),
                    (b.remaining(), b.reset_after()),
                    "step {step}"
                );
                for _ in 0..n {
                    admitted_at.push(clock.get());
                }
                admitted += 1;
            }
            (Err(a), Err(b)) => {
                assert_eq!(a.retry_after(), b.retry_after(), "step {step}");
                assert_eq!(a.remaining(), b.remaining(), "step {step}");
                refused += 1;
            }
            (a, b) => panic!("step {step} n={n}: Redis {a:?}, in process {b:?}"),
        }
    }
    assert!(
        admitted > 100 && refused > 50,
        "{admitted} admitted, {refused} refused"
    );
    // Exact: no two-second interval holds more than five admitted requests.
    for (i, &start) in admitted_at.iter().enumerate() {
        let inside = admitted_at[i..]
            .iter()
            .take_while(|&&t| t < start + 2_000_000_000)
            .count();
        assert!(inside <= 5, "{inside} requests within 2 s of {start}");
    }
    assert!(
        remote.check_n("k", 6).await.is_err(),
        "above the limit: never"
    );
    // At the boundary: five requests at one time leave the window exactly one window later,
    // not a microsecond sooner or later.
    clock.advance(Duration::from_secs(3));
    assert!(remote.check_n("edge", 5).await.unwrap().is_allowed());
    clock.advance(Duration::from_micros(1_999_999));
    let early = remote.check("edge").await.unwrap().outcome().unwrap_err();
    assert_eq!(early.retry_after(), Duration::from_micros(1));
    clock.advance(Duration::from_micros(1));
    assert!(remote.check_n("edge", 5).await.unwrap().is_allowed());
    let trips = remote.stats().round_trips + other.stats().round_trips;
    let reloads = remote.stats().reloads + other.stats().reloads;
    assert_eq!(trips - reloads, 503, "one round trip per decision");
    // The log expires a window after its newest time (the server's real time).
    let ttl: i64 = server.command(redis::cmd("PTTL").arg("{logs:k}:api"));
    assert!((1..=2_001).contains(&ttl), "{ttl}");
    // A key overwritten by something else is taken as a full log, counted, and replaced.
    let _: () = server.command(redis::cmd("SET").arg("{logs:odd}:api").arg("text"));
    let full = remote.check("odd").await.unwrap().outcome().unwrap_err();
    assert_eq!(full.retry_after(), Duration::from_secs(2));
    assert_eq!(remote.stats().repaired, 1);
    let kind: String = server.command(redis::cmd("TYPE").arg("{logs:odd}:api"));
    assert_eq!(kind, "zset");
}

/// The local share of a window counter is a window counter counting fewer: with Redis away, a
/// fixed window of 4 per minute becomes 2 per minute in each process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_counter_falls_back_to_its_local_share() {
    let backend = RedisBackend::new(redis_server::nobody())
        .timeout(Duration::from_millis(100))
        .on_failure(OnFailure::Local { share: 0.5 });
    let fixed = "4/min fixed"
        .parse::<flowgate::algorithm::AnyAlgorithm>()
        .unwrap();
    let limiter = Policies::<str>::builder()
        .policy(Policy::keyed("k", |k: &str| k).quota_with(fixed))
        .build_redis(backend)
        .unwrap();
    let mut admitted = Vec::new();
    for _ in 0..3 {
        let verdict = limiter.check("a").await.unwrap();
        assert!(matches!(verdict.source(), Source::Local(_)), "{verdict:?}");
        admitted.push(verdict.is_allowed());
    }
    assert_eq!(admitted, [true, true, false]);
}

/// A stream over a Redis set goes no faster than the set's quota: its time has a lower bound
/// only (a busy machine makes it slower, never faster), every decision is Redis's (failing
/// closed, a late answer could only delay), and an item above the burst is paid in parts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_over_redis_goes_no_faster_than_its_quota() {
    use flowgate::stream::{Over, RateLimited};
    use futures_util::StreamExt;

    let server = RedisServer::start();
    let closed = OnFailure::Closed {
        retry_after: Duration::from_millis(10),
    };
    let limiter = Policies::<str>::builder()
        .policy(Policy::keyed("user", |user: &str| user).quota("20/s burst 2".parse().unwrap()))
        .build_redis(server.backend().prefix("stream").on_failure(closed))
        .unwrap();
    let start = Instant::now();
    let items = futures_util::stream::iter([1u32, 1, 5, 1]);
    let limited = RateLimited::new(items, Over::new(limiter.clone(), "alice"))
        .with_cost(|cells: &u32| *cells);
    assert_eq!(limited.collect::<Vec<_>>().await, [1, 1, 5, 1]);
    // 2 cells at once, then 6 at 50 ms each.
    let elapsed = start.elapsed();
    assert!(elapsed >= Duration::from_millis(295), "{elapsed:?}");
    let stats = limiter.stats();
    assert_eq!((stats.failed_closed, stats.failed_open), (0, 0));
    // At least one decision per item, and the 5 cells in more than one part.
    assert!(stats.answered >= 5, "{stats:?}");
}

/// Whether Redis answers is known at start-up: `ready` succeeds on a running server and names
/// the address of one that does not answer (nothing listens on its port); a configuration's
/// `connect` fails there, naming `redis.url`, unless its table says `check_at_start = false`,
/// where the set starts and decides by its failure policy until Redis answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_names_a_server_that_does_not_answer() {
    use flowgate::policy::KeyExtractors;
    let server = RedisServer::start();
    let set = || {
        let user = Policy::keyed("user", |user: &str| user).quota("3/h".parse().unwrap());
        Policies::<str>::builder().policy(user)
    };
    set()
        .build_redis(server.backend())
        .unwrap()
        .ready()
        .await
        .unwrap();

    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let url = format!("redis://127.0.0.1:{port}/");
    let nowhere = RedisBackend::new(redis::Client::open(url.as_str()).unwrap());
    let lost = set().build_redis(nowhere).unwrap();
    let error = lost.ready().await.unwrap_err();
    let named = format!("127.0.0.1:{port}");
    assert!(
        matches!(&error, RedisConfigError::Unreachable { server, .. } if *server == named),
        "{error}"
    );
    assert!(lost
        .check("alice")
        .await
        .unwrap()
        .source()
        .failure()
        .is_some());

    let file = |check: &str| -> flowgate_redis::Config {
        let text = format!(
            "backend = \"redis\"\n[redis]\nurl = {url:?}\n{check}\n\
             [[policies]]\nname = \"all\"\nquotas = [\"3/h\"]\n"
        );
        toml::from_str(&text).unwrap()
    };
    let (keys, clock) = (
        KeyExtractors::<str>::new(),
        flowgate::clock::QuantaClock::new(),
    );
    let error = file("").connect(&keys, clock.clone()).await.unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("redis.url") && message.contains(&named),
        "{message}"
    );
    let started = file("check_at_start = false").connect(&keys, clock).await;
    assert!(started.unwrap().ready().await.is_err());
}

/// The hot-key shield, at a manual clock: after Redis refuses a bucket, requests for as many
/// cells or more are refused here without a call until the refusal's wait ends, exactly when
/// Redis would admit again; fewer cells still go to Redis, a reset forgets the key, and a
/// limiter without the shield (another process) is refused by Redis at the same readings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shield_refuses_a_refused_bucket_until_it_conforms() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(1_000_000_000_000);
    let set = |shield: usize| {
        Policies::<str>::builder()
            .policy(per_key("user").quota("1/s burst 3".parse().unwrap()))
            .on(server.backend().prefix("shield").shield(shield), &clock)
    };
    let (shielded, other) = (set(4096), set(0));
    let check = |limiter: &RedisLimiter<str, ManualClock>, n: u32| {
        let limiter = limiter.clone();
        async move { limiter.check_n("hot", n).await.unwrap() }
    };
    assert!(check(&shielded, 2).await.is_allowed());
    // One cell left: 2 are refused by Redis (1 s), then by the shield, as often as asked.
    assert_eq!(check(&shielded, 2).await.source(), Source::Buckets);
    let calls = shielded.stats().round_trips;
    for _ in 0..100 {
        let verdict = check(&shielded, 2).await;
        assert_eq!(verdict.source(), Source::Shield);
        assert_eq!(refused(&verdict).conforms_after(), Duration::from_secs(1));
        assert_eq!(refused(&verdict).by().map(|by| by.policy()), Some("user"));
    }
    assert_eq!(
        shielded.stats().round_trips,
        calls,
        "no call while shielded"
    );
    assert_eq!(shielded.stats().shielded, 100);
    // The other process is refused by Redis itself.
    assert_eq!(check(&other, 2).await.source(), Source::Buckets);
    assert!(!check(&other, 2).await.is_allowed());
    // Fewer cells go to Redis: the one left is taken.
    let one = check(&shielded, 1).await;
    assert_eq!((one.is_allowed(), one.source()), (true, Source::Buckets));
    // 999 ms on, still shielded, and Redis refuses the other process too: nothing was lost.
    clock.advance(Duration::from_millis(999));
    assert_eq!(check(&shielded, 2).await.source(), Source::Shield);
    assert!(!check(&other, 2).await.is_allowed());
    // At 1 s the entry ends and Redis decides: 1 cell came, not 2 (the last one was taken),
    // so Redis refuses, and the shield takes over again.
    clock.advance(Duration::from_millis(1));
    let verdict = check(&shielded, 2).await;
    assert_eq!(
        (verdict.is_allowed(), verdict.source()),
        (false, Source::Buckets)
    );
    assert_eq!(check(&shielded, 2).await.source(), Source::Shield);
    // A reset forgets the bucket: Redis decides, on a full bucket.
    flowgate::backend::Backend::reset(&shielded, "hot")
        .await
        .unwrap();
    let verdict = check(&shielded, 3).await;
    assert_eq!(
        (verdict.is_allowed(), verdict.source()),
        (true, Source::Buckets)
    );
}

/// With leases the shield is off (a lease given back puts cells back into a bucket Redis
/// refused, which the shield could not see): bob, refused by Redis on the global bucket he
/// emptied, keeps being asked of Redis, and alice spends the cells her lease holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_leases_the_shield_is_off() {
    let bob_only = |user: &str, key: &mut flowgate::policy::Key| {
        if user == "bob" {
            key.add(user);
        } else {
            key.skip();
        }
    };
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(1_000_000_000_000);
    let limiter = Policies::<str>::builder()
        .policy(per_key("user").quota("100/h".parse().unwrap()))
        .policy(Policy::global("all").quota("10/h".parse().unwrap()))
        .policy(
            Policy::keyed_with("trial", bob_only)
                .quota("1/h".parse().unwrap())
                .dry_run(true),
        )
        .on(
            server
                .backend()
                .prefix("lease-shield")
                .lease(5, Duration::from_secs(600)),
            &clock,
        );
    let check = |user: &'static str| {
        let limiter = limiter.clone();
        async move { limiter.check(user).await.unwrap() }
    };
    // alice leases 5 of the 10 global cells and spends one; bob takes the other 5 one by one.
    assert_eq!(check("alice").await.source(), Source::Buckets);
    for _ in 0..5 {
        let verdict = check("bob").await;
        assert_eq!(
            (verdict.is_allowed(), verdict.source()),
            (true, Source::Buckets)
        );
    }
    // bob's next are refused by Redis (the global bucket is empty), every time.
    let refused_by_redis = check("bob").await;
    assert_eq!(
        (refused_by_redis.is_allowed(), refused_by_redis.source()),
        (false, Source::Buckets)
    );
    assert_eq!(check("bob").await.source(), Source::Buckets);
    // alice's lease still holds 4 cells.
    for _ in 0..4 {
        let verdict = check("alice").await;
        assert_eq!(
            (verdict.is_allowed(), verdict.source()),
            (true, Source::Lease)
        );
    }
    assert_eq!(limiter.stats().shielded, 0);
}

/// A shield entry lasts a second at most, however long the refusal's wait: what the shield
/// cannot see (cells given back by a process configured otherwise, a reset elsewhere) costs
/// at most that. Its refusals say when the bucket conforms all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shield_entry_lasts_a_second_at_most() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(1_000_000_000_000);
    let limiter = Policies::<str>::builder()
        .policy(per_key("user").quota("1/min".parse().unwrap()))
        .on(server.backend().prefix("shield-second"), &clock);
    assert!(limiter.check("hot").await.unwrap().is_allowed());
    let first = limiter.check("hot").await.unwrap();
    assert_eq!(
        (first.is_allowed(), first.source()),
        (false, Source::Buckets)
    );
    assert_eq!(refused(&first).conforms_after(), Duration::from_secs(60));
    clock.advance(Duration::from_millis(999));
    let shielded = limiter.check("hot").await.unwrap();
    assert_eq!(shielded.source(), Source::Shield);
    // It reports when the bucket conforms, not when the entry ends.
    assert_eq!(
        refused(&shielded).conforms_after(),
        Duration::from_millis(59_001)
    );
    clock.advance(Duration::from_millis(1));
    let again = limiter.check("hot").await.unwrap();
    assert_eq!(
        (again.is_allowed(), again.source()),
        (false, Source::Buckets)
    );
    assert_eq!(refused(&again).conforms_after(), Duration::from_secs(59));
}
