//! Redis outages with a real `redis-server` on a loopback port: a server that hangs (`SIGSTOP`)
//! costs each decision at most its deadline, leases or not.

#[path = "support/redis_server.rs"]
mod redis_server;

use std::time::{Duration, Instant};

use flowgate::policy::{Policies, Policy};
use flowgate::redis::{Failure, RedisBackend, RedisLimiter, Source};
use flowgate::Quota;
use redis_server::RedisServer;

/// The configured timeout: long against scheduling noise, so that 1.3 × it is a sharp bound.
const TIMEOUT: Duration = Duration::from_millis(300);

fn limiter(server: &RedisServer, lease: bool) -> RedisLimiter<str> {
    let mut backend = RedisBackend::new(server.client()).timeout(TIMEOUT);
    if lease {
        backend = backend.lease(4, Duration::from_secs(60));
    }
    Policies::<str>::builder()
        .policy(Policy::keyed("k", |k: &str| k).quota(Quota::per_second(1_000).unwrap()))
        .build_redis(backend)
        .unwrap()
}

/// How long one decision on "hot" takes, and where it came from.
async fn timed(limiter: RedisLimiter<str>) -> (Duration, Source) {
    let start = Instant::now();
    let verdict = limiter.check("hot").await.unwrap();
    (start.elapsed(), verdict.source())
}

/// A decision that starts while another holds the lease's renewal lock waits for the lock and
/// then calls: both within its one deadline. (With a timeout for the lock and a fresh one for
/// the call, the later decisions here took 1.5 × the timeout.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_server_costs_a_decision_at_most_its_deadline() {
    let server = RedisServer::start();
    for lease in [false, true] {
        let limiter = limiter(&server, lease);
        // Connected, and (with leases) the lease of "hot" taken (one cell for the decision,
        // three held) and spent, so that the next decision renews it.
        for _ in 0..4 {
            let verdict = limiter.check("hot").await.unwrap();
            assert!(verdict.is_allowed());
        }
        server.pause();
        let first = tokio::spawn(timed(limiter.clone()));
        // The others start halfway through the first one's call.
        tokio::time::sleep(TIMEOUT / 2).await;
        let later: Vec<_> = (0..4)
            .map(|_| tokio::spawn(timed(limiter.clone())))
            .collect();
        let mut times = vec![first.await.unwrap()];
        for task in later {
            times.push(task.await.unwrap());
        }
        server.resume();
        for (took, source) in &times {
            assert_eq!(
                *source,
                Source::FailedOpen(Failure::Timeout),
                "lease {lease}"
            );
            assert!(
                *took <= TIMEOUT.mul_f64(1.3),
                "lease {lease}: a decision took {took:?} with a timeout of {TIMEOUT:?}: {times:?}"
            );
        }
        // Back: decided in Redis again.
        let verdict = limiter.check("hot").await.unwrap();
        assert_eq!(verdict.source(), Source::Redis, "lease {lease}");
    }
}
