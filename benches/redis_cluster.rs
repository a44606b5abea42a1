#![allow(missing_docs)]
//! Decisions per second through a Redis Cluster (3 masters, one replica each, on loopback)
//! against one `redis-server` on the same machine, in one run (feature `redis-cluster`):
//!
//! * **keyed**: one keyed policy, keys rotating over 64 users (so every master serves some),
//!   sequential and 32 tasks at once;
//! * **user + global**: a per-user policy and a global one, sequential: one call on one server,
//!   two calls (one per slot) in the cluster;
//! * **global, leased**: a global policy alone with leases of 100 cells, sequential: the hot
//!   key's cost when a lease answers most decisions.
//!
//! Rounds rotate the sides in batches; each figure is the median over rounds, and each ratio
//! the median of per-round ratios (cluster / one server). On this 2-core machine the cluster's
//! six servers share the cores with the client, so the ratios measure the client and one round
//! trip, not a cluster's capacity.
//!
//! `cargo bench -p flowgate-benches --bench redis_cluster --features redis-cluster`. With `CASE N`
//! (`one_keyed`, `cluster_keyed`, `one_layered`, `cluster_layered`) it instead makes N
//! sequential decisions of one side inside `hot_loop`, for callgrind
//! (`BENCH=redis_cluster FEATURES=redis-cluster scripts/redis-instructions N CASE...`).

mod common;
#[path = "../integration/tests/support/redis_cluster.rs"]
mod redis_cluster;

use std::time::{Duration, Instant};

use common::paired::{median, mode};
use common::{case_from_args, hot_loop, unknown_case};
use flowgate::policy::{Policies, Policy};
use flowgate::Quota;
use flowgate_redis::BuildRedis as _;
use flowgate_redis::{RedisBackend, RedisLimiter};
use redis_cluster::redis_server::RedisServer;
use redis_cluster::RedisCluster;

const TASKS: usize = 32;
const USERS: usize = 64;
const CASES: &[&str] = &[
    "one_keyed",
    "cluster_keyed",
    "one_layered",
    "cluster_layered",
];

/// The limiters of one side: keyed, user + global, and global with leases.
struct Side {
    keyed: RedisLimiter<str>,
    layered: RedisLimiter<str>,
    leased: RedisLimiter<str>,
}

impl Side {
    fn new(backend: impl Fn() -> RedisBackend) -> Self {
        let quota = Quota::per_second(1_000_000).unwrap();
        let backend = || backend().timeout(Duration::from_secs(5));
        let user = || Policy::keyed("user", |k: &str| k).quota(quota);
        let global = || Policy::global("all").quota(quota);
        Self {
            keyed: (Policies::<str>::builder().policy(user()))
                .build_redis(backend().prefix("keyed"))
                .unwrap(),
            layered: (Policies::<str>::builder().policy(user()).policy(global()))
                .build_redis(backend().prefix("layered"))
                .unwrap(),
            leased: (Policies::<str>::builder().policy(global()))
                .build_redis(
                    backend()
                        .prefix("leased")
                        .lease(100, Duration::from_secs(1)),
                )
                .unwrap(),
        }
    }
}

fn user(i: usize) -> String {
    format!("user{}", i % USERS)
}

async fn admits(limiter: &RedisLimiter<str>, i: usize) -> bool {
    limiter.check(&user(i)).await.unwrap().is_allowed()
}

/// `decisions` sequential decisions; decisions per second.
async fn sequential(limiter: &RedisLimiter<str>, decisions: usize) -> f64 {
    let start = Instant::now();
    for i in 0..decisions {
        assert!(admits(limiter, i).await);
    }
    decisions as f64 / start.elapsed().as_secs_f64()
}

/// `decisions` decisions by `TASKS` tasks at once; decisions per second.
async fn concurrent(limiter: &RedisLimiter<str>, decisions: usize) -> f64 {
    let start = Instant::now();
    let mut done = 0;
    while done < decisions {
        let wave: Vec<_> = (0..TASKS.min(decisions - done))
            .map(|i| {
                let limiter = limiter.clone();
                tokio::spawn(async move { admits(&limiter, done + i).await })
            })
            .collect();
        done += wave.len();
        for handle in wave {
            assert!(handle.await.unwrap());
        }
    }
    decisions as f64 / start.elapsed().as_secs_f64()
}

