//! The no-`std` build under test: [`flowgate_nostd::run`]'s checks, and the keyed table's shard
//! lock (a spin lock without `std`) under threads. Run alone (`cargo test -p flowgate-nostd`):
//! in a workspace-wide run other members turn flowgate's `std` on.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use flowgate::clock::ManualClock;
use flowgate::{Gcra, KeyedRateLimiter, Quota};

#[test]
fn every_check_passes() {
    let checks = flowgate_nostd::run().unwrap();
    assert!(checks >= 35, "{checks}");
    // scripts/nostd runs these tests alone, where flowgate has no std; a workspace-wide run
    // turns it on through other members, and checks the same answers with std.
    if std::env::var_os("FLOWGATE_EXPECT_NO_STD").is_some() {
        assert!(flowgate_nostd::without_std(), "flowgate was built with std");
    }
}

/// Four threads insert, check and sweep 4 000 keys of a table of 4 096 (so shards fill, sweep
/// on insert and move keys under their locks) while a fifth sweeps the whole table: every key
/// gets exactly its burst, never more, and the table ends holding no more keys than exist.
#[test]
fn the_spin_locked_table_admits_each_key_its_burst_under_threads() {
    const KEYS: u64 = 4_000;
    const BURST: u64 = 3;
    let clock = ManualClock::new();
    let quota = Quota::per_hour(BURST as u32).unwrap();
    let limiter = KeyedRateLimiter::<u64, _>::builder_with_clock(Gcra::new(&quota), clock.clone())
        .max_keys(4_096)
        .shards(8)
        .hash_seed(7)
        .build()
        .unwrap();
    let admitted = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let (limiter, admitted) = (&limiter, &admitted);
            s.spawn(move || {
                // Every thread asks for every key more often than its burst.
                for round in 0..BURST + 2 {
                    for k in 0..KEYS {
                        let key = (k + t * 1_000 + round * 7) % KEYS;
                        if limiter.check_key(&key).is_ok() {
                            // Relaxed: a count, read after the scope joins the threads.
                            admitted.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            });
        }
        s.spawn(|| {
            for _ in 0..50 {
                limiter.sweep(limiter.stats().slots);
            }
        });
    });
    // No bucket is idle within the hour, so a sweep may not forget one: each key got exactly
    // its burst.
    // Relaxed: the scope's join orders every increment before this load.
    assert_eq!(admitted.load(Ordering::Relaxed), KEYS * BURST);
    assert_eq!(limiter.len() as u64, KEYS);
    clock.advance(Duration::from_secs(3_600));
    assert_eq!(limiter.sweep(limiter.stats().slots) as u64, KEYS);
    assert!(limiter.is_empty());
}
