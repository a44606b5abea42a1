//! Redis Cluster (feature `redis-cluster`) against a real 3-master cluster with one replica
//! each (`tests/support/redis_cluster.rs`): decisions agree with one server's on the same
//! sequence, a decision across slots is all or nothing (the undo puts back exactly what it
//! took), a slot moved under load loses no decision and admits nothing extra, a failure between
//! two slots costs cells but never admits extra, and a killed master fails over.

#[path = "support/redis_cluster.rs"]
mod redis_cluster;

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use flowgate::clock::{Clock, ManualClock};
use flowgate::policy::{Policies, PoliciesBuilder, Policy};
use flowgate::Quota;
use flowgate_redis::BuildRedis as _;
use flowgate_redis::{
    BreakerState, Failure, OnFailure, RedisBackend, RedisConfigError, RedisLimiter,
    RedisSlidingLog, Source,
};
use redis_cluster::redis_server::RedisServer;
use redis_cluster::{ClusterNode, RedisCluster};

/// One cluster at a time: six servers per cluster on a 2-core machine, and a cluster starved of
/// CPU can take a slow master for a failed one (the node timeout is 500 ms).
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A per-user policy and a global one: two slots per decision in a cluster.
fn layered<C: Clock>(builder: PoliciesBuilder<str, C>, global: Quota) -> PoliciesBuilder<str, C> {
    builder
        .policy(
            Policy::keyed("user", |user: &str| user)
                .quota(Quota::per_second(2).unwrap().with_burst(3).unwrap()),
        )
        .policy(Policy::global("all").quota(global))
}

/// The cluster as a backend that waits up to 10 s for an answer: on a busy machine a call is
/// answered late, never decided by the failure policy instead (tests of outages set their own).
fn cluster_backend(cluster: &RedisCluster) -> RedisBackend {
    RedisBackend::cluster(cluster.seed_urls())
        .unwrap()
        .timeout(Duration::from_secs(10))
}

/// The value of `key` on the node that serves it (`None`: missing).
fn value(cluster: &RedisCluster, key: &str) -> Option<String> {
    let node = cluster.node_for_slot(cluster.slot_of(key));
    value_on(cluster, &node, key)
}

/// The value of `key` on `node`, asking no other node.
fn value_on(cluster: &RedisCluster, node: &ClusterNode, key: &str) -> Option<String> {
    cluster.command(node, redis::cmd("GET").arg(key)).unwrap()
}

fn signal(node: &ClusterNode, signal: &str) {
    let status = Command::new("kill")
        .args([signal, &node.pid.to_string()])
        .status()
        .expect("kill(1) runs");
    assert!(status.success(), "kill {signal} {}", node.pid);
}

/// A user whose bucket is served by another master than `other`'s slot.
fn user_away_from(cluster: &RedisCluster, other: &str) -> String {
    let away = cluster.node_for_slot(cluster.slot_of(other));
    (0..100)
        .map(|i| format!("u{i}"))
        .find(|user| {
            cluster.node_for_slot(cluster.slot_of(&format!("{{flowgate:user:{user}}}:0"))) != away
        })
        .expect("a user on another master")
}

/// One sequence of requests (users, sizes, clock steps) through a single server and through
/// the cluster, both at the same manual clock: the same decisions, and where both admit the
/// same room left. The global quota refuses often, so the per-user buckets are undone often:
/// an undo that put back too little would starve a user that one server still admits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_agree_with_one_server() {
    let _serial = SERIAL.lock().await;
    let cluster = RedisCluster::start();
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(1_000_000_000_000);
    let global = Quota::per_second(5).unwrap().with_burst(4).unwrap();
    let build = |backend: RedisBackend| -> RedisLimiter<str, ManualClock> {
        layered(Policies::<str>::builder().clock(clock.clone()), global)
            .build_redis(backend.client_time(true).timeout(Duration::from_secs(10)))
            .unwrap()
    };
    // Without the shield: every decision is compared as Redis makes it, slot by slot.
    let build = |backend: RedisBackend| build(backend.shield(0));
    let one = build(server.backend());
    let many = build(cluster_backend(&cluster));
    // The two policies' buckets live in different slots.
    assert_ne!(
        cluster.slot_of("{flowgate:user:a}:0"),
        cluster.slot_of("{flowgate:all}:0")
    );
    let mut seed = 7_u64;
    let mut next = move |below: u64| {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        (seed >> 33) % below
    };
    let (mut admitted, mut refused) = (0, 0);
    for step in 0..400 {
        let user = ["a", "b", "c"][next(3) as usize];
        let n = 1 + next(2) as u32;
        let (a, b) = (
            one.check_n(user, n).await.unwrap(),
            many.check_n(user, n).await.unwrap(),
        );
        assert_eq!(b.source(), Source::Buckets, "step {step}");
        assert_eq!(a.is_allowed(), b.is_allowed(), "step {step}: {user} n={n}");
        match (a.outcome(), b.outcome()) {
            (Ok(x), Ok(y)) => {
                assert_eq!(x.remaining(), y.remaining(), "step {step}");
                admitted += 1;
            }
            _ => refused += 1,
        }
        clock.advance(Duration::from_millis(next(150)));
    }
    assert!(
        admitted > 50 && refused > 50,
        "{admitted} admitted, {refused} refused"
    );
    let undone = many.stats().undone;
    assert!(
        undone > 0,
        "refusals by the global quota undo the users' takes"
    );
}

