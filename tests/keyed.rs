//! The keyed limiter against a reference: a `HashMap` of single-key limiters that never forgets
//! a key. Sweeps, resets, give-backs and peeks are interleaved at random, in tables small enough
//! that keys share probe chains and move when others leave; every answer must match.

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use common::{answer_of, answer_of_reserved, Answer};
use flowgate::algorithm::{Credit, FixedWindow, IntervalRefill, LeakyBucket, SlidingWindow};
use flowgate::clock::ManualClock;
use flowgate::{
    Algorithm, Cause, Gcra, KeyedError, KeyedRateLimiter, Quota, RateLimiter, WhenFull,
};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Advance(u64),
    Check(u64, u32),
    /// Three keys in one `check_keys` batch, against one check of each in turn.
    Batch([u64; 3]),
    Peek(u64, u32),
    /// Gives back the newest admission's receipt of the key.
    GiveBack(u64),
    Reset(u64),
    Sweep(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0u64..7;
    let n = 0u32..4;
    prop_oneof![
        3 => (1u64..400).prop_map(|ms| Op::Advance(ms * 1_000_000)),
        1 => (1u64..1_000_000).prop_map(Op::Advance),
        8 => (key.clone(), n.clone()).prop_map(|(k, n)| Op::Check(k, n)),
        3 => [key.clone(), key.clone(), key.clone()].prop_map(Op::Batch),
        2 => (key.clone(), n.clone()).prop_map(|(k, n)| Op::Peek(k, n)),
        2 => key.clone().prop_map(Op::GiveBack),
        1 => key.prop_map(Op::Reset),
        3 => (1usize..20).prop_map(Op::Sweep),
    ]
}

/// Runs `ops` against a keyed limiter for `algorithm` (one shard of 8 keys, so keys crowd
/// together) and against one `RateLimiter` per key; a batch (`check_keys`) against a check of
/// each of its keys in turn.
fn differential<A: Algorithm + Clone>(algorithm: A, ops: &[Op]) -> Result<(), TestCaseError> {
    let clock = ManualClock::starting_at(1_000_000_000);
    let keyed = KeyedRateLimiter::<u64, _, _>::builder(algorithm.clone())
        .clock(clock.clone())
        .max_keys(8)
        .shards(1)
        .build()
        .unwrap();
    let mut reference: HashMap<u64, RateLimiter<ManualClock, A>> = HashMap::new();
    let mut receipts = HashMap::new();
    for (i, op) in ops.iter().enumerate() {
        let (got, want) = match *op {
            Op::Advance(d) => {
                clock.advance(Duration::from_nanos(d));
                continue;
            }
            Op::Check(k, n) => {
                let got = keyed.reserve_key(&k, n);
                let want = single(&mut reference, k, &algorithm, &clock).reserve(n);
                let answers = (answer_of_reserved(&got), answer_of_reserved(&want));
                if let (Ok(Ok((_, mine))), Ok(Ok((_, theirs)))) = (got, want) {
                    receipts.insert(k, (mine, theirs));
                }
                answers
            }
            Op::Batch(keys) => {
                let got = keyed.check_keys(keys.each_ref());
                for (k, got) in keys.into_iter().zip(got) {
                    let want = single(&mut reference, k, &algorithm, &clock).check();
                    let answers = (answer_of(Ok(got)), answer_of(Ok(want)));
                    prop_assert_eq!(answers.0, answers.1, "op {} ({:?}), key {}", i, op, k);
                }
                continue;
            }
            Op::Peek(k, n) => (
                answer_of(keyed.peek_key(&k, n)),
                answer_of(single(&mut reference, k, &algorithm, &clock).peek(n)),
            ),
            Op::GiveBack(k) => {
                // Not compared: a bucket swept or reset since its admission is gone from the
                // table (nothing given back) while its single twin is given back, to the same
                // effect (a full bucket either way, or a fresh one after a reset). What follows
                // must still agree.
                if let Some((mine, theirs)) = receipts.remove(&k) {
                    keyed.give_back(mine);
                    single(&mut reference, k, &algorithm, &clock).give_back(theirs);
                }
                (Answer::Done, Answer::Done)
            }
            Op::Reset(k) => {
                keyed.reset_key(&k);
                reference.remove(&k);
                receipts.remove(&k);
                (Answer::Done, Answer::Done)
            }
            Op::Sweep(budget) => {
                keyed.sweep(budget);
                (Answer::Done, Answer::Done)
            }
        };
        prop_assert_eq!(got, want, "op {} ({:?}) of {:?}", i, op, ops);
    }
    // Nothing was ever refused for room: 7 keys in a table of 8.
    prop_assert_eq!(keyed.stats().refused_full, 0);
    Ok(())
}

