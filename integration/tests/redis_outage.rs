//! Redis outages with a real `redis-server` on a loopback port: a server that hangs (`SIGSTOP`)
//! costs each decision at most its deadline, leases or not; a server killed (`kill -9`) opens
//! the circuit breaker, after which decisions cost the failure policy alone, and a restarted
//! one is back in use a cool-down later.

#[path = "support/redis_server.rs"]
mod redis_server;

use std::time::{Duration, Instant};

use flowgate::policy::{Policies, Policy};
use flowgate::Quota;
use flowgate_redis::BuildRedis as _;
use flowgate_redis::{
    Breaker, BreakerState, Failure, OnFailure, RedisBackend, RedisLimiter, Source,
};
use redis_server::RedisServer;

/// Tasks deciding at once through a stall or a dropped connection.
const TASKS: usize = 8;

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
        // How many of those decisions reached Redis depends on timing: with leases, a waiter
        // whose deadline passes while it waits for the renewal lock fails without a call, and
        // the breaker counts calls. Decisions one after another, each a call that times out,
        // open it within the breaker's three failures.
        for _ in 0..3 {
            if limiter.breaker_state() == BreakerState::Open {
                break;
            }
            times.push(timed(limiter.clone()).await);
        }
        server.resume();
        for (took, source) in &times {
            // Timed out, or (once three calls had) refused by the breaker without a call.
            assert!(
                matches!(
                    source,
                    Source::FailedOpen(Failure::Timeout | Failure::BreakerOpen)
                ),
                "lease {lease}: {source:?}"
            );
            assert!(
                *took <= TIMEOUT.mul_f64(1.3),
                "lease {lease}: a decision took {took:?} with a timeout of {TIMEOUT:?}: {times:?}"
            );
        }
        // The timeouts opened the breaker; back in Redis after a cool-down and a probe.
        assert_eq!(limiter.breaker_state(), BreakerState::Open, "lease {lease}");
        let mut source = None;
        for _ in 0..100 {
            tokio::time::sleep(Duration::from_millis(10)).await;
            source = Some(limiter.check("hot").await.unwrap().source());
            if source == Some(Source::Buckets) {
                break;
            }
        }
        assert_eq!(source, Some(Source::Buckets), "lease {lease}");
    }
}

/// What one outage cost: each decision's time once the breaker was open, the calls that
/// failed, and how long after the restarted server accepted connections a decision came from
/// Redis again.
struct Outage {
    /// Decisions made while the breaker was open.
    open_times: Vec<Duration>,
    /// Every decision Redis did not make.
    failed_times: Vec<Duration>,
    failed_calls: u64,
    back_after: Duration,
}

