//! Loom models of the keyed table: a lock-free check of a key racing what the shard's lock holder
//! does to the same key (evict it, move it when another key leaves, insert it). Each asserts
//! that no update is lost and nothing is admitted twice: the bucket accounts for every admitted
//! cell afterwards.
//!
//! Run: `RUSTFLAGS="--cfg flowgate_loom" cargo test --release -p flowgate-loom-tests`
#![cfg(flowgate_loom)]

use flowgate::clock::ManualClock;
use flowgate::loom::fail_next_cas;
use flowgate::{Gcra, KeyedRateLimiter, Quota, WaitOptions};
use flowgate_loom_tests::model;
use loom::sync::Arc;
use loom::thread;

type Keyed = KeyedRateLimiter<u64, ManualClock>;

/// `burst` cells per hour per key, one shard of `max_keys`, a fixed hash seed.
fn keyed(burst: u32, max_keys: usize, seed: u64, clock: &ManualClock) -> Keyed {
    KeyedRateLimiter::<u64, _, _>::builder(Gcra::new(&Quota::per_hour(burst).unwrap()))
        .clock(clock.clone())
        .max_keys(max_keys)
        .shards(1)
        .hash_seed(seed)
        .build()
        .unwrap()
}

/// A table of three keys in one shard running `algorithm`, under the first hash seed that gives
/// keys 1 and 2 the same home slot (the search is deterministic), so that removing key 1 moves
/// key 2.
fn sharing_a_home<A: flowgate::Algorithm + Clone>(
    algorithm: A,
    clock: &ManualClock,
) -> Arc<KeyedRateLimiter<u64, ManualClock, A>> {
    let limiter = (0..)
        .map(|seed| {
            KeyedRateLimiter::<u64, _, _>::builder(algorithm.clone())
                .clock(clock.clone())
                .max_keys(3)
                .shards(1)
                .hash_seed(seed)
                .build()
                .unwrap()
        })
        .find(|l| l.home_of(&1) == l.home_of(&2))
        .unwrap();
    Arc::new(limiter)
}

/// Cells left in `key`'s bucket.
fn left(limiter: &Keyed, key: u64) -> u32 {
    limiter.peek_key(&key, 0).unwrap().unwrap().remaining()
}

/// Key 7 is idle (its hour has passed) when one thread checks it while another sweeps it away
/// and a third checks it too (re-inserting it if the sweep won). Burst 1: exactly one
/// admission, and the key ends up held and empty.
#[test]
fn check_vs_evict_vs_insert_on_one_key() {
    model(|| {
        let clock = ManualClock::starting_at(1_000);
        let limiter = Arc::new(keyed(1, 2, 1, &clock));
        assert!(limiter.check_key(&7).is_ok());
        clock.advance(core::time::Duration::from_secs(3600));
        let sweeper = {
            let limiter = limiter.clone();
            thread::spawn(move || limiter.sweep(limiter.stats().slots))
        };
        let checker = {
            let limiter = limiter.clone();
            thread::spawn(move || {
                fail_next_cas(1);
                limiter.check_key(&7).is_ok()
            })
        };
        let here = limiter.check_key(&7).is_ok();
        let there = checker.join().unwrap();
        sweeper.join().unwrap();
        assert_eq!(u32::from(here) + u32::from(there), 1);
        assert_eq!(left(&limiter, 7), 0);
        assert_eq!(limiter.len(), 1);
    });
}

/// Two keys share a home slot, so the second sits after the first. One thread removes the first
/// (the second moves back into its slot) while another checks the second: the check lands in
/// the bucket the second key ends up with, whichever slot that is.
#[test]
fn check_vs_move_of_the_same_key() {
    model(|| {
        let clock = ManualClock::starting_at(1_000);
        // A seed under which keys 1 and 2 share a home slot (the search is deterministic).
        let limiter = (0..)
            .map(|seed| keyed(2, 3, seed, &clock))
            .find(|l| l.home_of(&1) == l.home_of(&2))
            .unwrap();
        let limiter = Arc::new(limiter);
        assert!(limiter.check_key(&1).is_ok());
        assert!(limiter.check_key(&2).is_ok());
        let before = limiter.position_of(&2);
        let remover = {
            let limiter = limiter.clone();
            thread::spawn(move || assert!(limiter.reset_key(&1)))
        };
        let checked = limiter.check_key(&2).is_ok();
        remover.join().unwrap();
        assert!(checked);
        assert_ne!(limiter.position_of(&2), before, "key 2 moved");
        assert_eq!(left(&limiter, 2), 0);
        assert_eq!(limiter.len(), 1);
    });
}

/// Two threads check a key the table does not hold yet: one inserts it, the other finds it.
/// Burst 1: exactly one admission, one bucket.
#[test]
fn two_inserts_of_one_new_key() {
    model(|| {
        let clock = ManualClock::starting_at(1_000);
        let limiter = Arc::new(keyed(1, 2, 1, &clock));
        let other = {
            let limiter = limiter.clone();
            thread::spawn(move || limiter.check_key(&9).is_ok())
        };
        let here = limiter.check_key(&9).is_ok();
        let there = other.join().unwrap();
        assert_eq!(u32::from(here) + u32::from(there), 1);
        assert_eq!(limiter.len(), 1);
        assert_eq!(left(&limiter, 9), 0);
    });
}

