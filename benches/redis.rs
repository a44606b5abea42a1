#![allow(missing_docs)]
//! Decisions per second against a real `redis-server` on loopback: flowgate's `RedisLimiter`
//! against a plain token bucket in Lua (`article.lua`: HGET/HSET of the tokens left and the last
//! time, on the client's clock, as blog posts publish it; "the article" below), one connection
//! each, in one run.
//!
//! * **sequential**: one decision at a time, each awaited before the next;
//! * **concurrent**: 32 tasks sharing the connection (redis-rs pipelines their commands);
//! * **leased**: flowgate only, sequential, with leases of 100 cells;
//! * **script alone**: flowgate's `gcra.lua` sent like the article's, through `redis::Script`
//!   without the limiter around it, which separates the server's side from the client's;
//! * **sliding log**: flowgate's `RedisSlidingLog` against the article's sorted-set log
//!   (`article_log.lua`), sequential, in rounds of their own. The article's records one member
//!   per distinct time (requests in one ms count once, an under-count flowgate's unique members
//!   avoid), so its set stays smaller: both admit every request, and flowgate's set holds every
//!   request of the last 100 ms.
//!
//! * **flood**: one key hammered by two limiters (two processes' worth: connections of their
//!   own, one prefix), each deciding again as soon as it is answered, with and without the
//!   hot-key shield: decisions and Redis calls per second, and the admissions against the
//!   exact bound (the burst plus the rate over the whole run).
//!
//! Rounds rotate the sides in batches and the figure is the median over rounds of each side's
//! rate and of the per-round ratio to the article's script. Every decision admits (both
//! quotas are far above the offered load), so both sides do the same work each time.
//!
//! The runtime is tokio's current-thread one: with two workers, where each connection's driver
//! task happened to run moved a side's rate between runs whatever its script.
//!
//! `cargo bench -p flowgate-benches --bench redis`. With `CASE N` (`redis_flowgate`,
//! `redis_article`, `redis_script`), it instead makes N sequential decisions of one side inside
//! `hot_loop`, for callgrind (`scripts/redis-instructions`).

mod common;
#[path = "../integration/tests/support/redis_server.rs"]
mod redis_server;

use std::time::{Duration, Instant};

use common::paired::{median, mode};
use common::{case_from_args, hot_loop, unknown_case};
use flowgate::policy::{Policies, Policy};
use flowgate::Quota;
use flowgate_redis::BuildRedis as _;
use flowgate_redis::{RedisBackend, RedisLimiter, RedisSlidingLog};
use redis::aio::ConnectionManager;

/// The plain token bucket (`article.lua`), as blog posts publish it.
const ARTICLE: &str = include_str!("article.lua");

/// The article's sliding window log, as published.
const ARTICLE_LOG: &str = include_str!("article_log.lua");

/// flowgate's script, for the side that sends it without the limiter.
const GCRA: &str = include_str!("../flowgate-redis/src/script/gcra.lua");

const TASKS: usize = 32;

const CASES: &[&str] = &["redis_flowgate", "redis_article", "redis_script"];

/// A script sent through `redis::Script` on a connection of its own, as the article does.
#[derive(Clone)]
struct Scripted {
    connection: ConnectionManager,
    script: redis::Script,
    origin: Instant,
}

impl Scripted {
    async fn new(server: &redis_server::RedisServer, source: &str) -> Self {
        Self {
            connection: ConnectionManager::new(server.client()).await.unwrap(),
            script: redis::Script::new(source),
            origin: Instant::now(),
        }
    }

    /// The article's decision: at the client's time in ms, 10^6 tokens per ms, capacity 10^9.
    async fn article(&mut self) -> bool {
        let now = self.origin.elapsed().as_millis() as u64;
        let admitted: Option<i64> = self
            .script
            .key("article:bucket")
            .arg(now)
            .arg(1_000_000)
            .arg(1_000_000_000)
            .invoke_async(&mut self.connection)
            .await
            .expect("the article's script runs");
        admitted == Some(1)
    }

