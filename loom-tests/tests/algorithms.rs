//! Loom models of the algorithms other than GCRA, each on the same lock-free cell: 2–3 threads
//! racing on one bucket, with and without spurious CAS failures.
#![cfg(flowgate_loom)]

use std::time::Duration;

use flowgate::algorithm::{Credit, FixedWindow, IntervalRefill, LeakyBucket, SlidingWindow};
use flowgate::clock::ManualClock;
use flowgate::{Quota, RateLimiter, SlidingLog};
use flowgate_loom_tests::{model, Checks};
use loom::sync::Arc;
use loom::thread;

const SECOND: u64 = 1_000_000_000;

fn fixed_window(quota: &str, clock: &ManualClock) -> Arc<RateLimiter<ManualClock, FixedWindow>> {
    let fw = FixedWindow::new(&quota.parse::<Quota>().unwrap()).unwrap();
    Arc::new(RateLimiter::with_algorithm(fw, clock.clone()))
}

#[test]
fn fixed_window_last_cell() {
    model(|| {
        let clock = ManualClock::starting_at(SECOND / 2);
        let l = fixed_window("2/s", &clock);
        assert!(l.check().is_ok());
        let checks = Checks::spawn(&l, 2);
        let admitted = checks.admitted();
        assert_eq!(admitted, 1);
        assert_eq!(l.available(), 0);
    });
}

/// The clock crosses into the next window while two threads decide: whatever their readings,
/// the full first window admits nothing more and the second at most its limit.
#[test]
fn fixed_window_rollover() {
    model(|| {
        let clock = ManualClock::starting_at(SECOND / 2);
        let l = fixed_window("1/s", &clock);
        assert!(l.check().is_ok());
        let setter = {
            let clock = clock.clone();
            thread::spawn(move || clock.set(SECOND))
        };
        let checks = Checks::spawn(&l, 2);
        setter.join().unwrap();
        let admitted = checks.admitted();
        assert!(
            admitted <= 1,
            "{admitted} admitted: the second window holds 1"
        );
        assert_eq!(
            l.available() as usize,
            1 - admitted,
            "an admission was lost or doubled"
        );
    });
}

/// Two threads race for the last token of an interval-refill bucket.
#[test]
fn interval_refill_last_token() {
    model(|| {
        let clock = ManualClock::starting_at(SECOND / 2);
        let bucket = IntervalRefill::new(&"1/s burst 2".parse::<Quota>().unwrap()).unwrap();
        let l = Arc::new(RateLimiter::with_algorithm(bucket, clock.clone()));
        assert!(l.check().is_ok());
        assert_eq!(Checks::spawn(&l, 2).admitted(), 1);
        assert_eq!(l.available(), 0);
    });
}

/// Two threads race for the last place in a shaper's queue: one is admitted with the longest
/// delay, the other refused; nothing is reserved for it.
#[test]
fn shaper_last_place_in_the_queue() {
    model(|| {
        let clock = ManualClock::new();
        let shaper = LeakyBucket::shaper(
            &"10/s burst 1".parse::<Quota>().unwrap(),
            Duration::from_millis(100),
        )
        .unwrap();
        let l = Arc::new(RateLimiter::with_algorithm(shaper, clock.clone()));
        assert_eq!(l.check().unwrap().delay(), Duration::ZERO);
        assert_eq!(Checks::spawn(&l, 2).admitted(), 1);
        // The queue is full: the next request would wait 200 ms, and is refused.
        let refused = l.check().unwrap_err();
        assert_eq!(refused.retry_after(), Duration::from_millis(100));
    });
}

/// Three threads borrow on credit with room for two more: exactly two are admitted, and the
/// debt never exceeds the maximum.
#[test]
fn credit_debt_bound() {
    model(|| {
        let clock = ManualClock::new();
        let credit = Credit::new(
            &"10/s burst 1".parse::<Quota>().unwrap(),
            Duration::from_millis(200),
        )
        .unwrap();
        let l = Arc::new(RateLimiter::with_algorithm(credit, clock.clone()));
        assert!(l.check().is_ok());
        assert_eq!(Checks::spawn(&l, 3).admitted(), 2);
        assert!(l.check().is_err());
    });
}

/// Two threads race for the last cell of a sliding window whose previous window still weighs.
#[test]
fn sliding_window_last_cell() {
    model(|| {
        let clock = ManualClock::new();
        let sw = SlidingWindow::new(&"4/s".parse::<Quota>().unwrap()).unwrap();
        let l = Arc::new(RateLimiter::with_algorithm(sw, clock.clone()));
        assert!(l.check_n(4).unwrap().is_ok());
        // Half into the next window: the previous 4 weigh 2, so 2 cells are free; take one.
        clock.set(SECOND + SECOND / 2);
        assert!(l.check().is_ok());
        assert_eq!(Checks::spawn(&l, 2).admitted(), 1);
        assert_eq!(l.available(), 0);
    });
}

fn log(limit: u32, clock: &ManualClock) -> Arc<SlidingLog<ManualClock>> {
    Arc::new(
        SlidingLog::with_clock(
            Quota::new(limit, core::time::Duration::from_nanos(SECOND)).unwrap(),
            clock.clone(),
        )
        .unwrap(),
    )
}

/// Claim, advance and record race: two threads for one slot, with spurious CAS failures
/// driving the retry and helping paths. Exactly one is admitted, and its time is recorded.
#[test]
fn sliding_log_one_slot() {
    model(|| {
        let clock = ManualClock::starting_at(SECOND);
        let l = log(1, &clock);
        let threads: Vec<_> = (0..2)
            .map(|i| {
                let l = l.clone();
                thread::spawn(move || {
                    flowgate::loom::fail_next_cas(i);
                    l.check().is_ok()
                })
            })
            .collect();
        let admitted = threads
            .into_iter()
            .map(|h| h.join().unwrap())
            .filter(|&ok| ok)
            .count();
        assert_eq!(admitted, 1);
        assert_eq!(l.available(), 0);
        assert_eq!(l.check().unwrap_err().retry_after(), Duration::from_secs(1));
    });
}

/// A two-cell request races a one-cell request for a log with two free slots: either the pair
/// or the single gets in, never both, and a lost race gives back what it claimed.
#[test]
fn sliding_log_pair_against_single() {
    model(|| {
        let clock = ManualClock::starting_at(SECOND);
        let l = log(2, &clock);
        let pair = {
            let l = l.clone();
            thread::spawn(move || matches!(l.check_n(2), Ok(Ok(_))))
        };
        let single = {
            let l = l.clone();
            thread::spawn(move || l.check().is_ok())
        };
        let (pair, single) = (pair.join().unwrap(), single.join().unwrap());
        assert!(pair || single, "one of them fits");
        assert!(!(pair && single), "three cells in a log of two");
        let taken = if pair { 2 } else { 1 };
        assert_eq!(l.available(), 2 - taken);
    });
}
