//! `RedisLimiter::check_up_to` and `Backend::check_up_to` against a real `redis-server`:
//! the tightest enforcing quota sets the count, for every kind of bucket the script keeps;
//! dry-run policies do not limit it; `n` above the burst and `n = 0`; the refusal of one cell;
//! decision for decision the same counts and outcomes as the in-process `Policies::check_up_to`;
//! the failure policies; and concurrent takers that never take more than a bucket holds.

// The cluster harness holds the server harness: one copy of it.
#[path = "support/redis_cluster.rs"]
mod redis_cluster;
use redis_cluster::redis_server;

use std::time::Duration;

use flowgate::algorithm::AnyAlgorithm;
use flowgate::backend::Backend;
use flowgate::clock::ManualClock;
use flowgate::policy::{Policies, PoliciesBuilder, Policy};
use flowgate::Quota;
use flowgate_redis::AnyPolicies;
use flowgate_redis::BuildRedis as _;
use flowgate_redis::{OnFailure, RedisBackend, RedisLimiter, Source, Verdict};
use redis_server::{nobody, RedisServer};

#[derive(Debug, Clone)]
struct Request {
    user: &'static str,
    endpoint: &'static str,
}

fn algorithm(text: &str) -> AnyAlgorithm {
    text.parse().unwrap()
}

fn per_key(name: &str) -> Policy<str> {
    Policy::keyed(name, |key: &str| key)
}

/// A limiter deciding at `clock`'s readings (the script is given the client's time).
fn on_clock<R: ?Sized + 'static>(
    builder: PoliciesBuilder<R>,
    server: &RedisServer,
    prefix: &str,
    clock: &ManualClock,
) -> RedisLimiter<R, ManualClock> {
    let backend = server.backend().prefix(prefix).client_time(true);
    builder.clock(clock.clone()).build_redis(backend).unwrap()
}

/// The cells taken, or `None` for a refusal (which must take none).
fn taken((taken, verdict): (u32, Verdict)) -> Option<u32> {
    assert_eq!(verdict.source(), Source::Buckets);
    if verdict.is_allowed() {
        Some(taken)
    } else {
        assert_eq!(taken, 0, "a refusal takes nothing");
        None
    }
}

/// Every kind of bucket the script keeps gives what it holds, even when more is asked for
/// than its burst, and then refuses one cell with the in-process wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_bucket_gives_what_it_holds() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(1_000_000_000_000);
    // Each kind's most for one request, and all it holds (a shaper queues beyond its burst,
    // credit lends up to its debt).
    for (kind, most, all) in [
        ("10/s", 10, 10),
        ("4/s fixed", 4, 4),
        ("2/700ms burst 5 interval", 5, 5),
        ("6/1500ms sliding", 6, 6),
        ("300/min leaky", 300, 300),
        ("5/s burst 2 shaper 900ms", 2, 6),
        ("20/s burst 3 credit 400ms", 11, 11),
    ] {
        let builder = Policies::<str>::builder().policy(per_key("k").quota_with(algorithm(kind)));
        let limiter = on_clock(builder, &server, "kinds", &clock);
        let key = kind.to_owned();
        assert_eq!(taken(limiter.check_up_to(&key, 0).await), Some(0), "{kind}");
        assert_eq!(
            taken(limiter.check_up_to(&key, 1_000).await),
            Some(most),
            "{kind}"
        );
        let mut total = most;
        while let Some(k) = taken(limiter.check_up_to(&key, 1_000).await) {
            total += k;
        }
        assert_eq!(total, all, "{kind}");
        let (none, verdict) = limiter.check_up_to(&key, 3).await;
        assert_eq!(none, 0, "{kind}");
        let refused = verdict.outcome().expect_err("an empty bucket refuses");
        assert!(refused.retry_after() > Duration::ZERO, "{kind}");
        assert_eq!(refused.by().map(|by| by.policy()), Some("k"), "{kind}");
    }
}

/// n = 0 takes nothing and reports the bucket; fewer than the bucket holds takes exactly n.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn takes_n_when_the_bucket_holds_more_and_nothing_for_zero() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(1_000_000_000_000);
    let builder =
        Policies::<str>::builder().policy(per_key("k").quota(Quota::per_second(10).unwrap()));
    let limiter = on_clock(builder, &server, "small", &clock);
    let (zero, verdict) = limiter.check_up_to("a", 0).await;
    assert_eq!((zero, verdict.outcome().unwrap().remaining()), (0, 10));
    assert_eq!(taken(limiter.check_up_to("a", 3).await), Some(3));
    let (three, verdict) = limiter.check_up_to("a", 3).await;
    assert_eq!((three, verdict.outcome().unwrap().remaining()), (3, 4));
    assert_eq!(taken(limiter.check_up_to("a", 9).await), Some(4));
    assert_eq!(taken(limiter.check_up_to("a", 9).await), None);
    // 250 ms later, 2.5 cells have come back: 2.
    clock.advance(Duration::from_millis(250));
    assert_eq!(taken(limiter.check_up_to("a", 9).await), Some(2));
}