/// The reference limiter of `key`, created on first use.
fn single<'a, A: Algorithm + Clone>(
    reference: &'a mut HashMap<u64, RateLimiter<ManualClock, A>>,
    key: u64,
    algorithm: &A,
    clock: &ManualClock,
) -> &'a RateLimiter<ManualClock, A> {
    reference
        .entry(key)
        .or_insert_with(|| RateLimiter::with_algorithm(algorithm.clone(), clock.clone()))
}

fn quota() -> impl Strategy<Value = Quota> {
    (1u32..5, 1u64..2_000)
        .prop_map(|(count, ms)| Quota::new(count, Duration::from_millis(ms)).unwrap())
}

proptest! {
    #![proptest_config(common::config())]

    #[test]
    fn gcra_keyed_matches_one_limiter_per_key(
        q in quota(), burst in 1u32..6, ops in prop::collection::vec(op(), 1..80)
    ) {
        differential(Gcra::new(&q.with_burst(burst).unwrap()), &ops)?;
    }

    #[test]
    fn shaper_and_credit_keyed_match_one_limiter_per_key(
        q in quota(), slack_ms in 0u64..500, credit: bool, ops in prop::collection::vec(op(), 1..80)
    ) {
        let slack = Duration::from_millis(slack_ms);
        if credit {
            differential(Credit::new(&q, slack).unwrap(), &ops)?;
        } else {
            differential(LeakyBucket::shaper(&q, slack).unwrap(), &ops)?;
        }
    }

    #[test]
    fn window_counters_keyed_match_one_limiter_per_key(
        q in quota(), which in 0u8..3, ops in prop::collection::vec(op(), 1..80)
    ) {
        match which {
            0 => differential(FixedWindow::new(&q).unwrap(), &ops)?,
            1 => differential(IntervalRefill::new(&q).unwrap(), &ops)?,
            _ => differential(SlidingWindow::new(&q).unwrap(), &ops)?,
        }
    }
}

fn manual(quota: &str, max_keys: usize, when_full: WhenFull) -> KeyedRateLimiter<u64, ManualClock> {
    let quota: Quota = quota.parse().unwrap();
    KeyedRateLimiter::<u64, _, _>::builder(Gcra::new(&quota))
        .clock(ManualClock::new())
        .max_keys(max_keys)
        .when_full(when_full)
        .build()
        .unwrap()
}

#[test]
fn a_full_table_refuses_new_keys_and_never_touches_old_ones() {
    let limiter = manual("1/s burst 2", 4, WhenFull::Refuse);
    for key in 0..4 {
        assert!(limiter.check_key(&key).is_ok());
    }
    assert_eq!(limiter.len(), 4);
    let refused = limiter.check_key(&99).unwrap_err();
    assert_eq!(refused.cause(), Cause::TableFull);
    assert_eq!(refused.remaining(), 0);
    assert_eq!(refused.retry_after(), Duration::from_secs(1));
    // The tracked keys keep exactly their state: one cell left each, then refused.
    for key in 0..4 {
        assert_eq!(limiter.check_key(&key).unwrap().remaining(), 0);
        assert_eq!(limiter.check_key(&key).unwrap_err().cause(), Cause::Quota);
    }
    assert_eq!(limiter.len(), 4);
    assert_eq!(limiter.stats().refused_full, 1);
}

