//! The stepwise-refill algorithms (the fixed window counter, and the token bucket with interval
//! refill) against a reference model with absolute window numbers in 128-bit arithmetic
//! (`tests/common/models/stepped.rs`).

use std::time::Duration;

use flowgate::algorithm::{FixedWindow, IntervalRefill};
use flowgate::clock::ManualClock;
use flowgate::{Initial, Quota, QuotaError, RateLimiter, Receipt};
use proptest::prelude::*;

mod common;
use common::models::stepped::Model;
use common::{Lagging, Op};

enum Limiter {
    Fixed(RateLimiter<Lagging, FixedWindow>),
    Interval(RateLimiter<Lagging, IntervalRefill>),
}

impl Limiter {
    fn new(q: &Quota, clock: &Lagging) -> Self {
        if q.burst() == q.count() && q.count() % 2 == 0 {
            Self::Fixed(RateLimiter::with_algorithm(
                FixedWindow::new(q).unwrap(),
                clock.clone(),
            ))
        } else {
            Self::Interval(RateLimiter::with_algorithm(
                IntervalRefill::new(q).unwrap(),
                clock.clone(),
            ))
        }
    }
    fn reserve(&self, n: u32) -> common::Reserved {
        match self {
            Self::Fixed(l) => l.reserve(n),
            Self::Interval(l) => l.reserve(n),
        }
    }
    fn give_back(&self, receipt: Receipt) -> bool {
        match self {
            Self::Fixed(l) => l.give_back(receipt),
            Self::Interval(l) => l.give_back(receipt),
        }
    }
}

fn scenario() -> impl Strategy<Value = (Quota, u64, Vec<Op>)> {
    let window = prop_oneof![
        Just(1_000_000u64),
        1_000_000u64..=10_000_000_000,
        Just(86_400_000_000_000)
    ];
    // Half the quotas have burst = count (a fixed window when the count is even).
    (
        window,
        1u32..=20,
        prop_oneof![Just(0u32), 1u32..=25],
        any::<u32>(),
    )
        .prop_filter_map("invalid", |(window, count, burst, cells)| {
            let burst = if burst == 0 { count } else { burst };
            let q = Quota::new(count, core::time::Duration::from_nanos(window))
                .ok()?
                .with_burst(burst)
                .ok()?;
            q.with_initial(Initial::Cells(cells % (burst + 1))).ok()
        })
        .prop_flat_map(|q| {
            let w = q.period().as_nanos() as u64;
            // Readings stay within 2^38 windows of each other, where window numbers modulo
            // 2^40 are unambiguous (aliasing has its own test below).
            let start = 0u64..(1u64 << 38).saturating_mul(w.min(1 << 20));
            let op = prop_oneof![
                4 => (0..=w.saturating_mul(2)).prop_map(Op::Advance),
                1 => Just(Op::Advance(0)),
                2 => (0..=w.saturating_mul(2)).prop_map(Op::Rewind),
                8 => (0u32..=27).prop_map(Op::Check),
                3 => (0u32..=27, 0..=w.saturating_mul(2)).prop_map(|(n, b)| Op::CheckAt(n, b)),
                2 => any::<u8>().prop_map(Op::GiveBack),
            ];
            (Just(q), start, prop::collection::vec(op, 1..60))
        })
}

proptest! {
    #![proptest_config(common::config())]

    #[test]
    fn stepped_algorithms_match_the_model((quota, start, ops) in scenario()) {
        let clock = Lagging::starting_at(start);
        let limiter = Limiter::new(&quota, &clock);
        let mut model = Model::new(&quota, start.into());
        common::drive(&clock, &ops, |n| limiter.reserve(n), |r| limiter.give_back(r), &mut model)?;
    }
}

#[test]
fn limits_are_validated() {
    let q = |s: &str| s.parse::<Quota>().unwrap();
    assert_eq!(
        FixedWindow::new(&q("16777216/s")),
        Err(QuotaError::LimitTooLarge { max: 16_777_215 })
    );
    assert!(FixedWindow::new(&q("16777215/s")).is_ok());
    assert_eq!(
        FixedWindow::new(&q("1/999us")),
        Err(QuotaError::WindowTooShort {
            min_nanos: 1_000_000
        })
    );
    assert!(FixedWindow::new(&q("1/1ms")).is_ok());
    assert_eq!(
        FixedWindow::new(&q("100/min burst 20")),
        Err(QuotaError::BurstNotSupported)
    );
}

/// Window numbers are kept modulo 2^40: a bucket idle for 2^39 windows or more is read as a
/// future window, which counts conservatively (its old cells still count) and is repaired on
/// its first refusal.
#[test]
fn aliasing_after_two_to_the_thirty_nine_windows_is_conservative() {
    let ms = 1_000_000u64;
    let clock = ManualClock::new();
    let fw = FixedWindow::new(&"2/1ms".parse().unwrap()).unwrap();
    let limiter = RateLimiter::with_algorithm(fw, clock.clone());
    assert!(limiter.check_n(2).unwrap().is_ok());
    clock.set((1u64 << 39) * ms);
    // Seen as the stored window, still full: refused, never an extra cell.
    assert!(limiter.check().is_err());
    // The refusal moved the count to the current window; the next window is fresh.
    clock.advance(Duration::from_millis(1));
    assert!(limiter.check_n(2).unwrap().is_ok());
}

#[test]
fn interval_refill_limits_are_validated() {
    let q = |s: &str| s.parse::<Quota>().unwrap();
    assert_eq!(
        IntervalRefill::new(&q("1/s burst 16777216")),
        Err(QuotaError::LimitTooLarge { max: 16_777_215 })
    );
    assert!(IntervalRefill::new(&q("100000000/s burst 16777215")).is_ok());
    assert_eq!(
        IntervalRefill::new(&q("1/999us")),
        Err(QuotaError::WindowTooShort {
            min_nanos: 1_000_000
        })
    );
}

/// A whole batch arrives at each boundary, and none before it; many idle intervals refill only
/// up to the burst.
#[test]
fn interval_refill_arrives_in_batches() {
    let ms = 1_000_000u64;
    let clock = ManualClock::new();
    let bucket = IntervalRefill::new(&"3/100ms burst 7".parse().unwrap()).unwrap();
    let limiter = RateLimiter::with_algorithm(bucket, clock.clone());
    assert!(limiter.check_n(7).is_ok_and(|r| r.is_ok()));
    clock.set(99 * ms);
    assert_eq!(limiter.available(), 0);
    let refused = limiter.check_n(4).unwrap().unwrap_err();
    // 4 cells need two batches: the boundaries at 100 ms and 200 ms.
    assert_eq!(refused.retry_after(), Duration::from_millis(101));
    clock.set(100 * ms);
    assert_eq!(limiter.available(), 3);
    clock.set(1_000 * ms);
    assert_eq!(limiter.available(), 7);
}