/// Eight tasks decide every millisecond or so while the server is killed (`kill -9`), stays
/// down for `DOWN`, and is restarted on the same port.
async fn outage(breaker: Breaker) -> Outage {
    const TASKS: usize = 8;
    const DOWN: Duration = Duration::from_millis(400);
    let mut server = RedisServer::start();
    let limiter = Policies::<str>::builder()
        .policy(Policy::keyed("k", |k: &str| k).quota(Quota::per_second(1_000_000).unwrap()))
        .build_redis(
            RedisBackend::new(server.client())
                .timeout(Duration::from_millis(50))
                .on_failure(OnFailure::Local { share: 0.5 })
                .breaker(breaker),
        )
        .unwrap();
    for task in 0..TASKS {
        let verdict = limiter.check(&task.to_string()).await.unwrap();
        assert_eq!(verdict.source(), Source::Buckets);
    }
    let before = limiter.stats();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let deciders: Vec<_> = (0..TASKS)
        .map(|task| {
            let (limiter, stop) = (limiter.clone(), stop.clone());
            tokio::spawn(async move {
                let key = task.to_string();
                let mut times = Vec::new();
                // Bounded: 2 s of decisions at most, whatever happens.
                for _ in 0..2_000 {
                    if stop.load(std::sync::atomic::Ordering::Relaxed) {
                        break;
                    }
                    let start = Instant::now();
                    let source = limiter.check(&key).await.unwrap().source();
                    times.push((start.elapsed(), source));
                    tokio::time::sleep(Duration::from_micros(500)).await;
                }
                times
            })
        })
        .collect();
    server.kill();
    tokio::time::sleep(DOWN).await;
    // The moment the restarted server accepts a connection, polled every 0.2 ms.
    let port = server
        .url()
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches('/')
        .to_owned();
    let accepting = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if std::net::TcpStream::connect(format!("127.0.0.1:{port}")).is_ok() {
                return Instant::now();
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        panic!("the restarted server never accepted a connection");
    });
    tokio::task::block_in_place(|| server.restart());
    let accepting = accepting.join().unwrap();
    // Until a decision comes from Redis again (bounded: 2 s).
    let mut back = None;
    for _ in 0..2_000 {
        if limiter.check("probe").await.unwrap().source() == Source::Buckets {
            back = Some(Instant::now());
            break;
        }
        tokio::time::sleep(Duration::from_micros(500)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (mut open_times, mut failed_times) = (Vec::new(), Vec::new());
    for decider in deciders {
        for (took, source) in decider.await.unwrap() {
            if source.failure() == Some(Failure::BreakerOpen) {
                open_times.push(took);
            }
            if source.failure().is_some() {
                failed_times.push(took);
            }
        }
    }
    let after = limiter.stats();
    let failed =
        |s: flowgate_redis::RedisStats| s.timeouts + s.connection_failures + s.reply_failures;
    Outage {
        open_times,
        failed_times,
        failed_calls: failed(after) - failed(before),
        back_after: back.expect("decisions from Redis within 2 s of the restart") - accepting,
    }
}

/// The 99th percentile of `times`.
fn p99(times: &mut [Duration]) -> Duration {
    times.sort();
    times[(times.len() * 99).div_ceil(100) - 1]
}

/// With the default breaker (3 failures, 100 ms): it opens within the first failures (at most
/// one per task in flight past the third), decisions are then made locally at once (p99 ≤ 1 ms;
/// without the breaker each one waited for a reconnection or the timeout), and decisions come
/// from Redis again within 200 ms of the restarted server accepting connections.
/// `--nocapture` prints the figures.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_breaker_answers_at_once_during_an_outage_and_closes_soon_after() {
    let mut outage = outage(Breaker::default()).await;
    let decisions = outage.open_times.len();
    let p99 = p99(&mut outage.open_times);
    let max = outage.open_times.last().copied().unwrap_or_default();
    let all = outage.failed_times.len();
    let p99_all = self::p99(&mut outage.failed_times);
    println!(
        "breaker: {decisions} decisions while open, p99 {p99:?}, max {max:?}; \
         {all} decisions by the failure policy, p99 {p99_all:?}; {} failed calls; \
         from Redis again {:?} after the server accepted connections",
        outage.failed_calls, outage.back_after
    );
    // The same outage without a breaker, for the record (nothing is asserted of it).
    let mut without = self::outage(Breaker::off()).await;
    let all = without.failed_times.len();
    println!(
        "no breaker: {all} decisions by the failure policy, p99 {:?}; {} failed calls; \
         from Redis again {:?} after the server accepted connections",
        self::p99(&mut without.failed_times),
        without.failed_calls,
        without.back_after
    );
    assert!(
        decisions >= 500,
        "only {decisions} decisions while the breaker was open"
    );
    assert!(p99 <= Duration::from_millis(1), "p99 {p99:?} while open");
    // Calls that fail together count once: the third wave of failures opens it, each wave at
    // most one call per task.
    assert!(
        outage.failed_calls <= 3 * 8,
        "{} failed calls",
        outage.failed_calls
    );
    assert!(
        outage.back_after <= Duration::from_millis(200),
        "from Redis again only {:?} after the server accepted connections",
        outage.back_after
    );
}

/// A healthy server that stalls once for a little longer than the timeout (a fork, a slow
/// disk) costs the decisions that were in flight, not an open breaker: the calls that time
/// out together are one failure, and the calls sent after them are answered when the server
/// goes on. (When each failed call counted, the eight in flight opened the breaker, and
/// hundreds of decisions went to the failure policy until a probe closed it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stall_costs_the_decisions_in_flight_not_an_open_breaker() {
    // Long enough that a starved runtime does not time out a call the server answered.
    const TIMEOUT: Duration = Duration::from_millis(500);
    let server = RedisServer::start();
    let limiter = Policies::<str>::builder()
        .policy(Policy::keyed("k", |k: &str| k).quota(Quota::per_second(1_000_000).unwrap()))
        .build_redis(RedisBackend::new(server.client()).timeout(TIMEOUT))
        .unwrap();
    // The scenario needs the stall to end before a call sent after the first timeouts times out
    // too (two timeouts): a machine too busy to resume the server in time is retried, three
    // times at most.
    for _ in 0..3 {
        let (stall, sources) = deciding_during(&limiter, async {
            let paused = Instant::now();
            server.pause();
            tokio::time::sleep(TIMEOUT.mul_f64(1.2)).await;
            server.resume();
            let stall = paused.elapsed();
            tokio::time::sleep(TIMEOUT).await;
            stall
        })
        .await;
        if stall >= TIMEOUT.mul_f64(1.9) {
            println!("the stall lasted {stall:?}: trying again");
            continue;
        }
        let failed = in_flight_only(&sources, &format!("a stall of {stall:?}"));
        assert!(failed > 0, "the stall timed out no call");
        return;
    }
    panic!("three stalls of 600 ms each lasted 950 ms or more: the machine is too busy");
}