/// A refusal in the second slot puts the first slot's bucket back exactly as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_in_a_later_slot_undoes_the_earlier_take() {
    let _serial = SERIAL.lock().await;
    let cluster = RedisCluster::start();
    // Without the shield: the refusals below must reach the second slot.
    let backend = cluster_backend(&cluster).shield(0);
    let limiter = layered(Policies::<str>::builder(), Quota::per_hour(1).unwrap())
        .build_redis(backend.timeout(Duration::from_secs(10)))
        .unwrap();
    let user_key = "{flowgate:user:alice}:0";
    assert!(limiter.check("alice").await.unwrap().is_allowed());
    let after_first = value(&cluster, user_key);
    assert!(after_first.is_some(), "the first decision took a cell");
    // The global quota is spent: every later decision is refused in the second slot.
    for _ in 0..3 {
        let verdict = limiter.check("alice").await.unwrap();
        assert_eq!(verdict.source(), Source::Buckets);
        let refused = verdict.outcome().unwrap_err();
        assert_eq!(refused.by().map(|by| by.policy()), Some("all"));
        assert_eq!(value(&cluster, user_key), after_first, "put back exactly");
    }
    assert_eq!(limiter.stats().undone, 3);
    // The sliding log routes by its key too: 3 per window, wherever the key lives.
    let log = RedisSlidingLog::new(
        cluster_backend(&cluster).timeout(Duration::from_secs(10)),
        "log",
        Quota::per_hour(3).unwrap(),
    )
    .unwrap();
    for key in ["alice", "bob", "carol"] {
        let mut admitted = 0;
        for _ in 0..5 {
            let verdict = log.check(key).await.unwrap();
            assert_eq!(verdict.source(), Source::Buckets, "{key}");
            admitted += u32::from(verdict.is_allowed());
        }
        assert_eq!(admitted, 3, "{key}");
    }
}

