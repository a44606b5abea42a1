//! The same traffic through every algorithm, side by side: the quickest way to choose one.
//!
//! The traffic is the boundary example (120 per minute allowed; 100 requests over
//! 00:50–00:59.9 and 100 over 01:00–01:09.9), then a quiet minute, then a burst of 150 at
//! 02:30. A manual clock replays it instantly.
//!
//! Run with `cargo run --release --example algorithms`.

use std::time::Duration;

use flowgate::algorithm::{Credit, FixedWindow, IntervalRefill, LeakyBucket, SlidingWindow};
use flowgate::clock::ManualClock;
use flowgate::{Algorithm, Allowed, Gcra, Quota, QuotaError, RateLimiter, SlidingLog};

const MS: u64 = 1_000_000;

/// Request times in ms.
fn traffic() -> Vec<u64> {
    let edge = (0..100)
        .map(|i| 50_000 + i * 100)
        .chain((0..100).map(|i| 60_000 + i * 100));
    let burst = std::iter::repeat(150_000).take(150);
    edge.chain(burst).collect()
}

/// What one algorithm did with the traffic.
struct Row {
    name: &'static str,
    /// Admitted in the first phase (the boundary), and in the burst.
    edge: usize,
    burst: usize,
    /// The most admitted in any 60 s span.
    peak: usize,
    /// The longest delay a caller was asked to wait (shapers only).
    max_delay: Duration,
}

fn row(name: &'static str, admitted: &[(u64, Duration)]) -> Row {
    let times: Vec<u64> = admitted.iter().map(|&(t, _)| t).collect();
    let peak = (0..times.len())
        .map(|i| {
            times[i..]
                .iter()
                .take_while(|&&t| t - times[i] < 60_000)
                .count()
        })
        .max()
        .unwrap_or(0);
    Row {
        name,
        edge: times.iter().filter(|&&t| t < 100_000).count(),
        burst: times.iter().filter(|&&t| t >= 100_000).count(),
        peak,
        max_delay: admitted.iter().map(|&(_, d)| d).max().unwrap_or_default(),
    }
}

fn replay(name: &'static str, algorithm: impl Algorithm) -> Row {
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_algorithm(algorithm, clock.clone());
    let admitted: Vec<(u64, Duration)> = traffic()
        .into_iter()
        .filter_map(|t| {
            clock.set(t * MS);
            limiter.check().ok().map(|a: Allowed| (t, a.delay()))
        })
        .collect();
    row(name, &admitted)
}

fn main() -> Result<(), QuotaError> {
    let quota = Quota::per_minute(120)?;
    let queue = Duration::from_secs(10);
    let log = {
        let clock = ManualClock::new();
        let log = SlidingLog::with_clock(quota, clock.clone())?;
        let admitted: Vec<(u64, Duration)> = traffic()
            .into_iter()
            .filter(|&t| {
                clock.set(t * MS);
                log.check().is_ok()
            })
            .map(|t| (t, Duration::ZERO))
            .collect();
        row("sliding log", &admitted)
    };
    let rows = [
        replay("GCRA (token bucket)", Gcra::new(&quota)),
        replay("leaky bucket meter", LeakyBucket::meter(&quota)),
        replay(
            "leaky bucket shaper 10s",
            LeakyBucket::shaper(&quota, queue)?,
        ),
        replay("credit, 10s max debt", Credit::new(&quota, queue)?),
        replay("interval refill", IntervalRefill::new(&quota)?),
        replay("fixed window", FixedWindow::new(&quota)?),
        replay("sliding window counter", SlidingWindow::new(&quota)?),
        log,
    ];
    println!("limit {quota}; 200 requests across 01:00, then 150 at once at 02:30\n");
    println!(
        "{:<26} {:>10} {:>10} {:>16} {:>12}",
        "algorithm", "edge", "burst", "most in 60 s", "max delay"
    );
    for r in &rows {
        println!(
            "{:<26} {:>6}/200 {:>6}/150 {:>16} {:>12?}",
            r.name, r.edge, r.burst, r.peak, r.max_delay
        );
    }
    // The table's two ends, checked (`scripts/test` runs this): the fixed window lets the whole
    // edge through, twice the limit within a minute; the sliding log never exceeds it.
    let row = |name| {
        rows.iter()
            .find(|r| r.name == name)
            .expect("a row of the table")
    };
    assert_eq!(
        (row("fixed window").edge, row("sliding log").peak),
        (200, 120)
    );
    Ok(())
}