/// Several quotas and layered policies: the tightest sets the count, and the refusal names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tightest_quota_of_every_policy_sets_the_count() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(1_000_000_000_000);
    let builder = Policies::<Request>::builder()
        .policy(
            Policy::keyed("user", |r: &Request| r.user)
                .quota(Quota::per_second(10).unwrap())
                .quota_with(algorithm("8/s fixed")),
        )
        .policy(
            Policy::keyed("endpoint", |r: &Request| r.endpoint)
                .quota_with(algorithm("12/2s sliding")),
        )
        .policy(Policy::global("all").quota(Quota::per_second(15).unwrap()));
    let limiter = on_clock(builder, &server, "layers", &clock);
    let alice = Request {
        user: "alice",
        endpoint: "/a",
    };
    let bob = Request {
        user: "bob",
        endpoint: "/a",
    };
    let carol = Request {
        user: "carol",
        endpoint: "/b",
    };
    // alice: the fixed window of 8 is the tightest.
    assert_eq!(taken(limiter.check_up_to(&alice, 20).await), Some(8));
    // bob on /a: the sliding window has 12 - 8 = 4 left.
    assert_eq!(taken(limiter.check_up_to(&bob, 20).await), Some(4));
    // carol on /b: the global bucket has 15 - 12 = 3 left.
    assert_eq!(taken(limiter.check_up_to(&carol, 20).await), Some(3));
    let (_, verdict) = limiter.check_up_to(&carol, 20).await;
    assert_eq!(
        verdict.outcome().unwrap_err().by().map(|by| by.policy()),
        Some("all")
    );
}

/// A dry-run policy neither limits the count nor refuses; one that would refuse the count
/// takes nothing and is reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_policies_do_not_limit_the_count() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(1_000_000_000_000);
    let builder = Policies::<str>::builder()
        .policy(
            Policy::global("trial")
                .quota(Quota::per_second(3).unwrap())
                .dry_run(true),
        )
        .policy(per_key("user").quota(Quota::per_second(8).unwrap()));
    let limiter = on_clock(builder, &server, "dry", &clock);
    let (eight, verdict) = limiter.check_up_to("alice", 20).await;
    assert_eq!(eight, 8, "the dry run's 3 do not limit the count");
    let allowed = verdict.outcome().unwrap();
    assert_eq!(allowed.dry_run().map(|d| d.by().policy()), Some("trial"));
    // The dry run took nothing: it holds 3 and admits bob's 2 without a report.
    let (two, verdict) = limiter.check_up_to("bob", 2).await;
    assert_eq!(two, 2);
    assert_eq!(verdict.outcome().unwrap().dry_run(), None);
    // Now it holds 1: bob's next 5 are admitted, the dry run reported again.
    let (five, verdict) = limiter.check_up_to("bob", 5).await;
    assert_eq!(five, 5);
    assert!(verdict.outcome().unwrap().dry_run().is_some());
}

/// Random requests (n from 0 to far above every burst, at random gaps) through Redis and the
/// in-process set of the same algorithms: the same counts and the same outcomes, with dry-run
/// policies before and between enforcing ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_exactly_like_the_in_process_set() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(1_000_000_000_000);
    let policies = |all: [Vec<AnyAlgorithm>; 4]| {
        let [trial, user, endpoint, global] = all;
        let with = |mut policy: Policy<Request>, algorithms: Vec<AnyAlgorithm>| {
            for a in algorithms {
                policy = policy.quota_with(a);
            }
            policy
        };
        Policies::<Request>::builder()
            .policy(with(Policy::keyed("trial", |r: &Request| r.user), trial).dry_run(true))
            .policy(with(Policy::keyed("user", |r: &Request| r.user), user))
            .policy(
                with(
                    Policy::keyed("trial-endpoint", |r: &Request| r.endpoint),
                    endpoint,
                )
                .dry_run(true),
            )
            .policy(with(Policy::global("global"), global))
    };
    let limiter = on_clock(
        policies([
            vec![algorithm("3/s burst 4")],
            vec![
                algorithm("4/s burst 6"),
                algorithm("5/s fixed"),
                algorithm("3/700ms burst 7 interval"),
            ],
            vec![algorithm("6/1500ms sliding")],
            vec![algorithm("9/1200ms sliding"), algorithm("333/min")],
        ]),
        &server,
        "agree",
        &clock,
    );
    let names = ["trial", "user", "trial-endpoint", "global"];
    let twin = policies(names.map(|name| limiter.algorithms(name).unwrap()))
        .clock(clock.clone())
        .build()
        .unwrap();
    agree(&limiter, &twin, &clock, 700_000, 20).await;
}