/// The global bucket's slot moves to another master while 8 tasks decide: every decision comes
/// from Redis (`MOVED` and `ASK` followed), and exactly the global burst is admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_moved_under_load_loses_no_decision_and_admits_nothing_extra() {
    let _serial = SERIAL.lock().await;
    const BURST: u32 = 300;
    let cluster = Arc::new(RedisCluster::start());
    let global = Quota::per_day(BURST).unwrap();
    let limiter = layered(Policies::<str>::builder(), global)
        .build_redis(cluster_backend(&cluster).timeout(Duration::from_secs(10)))
        .unwrap();
    let hot = "{flowgate:all}:0";
    let slot = cluster.slot_of(hot);
    let from = cluster.node_for_slot(slot);
    let to = (cluster.masters().into_iter())
        .find(|m| *m != from)
        .expect("another master");
    // Warm: the hot key exists before the move.
    assert!(limiter.check("warm").await.unwrap().is_allowed());
    let admitted = Arc::new(AtomicU32::new(1));
    let decisions = Arc::new(AtomicU32::new(1));
    let tasks: Vec<_> = (0..8)
        .map(|task| {
            let (limiter, admitted, decisions) =
                (limiter.clone(), admitted.clone(), decisions.clone());
            tokio::spawn(async move {
                let mut sources = Vec::new();
                for i in 0..80 {
                    // Users rotate so that no user quota binds (3 per user at most here).
                    let user = format!("t{task}-{}", i % 40);
                    let verdict = limiter.check(&user).await.unwrap();
                    decisions.fetch_add(1, Ordering::Relaxed);
                    if verdict.is_allowed() {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                    sources.push(verdict.source());
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                sources
            })
        })
        .collect();
    let mover = {
        let (cluster, to) = (cluster.clone(), to.clone());
        tokio::task::spawn_blocking(move || {
            std::thread::sleep(Duration::from_millis(50));
            let migration = cluster.begin_migration(slot, &from, &to);
            // Decisions meet the slot half moved (ASK) for a while.
            std::thread::sleep(Duration::from_millis(100));
            let moved = cluster.move_keys(&migration, usize::MAX);
            std::thread::sleep(Duration::from_millis(100));
            cluster.finish_migration(&migration);
            moved
        })
    };
    let moved = mover.await.unwrap();
    let mut sources = Vec::new();
    for task in tasks {
        sources.extend(task.await.unwrap());
    }
    assert!(moved >= 1, "the hot key moved");
    assert_eq!(cluster.node_for_slot(slot), to);
    // The shield refuses what Redis refused: decided by Redis too.
    let from_redis = |s: &&Source| matches!(s, Source::Buckets | Source::Shield);
    let elsewhere: Vec<_> = sources.iter().filter(|s| !from_redis(s)).collect();
    assert!(
        elsewhere.is_empty(),
        "{} decisions not from Redis, the first {:?}",
        elsewhere.len(),
        elsewhere.first()
    );
    assert_eq!(decisions.load(Ordering::Relaxed), 641);
    assert_eq!(
        admitted.load(Ordering::Relaxed),
        BURST,
        "exactly the global burst"
    );
}

/// The second slot's master hangs (`SIGSTOP`) after the first slot took: the decision follows
/// the failure policy, the first slot's bucket is put back, and the hung call, which runs when
/// the master continues, keeps its cells (fewer admissions, never more).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_between_slots_costs_cells_and_never_admits_extra() {
    let _serial = SERIAL.lock().await;
    let cluster = RedisCluster::start();
    let hot = "{flowgate:all}:0";
    let user = user_away_from(&cluster, hot);
    let user_key = format!("{{flowgate:user:{user}}}:0");
    let global_node = cluster.node_for_slot(cluster.slot_of(hot));
    let limiter = layered(Policies::<str>::builder(), Quota::per_day(10).unwrap())
        .build_redis(
            // Short: the stopped master must continue before the cluster (node timeout
            // 500 ms) takes it for failed and fails it over.
            cluster_backend(&cluster)
                .timeout(Duration::from_millis(100))
                .on_failure(OnFailure::Closed {
                    retry_after: Duration::from_secs(1),
                }),
        )
        .unwrap();
    let user_node = cluster.node_for_slot(cluster.slot_of(&user_key));
    assert!(limiter.check(&user).await.unwrap().is_allowed());
    let before = value_on(&cluster, &user_node, &user_key);
    let global_before = value_on(&cluster, &global_node, hot);
    signal(&global_node, "-STOP");
    let verdict = limiter.check(&user).await.unwrap();
    assert!(
        matches!(verdict.source(), Source::FailedClosed(_)),
        "{:?}",
        verdict.source()
    );
    // The undo runs in the background, within one timeout. (Only the user's node is asked:
    // the stopped one would not answer.)
    let deadline = Instant::now() + Duration::from_secs(2);
    while value_on(&cluster, &user_node, &user_key) != before && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        value_on(&cluster, &user_node, &user_key),
        before,
        "the first slot put back"
    );
    signal(&global_node, "-CONT");
    // The hung call ran when its master continued: the global bucket keeps its cell.
    let deadline = Instant::now() + Duration::from_secs(2);
    while value_on(&cluster, &global_node, hot) == global_before && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_ne!(
        value_on(&cluster, &global_node, hot),
        global_before,
        "the late call took its cell"
    );
    // 10 per day: one admitted, one taken by the late call: eight left, never nine.
    let mut admitted = 0;
    for i in 0..20 {
        let verdict = limiter.check(&format!("other{i}")).await.unwrap();
        if verdict.source() == Source::Buckets && verdict.is_allowed() {
            admitted += 1;
        }
    }
    assert_eq!(admitted, 8);
}