/// A table of one key, held by key 3, idle. One thread checks key 3 while another checks key 4,
/// which may take key 3's slot over (evicting it) if key 3 is still idle then. Burst 1 and a
/// full table refuse whoever comes second: exactly one admission, and a check of key 3 that
/// stalled across the takeover never lands in key 4's bucket.
#[test]
fn check_vs_takeover_of_its_slot_by_another_key() {
    model(|| {
        let clock = ManualClock::starting_at(1_000);
        let limiter = Arc::new(keyed(1, 1, 1, &clock));
        assert!(limiter.check_key(&3).is_ok());
        clock.advance(core::time::Duration::from_secs(3600));
        let other = {
            let limiter = limiter.clone();
            thread::spawn(move || limiter.check_key(&4).is_ok())
        };
        fail_next_cas(1);
        let three = limiter.check_key(&3).is_ok();
        let four = other.join().unwrap();
        assert_eq!(u32::from(three) + u32::from(four), 1);
        let held = if three { 3 } else { 4 };
        assert_eq!(limiter.len(), 1);
        assert_eq!(left(&limiter, held), 0);
    });
}

/// A window counter's count goes from 2 to 3 and then to 4, which changes the low bit of its word
/// only, while the lock holder moves the key (its chain neighbour is removed). Two threads
/// check key 2 while a third removes key 1: both checks are admitted and the moved bucket counts
/// both. (When a close flipped one fixed bit, the close could restore a word a stalled check
/// still expected, and that check's CAS landed on the closed slot: one admission lost.)
#[test]
fn two_checks_vs_a_move_of_a_window_counter() {
    use flowgate::algorithm::FixedWindow;
    model(|| {
        let clock = ManualClock::starting_at(1_000);
        let quota = Quota::per_hour(4).unwrap();
        let limiter = sharing_a_home(FixedWindow::new(&quota).unwrap(), &clock);
        assert!(limiter.check_key(&1).is_ok());
        assert!(limiter.check_key(&2).is_ok());
        assert!(limiter.check_key(&2).is_ok());
        let remover = {
            let limiter = limiter.clone();
            thread::spawn(move || assert!(limiter.reset_key(&1)))
        };
        let checker = {
            let limiter = limiter.clone();
            thread::spawn(move || limiter.check_key(&2).is_ok())
        };
        let here = limiter.check_key(&2).is_ok();
        assert!(checker.join().unwrap() && here);
        remover.join().unwrap();
        assert_eq!(limiter.peek_key(&2, 0).unwrap().unwrap().remaining(), 0);
    });
}

/// The exact undo on a tagged slot (the cell's loop with the key as owner) racing a move of
/// the key: a shaper's reservation found too long for its wait is given back while the lock
/// holder removes the key ahead of it on its probe chain (so it moves back). The give-back
/// follows the key (under the shard's lock if the slot stopped holding it) and puts the exact
/// word back: the bucket ends as it began.
#[test]
fn a_given_back_reservation_follows_its_key_across_a_move() {
    use flowgate::algorithm::LeakyBucket;
    use std::time::Duration;
    model(|| {
        let clock = ManualClock::starting_at(1_000);
        let quota = Quota::per_hour(2).unwrap().with_burst(1).unwrap();
        let shaper = LeakyBucket::shaper(&quota, Duration::from_secs(3600)).unwrap();
        let limiter = sharing_a_home(shaper, &clock);
        assert!(limiter.check_key(&1).is_ok());
        // Key 2's one cell: the next request would wait half an hour.
        assert!(limiter.check_key(&2).is_ok());
        let before = limiter.peek_key(&2, 0).unwrap().unwrap();
        let remover = {
            let limiter = limiter.clone();
            thread::spawn(move || assert!(limiter.reset_key(&1)))
        };
        fail_next_cas(1);
        let short = limiter.wait_key(&2, 1, WaitOptions::new().at_most(Duration::from_secs(60)));
        assert!(
            short.is_err(),
            "a half-hour place in the queue is not a minute's wait"
        );
        remover.join().unwrap();
        assert_eq!(limiter.peek_key(&2, 0).unwrap().unwrap(), before);
        assert_eq!(limiter.len(), 1);
    });
}

/// Two threads decide batches of the same two keys in opposite orders (`check_keys`: every
/// line asked for, one clock reading, then each key in turn), both keys new, so the batches
/// race to insert them; one thread's first compare-and-swap fails once. Burst 1 per key: each
/// key admits exactly once, whichever batch gets it, and both buckets end empty.
#[test]
fn batches_of_the_same_keys_admit_each_once() {
    model(|| {
        let clock = ManualClock::starting_at(1_000);
        let limiter = Arc::new(keyed(1, 2, 1, &clock));
        let other = {
            let limiter = limiter.clone();
            thread::spawn(move || {
                fail_next_cas(1);
                limiter.check_keys([&2, &1]).map(|r| r.is_ok())
            })
        };
        let [one, two] = limiter.check_keys([&1, &2]).map(|r| r.is_ok());
        let [two_there, one_there] = other.join().unwrap();
        assert_eq!(u32::from(one) + u32::from(one_there), 1);
        assert_eq!(u32::from(two) + u32::from(two_there), 1);
        assert_eq!((left(&limiter, 1), left(&limiter, 2)), (0, 0));
    });
}