#[test]
fn a_full_table_makes_room_from_idle_keys_on_insert() {
    let limiter = manual("1/s burst 2", 4, WhenFull::Refuse);
    for key in 0..4 {
        assert!(limiter.check_key(&key).is_ok());
    }
    // After 1 s every bucket is full again: idle, so a new key may take a slot.
    limiter.clock().advance(Duration::from_secs(1));
    assert_eq!(limiter.check_key(&99).unwrap().remaining(), 1);
    // Idle keys the insert met on its way may have gone too; never a busy one, never too many.
    let stats = limiter.stats();
    assert!((1..=4).contains(&stats.keys));
    assert_eq!(stats.keys as u64 + stats.evicted, 5);
    let held = (0..4).filter(|key| limiter.contains_key(key)).count();
    assert_eq!(held, stats.keys - 1, "the evicted keys are gone");
    assert!(limiter.reset_key(&99), "the new key is held");
}

#[test]
fn admit_untracked_answers_as_a_new_bucket_and_keeps_nothing() {
    let limiter = manual("1/s burst 3", 2, WhenFull::AdmitUntracked);
    assert!(limiter.check_key(&1).is_ok());
    assert!(limiter.check_key(&2).is_ok());
    for _ in 0..5 {
        // Each untracked request is a new bucket's first: 2 of 3 left, every time.
        assert_eq!(limiter.check_key(&3).unwrap().remaining(), 2);
    }
    assert_eq!(limiter.len(), 2);
    assert_eq!(limiter.stats().untracked, 5);
    assert!(!limiter.contains_key(&3) && limiter.contains_key(&1));
}

#[test]
fn the_new_keys_quota_bounds_untracked_admissions_and_creation() {
    let clock = ManualClock::new();
    let limiter = KeyedRateLimiter::<u64, _, _>::builder(Gcra::new(&Quota::per_second(1).unwrap()))
        .clock(clock.clone())
        .max_keys(1)
        .shards(1)
        .when_full(WhenFull::AdmitUntracked)
        .new_keys("2/s".parse().unwrap())
        .build()
        .unwrap();
    assert!(limiter.check_key(&1).is_ok()); // created: 1 new-key cell used
    assert!(limiter.check_key(&2).is_ok()); // untracked: the second
    let refused = limiter.check_key(&3).unwrap_err();
    assert_eq!(refused.cause(), Cause::NewKeys);
    assert_eq!(refused.retry_after(), Duration::from_millis(500));
    // A tracked key is never asked for a new-key cell.
    clock.advance(Duration::from_secs(1));
    assert!(limiter.check_key(&1).is_ok());
    assert_eq!(limiter.stats().untracked, 1);
}

#[test]
fn tiers_give_keys_their_own_quota() {
    let free = Gcra::new(&"2/s".parse().unwrap());
    let pro = Gcra::new(&"5/s".parse().unwrap());
    let limiter = KeyedRateLimiter::<str, _, _>::builder(free)
        .tier(pro)
        .classify(|key: &str| usize::from(key.starts_with("pro-")))
        .clock(ManualClock::new())
        .build()
        .unwrap();
    let admitted = |key: &str| (0..10).filter(|_| limiter.check_key(key).is_ok()).count();
    assert_eq!(admitted("free-1"), 2);
    assert_eq!(admitted("pro-1"), 5);
    assert_eq!(admitted("free-2"), 2);
    assert_eq!(limiter.len(), 3);
}

#[test]
fn zero_cells_and_oversized_requests_create_nothing() {
    let limiter = manual("10/s", 16, WhenFull::Refuse);
    assert_eq!(limiter.check_key_n(&1, 0).unwrap().unwrap().remaining(), 10);
    let never = limiter.check_key_n(&1, 11).unwrap_err();
    assert_eq!((never.requested, never.burst), (11, 10));
    assert_eq!(limiter.peek_key(&1, 10).unwrap().unwrap().remaining(), 0);
    assert!(limiter.is_empty());
    let (_, receipt) = limiter.reserve_key(&1, 0).unwrap().unwrap();
    assert!(receipt.is_empty() && !limiter.give_back(receipt));
    assert!(limiter.is_empty());
}