    /// `gcra.lua`'s common call (gcra.lua, "Replies") at the server's time (n, T and τ
    /// alone): T = 1 µs, τ = 1 s, as the limiter sends it for `Quota::per_second(1_000_000)`.
    async fn gcra(&mut self) -> bool {
        let debt: i64 = self
            .script
            .key("{script:hot}:k:0")
            .arg(1)
            .arg(1)
            .arg(1_000_000)
            .invoke_async(&mut self.connection)
            .await
            .expect("gcra.lua runs");
        debt >= 0
    }
}

impl Scripted {
    /// The article's sliding log: at the client's time in ms, a window of 100 ms, at most
    /// 65 536 in it (every request admitted).
    async fn article_log(&mut self) -> bool {
        let now = self.origin.elapsed().as_millis() as u64;
        let left: i64 = self
            .script
            .key("article:log")
            .arg(now)
            .arg(100)
            .arg(65_536)
            .invoke_async(&mut self.connection)
            .await
            .expect("the article's log runs");
        left > 0
    }
}

/// flowgate's sliding log against the article's, sequential, in paired rounds.
async fn logs(server: &redis_server::RedisServer, rounds: usize, batch: usize) {
    let backend = RedisBackend::new(server.client())
        .prefix("log")
        .timeout(Duration::from_secs(5));
    let ours = RedisSlidingLog::new(backend, "hot", "65536/100ms".parse().unwrap()).unwrap();
    let article = Scripted::new(server, ARTICLE_LOG).await;
    let mut rates: [Vec<f64>; 2] = Default::default();
    let mut ratios = Vec::new();
    for round in 0..rounds {
        let mut r = [0.0; 2];
        for k in 0..2 {
            let side = (round + k) % 2;
            r[side] = if side == 0 {
                sequential(batch, || async {
                    ours.check("hot").await.unwrap().is_allowed()
                })
                .await
            } else {
                let mut article = article.clone();
                let start = Instant::now();
                for _ in 0..batch {
                    assert!(article.article_log().await);
                }
                batch as f64 / start.elapsed().as_secs_f64()
            };
        }
        rates[0].push(r[0]);
        rates[1].push(r[1]);
        ratios.push(r[0] / r[1]);
    }
    for (name, rates) in ["flowgate sliding log", "article sorted-set log"]
        .iter()
        .zip(rates.iter_mut())
    {
        println!(
            "redis/{name}, sequential: {:.0} decisions/s (median of {rounds} rounds)",
            median(rates)
        );
    }
    println!(
        "redis/ratio flowgate sliding log / article's, sequential: {:.3}",
        median(&mut ratios)
    );
    let s = ours.stats();
    assert_eq!(s.admitted, s.decisions);
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

/// The limiters of the bench, on `server`: plain, and with leases of 100 cells.
fn limiters(server: &redis_server::RedisServer) -> (RedisLimiter<str>, RedisLimiter<str>) {
    let quota = Quota::per_second(1_000_000).unwrap();
    let build = |backend: RedisBackend| {
        Policies::<str>::builder()
            .policy(Policy::keyed("k", |k: &str| k).quota(quota))
            .build_redis(backend.timeout(Duration::from_secs(5)))
            .unwrap()
    };
    let backend = |prefix: &str| RedisBackend::new(server.client()).prefix(prefix);
    (
        build(backend("seq")),
        build(backend("lease").lease(100, Duration::from_secs(1))),
    )
}

async fn run() {
    let Some(bench) = mode() else { return };
    let (rounds, batch) = if bench { (21, 2_000) } else { (1, 64) };
    let server = redis_server::RedisServer::start();
    let (ours, leased) = limiters(&server);
    let article = Scripted::new(&server, ARTICLE).await;
    let alone = Scripted::new(&server, GCRA).await;

    let mut rates: [Vec<f64>; 6] = Default::default();
    let mut ratios: [Vec<f64>; 3] = Default::default();
    for round in 0..rounds {
        let mut r = [0.0; 6];
        for k in 0..6 {
            let side = (round + k) % 6;
            r[side] = match side {
                0 => sequential(batch, || admits(&ours)).await,
                1 => {
                    let mut article = article.clone();
                    let start = Instant::now();
                    for _ in 0..batch {
                        assert!(article.article().await);
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
                        async move { article.article().await }
                    })
                    .await
                }
                4 => sequential(batch, || admits(&leased)).await,
                _ => {
                    let mut alone = alone.clone();
                    let start = Instant::now();
                    for _ in 0..batch {
                        assert!(alone.gcra().await);
                    }
                    batch as f64 / start.elapsed().as_secs_f64()
                }
            };
        }
        for (side, rate) in r.iter().enumerate() {
            rates[side].push(*rate);
        }
        ratios[0].push(r[0] / r[1]);
        ratios[1].push(r[2] / r[3]);
        ratios[2].push(r[5] / r[1]);
    }
    let names = [
        "flowgate, sequential",
        "article, sequential",
        "flowgate, 32 concurrent",
        "article, 32 concurrent",
        "flowgate, sequential, leases of 100",
        "gcra.lua alone through redis::Script, sequential",
    ];
    for (name, rates) in names.iter().zip(rates.iter_mut()) {
        println!(
            "redis/{name}: {:.0} decisions/s (median of {rounds} rounds)",
            median(rates)
        );
    }
    println!(
        "redis/ratio flowgate / article, sequential: {:.3}",
        median(&mut ratios[0])
    );
    println!(
        "redis/ratio flowgate / article, 32 concurrent: {:.3}",
        median(&mut ratios[1])
    );
    println!(
        "redis/ratio gcra.lua alone / article, sequential: {:.3}",
        median(&mut ratios[2])
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
    logs(&server, rounds, batch).await;
    flood(
        &server,
        Duration::from_millis(if bench { 3_000 } else { 100 }),
    )
    .await;
}

/// The flood of the module docs, for `run_for` of wall time per mode. Each decision is
/// followed by a yield, so that the two limiters take turns on this one thread even when the
/// shield answers without a call.
async fn flood(server: &redis_server::RedisServer, run_for: Duration) {
    for shield in [0, 4096] {
        let make = || {
            let backend = RedisBackend::new(server.client()).prefix(format!("flood{shield}"));
            Policies::<str>::builder()
                .policy(Policy::keyed("k", |k: &str| k).quota("100/s burst 100".parse().unwrap()))
                .build_redis(backend.timeout(Duration::from_secs(5)).shield(shield))
                .unwrap()
        };
        let (a, b) = (make(), make());
        let start = Instant::now();
        let hammer = |limiter: RedisLimiter<str>| async move {
            let mut admitted = 0u64;
            while start.elapsed() < run_for {
                admitted += u64::from(limiter.check("hot").await.unwrap().is_allowed());
                tokio::task::yield_now().await;
            }
            admitted
        };
        let (x, y) = tokio::join!(hammer(a.clone()), hammer(b.clone()));
        let secs = start.elapsed().as_secs_f64();
        let (sa, sb) = (a.stats(), b.stats());
        let calls = sa.round_trips + sb.round_trips - sa.reloads - sb.reloads;
        let bound = 100.0 + 100.0 * secs;
        println!(
            "redis/flood, shield {}: {:.0} decisions/s, {:.0} Redis calls/s, {} admitted against \
             a bound of {bound:.0} ({} shielded)",
            if shield > 0 { "on" } else { "off" },
            (sa.decisions + sb.decisions) as f64 / secs,
            calls as f64 / secs,
            x + y,
            sa.shielded + sb.shielded,
        );
        assert!((x + y) as f64 <= bound.ceil(), "over the bound");
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

/// `n` sequential decisions of one side inside `hot_loop`, each driven to completion on this
/// thread, so that callgrind counts the client's whole side: the limiter or `redis::Script`,
/// redis-rs and the runtime (the server is another process).
fn instructions(case: &str, n: u64) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let server = redis_server::RedisServer::start();
    let (ours, _) = runtime.block_on(async { limiters(&server) });
    let mut article = runtime.block_on(Scripted::new(&server, ARTICLE));
    let mut alone = runtime.block_on(Scripted::new(&server, GCRA));
    // Warm up: the script loads (NOSCRIPT) and the connections settle before counting.
    for _ in 0..100 {
        runtime.block_on(async {
            assert!(admits(&ours).await && article.article().await && alone.gcra().await);
        });
    }
    match case {
        "redis_flowgate" => hot_loop(n, || assert!(runtime.block_on(admits(&ours)))),
        "redis_article" => hot_loop(n, || assert!(runtime.block_on(article.article()))),
        "redis_script" => hot_loop(n, || assert!(runtime.block_on(alone.gcra()))),
        _ => unknown_case(case, CASES),
    }
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
