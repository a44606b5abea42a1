#![allow(missing_docs)]
//! What a Redis set's defaults let through on a machine whose CPUs are busy: two instances of
//! an axum service (each a thread with a current-thread runtime, a connection of its own, one
//! prefix; the tower layer over the set) are each sent 150 requests a second over loopback on
//! one key of a `100/s burst 10` quota (twice the quota together), while busy loops keep every
//! CPU busy (`SPINNERS_PER_CPU`, 2 unless set); the admissions against the exact bound (the
//! burst plus the rate over the whole run), and the decisions the failure policy made. Each
//! timeout in turn, the default first, failing open (the default).
//!
//! `cargo bench -p flowgate-benches --bench redis_defaults` (10 s per setting; 1 s under
//! `cargo test`, which checks only that it runs).

mod common;
#[path = "../integration/tests/support/http_client.rs"]
mod http_client;
#[path = "../integration/tests/support/redis_server.rs"]
mod redis_server;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use axum::routing::get;
use axum::Router;
use flowgate::http::{Inbound, RateLimitLayer};
use flowgate::policy::{Policies, Policy};
use flowgate_redis::BuildRedis as _;
use flowgate_redis::{RedisBackend, RedisStats};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// One instance serving until `stop`: its address, then its counters when it stops.
fn instance(
    backend: RedisBackend,
    stop: Arc<AtomicBool>,
    up: mpsc::Sender<SocketAddr>,
) -> RedisStats {
    runtime().block_on(async {
        let limiter = Policies::<Inbound>::builder()
            .policy(Policy::global("api").quota("100/s burst 10".parse().unwrap()))
            .build_redis(backend)
            .unwrap();
        let app = Router::new()
            .route("/", get(|| async { "ok" }))
            .layer(RateLimitLayer::new(limiter.clone()));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        up.send(listener.local_addr().unwrap()).unwrap();
        let app = app.into_make_service_with_connect_info::<SocketAddr>();
        let serving = tokio::spawn(async move { axum::serve(listener, app).await });
        // Relaxed: a flag to stop; a late look serves a little longer.
        while !stop.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        serving.abort();
        limiter.stats()
    })
}

/// 150 requests a second to `address` for `run_for`; the admitted ones.
fn client(address: SocketAddr, run_for: Duration) -> u64 {
    runtime().block_on(async {
        let client = http_client::client();
        let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / 150));
        let (start, mut admitted) = (Instant::now(), 0);
        while start.elapsed() < run_for {
            tick.tick().await;
            let (status, _, _) = http_client::get(&client, address, "/", &[("x", "")]).await;
            admitted += u64::from(status.is_success());
        }
        admitted
    })
}

fn main() {
    let Some(bench) = common::paired::mode() else {
        return;
    };
    let run_for = Duration::from_secs(if bench { 10 } else { 1 });
    let server = redis_server::RedisServer::start();
    let spin = Arc::new(AtomicBool::new(true));
    let cpus = std::thread::available_parallelism().map_or(2, usize::from);
    let per_cpu = std::env::var("SPINNERS_PER_CPU")
        .ok()
        .and_then(|s| s.parse().ok());
    let load: Vec<_> = (0..per_cpu.unwrap_or(2) * cpus)
        .map(|_| {
            let spin = Arc::clone(&spin);
            // Relaxed: as above.
            std::thread::spawn(move || while spin.load(Ordering::Relaxed) {})
        })
        .collect();
    let settings: [(&str, Option<Duration>); 3] = [
        ("default (50 ms)", None),
        ("250 ms", Some(Duration::from_millis(250))),
        ("1 s", Some(Duration::from_secs(1))),
    ];
    for (round, (name, timeout)) in settings.into_iter().enumerate() {
        let stop = Arc::new(AtomicBool::new(false));
        let (up, addresses) = mpsc::channel();
        let instances: Vec<_> = (0..2)
            .map(|_| {
                let mut backend = RedisBackend::new(server.client()).prefix(format!("load{round}"));
                if let Some(timeout) = timeout {
                    backend = backend.timeout(timeout);
                }
                let (stop, up) = (Arc::clone(&stop), up.clone());
                std::thread::spawn(move || instance(backend, stop, up))
            })
            .collect();
        let start = Instant::now();
        let clients: Vec<_> = (0..2)
            .map(|_| {
                let address = addresses.recv().unwrap();
                std::thread::spawn(move || client(address, run_for))
            })
            .collect();
        let admitted: u64 = clients.into_iter().map(|c| c.join().unwrap()).sum();
        let secs = start.elapsed().as_secs_f64();
        // Relaxed: as above.
        stop.store(true, Ordering::Relaxed);
        let stats: Vec<_> = instances.into_iter().map(|i| i.join().unwrap()).collect();
        let sum = |count: fn(&RedisStats) -> u64| stats.iter().map(count).sum::<u64>();
        let bound = 10.0 + 100.0 * secs;
        println!(
            "redis_defaults/timeout {name}: {admitted} admitted against a bound of {bound:.0} \
             ({:+.1} %); of {} decisions, {} failed open, {} calls timed out",
            (admitted as f64 / bound - 1.0) * 100.0,
            sum(|s| s.decisions),
            sum(|s| s.failed_open),
            sum(|s| s.timeouts),
        );
    }
    // Relaxed: as above.
    spin.store(false, Ordering::Relaxed);
    for spinner in load {
        spinner.join().unwrap();
    }
}