/// Shapers and credit count the cells they would queue or lend, as in process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shapers_count_exactly_like_the_in_process_set() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(1_000_000_000_000);
    let policies = |user: Vec<AnyAlgorithm>, endpoint: Vec<AnyAlgorithm>| {
        let mut a = Policy::keyed("shaped", |r: &Request| r.user);
        for x in user {
            a = a.quota_with(x);
        }
        let mut b = Policy::keyed("credit", |r: &Request| r.endpoint);
        for x in endpoint {
            b = b.quota_with(x);
        }
        Policies::<Request>::builder().policy(a).policy(b)
    };
    let limiter = on_clock(
        policies(
            vec![
                algorithm("5/s burst 2 shaper 900ms"),
                algorithm("300/min leaky"),
            ],
            vec![algorithm("20/s burst 3 credit 400ms")],
        ),
        &server,
        "shapers",
        &clock,
    );
    let twin = policies(
        limiter.algorithms("shaped").unwrap(),
        limiter.algorithms("credit").unwrap(),
    )
    .clock(clock.clone())
    .build()
    .unwrap();
    agree(&limiter, &twin, &clock, 300_000, 12).await;
}

/// Runs 500 random requests, 0 to `gap` µs apart and of 0 to `most` cells, through `limiter`
/// and `twin`, requiring the same count, the same admission (tightest quota, gauge, delay,
/// dry-run report) or the same refusal (quota, gauge, wait, dry-run report).
async fn agree(
    limiter: &RedisLimiter<Request, ManualClock>,
    twin: &Policies<Request, ManualClock>,
    clock: &ManualClock,
    gap: u64,
    most: u64,
) {
    let users = ["alice", "bob"];
    let endpoints = ["/a", "/b"];
    let mut random = 7u64;
    let mut below = |n: u64| {
        random = random
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (random >> 33) % n
    };
    let (mut partial, mut refusals, mut dry_runs) = (0, 0, 0);
    for step in 0..500 {
        clock.advance(Duration::from_micros(below(gap)));
        let r = Request {
            user: users[below(2) as usize],
            endpoint: endpoints[below(2) as usize],
        };
        let n = below(most + 1) as u32;
        flowgate::policy::seed_jitter(step);
        let (count, verdict) = limiter.check_up_to(&r, n).await;
        flowgate::policy::seed_jitter(step);
        let local = twin.check_up_to(&r, n);
        let context = format!("step {step}: {r:?} n={n}");
        assert_eq!(verdict.source(), Source::Buckets, "{context}");
        match (verdict.outcome(), local) {
            (Ok(remote), Ok((k, local))) => {
                assert_eq!(count, k, "{context}");
                assert_eq!(remote.gauge(), local.gauge(), "{context}");
                assert_eq!(
                    remote.by().map(|by| by.policy()),
                    local.by().map(|by| by.policy()),
                    "{context}"
                );
                assert_eq!(remote.delay(), local.delay(), "{context}");
                assert_eq!(remote.dry_run(), local.dry_run(), "{context}");
                partial += usize::from(k > 0 && k < n);
                dry_runs += usize::from(local.dry_run().is_some());
            }
            (Err(remote), Err(local)) => {
                assert_eq!(count, 0, "{context}");
                assert_eq!(remote.retry_after(), local.retry_after(), "{context}");
                assert_eq!(remote.gauge(), local.gauge(), "{context}");
                assert_eq!(
                    remote.by().map(|by| by.policy()),
                    local.by().map(|by| by.policy()),
                    "{context}"
                );
                assert_eq!(remote.dry_run(), local.dry_run(), "{context}");
                refusals += 1;
            }
            (remote, local) => panic!("{context}: Redis {count} {remote:?}, in-process {local:?}"),
        }
    }
    assert!(
        partial > 50,
        "{partial} requests were given part of what they asked"
    );
    assert!(refusals > 30, "{refusals} refusals");
    let dry = twin.stats().iter().any(|policy| policy.dry_run);
    assert_eq!(dry_runs > 20, dry, "{dry_runs} dry-run reports");
}

