//! Unit tests of the keyed table that look at where keys are (their home and slot), which the
//! public surface does not show.

use core::time::Duration;

use super::store::{One, Options, Store};
use super::{KeyedRateLimiter, WhenFull};
use crate::algorithm::Gcra;
use crate::clock::ManualClock;
use crate::observe::TableMetrics;
use crate::quota::Quota;

/// `wrote` reports only a word that was written: an untracked admission of a new key (no room)
/// writes none, whatever a failed lock-free attempt left in `wrote` before the slow path. A
/// policy's undo would otherwise compare-and-swap words nobody wrote.
#[test]
fn an_untracked_admission_reports_no_write() {
    let options = Options {
        max_keys: 1,
        shards: Some(1),
        when_full: WhenFull::AdmitUntracked,
        new_keys: None,
        metrics: TableMetrics::none(),
    };
    let store = Store::new(options, 7, ManualClock::new()).unwrap();
    let gcra = Gcra::new(&Quota::per_hour(10).unwrap());
    let tiers = One(&gcra);
    let mut wrote = None;
    let first = Store::<ManualClock>::tag(1 << 40);
    assert!(store
        .decide(first, (&gcra, &tiers), (1, || ()), || 1_000, &mut wrote)
        .is_ok());
    assert!(wrote.is_some(), "the first key is inserted and written");
    // As a lock-free attempt that lost its slot leaves it.
    let mut wrote = Some((7, 8));
    let second = Store::<ManualClock>::tag(2 << 40);
    assert!(store
        .decide(second, (&gcra, &tiers), (1, || ()), || 1_000, &mut wrote)
        .is_ok());
    assert_eq!(wrote, None, "no room: admitted untracked, nothing written");
}

/// A key found again after an idle neighbour left keeps its place in the probe chain or moves
/// back, and answers from its own bucket either way.
#[test]
fn a_new_key_takes_the_slot_of_an_idle_one() {
    let clock = ManualClock::new();
    let limiter = KeyedRateLimiter::<u64, _, _>::builder(Gcra::new(&Quota::per_second(2).unwrap()))
        .clock(clock.clone())
        .max_keys(1)
        .shards(1)
        .build()
        .unwrap();
    assert!(limiter.check_key(&1).is_ok());
    clock.advance(Duration::from_secs(1));
    assert_eq!(limiter.check_key(&2).unwrap().remaining(), 1);
    assert!(limiter.position_of(&2).is_some());
    assert_eq!(limiter.position_of(&1), None);
}

/// While its home line has a free slot to spare, an insert leaves the idle keys on its probe
/// chain where they are: their owners, back within their interval, are found rather than
/// inserted again. Each new key is picked to share its home line (four slots) with one or two
/// idle keys, so an insert that reused the first idle slot of its chain would evict one every
/// time; none may go. Past its home line's spare slot an idle key's slot still goes first: a
/// key homed in a line of three idle keys evicts one (taking any free slot first would not).
#[test]
fn an_insert_evicts_an_idle_key_only_past_its_home_lines_spare_slot() {
    for seed in 0..4 {
        let clock = ManualClock::new();
        let limiter =
            KeyedRateLimiter::<u64, _, _>::builder(Gcra::new(&Quota::per_second(2).unwrap()))
                .clock(clock.clone())
                .max_keys(1024)
                .shards(1)
                .hash_seed(seed)
                .build()
                .unwrap();
        let table = limiter.store.table();
        let line = |key: u64| table.line_of(limiter.locate(&key).0);
        // How far from its home slot a held key sits.
        let offset = |key: u64| {
            let home = table.home(limiter.locate(&key).0);
            limiter
                .position_of(&key)
                .map(|(_, slot)| slot.wrapping_sub(home))
        };
        let mut held = std::collections::HashMap::new();
        for key in 0..64 {
            assert!(limiter.check_key(&key).is_ok());
            *held.entry(line(key)).or_insert(0) += 1;
        }
        // Four keys homed in one line with no key homed in it or the line before; three now.
        let crowded = (1_000..)
            .map(line)
            .find(|&l| l > 0 && !held.contains_key(&l) && !held.contains_key(&(l - 1)))
            .unwrap();
        let crowd: Vec<u64> = (1_000..)
            .filter(|&key| line(key) == crowded)
            .take(4)
            .collect();
        for key in &crowd[..3] {
            assert!(limiter.check_key(key).is_ok());
        }
        held.insert(crowded, 3);
        clock.advance(Duration::from_secs(1));
        let mut new = 0;
        for key in 64..1_000 {
            let l = line(key);
            // One or two keys in the line and none homed in the line before (whose chain could
            // run into it): the new key's free slot leaves the line one to spare.
            let count = held.get(&l).copied().unwrap_or(0);
            if new < 32 && l > 0 && (1..3).contains(&count) && !held.contains_key(&(l - 1)) {
                assert!(limiter.check_key(&key).is_ok());
                assert!(offset(key).is_some_and(|o| o < 3), "seed {seed}: spilled");
                *held.entry(l).or_insert(0) += 1;
                new += 1;
            }
        }
        assert_eq!(new, 32, "seed {seed}");
        assert_eq!(limiter.stats().evicted, 0, "seed {seed}");
        assert_eq!(limiter.len(), 64 + 3 + 32, "seed {seed}");
        // The fourth key of the crowded line: its free slot would be the line's last.
        assert!(limiter.check_key(&crowd[3]).is_ok());
        assert_eq!(limiter.stats().evicted, 1, "seed {seed}");
        assert_eq!(
            offset(crowd[3]),
            Some(0),
            "seed {seed}: the first idle slot"
        );
    }
}