#[test]
fn reset_key_forgets_one_key() {
    let limiter = manual("1/h", 16, WhenFull::Refuse);
    assert!(!limiter.contains_key(&1), "not before its first admission");
    assert!(limiter.check_key(&1).is_ok());
    assert!(limiter.check_key(&2).is_ok());
    assert!(limiter.check_key(&1).is_err());
    assert!(limiter.contains_key(&1) && limiter.contains_key(&2));
    assert!(limiter.reset_key(&1));
    assert!(!limiter.contains_key(&1) && limiter.contains_key(&2));
    assert!(!limiter.reset_key(&1));
    assert!(limiter.check_key(&1).is_ok());
    assert!(limiter.check_key(&2).is_err());
}

#[test]
fn a_backward_clock_step_locks_a_key_out_for_at_most_one_window() {
    let clock = ManualClock::starting_at(1 << 40);
    let limiter =
        KeyedRateLimiter::<u64, _, _>::builder(Gcra::new(&"1/s burst 2".parse().unwrap()))
            .clock(clock.clone())
            .build()
            .unwrap();
    assert!(limiter.check_key(&7).is_ok());
    assert!(limiter.check_key(&7).is_ok());
    clock.set(1 << 30); // about 1000 s back
    assert!(limiter.check_key(&7).is_err()); // clamps the key to "empty as of now"
    clock.advance(Duration::from_secs(2));
    assert!(limiter.check_key(&7).is_ok());
}

#[test]
fn bad_configurations_are_errors() {
    let gcra = Gcra::new(&Quota::per_second(1).unwrap());
    let build = |max_keys, shards| {
        KeyedRateLimiter::<u64, _, _>::builder(gcra)
            .max_keys(max_keys)
            .shards(shards)
            .build()
            .map(|_| ())
    };
    assert_eq!(build(0, 1), Err(KeyedError::NoKeys));
    assert_eq!(build(10, 3), Err(KeyedError::Shards { shards: 3 }));
    assert_eq!(build(10, 0), Err(KeyedError::Shards { shards: 0 }));
    assert_eq!(
        build(usize::MAX, 1),
        Err(KeyedError::TooManyKeys {
            max_keys: usize::MAX
        })
    );
    let mut many = KeyedRateLimiter::<u64, _, _>::builder(gcra);
    for _ in 0..256 {
        many = many.tier(gcra);
    }
    assert_eq!(many.build().map(|_| ()), Err(KeyedError::TooManyTiers));
}

#[test]
fn memory_is_within_20_bytes_per_key_at_a_million() {
    let limiter = KeyedRateLimiter::<u64>::new(Quota::per_second(1).unwrap(), 1_000_000).unwrap();
    assert_eq!(limiter.stats().max_keys, 1_000_000);
    let per_key = limiter.stats().memory_bytes as f64 / 1e6;
    // 16-byte slots at most 7/8 full (18.3 bytes), plus the shards' spread.
    assert!((18.2..=20.0).contains(&per_key), "{per_key} bytes per key");
}

#[test]
fn the_sweeper_forgets_idle_keys_and_stops_with_its_handle() {
    let clock = ManualClock::new();
    let limiter = Arc::new(
        KeyedRateLimiter::<u64, _, _>::builder(Gcra::new(&"1/s".parse().unwrap()))
            .clock(clock.clone())
            .max_keys(1000)
            .build()
            .unwrap(),
    );
    for key in 0..100 {
        assert!(limiter.check_key(&key).is_ok());
    }
    clock.advance(Duration::from_secs(1));
    let sweeper = limiter.spawn_sweeper(Duration::from_millis(1)).unwrap();
    // Bounded wait for the thread to run: the assertion below does not depend on timing.
    for _ in 0..10_000 {
        if limiter.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    drop(sweeper);
    assert!(limiter.is_empty());
    assert_eq!(limiter.stats().evicted, 100);
}

/// The hash seed is random per process: the same keys land in different shards in a child
/// process (the chance that 64 keys land alike in 16 shards by luck is 2⁻²⁵⁶).
#[test]
fn the_hash_seed_differs_between_processes() {
    fn shards() -> Vec<usize> {
        let limiter = KeyedRateLimiter::<u64>::builder(Gcra::new(&Quota::per_second(1).unwrap()))
            .shards(16)
            .max_keys(1 << 12)
            .build()
            .unwrap();
        (0..64).map(|key| limiter.shard_of(&key)).collect()
    }
    if std::env::var_os("FLOWGATE_PRINT_SHARDS").is_some() {
        println!("SHARDS {:?}", shards());
        return;
    }
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "the_hash_seed_differs_between_processes",
            "--nocapture",
        ])
        .env("FLOWGATE_PRINT_SHARDS", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let child = stdout
        .lines()
        .find_map(|line| line.strip_prefix("SHARDS "))
        .expect("the child printed its shards");
    let ours = format!("{:?}", shards());
    assert_ne!(child, ours);
    // And a fixed seed gives the same layout every time.
    let seeded = |seed| {
        let limiter = KeyedRateLimiter::<u64>::builder(Gcra::new(&Quota::per_second(1).unwrap()))
            .shards(16)
            .hash_seed(seed)
            .build()
            .unwrap();
        (0..64u64)
            .map(|key| limiter.shard_of(&key))
            .collect::<Vec<_>>()
    };
    assert_eq!(seeded(7), seeded(7));
    assert_ne!(seeded(7), seeded(8));
}