/// When Redis does not answer: the local share takes up to n by its own count, failing open
/// admits all n, failing closed refuses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_failure_policy_decides_when_redis_is_away() {
    let build = |on_failure| {
        Policies::<str>::builder()
            .policy(per_key("k").quota(Quota::per_hour(10).unwrap()))
            .build_redis(RedisBackend::new(nobody()).on_failure(on_failure))
            .unwrap()
    };
    let local = build(OnFailure::Local { share: 0.5 });
    // Half of a burst of 10: 5 cells, then refusals.
    let (five, verdict) = local.check_up_to("k", 8).await;
    assert!(matches!(verdict.source(), Source::Local(_)), "{verdict:?}");
    assert_eq!((five, verdict.is_allowed()), (5, true));
    let (none, verdict) = local.check_up_to("k", 8).await;
    assert!(matches!(verdict.source(), Source::Local(_)), "{verdict:?}");
    assert_eq!((none, verdict.is_allowed()), (0, false));

    let open = build(OnFailure::Open);
    let (all, verdict) = open.check_up_to("k", 80).await;
    assert!(
        matches!(verdict.source(), Source::FailedOpen(_)),
        "{verdict:?}"
    );
    assert_eq!((all, verdict.is_allowed()), (80, true));

    let closed = build(OnFailure::Closed {
        retry_after: Duration::from_secs(1),
    });
    let (none, verdict) = closed.check_up_to("k", 8).await;
    assert!(
        matches!(verdict.source(), Source::FailedClosed(_)),
        "{verdict:?}"
    );
    assert_eq!((none, verdict.is_allowed()), (0, false));
}

/// Takers racing on one key (six tasks, at the server's clock) take every cell the buckets
/// hold and not one more: 100 from a day's GCRA bucket, of which a day's sliding window of 70
/// lets 70 through. Each asks for 9, which neither total divides: some taker is given part of
/// what it asked (the count and the take in one call, or it would take what another took).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_takers_never_take_more_than_the_buckets_hold() {
    let server = RedisServer::start();
    for (prefix, window, expected) in [
        ("race-gcra", "200/day", 100),
        ("race-sliding", "70/day sliding", 70),
    ] {
        let limiter = Policies::<str>::builder()
            .policy(per_key("k").quota(Quota::per_day(100).unwrap()))
            .policy(Policy::global("all").quota_with(algorithm(window)))
            .build_redis(
                server
                    .backend()
                    .prefix(prefix)
                    .timeout(Duration::from_secs(5)),
            )
            .unwrap();
        let tasks: Vec<_> = (0..6)
            .map(|_| {
                let limiter = limiter.clone();
                tokio::spawn(async move {
                    let (mut total, mut partial) = (0, 0);
                    loop {
                        let (k, verdict) = limiter.check_up_to("hot", 9).await;
                        assert_eq!(verdict.source(), Source::Buckets, "{verdict:?}");
                        if !verdict.is_allowed() {
                            return (total, partial);
                        }
                        assert!((1..=9).contains(&k), "{k}");
                        total += k;
                        partial += u32::from(k < 9);
                    }
                })
            })
            .collect();
        let (mut sum, mut partial) = (0, 0);
        for task in tasks {
            let (total, part) = task.await.unwrap();
            sum += total;
            partial += part;
        }
        assert_eq!(sum, expected, "{prefix}");
        assert_eq!(partial, 1, "{prefix}: one partial take empties the bucket");
    }
}

/// `Backend::check_up_to` of an `AnyPolicies` delegates to either backend, with the same answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_policies_takes_up_to_n_on_either_backend() {
    let server = RedisServer::start();
    let set = || Policies::<str>::builder().policy(per_key("user").quota("5/min".parse().unwrap()));
    let redis = server.backend().prefix("any");
    let sets = [
        AnyPolicies::from(set().build().unwrap()),
        AnyPolicies::from(set().build_redis(redis).unwrap()),
    ];
    for limits in sets {
        let name = limits.backend_name();
        let (zero, state) = limits.check_up_to("alice", 0).await;
        assert_eq!(
            (zero, state.outcome().unwrap().remaining()),
            (0, 5),
            "{name}"
        );
        assert_eq!(limits.check_up_to("alice", 3).await.0, 3, "{name}");
        assert_eq!(limits.check_up_to("alice", 8).await.0, 2, "{name}");
        let refused = limits
            .check_up_to("alice", 8)
            .await
            .1
            .outcome()
            .unwrap_err();
        assert_eq!(refused.by().map(|by| by.policy()), Some("user"), "{name}");
    }
}

