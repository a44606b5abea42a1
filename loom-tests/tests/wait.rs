//! Loom model of a bounded wait giving its reservation back while another caller reserves: the
//! give-back is exact or gives way, never frees a slot someone else holds.
//!
//! Run: `RUSTFLAGS="--cfg flowgate_loom" cargo test --release -p flowgate-loom-tests`
#![cfg(flowgate_loom)]

use core::time::Duration;

use flowgate::algorithm::LeakyBucket;
use flowgate::clock::ManualClock;
use flowgate::{Error, Quota, RateLimiter, WaitOptions};
use flowgate_loom_tests::model;
use loom::sync::Arc;
use loom::thread;

/// A shaper at 1/s (burst 1) with its first slot taken. Thread A's bounded wait reserves the
/// slot at 1 s, finds it beyond its zero budget, and gives it back; thread B reserves at the
/// same time. B gets the slot at 1 s (A's was given back, or A came after B) or at 2 s (A's
/// reservation came first and B booked after it, so A's give-back gave way and its slot stays
/// unused). Either way the queue ends exactly after B's slot: nothing was freed under B.
#[test]
fn a_given_back_reservation_never_frees_another_callers_slot() {
    model(|| {
        let second = Duration::from_secs(1);
        let quota = Quota::per_second(1).unwrap();
        let shaper = LeakyBucket::shaper(&quota, Duration::from_secs(10)).unwrap();
        let limiter = Arc::new(RateLimiter::with_algorithm(
            shaper,
            ManualClock::starting_at(1_000),
        ));
        assert_eq!(
            limiter.reserve(1).unwrap().unwrap().0.delay(),
            Duration::ZERO
        );
        let other = {
            let limiter = limiter.clone();
            thread::spawn(move || limiter.wait(1, WaitOptions::new().at_most(Duration::ZERO)))
        };
        let mine = limiter.reserve(1).unwrap().unwrap().0.delay();
        let Err(Error::Refused(_)) = other.join().unwrap() else {
            panic!("a reservation 1 s or 2 s away does not fit a zero budget");
        };
        assert!(mine == second || mine == 2 * second, "B's slot: {mine:?}");
        // The next slot follows B's directly: A's give-back freed nothing B holds.
        let next = limiter.reserve(1).unwrap().unwrap().0.delay();
        assert_eq!(next, mine + second);
    });
}