/// A sweep that begins in the middle of a shard (after a partial one) still forgets every idle
/// key: a shift can move a key from a slot it has not visited into one it has, and the sweep
/// looks at that slot again. Many seeds, so that some layouts have such chains.
#[test]
fn a_full_sweep_after_a_partial_one_forgets_every_idle_key() {
    for seed in 0..300 {
        let clock = ManualClock::new();
        let limiter = KeyedRateLimiter::<u64, _, _>::builder(Gcra::new(&"1/s".parse().unwrap()))
            .clock(clock.clone())
            .max_keys(12)
            .shards(1)
            .hash_seed(seed)
            .build()
            .unwrap();
        for key in 0..12 {
            assert!(limiter.check_key(&key).is_ok());
        }
        assert_eq!(limiter.sweep(8), 0); // nothing idle yet; moves the sweep's position
        clock.advance(Duration::from_secs(1));
        assert_eq!(limiter.sweep(limiter.stats().slots), 12, "seed {seed}");
        assert!(limiter.is_empty());
    }
}

/// Racing inserts share the global key count exactly: the table fills to `max_keys`, never
/// beyond, and no insert is refused while there is room.
#[test]
fn racing_inserts_fill_the_table_exactly() {
    for round in 0..20u64 {
        let limiter = Arc::new(
            KeyedRateLimiter::<u64, _, _>::builder(Gcra::new(&"1/h".parse().unwrap()))
                .clock(ManualClock::new())
                .max_keys(64)
                .shards(4)
                .build()
                .unwrap(),
        );
        let barrier = Arc::new(std::sync::Barrier::new(4));
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let (limiter, barrier) = (limiter.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    (0..12u64)
                        .filter(|i| limiter.check_key(&(round << 32 | t << 8 | i)).is_ok())
                        .count()
                })
            })
            .collect();
        let admitted: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
        // 48 keys, room for 64, shards sized for their share plus spread: all get in.
        assert_eq!((admitted, limiter.len()), (48, 48));
    }
}

/// The quota on new keys is asked only once a key is sure to be created (or admitted
/// untracked): a refusal for a full table takes no new-key cell.
#[test]
fn a_refusal_for_a_full_table_takes_no_new_key_cell() {
    let clock = ManualClock::new();
    let limiter = KeyedRateLimiter::<u64, _, _>::builder(Gcra::new(&"1/h".parse().unwrap()))
        .clock(clock.clone())
        .max_keys(1)
        .shards(1)
        .new_keys("2/h".parse().unwrap())
        .build()
        .unwrap();
    assert!(limiter.check_key(&1).is_ok()); // one new-key cell used
    for key in 2..10 {
        // The table is full: refused for room, and no new-key cell is taken.
        assert_eq!(
            limiter.check_key(&key).unwrap_err().cause(),
            Cause::TableFull
        );
    }
    assert!(limiter.reset_key(&1));
    // The second cell is still there: key 2 gets in.
    assert!(limiter.check_key(&2).is_ok());
    assert_eq!(limiter.check_key(&3).unwrap_err().cause(), Cause::TableFull);
    // With room again, both new-key cells are spent.
    assert!(limiter.reset_key(&2));
    assert_eq!(limiter.check_key(&3).unwrap_err().cause(), Cause::NewKeys);
}