/// Three threads check key 0 while another removes the two keys ahead of it on its probe
/// chain, so key 0 moves back twice during the checks (each round rebuilds that layout). The
/// clock stands still and the burst is large, so every check is admitted and writes; after each
/// round key 0's bucket must hold exactly its burst minus the admissions (an update lost in a
/// move leaves more; one applied twice leaves less).
#[test]
fn moves_under_contention_lose_nothing_and_admit_nothing_twice() {
    const BURST: u32 = 1_000_000;
    const CHECKS: u32 = 40;
    let quota = Quota::per_hour(1).unwrap().with_burst(BURST).unwrap();
    // A seed under which keys 0, 1 and 2 share a home line.
    let limiter = (0..)
        .map(|seed| {
            KeyedRateLimiter::<u64, _, _>::builder(Gcra::new(&quota))
                .clock(ManualClock::new())
                .max_keys(12)
                .shards(1)
                .hash_seed(seed)
                .build()
                .unwrap()
        })
        .find(|l| l.home_of(&0) == l.home_of(&1) && l.home_of(&0) == l.home_of(&2))
        .unwrap();
    let mut moved = 0;
    for round in 0..300 {
        for key in 0..3 {
            limiter.reset_key(&key);
        }
        for key in [1, 2, 0] {
            assert!(limiter.check_key(&key).is_ok());
        }
        let before = limiter.position_of(&0);
        let barrier = std::sync::Barrier::new(4);
        let admitted: u32 = std::thread::scope(|s| {
            s.spawn(|| {
                barrier.wait();
                assert!(limiter.reset_key(&1));
                assert!(limiter.reset_key(&2));
            });
            let checkers: Vec<_> = (0..3)
                .map(|_| {
                    s.spawn(|| {
                        barrier.wait();
                        (0..CHECKS)
                            .map(|_| u32::from(limiter.check_key(&0).is_ok()))
                            .sum::<u32>()
                    })
                })
                .collect();
            checkers.into_iter().map(|c| c.join().unwrap()).sum()
        });
        assert_eq!(admitted, 3 * CHECKS);
        moved += u32::from(limiter.position_of(&0) != before);
        let left = limiter.peek_key(&0, 0).unwrap().unwrap().remaining();
        assert_eq!(BURST - 1 - left, admitted, "round {round}");
    }
    assert_eq!(moved, 300, "key 0 moved in every round");
}

/// A sweep looks at a key a shift carries into a slot it has visited from one it has not (from
/// beyond the swept range, or from the shard's start over its end) where the key lands,
/// instead of passing over the range again: every idle key goes, whether the sweep covers the
/// shard in one range or in two (in claim order: the lines below a midpoint first, as a sweep
/// that began mid-shard does), and in one range a key that stays is judged once, plus at most
/// twice per eviction (the emptied slot looked at again, a carried key where it lands). A
/// nearly full shard and many seeds, so chains cross the midpoint and wrap.
#[test]
fn a_sweep_judges_carried_keys_where_they_land_and_passes_once() {
    const KEYS: u64 = 48;
    let mut wrapping = 0;
    for seed in 0..400u64 {
        for split in [false, true] {
            let quota = Quota::per_hour(1).unwrap();
            let limiter = KeyedRateLimiter::<u64, _, _>::builder(Gcra::new(&quota))
                .clock(ManualClock::new())
                .max_keys(KEYS as usize)
                .shards(1)
                .hash_seed(seed)
                .build()
                .unwrap();
            for key in 0..KEYS {
                assert!(limiter.check_key(&key).is_ok());
            }
            let slot_of = |key| limiter.position_of(&key).unwrap().1;
            let slots = limiter.stats().slots;
            let lines = slots / 4;
            let mid = if split { lines / 2 } else { lines };
            wrapping += u32::from((0..KEYS).any(|key| slot_of(key) < limiter.home_of(&key).1));
            // The keys in the four slots below the first swept range's end go (their shifts
            // carry keys across it), and one in eight of the others.
            let idle: Vec<_> = (0..KEYS)
                .filter(|&key| {
                    (mid * 4 - 4..mid * 4).contains(&slot_of(key)) || (key ^ seed) % 8 == 0
                })
                .map(|key| limiter.locate(&key).0)
                .collect();
            let kept_judged = core::cell::Cell::new(0);
            let table = limiter.store.table();
            let shard = &table.shards()[0];
            let judge = |tag| {
                let goes = idle.contains(&tag);
                kept_judged.set(kept_judged.get() + usize::from(!goes));
                goes
            };
            let mut evicted = 0;
            for range in [0..mid, mid..lines] {
                evicted += table.sweep_shard(shard, &mut shard.lock(), range, |tag, _| judge(tag));
            }
            assert_eq!(evicted, idle.len(), "seed {seed}, split {split}");
            for key in 0..KEYS {
                let held = limiter.position_of(&key).is_some();
                assert_eq!(held, !idle.contains(&limiter.locate(&key).0), "seed {seed}");
            }
            let kept = KEYS as usize - idle.len();
            assert!(
                split || kept_judged.get() <= kept + 2 * idle.len(),
                "seed {seed}: {} judgements of {kept} kept keys, {} evicted",
                kept_judged.get(),
                idle.len()
            );
        }
    }
    assert!(
        wrapping > 200,
        "{wrapping} of 800 layouts had a wrapping chain"
    );
}
