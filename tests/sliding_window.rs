//! The sliding window counter against a reference model (`tests/common/models/sliding_window.rs`:
//! absolute window numbers, 128-bit arithmetic, and `retry_after` found by searching for the
//! first admitting time rather than by the limiter's closed form).

use flowgate::algorithm::SlidingWindow;
use flowgate::{Initial, Quota, QuotaError, RateLimiter};
use proptest::prelude::*;

mod common;
use common::models::sliding_window::Model;
use common::Op;

fn scenario() -> impl Strategy<Value = (Quota, u64, Vec<Op>)> {
    let window = prop_oneof![
        Just(1_000_000u64),
        1_000_000u64..=10_000_000_000,
        Just(86_400_000_000_000),
        // Longer than 2^42 ns: scaled weights.
        (1u64 << 42)..(1u64 << 50),
    ];
    (window, prop_oneof![1u32..=20, 1u32..=1_000], any::<u32>())
        .prop_filter_map("invalid", |(window, limit, cells)| {
            let q = Quota::new(limit, core::time::Duration::from_nanos(window)).ok()?;
            q.with_initial(Initial::Cells(cells % (limit + 1))).ok()
        })
        .prop_flat_map(|q| {
            let w = q.period().as_nanos() as u64;
            let l = q.count();
            // Readings stay within 2^22 windows, where indices modulo 2^24 are unambiguous.
            let start = 0u64..(1u64 << 22).saturating_mul(w.min(1 << 30));
            let op = prop_oneof![
                4 => (0..=w.saturating_mul(2)).prop_map(Op::Advance),
                1 => Just(Op::Advance(0)),
                1 => (0..=w.saturating_mul(1100)).prop_map(Op::Advance),
                2 => (0..=w.saturating_mul(2)).prop_map(Op::Rewind),
                1 => (0..=w.saturating_mul(1100)).prop_map(Op::Rewind),
                8 => (0u32..=l.min(5) + 1).prop_map(Op::Check),
                2 => (0u32..=l + 1).prop_map(Op::Check),
                3 => (0u32..=l + 1, 0..=w.saturating_mul(2)).prop_map(|(n, b)| Op::CheckAt(n, b)),
                2 => any::<u8>().prop_map(Op::GiveBack),
            ];
            (Just(q), start, prop::collection::vec(op, 1..60))
        })
}

proptest! {
    #![proptest_config(common::config())]

    #[test]
    fn sliding_window_matches_the_model((quota, start, ops) in scenario()) {
        let clock = common::Lagging::starting_at(start);
        let sw = SlidingWindow::new(&quota).unwrap();
        let limiter = RateLimiter::with_algorithm(sw, clock.clone());
        let mut model = Model::new(&quota, start.into());
        common::drive(&clock, &ops, |n| limiter.reserve(n), |r| limiter.give_back(r), &mut model)?;
    }
}

#[test]
fn limits_are_validated() {
    let q = |s: &str| s.parse::<Quota>().unwrap();
    assert_eq!(
        SlidingWindow::new(&q("262144/s")),
        Err(QuotaError::LimitTooLarge { max: 262_143 })
    );
    assert!(SlidingWindow::new(&q("262143/s")).is_ok());
    assert_eq!(
        SlidingWindow::new(&q("1/999us")),
        Err(QuotaError::WindowTooShort {
            min_nanos: 1_000_000
        })
    );
    assert_eq!(
        SlidingWindow::new(&q("100/min burst 20")),
        Err(QuotaError::BurstNotSupported)
    );
}

/// A reading far older than the stored window (a thread preempted for a long time, a cached
/// reading) is judged against the stored window: it frees nothing, and the bucket it leaves
/// behind still refuses fresh readings (found in review: a design that took such readings as
/// "past" let alternating stale and fresh readings admit without bound).
#[test]
fn a_far_stale_reading_frees_nothing() {
    let ms = 1_000_000u64;
    let clock = common::Lagging::starting_at(10_000 * ms);
    let sw = SlidingWindow::new(&"10/1ms".parse().unwrap()).unwrap();
    let limiter = RateLimiter::with_algorithm(sw, clock.clone());
    assert!(limiter.check_n(10).is_ok_and(|r| r.is_ok()));
    for _ in 0..3 {
        clock.stale(8_000 * ms);
        assert!(limiter.check().is_err(), "2000 windows stale");
        assert!(limiter.check().is_err(), "the fresh reading still sees 10");
    }
    // Idle for a day of 1 ms windows (below 2^27 windows): read as past, empty.
    clock.advance(std::time::Duration::from_secs(86_400));
    assert!(limiter.check_n(10).is_ok_and(|r| r.is_ok()));
}
