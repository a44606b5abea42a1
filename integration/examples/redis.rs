//! Two limiters, as if on two hosts, sharing one limit through Redis.
//!
//! ```text
//! cargo run -p flowgate-integration --example redis
//! ```
//!
//! Uses the server at `REDIS_URL` if set; otherwise starts a private `redis-server` on a free
//! loopback port (installed by `scripts/install-redis`) and stops it at the end.

#[path = "../tests/support/redis_server.rs"]
mod redis_server;

use std::time::Duration;

use flowgate::policy::{Policies, Policy};
use flowgate::Quota;
use flowgate_redis::BuildRedis as _;
use flowgate_redis::{OnFailure, RedisBackend};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (_server, url) = redis_server::RedisServer::from_env_or_start();
    // A fresh prefix per run, so that an earlier run's buckets do not count.
    let prefix = format!("example-{}", std::process::id());
    let quota = Quota::per_minute(10)?;
    println!(
        "limit: {} requests per minute per user, shared by two hosts",
        quota.burst()
    );

    let mut hosts = Vec::new();
    for host in ["host-a", "host-b"] {
        // Each host has its own limiter and connection, as two processes would.
        let backend = RedisBackend::new(redis::Client::open(url.as_str())?)
            .prefix(prefix.as_str())
            .timeout(Duration::from_millis(200))
            .on_failure(OnFailure::Local { share: 0.5 });
        // The same policies an in-process set would have; `build_redis` instead of `build`.
        let limiter = Policies::<str>::builder()
            .policy(Policy::keyed("user", |user: &str| user).quota(quota))
            .build_redis(backend)?;
        hosts.push(tokio::spawn(async move {
            let mut admitted = 0;
            for i in 0..8 {
                let verdict = limiter.check("alice").await.expect("n = 1 fits the burst");
                match verdict.outcome() {
                    Ok(allowed) => {
                        admitted += 1;
                        println!("{host} request {i}: admitted, {} left", allowed.remaining());
                    }
                    Err(refused) => println!(
                        "{host} request {i}: refused, retry after {:?}",
                        refused.retry_after()
                    ),
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let stats = limiter.stats();
            println!(
                "{host}: {} decisions, {} round trips, {} failures",
                stats.decisions,
                stats.round_trips,
                stats.timeouts + stats.connection_failures + stats.reply_failures
            );
            admitted
        }));
    }
    let mut total = 0;
    for host in hosts {
        total += host.await?;
    }
    println!("admitted across both hosts: {total} of 16 requests");
    // The hosts share one limit: 10 in all, not 10 each.
    assert_eq!(total, 10);
    Ok(())
}
