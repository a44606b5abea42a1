#![allow(missing_docs)]
//! Decisions per second against a real `redis-server` on loopback: flowgate's script against the
//! users' article's token-bucket script (the HGET/HSET "v4" version, `../shared/seeds/002_*`),
//! one connection each way, in one run.
//!
//! * **sequential**: one decision at a time, each awaited before the next;
//! * **concurrent**: 32 tasks sharing the connection (redis-rs pipelines their commands);
//! * **leased**: flowgate only, sequential, with leases of 100 cells.
//!
//! Rounds rotate the sides in batches and the figure is the median over rounds of each side's
//! rate and of the per-round ratio to the article's script. Every decision admits (both
//! quotas are far above the offered load), so both sides do the same work each time.
//! `cargo bench --bench redis --features redis`.

mod common;
#[path = "../tests/support/redis_server.rs"]
mod redis_server;

use std::time::{Duration, Instant};

use common::paired::{median, mode};
use flowgate::redis::{Level, RedisLimiter};
use flowgate::Quota;
use redis::aio::ConnectionManager;

/// The article's script, as published (its "Lua实现v4").
const ARTICLE: &str = include_str!("article.lua");

const TASKS: usize = 32;

/// The article's script on one connection: a decision at the client's time in ms.
#[derive(Clone)]
struct Article {
    connection: ConnectionManager,
    script: redis::Script,
    origin: Instant,
}

impl Article {
    async fn check(&mut self) -> bool {
        let now = self.origin.elapsed().as_millis() as u64;
        let admitted: Option<i64> = self
            .script
            .key("article:bucket")
            .arg(now)
            .arg(1_000_000) // tokens per ms
            .arg(1_000_000_000) // capacity
            .invoke_async(&mut self.connection)
            .await
            .expect("the article's script runs");
        admitted == Some(1)
    }
}

/// Times `decisions` sequential decisions; returns decisions per second.
async fn sequential<F, Fut>(decisions: usize, mut decide: F) -> f64
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    for _ in 0..decisions {
        assert!(decide().await);
    }
    decisions as f64 / start.elapsed().as_secs_f64()
}

async fn run() {
    let Some(bench) = mode() else { return };
    let (rounds, batch) = if bench { (21, 2_000) } else { (1, 64) };
    let server = redis_server::RedisServer::start();
    let quota = Quota::per_second(1_000_000).unwrap();
    let build = |prefix: &str, lease: bool| {
        let builder = RedisLimiter::<str>::builder(server.client())
            .prefix(prefix)
            .level(Level::per_key("k").quota(quota))
            .timeout(Duration::from_secs(5));
        let builder = if lease {
            builder.lease(100, Duration::from_secs(1))
        } else {
            builder
        };
        builder.build().unwrap()
    };
    let ours = build("seq", false);
    let leased = build("lease", true);
    let article = Article {
        connection: ConnectionManager::new(server.client()).await.unwrap(),
        script: redis::Script::new(ARTICLE),
        origin: Instant::now(),
    };

    let mut rates: [Vec<f64>; 5] = Default::default();
    let mut ratios: [Vec<f64>; 2] = Default::default();
    for round in 0..rounds {
        let mut r = [0.0; 5];
        for k in 0..5 {
            let side = (round + k) % 5;
            r[side] = match side {
                0 => sequential(batch, || admits(&ours)).await,
                1 => {
                    let mut article = article.clone();
                    let start = Instant::now();
                    for _ in 0..batch {
                        assert!(article.check().await);
                    }
                    batch as f64 / start.elapsed().as_secs_f64()
                }
                2 => {
                    concurrent(batch, |_| {
                        let ours = ours.clone();
                        async move { ours.check("hot").await.unwrap().is_allowed() }
                    })
                    .await
                }
                3 => {
                    concurrent(batch, |_| {
                        let mut article = article.clone();
                        async move { article.check().await }
                    })
                    .await
                }
                _ => sequential(batch, || admits(&leased)).await,
            };
        }
        for (side, rate) in r.iter().enumerate() {
            rates[side].push(*rate);
        }
        ratios[0].push(r[0] / r[1]);
        ratios[1].push(r[2] / r[3]);
    }
    let names = [
        "flowgate, sequential",
        "article, sequential",
        "flowgate, 32 concurrent",
        "article, 32 concurrent",
        "flowgate, sequential, leases of 100",
    ];
    for (name, rates) in names.iter().zip(rates.iter_mut()) {
        println!(
            "redis/{name}: {:.0} decisions/s (median of {rounds} rounds)",
            median(rates)
        );
    }
    println!(
        "redis/ratio flowgate / article, sequential: {:.2}",
        median(&mut ratios[0])
    );
    println!(
        "redis/ratio flowgate / article, 32 concurrent: {:.2}",
        median(&mut ratios[1])
    );
    for (name, limiter) in [("sequential", &ours), ("leased", &leased)] {
        let s = limiter.stats();
        let trips = s.round_trips - s.reloads;
        println!(
            "redis/{name}: {} decisions, {} round trips (+{} script loads): {:.3} per decision",
            s.decisions,
            trips,
            s.reloads,
            trips as f64 / s.decisions as f64
        );
        assert_eq!(s.admitted, s.decisions);
    }
}

/// Times `decisions` decisions by `TASKS` tasks at once; returns decisions per second.
async fn concurrent<F, Fut>(decisions: usize, task: F) -> f64
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = bool> + Send + 'static,
{
    let start = Instant::now();
    let mut done = 0;
    while done < decisions {
        let wave: Vec<_> = (0..TASKS.min(decisions - done))
            .map(|i| tokio::spawn(task(i)))
            .collect();
        done += wave.len();
        for handle in wave {
            assert!(handle.await.unwrap());
        }
    }
    decisions as f64 / start.elapsed().as_secs_f64()
}

/// One decision on the hot key: admitted?
async fn admits(limiter: &RedisLimiter<str>) -> bool {
    limiter.check("hot").await.unwrap().is_allowed()
}

fn main() {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(run());
}
