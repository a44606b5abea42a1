//! Loom models of the single-bucket limiter: every interleaving of 2–3 threads racing
//! `check_n` / `give_back` / the clock-step clamp on one bucket, with and without spurious CAS
//! failures. Each asserts that admissions never exceed what the quota allows and that no update
//! is lost (the final state accounts for every admitted cell).
//!
//! Run: `RUSTFLAGS="--cfg flowgate_loom" cargo test --release -p flowgate-loom-tests`
#![cfg(flowgate_loom)]

use flowgate::clock::ManualClock;
use flowgate::loom::fail_next_cas;
use flowgate::{Quota, RateLimiter};
use flowgate_loom_tests::{frozen, model, Checks};
use loom::sync::Arc;
use loom::thread;

type Limiter = RateLimiter<ManualClock>;

/// Each thread asks for its `n` cells (after `spurious` forced CAS failures); returns the cells
/// admitted in total.
fn race(limiter: &Arc<Limiter>, requests: &[(u32, u32)]) -> u32 {
    let handles: Vec<_> = requests
        .iter()
        .map(|&(n, spurious)| {
            let limiter = limiter.clone();
            thread::spawn(move || {
                fail_next_cas(spurious);
                match limiter.check_n(n) {
                    Ok(Ok(_)) => n,
                    _ => 0,
                }
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).sum()
}

#[test]
fn two_threads_one_cell_left() {
    model(|| {
        let l = frozen(1);
        assert_eq!(race(&l, &[(1, 0), (1, 0)]), 1);
        assert_eq!(l.available(), 0);
    });
}

#[test]
fn two_threads_both_fit_and_no_update_is_lost() {
    model(|| {
        let l = frozen(3);
        assert_eq!(race(&l, &[(2, 0), (1, 0)]), 3);
        assert_eq!(l.available(), 0);
    });
}

#[test]
fn three_threads_two_cells() {
    model(|| {
        let l = frozen(2);
        let admitted = race(&l, &[(1, 0), (1, 0), (1, 0)]);
        assert_eq!(admitted, 2);
        assert_eq!(l.available(), 0);
    });
}

#[test]
fn spurious_cas_failures_retry_without_loss() {
    model(|| {
        let l = frozen(3);
        assert_eq!(race(&l, &[(2, 1), (1, 2)]), 3);
        assert_eq!(l.available(), 0);
    });
}

#[test]
fn spurious_failures_never_over_admit() {
    model(|| {
        let l = frozen(2);
        // Whichever comes first wins: both cells, or one cell and the other request refused.
        let admitted = race(&l, &[(2, 2), (1, 1)]);
        assert!(
            admitted == 2 || admitted == 1,
            "admitted {admitted} of a burst of 2"
        );
        assert_eq!(
            l.available(),
            2 - admitted,
            "an admitted cell was lost or duplicated"
        );
    });
}

/// A give-back races a check that takes the next cell on top of the reservation: either the
/// give-back comes first (the bucket is whole again, then the check takes one), or the check
/// does and the give-back, finding its word gone, leaves the bucket as it is. Never both the
/// reservation's cell back and the check's taken from the restored bucket too, never a cell lost;
/// a spurious CAS failure in the give-back changes nothing.
#[test]
fn give_back_races_check() {
    model(|| {
        let l = frozen(2);
        let (_, receipt) = l.reserve(1).unwrap().unwrap();
        let giver = {
            let l = l.clone();
            thread::spawn(move || {
                fail_next_cas(1);
                l.give_back(receipt)
            })
        };
        let checker = {
            let l = l.clone();
            thread::spawn(move || l.check().is_ok())
        };
        let gave = giver.join().unwrap();
        assert!(checker.join().unwrap(), "a cell was left for the check");
        assert_eq!(l.available(), if gave { 1 } else { 0 });
    });
}

#[test]
fn clamp_after_a_clock_step_races_check() {
    const MINUTE: u64 = 60_000_000_000;
    model(|| {
        // 2 per hour: interval 30 min, window 1 h.
        let clock = ManualClock::starting_at(600 * MINUTE);
        let quota = Quota::per_hour(2).unwrap();
        let l = Arc::new(RateLimiter::with_clock(quota, clock.clone()));
        assert!(l.check_n(2).unwrap().is_ok());
        // The clock steps back five hours: the bucket is booked far beyond one window.
        clock.set(300 * MINUTE);
        let checks = Checks::spawn(&l, 2);
        assert_eq!(checks.admitted(), 0, "an empty bucket admits nothing");
        // Clamped to empty as of the new reading: one cell after one interval, not five hours.
        assert_eq!(l.available(), 0);
        clock.set(330 * MINUTE);
        assert_eq!(l.available(), 1);
    });
}

/// The ordering the clamp relies on: a thread that sees a bucket booked with some reading must
/// then read the clock no earlier than that reading. One thread moves the clock forwards while
/// another books the whole bucket and a third decides, possibly with an older reading: that
/// stale decision must never clamp away cells booked at the newer reading.
#[test]
fn a_stale_decision_never_frees_cells_booked_later() {
    const SECOND: u64 = 1_000_000_000;
    model(|| {
        let clock = ManualClock::starting_at(10 * SECOND);
        let quota = Quota::per_second(10).unwrap();
        let l = Arc::new(RateLimiter::with_clock(quota, clock.clone()));
        let setter = {
            let clock = clock.clone();
            thread::spawn(move || clock.set(12 * SECOND))
        };
        let booker = {
            let l = l.clone();
            thread::spawn(move || {
                // The clock only moves forwards: the booking's reading is `at` or later.
                let at = l.clock().get();
                (at, matches!(l.check_n(10), Ok(Ok(_))))
            })
        };
        let other = {
            let l = l.clone();
            thread::spawn(move || l.check().is_ok())
        };
        setter.join().unwrap();
        let (at, booked) = booker.join().unwrap();
        other.join().unwrap();
        // The clock now reads 12 s. Ten cells booked at 12 s leave nothing at 12 s.
        if booked && at == 12 * SECOND {
            assert_eq!(
                l.available(),
                0,
                "a stale reading freed cells booked at 12 s"
            );
        }
    });
}

#[test]
fn reset_races_check() {
    model(|| {
        let l = frozen(2);
        assert!(l.check_n(2).unwrap().is_ok());
        let resetter = {
            let l = l.clone();
            thread::spawn(move || l.reset())
        };
        let checker = {
            let l = l.clone();
            thread::spawn(move || {
                fail_next_cas(1);
                l.check().is_ok()
            })
        };
        resetter.join().unwrap();
        let admitted = checker.join().unwrap();
        // The check came before the reset (refused, bucket then full) or after it (admitted, one
        // cell taken from the full bucket); the reset is never lost to the check's CAS.
        assert_eq!(l.available(), if admitted { 1 } else { 2 });
    });
}
