//! Loom models of the algorithms other than GCRA, each on the same lock-free cell: 2–3 threads
//! racing on one bucket, with and without spurious CAS failures.
#![cfg(flowgate_loom)]

use flowgate::algorithm::FixedWindow;
use flowgate::clock::ManualClock;
use flowgate::{Quota, RateLimiter};
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
