//! The seeds' boundary example, through every algorithm: a limit of 120 per minute; 100
//! requests evenly over 00:50–00:59.9 and 100 over 01:00–01:09.9 (one every 100 ms), on a
//! clock whose minute windows start at 0. The counts are exact; each is also derived by hand in
//! its comment.

use std::time::Duration;

use flowgate::algorithm::{Credit, FixedWindow, IntervalRefill, LeakyBucket, SlidingWindow};
use flowgate::clock::ManualClock;
use flowgate::{Algorithm, Allowed, Gcra, Quota, RateLimiter, SlidingLog};

const MS: u64 = 1_000_000;

/// The request times, in ms.
fn times() -> impl Iterator<Item = u64> {
    (0..100)
        .map(|i| 50_000 + i * 100)
        .chain((0..100).map(|i| 60_000 + i * 100))
}

fn quota() -> Quota {
    "120/min".parse().unwrap()
}

/// The admissions (time in ms, delay) of `algorithm` over the example.
fn run(algorithm: impl Algorithm) -> Vec<(u64, Allowed)> {
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_algorithm(algorithm, clock.clone());
    times()
        .filter_map(|t| {
            clock.set(t * MS);
            limiter.check().ok().map(|a| (t, a))
        })
        .collect()
}

/// The most admissions in any span of `span_ms` (closed at both ends).
fn most_in_any(admitted: &[u64], span_ms: u64) -> usize {
    (0..admitted.len())
        .map(|i| {
            admitted[i..]
                .iter()
                .take_while(|&&t| t - admitted[i] <= span_ms)
                .count()
        })
        .max()
        .unwrap_or(0)
}

fn times_of(admitted: &[(u64, Allowed)]) -> Vec<u64> {
    admitted.iter().map(|&(t, _)| t).collect()
}

/// Each minute window counts 100 ≤ 120: all 200 pass, within 20 seconds.
#[test]
fn fixed_window_admits_all_two_hundred() {
    let admitted = run(FixedWindow::new(&quota()).unwrap());
    assert_eq!(admitted.len(), 200);
    assert_eq!(most_in_any(&times_of(&admitted), 19_900), 200);
}

/// The whole batch of 120 returns at 01:00, so the second 100 pass too: stepwise refill has the
/// fixed window's edge.
#[test]
fn interval_refill_admits_all_two_hundred() {
    assert_eq!(run(IntervalRefill::new(&quota()).unwrap()).len(), 200);
}

/// Exact: 100, then 20 more at 01:00.0–01:01.9, then nothing until 00:50 leaves the window.
#[test]
fn sliding_log_admits_at_most_one_hundred_twenty_in_any_minute() {
    let clock = ManualClock::new();
    let log = SlidingLog::with_clock(quota(), clock.clone()).unwrap();
    let admitted: Vec<u64> = times()
        .filter(|&t| {
            clock.set(t * MS);
            log.check().is_ok()
        })
        .collect();
    assert_eq!(admitted.len(), 120);
    assert_eq!(most_in_any(&admitted, 59_999), 120);
    assert_eq!(*admitted.last().unwrap(), 61_900);
}

/// At 01:00 + k·100 ms the previous 100 weigh ⌈100·(600 − k)/600⌉: the first 20 pass at once,
/// then about one in six as the weight falls: 136 in all, and never more than 136 in a minute
/// (the documented worst case is 2 × 120).
#[test]
fn sliding_window_admits_one_hundred_thirty_six() {
    let admitted = run(SlidingWindow::new(&quota()).unwrap());
    assert_eq!(admitted.len(), 136);
    assert_eq!(most_in_any(&times_of(&admitted), 59_999), 136);
}

/// Full bucket of 120, refilling 2 per second, 10 requests per second: after k admissions the
/// schedule runs 0.4·k + 0.1 s ahead, within 60 s up to k = 149 (at 01:04.8); then one per
/// 500 ms from 01:05.0 to 01:09.5: 10 more. 159, within burst + elapsed × rate.
#[test]
fn gcra_and_the_leaky_meter_admit_one_hundred_fifty_nine() {
    let gcra = run(Gcra::new(&quota()));
    assert_eq!(gcra.len(), 159);
    assert_eq!(gcra[148].0, 64_800);
    let meter = run(LeakyBucket::meter(&quota()));
    assert_eq!(times_of(&meter), times_of(&gcra));
    // The rate bound: between any two admissions, at most 120 + elapsed × 2/s.
    let t = times_of(&gcra);
    for i in 0..t.len() {
        for j in i..t.len() {
            assert!((j - i + 1) as u64 <= 120 + (t[j] - t[i]) * 2 / 1_000 + 1);
        }
    }
}

/// With 10 s of queueing (or debt) beyond the bucket, the schedule may run 70 s ahead: 175 in a
/// row (to 01:07.4), then one per 500 ms from 01:08.0: 179. The shaper's delays reach the full
/// 10 s; credit's stop at 9.5 s, as each request waits only for those before it.
#[test]
fn shaper_and_credit_admit_one_hundred_seventy_nine_with_delays() {
    let ten = Duration::from_secs(10);
    let shaper = run(LeakyBucket::shaper(&quota(), ten).unwrap());
    let credit = run(Credit::new(&quota(), ten).unwrap());
    assert_eq!(shaper.len(), 179);
    assert_eq!(times_of(&shaper), times_of(&credit));
    let max_delay = |a: &[(u64, Allowed)]| a.iter().map(|(_, a)| a.delay()).max().unwrap();
    assert_eq!(max_delay(&shaper), ten);
    assert_eq!(max_delay(&credit), Duration::from_millis(9_500));
    assert_eq!(
        shaper.iter().filter(|(_, a)| !a.delay().is_zero()).count(),
        30
    );
    // Released (admitted + delay), the delayed requests leave exactly one interval apart.
    let released: Vec<u64> = shaper
        .iter()
        .filter(|(_, a)| !a.delay().is_zero())
        .map(|(t, a)| t + a.delay().as_millis() as u64)
        .collect();
    assert!(
        released.windows(2).all(|w| w[1] - w[0] == 500),
        "{released:?}"
    );
}