/// Redis Cluster (feature `redis-cluster`): a decision over a per-user and a global policy
/// spans two slots, where no call sees every bucket. The count is made on each slot and taken
/// across them: one sequence of requests gets the same counts as on one server, and racing
/// takers never take more than the buckets hold.
mod cluster {
    use std::time::Duration;

    use super::redis_cluster::redis_server::RedisServer;
    use super::redis_cluster::RedisCluster;
    use flowgate::clock::ManualClock;
    use flowgate::policy::{Policies, Policy};
    use flowgate::Quota;
    use flowgate_redis::{BuildRedis as _, RedisBackend, RedisLimiter, Source};

    fn build(backend: RedisBackend, clock: &ManualClock) -> RedisLimiter<str, ManualClock> {
        Policies::<str>::builder()
            .clock(clock.clone())
            .policy(
                Policy::keyed("user", |user: &str| user)
                    .quota(Quota::per_second(2).unwrap().with_burst(6).unwrap()),
            )
            .policy(
                Policy::keyed("trial", |user: &str| user)
                    .quota(Quota::per_second(1).unwrap().with_burst(2).unwrap())
                    .dry_run(true),
            )
            .policy(
                Policy::global("all").quota_with(
                    "9/2s sliding"
                        .parse::<flowgate::algorithm::AnyAlgorithm>()
                        .unwrap(),
                ),
            )
            .build_redis(backend.client_time(true).timeout(Duration::from_secs(10)))
            .unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn across_slots_counts_like_one_server_and_never_over_takes() {
        let cluster = RedisCluster::start();
        let server = RedisServer::start();
        let clock = ManualClock::starting_at(1_000_000_000_000);
        let one = build(server.backend(), &clock);
        let many = build(RedisBackend::cluster(cluster.seed_urls()).unwrap(), &clock);
        assert_ne!(
            cluster.slot_of("{flowgate:user:a}:0"),
            cluster.slot_of("{flowgate:all}:0")
        );
        let mut seed = 7_u64;
        let mut next = move |below: u64| {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            (seed >> 33) % below
        };
        let (mut partial, mut refused, mut dry) = (0, 0, 0);
        for step in 0..300 {
            let user = ["a", "b", "c"][next(3) as usize];
            let n = next(9) as u32;
            let (a, (k, b)) = (
                one.check_up_to(user, n).await,
                many.check_up_to(user, n).await,
            );
            let context = format!("step {step}: {user} n={n}");
            assert_eq!(b.source(), Source::Buckets, "{context}");
            assert_eq!((a.0, a.1.is_allowed()), (k, b.is_allowed()), "{context}");
            match (a.1.outcome(), b.outcome()) {
                (Ok(x), Ok(y)) => {
                    assert_eq!(x.remaining(), y.remaining(), "{context}");
                    assert_eq!(x.dry_run().is_some(), y.dry_run().is_some(), "{context}");
                    dry += usize::from(x.dry_run().is_some());
                }
                (Err(_), Err(y)) => {
                    // Across slots the first refusing policy is named (one server names the
                    // longest wait's): the module docs' one difference.
                    assert_ne!(y.by().map(|by| by.policy()), Some("trial"), "{context}");
                    refused += 1;
                }
                (x, y) => panic!("{context}: {x:?} {y:?}"),
            }
            partial += usize::from(k > 0 && k < n);
            clock.advance(Duration::from_millis(next(400)));
        }
        assert!(
            partial > 20 && refused > 20 && dry > 20,
            "{partial} partial, {refused} refused, {dry} dry runs"
        );
        // One answer per decision, however many counts and takes a decision across slots made.
        for limiter in [&one, &many] {
            let stats = limiter.stats();
            assert_eq!(stats.answered, stats.decisions, "{stats:?}");
        }

        // Racing takers across the two slots: never more than the global window's 9 in all.
        clock.advance(Duration::from_secs(10));
        let tasks: Vec<_> = (0..4)
            .map(|t| {
                let many = many.clone();
                tokio::spawn(async move {
                    let user = ["w", "x", "y", "z"][t];
                    let mut total = 0;
                    loop {
                        let (k, verdict) = many.check_up_to(user, 4).await;
                        assert_eq!(verdict.source(), Source::Buckets, "{verdict:?}");
                        if !verdict.is_allowed() {
                            return total;
                        }
                        total += k;
                    }
                })
            })
            .collect();
        let mut sum = 0;
        for task in tasks {
            sum += task.await.unwrap();
        }
        assert!((1..=9).contains(&sum), "{sum} taken from a window of 9");
        let stats = many.stats();
        assert_eq!(
            stats.answered, stats.decisions,
            "after racing takes: {stats:?}"
        );
    }
}