/// Tasks deciding their own key back to back, while `during` runs (from 50 ms after they
/// start): what `during` gave, and where every decision came from.
async fn deciding_during<F: std::future::Future>(
    limiter: &RedisLimiter<str>,
    during: F,
) -> (F::Output, Vec<Source>) {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    assert_eq!(
        limiter.check("warm").await.unwrap().source(),
        Source::Buckets
    );
    let stop = Arc::new(AtomicBool::new(false));
    let deciders: Vec<_> = (0..TASKS)
        .map(|task| {
            let (limiter, stop) = (limiter.clone(), stop.clone());
            tokio::spawn(async move {
                let key = task.to_string();
                let mut sources = Vec::new();
                // Relaxed: a flag; a late look costs one more decision. Bounded: 5 000.
                while !stop.load(Ordering::Relaxed) && sources.len() < 5_000 {
                    sources.push(limiter.check(&key).await.unwrap().source());
                }
                sources
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let output = during.await;
    // Relaxed: see above.
    stop.store(true, Ordering::Relaxed);
    let mut sources = Vec::new();
    for decider in deciders {
        sources.extend(decider.await.unwrap());
    }
    (output, sources)
}

/// The decisions of `sources` the failure policy made, after checking that the breaker never
/// refused one and that they are at most twice the decisions in flight (one per task).
fn in_flight_only(sources: &[Source], what: &str) -> usize {
    let failed: Vec<_> = sources.iter().filter_map(Source::failure).collect();
    println!(
        "{what}: {} of {} decisions by the failure policy",
        failed.len(),
        sources.len()
    );
    let open = failed
        .iter()
        .filter(|f| **f == Failure::BreakerOpen)
        .count();
    assert_eq!(
        open, 0,
        "the breaker opened: {open} decisions refused by it"
    );
    assert!(
        failed.len() <= 2 * TASKS,
        "{} decisions by the failure policy, {TASKS} in flight",
        failed.len()
    );
    failed.len()
}

/// Log lines written to memory (the `fmt` subscriber's writer).
#[derive(Clone, Default)]
struct Logs(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// An outage is told to the logs in a few lines (feature `tracing`): the set built, failing
/// open; the breaker opened, naming the server; the failure policy's first decision at once,
/// then no line per decision; the breaker closed; and the decisions made since the first line.
/// The decisions the lines count are every decision the failure policy made.
#[tokio::test]
async fn an_outage_is_told_to_the_logs_in_a_few_lines() {
    let logs = Logs::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    // For the whole process: the breaker's probe runs on whichever thread the runtime gives
    // it. Lines are told apart by the server they name (no other test in this binary logs).
    tracing::subscriber::set_global_default(subscriber).unwrap();
    let mut server = RedisServer::start();
    let address = server
        .url()
        .trim_start_matches("redis://")
        .trim_end_matches('/')
        .to_owned();
    let limiter = Policies::<str>::builder()
        .policy(Policy::keyed("k", |k: &str| k).quota(Quota::per_second(1_000_000).unwrap()))
        .build_redis(RedisBackend::new(server.client()).timeout(TIMEOUT))
        .unwrap();
    assert_eq!(limiter.check("k").await.unwrap().source(), Source::Buckets);
    server.kill();
    for _ in 0..300 {
        assert!(limiter.check("k").await.unwrap().is_allowed(), "fails open");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    server.restart();
    // Until Redis decides again (bounded: 5 s).
    for _ in 0..500 {
        if limiter.check("k").await.unwrap().source() == Source::Buckets {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let text = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    let ours = format!("server=\"{address}\"");
    let lines = |what: &str| {
        let of = |line: &&str| line.contains(what) && line.contains(&ours);
        text.lines().filter(of).collect::<Vec<_>>()
    };
    let built = lines("policy set built in Redis");
    assert!(
        built.len() == 1 && built[0].contains("open: admits every request"),
        "{text}"
    );
    let opened = lines("circuit breaker opened");
    assert!(opened.len() == 1 && opened[0].contains(&address), "{text}");
    assert_eq!(lines("circuit breaker closed").len(), 1, "{text}");
    let counted = |line: &&str| -> u64 {
        let after = line.split("decisions=").nth(1).expect("a count");
        after.split(' ').next().unwrap().parse().unwrap()
    };
    let first = lines("Redis did not answer: decided by the failure policy");
    let since = lines("Redis answers again");
    assert_eq!((first.len(), since.len()), (1, 1), "{text}");
    let told: u64 = first.iter().chain(&since).map(counted).sum();
    assert_eq!(told, limiter.stats().failed_open, "{text}");
}

/// A dropped connection (`CLIENT KILL`) costs the decisions in flight on it, not an open
/// breaker: their failures are one piece of evidence, and the connection manager reconnects
/// for the calls after them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_connection_costs_the_decisions_in_flight() {
    let server = RedisServer::start();
    let limiter = Policies::<str>::builder()
        .policy(Policy::keyed("k", |k: &str| k).quota(Quota::per_second(1_000_000).unwrap()))
        .build_redis(server.backend())
        .unwrap();
    let (killed, sources) = deciding_during(&limiter, async {
        let killed: i64 =
            server.command(redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("normal"));
        tokio::time::sleep(Duration::from_millis(200)).await;
        killed
    })
    .await;
    assert!(killed >= 1);
    in_flight_only(&sources, &format!("CLIENT KILL ({killed} killed)"));
}
