//! A flood of 10 million distinct keys through a keyed limiter capped at 1 million: the table
//! never grows past its bound, resident memory stays within the table's size (allocated once,
//! at construction) plus a fixed allowance, and the flood neither locks out newcomers while idle
//! keys can make room nor changes what tracked keys are told.
//!
//! Alone in its test binary, so the process's peak resident set (`VmHWM`) is this test's.

use std::time::Duration;

use flowgate::clock::ManualClock;
use flowgate::{Cause, Gcra, KeyedRateLimiter, Quota, WhenFull};

/// A `/proc/self/status` field, in bytes.
fn status_bytes(field: &str) -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|line| line.starts_with(field))
        .unwrap_or_else(|| panic!("{field} in /proc/self/status"));
    let kib: usize = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap();
    kib * 1024
}

#[test]
fn ten_million_keys_through_a_table_of_one_million() {
    const MAX_KEYS: usize = 1_000_000;
    const FLOOD: u64 = 10_000_000;
    /// Whatever the process allocates besides the table (test harness, stack, page rounding).
    const ALLOWANCE: usize = 8 << 20;

    let before = status_bytes("VmRSS:");
    let clock = ManualClock::new();
    let limiter =
        KeyedRateLimiter::<u64, _, _>::builder(Gcra::new(&Quota::per_second(10).unwrap()))
            .clock(clock.clone())
            .max_keys(MAX_KEYS)
            .when_full(WhenFull::Refuse)
            .build()
            .unwrap();
    let table = limiter.stats().memory_bytes;
    assert!(table <= 20 * MAX_KEYS, "{table} bytes of table");

    // Phase 1: a new key every microsecond. A key is idle 100 ms (100 000 keys) after its one
    // request, so idle keys always make room: every request is admitted.
    for key in 0..FLOOD {
        assert!(limiter.check_key(&key).is_ok(), "key {key}");
        clock.advance(Duration::from_micros(1));
        if key % 1_000_000 == 0 {
            assert!(limiter.len() <= MAX_KEYS);
        }
    }
    let stats = limiter.stats();
    assert!(stats.keys <= MAX_KEYS);
    assert_eq!(stats.created, FLOOD);
    assert_eq!(stats.evicted + stats.keys as u64, FLOOD);

    // Phase 2: the clock stops, the table fills with busy keys, and then new keys are refused
    // while every tracked key is still answered from its own bucket.
    let mut refused = 0;
    for key in FLOOD..FLOOD + MAX_KEYS as u64 + 1000 {
        match limiter.check_key(&key) {
            Ok(_) => {}
            Err(r) => {
                assert_eq!(r.cause(), Cause::TableFull);
                refused += 1;
            }
        }
    }
    assert_eq!(limiter.len(), MAX_KEYS);
    assert!(refused >= 1000, "{refused} refused");
    // The first key of phase 2 found room; its bucket answers as its own (a key the full table
    // did not hold would be refused).
    assert_eq!(limiter.check_key(&FLOOD).unwrap().remaining(), 8);

    let peak = status_bytes("VmHWM:");
    eprintln!("RSS before {before} B, table {table} B, peak {peak} B");
    assert!(
        peak <= before + table + ALLOWANCE,
        "peak RSS {peak} > {before} before + {table} table + {ALLOWANCE}"
    );
}