async fn run() {
    let Some(bench) = mode() else { return };
    let (rounds, batch) = if bench { (15, 2_000) } else { (1, 64) };
    let server = RedisServer::start();
    let cluster = RedisCluster::start();
    let one = Side::new(|| RedisBackend::new(server.client()));
    let many = Side::new(|| RedisBackend::cluster(cluster.seed_urls()).unwrap());
    // Connected, scripts loaded everywhere.
    for i in 0..2 * USERS {
        for side in [&one, &many] {
            for limiter in [&side.keyed, &side.layered, &side.leased] {
                assert!(admits(limiter, i).await);
            }
        }
    }
    const SIDES: usize = 8;
    let mut rates: [Vec<f64>; SIDES] = Default::default();
    let mut ratios: [Vec<f64>; SIDES / 2] = Default::default();
    for round in 0..rounds {
        let mut r = [0.0; SIDES];
        for k in 0..SIDES {
            let side = (round + k) % SIDES;
            let of = if side.is_multiple_of(2) { &one } else { &many };
            r[side] = match side / 2 {
                0 => sequential(&of.keyed, batch).await,
                1 => concurrent(&of.keyed, batch).await,
                2 => sequential(&of.layered, batch).await,
                _ => sequential(&of.leased, batch).await,
            };
        }
        for (side, rate) in r.iter().enumerate() {
            rates[side].push(*rate);
        }
        for (pair, ratio) in ratios.iter_mut().enumerate() {
            ratio.push(r[2 * pair + 1] / r[2 * pair]);
        }
    }
    let names = [
        "keyed, sequential",
        "keyed, 32 concurrent",
        "user + global, sequential",
        "global, leases of 100, sequential",
    ];
    for (pair, name) in names.iter().enumerate() {
        println!(
            "redis_cluster/{name}: one server {:.0}/s, cluster {:.0}/s, ratio {:.3} (medians of {rounds} rounds)",
            median(&mut rates[2 * pair]),
            median(&mut rates[2 * pair + 1]),
            median(&mut ratios[pair])
        );
    }
    // The servers' own time per script call (`INFO commandstats`), over the whole run.
    let per_call = |info: String| -> (f64, f64) {
        let line = info.lines().find(|l| l.starts_with("cmdstat_evalsha:"));
        let field = |name: &str| -> f64 {
            (line.and_then(|l| l.split([':', ',']).find_map(|f| f.strip_prefix(name))))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0.0)
        };
        (field("calls="), field("usec="))
    };
    let info = |cmd: &mut redis::Cmd| cmd.arg("commandstats").clone();
    let (calls, usec) = per_call(server.command(&mut info(&mut redis::cmd("INFO"))));
    println!(
        "redis_cluster/one server: {:.2} µs of server time per call",
        usec / calls
    );
    let (mut calls, mut usec) = (0.0, 0.0);
    for master in cluster.masters() {
        let text: String = cluster
            .command(&master, &info(&mut redis::cmd("INFO")))
            .unwrap();
        let (c, u) = per_call(text);
        calls += c;
        usec += u;
    }
    println!(
        "redis_cluster/cluster masters: {:.2} µs of server time per call",
        usec / calls
    );
    for (name, side) in [("one server", &one), ("cluster", &many)] {
        let s = side.layered.stats();
        let trips = s.round_trips - s.reloads;
        println!(
            "redis_cluster/{name}, user + global: {:.3} round trips per decision",
            trips as f64 / s.decisions as f64
        );
    }
}

/// `n` sequential decisions of one side inside `hot_loop`, each driven to completion on this
/// thread, so that callgrind counts the client's whole side (the servers are other processes).
fn instructions(case: &str, n: u64) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let server = RedisServer::start();
    let cluster = RedisCluster::start();
    let (one, many) = runtime.block_on(async {
        (
            Side::new(|| RedisBackend::new(server.client())),
            Side::new(|| RedisBackend::cluster(cluster.seed_urls()).unwrap()),
        )
    });
    let limiter = match case {
        "one_keyed" => &one.keyed,
        "cluster_keyed" => &many.keyed,
        "one_layered" => &one.layered,
        "cluster_layered" => &many.layered,
        _ => unknown_case(case, CASES),
    };
    // Warm up: connections made, the scripts loaded on every master.
    for i in 0..4 * USERS {
        assert!(runtime.block_on(admits(limiter, i)));
    }
    let mut i = 0;
    hot_loop(n, || {
        i += 1;
        assert!(runtime.block_on(admits(limiter, i)));
    });
}

fn main() {
    if let Some((case, n)) = case_from_args() {
        return instructions(&case, n);
    }
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(run());
}