/// A master killed (`kill -9`) under load: decisions for its slots follow the failure policy
/// until its replica takes over, then come from Redis again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_master_fails_over_and_decisions_follow_the_failure_policy_meanwhile() {
    let _serial = SERIAL.lock().await;
    let cluster = RedisCluster::start();
    let hot = "{flowgate:all}:0";
    let limiter = layered(
        Policies::<str>::builder(),
        Quota::per_second(100_000).unwrap(),
    )
    .build_redis(
        cluster_backend(&cluster)
            .timeout(Duration::from_millis(100))
            .on_failure(OnFailure::Local { share: 0.5 }),
    )
    .unwrap();
    assert_eq!(limiter.check("a").await.unwrap().source(), Source::Buckets);
    let index = (cluster.masters().iter())
        .position(|m| *m == cluster.node_for_slot(cluster.slot_of(hot)))
        .unwrap();
    let killed = cluster.kill_master(index);
    let mut failed = 0;
    let mut back = None;
    // Bounded: 20 s of decisions at most.
    for i in 0..4_000 {
        let verdict = limiter.check(&format!("u{}", i % 50)).await.unwrap();
        match verdict.source() {
            Source::Buckets => {
                if failed > 0 {
                    back = Some(killed.at.elapsed());
                    break;
                }
            }
            Source::Local(_) => failed += 1,
            other => panic!("{other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let failover = cluster.wait_for_failover(&killed);
    let back = back.expect("decisions from Redis again after the failover");
    println!("failover: {failover:?} by the cluster; decisions from Redis again after {back:?}; {failed} decided locally");
    assert!(
        failed > 0,
        "decisions in between followed the failure policy"
    );
    // The killed master serves no slot now: its breaker, open, is not reported (nor kept).
    for i in 0..20 {
        let verdict = limiter.check(&format!("u{}", i % 50)).await.unwrap();
        assert_eq!(verdict.source(), Source::Buckets, "decision {i}");
    }
    let state = limiter.breaker_state();
    assert!(matches!(state, BreakerState::Closed { .. }), "{state}");
}

/// A configuration file names a cluster by its seeds (`url` and `cluster`), and the set it
/// builds decides there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configuration_file_names_a_cluster() {
    let _serial = SERIAL.lock().await;
    let cluster = RedisCluster::start();
    let seeds = cluster.seed_urls();
    let file: flowgate_redis::Config = toml::from_str(&format!(
        "backend = \"redis\"\n\
         [redis]\nurl = {:?}\ncluster = {:?}\ntimeout = \"10s\"\n\
         [[policies]]\nname = \"user\"\nkey = \"user\"\nquotas = [\"2/h\"]\n\
         [[policies]]\nname = \"all\"\nquotas = [\"3/h\"]\n",
        seeds[0],
        &seeds[1..],
    ))
    .unwrap();
    let keys = flowgate::policy::KeyExtractors::new().key("user", |user: &str, k| {
        k.add(user);
    });
    let limits = file
        .build(&keys, flowgate::clock::QuantaClock::new())
        .unwrap();
    let flowgate_redis::AnyPolicies::Redis(limiter) = &limits else {
        panic!("a Redis set");
    };
    let mut admitted = Vec::new();
    for user in ["a", "a", "a", "b", "c"] {
        let verdict = limiter.check(user).await.unwrap();
        assert_eq!(verdict.source(), Source::Buckets);
        admitted.push(verdict.is_allowed());
    }
    // Two for "a", then the global three are spent.
    assert_eq!(admitted, [true, true, false, true, false]);
    assert!(
        value(&cluster, "{flowgate:all}:0").is_some(),
        "the global bucket in the cluster"
    );
    // A reset deletes the key's bucket on the master of its slot, and leaves the global one
    // (every client's, in a slot of its own): "a" is then refused by "all" alone.
    assert!(value(&cluster, "{flowgate:user:a}:0").is_some());
    flowgate::backend::Backend::reset(&limits, "a")
        .await
        .unwrap();
    assert_eq!(value(&cluster, "{flowgate:user:a}:0"), None);
    assert!(value(&cluster, "{flowgate:all}:0").is_some());
    let refused = limiter.check("a").await.unwrap().outcome().unwrap_err();
    assert_eq!(refused.by().map(|by| by.policy()), Some("all"));
    // Ready while every master answers; a hung master is named (last: it may fail over), by a
    // set from the same file waiting 1 s.
    limits.ready().await.unwrap();
    let mut impatient = file.clone();
    impatient.redis.as_mut().unwrap().timeout = Some("1s".to_owned());
    let impatient = impatient
        .build(&keys, flowgate::clock::QuantaClock::new())
        .unwrap();
    let hung = cluster.masters()[1].clone();
    signal(&hung, "-STOP");
    let error = impatient.ready().await.unwrap_err();
    signal(&hung, "-CONT");
    let named =
        matches!(&error, RedisConfigError::Unreachable { server, .. } if *server == hung.address());
    assert!(named, "{error}");
}

/// One of three masters hung (`SIGSTOP`) for 2 s, its breaker open: keys on the two healthy
/// masters are still decided in Redis (at least 99 % of their decisions), because each master
/// has a breaker of its own and the hung one's probes ask it alone; its own keys are answered
/// by the failure policy at once. (With one breaker for the cluster, the hung master's
/// timeouts opened it for everyone.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_master_stops_calls_to_itself_alone() {
    let _serial = SERIAL.lock().await;
    let cluster = RedisCluster::start();
    let limiter = Policies::<str>::builder()
        .policy(Policy::keyed("user", |u: &str| u).quota(Quota::per_second(1_000_000).unwrap()))
        .build_redis(cluster_backend(&cluster).timeout(Duration::from_secs(1)))
        .unwrap();
    let hung = cluster.masters()[0].clone();
    let users: Vec<String> = (0..60).map(|i| format!("u{i}")).collect();
    let on_hung = |user: &str| {
        let slot = cluster.slot_of(&format!("{{flowgate:{user}}}:user:0"));
        cluster.node_for_slot(slot) == hung
    };
    let healthy: Vec<bool> = users.iter().map(|u| !on_hung(u)).collect();
    assert!(healthy.iter().any(|h| *h) && healthy.iter().any(|h| !*h));
    for user in &users {
        assert_eq!(limiter.check(user).await.unwrap().source(), Source::Buckets);
    }
    signal(&hung, "-STOP");
    // Three decisions on the hung master, one after another, time out and open its breaker:
    // the next is refused by it at once.
    let hung_user = users.iter().zip(&healthy).find(|(_, h)| !**h).unwrap().0;
    for _ in 0..3 {
        let source = limiter.check(hung_user).await.unwrap().source();
        assert_eq!(source, Source::FailedOpen(Failure::Timeout));
    }
    let source = limiter.check(hung_user).await.unwrap().source();
    assert_eq!(source, Source::FailedOpen(Failure::BreakerOpen));
    let stop = Instant::now() + Duration::from_secs(2);
    let tasks: Vec<_> = (0..4)
        .map(|task| {
            let (limiter, users, healthy) = (limiter.clone(), users.clone(), healthy.clone());
            tokio::spawn(async move {
                let mut seen = Vec::new();
                // Bounded: 2 s, and 20 000 decisions at most.
                for i in (task..).step_by(4).take(20_000) {
                    if Instant::now() >= stop {
                        break;
                    }
                    let user = i % users.len();
                    let source = limiter.check(&users[user]).await.unwrap().source();
                    seen.push((healthy[user], source));
                }
                seen
            })
        })
        .collect();
    let mut seen = Vec::new();
    for task in tasks {
        seen.extend(task.await.unwrap());
    }
    signal(&hung, "-CONT");
    let of_healthy: Vec<_> = seen.iter().filter(|(h, _)| *h).map(|(_, s)| *s).collect();
    let in_redis = of_healthy.iter().filter(|s| **s == Source::Buckets).count();
    let on_hung_failed = seen
        .iter()
        .filter(|(h, s)| !*h && s.failure().is_some())
        .count();
    println!(
        "healthy masters: {in_redis} of {} decisions in Redis; hung master: {on_hung_failed} \
         by the failure policy",
        of_healthy.len()
    );
    assert!(
        on_hung_failed > 0,
        "the hung master's keys were decided in Redis"
    );
    assert!(
        in_redis * 100 >= of_healthy.len() * 99,
        "{in_redis} of {} healthy decisions in Redis",
        of_healthy.len()
    );
}
