#![allow(missing_docs)]
//! How many instructions a keyed hit may take before consecutive hits stop overlapping their
//! cache misses: a synthetic hit (a 16-byte slot at random in a 32 MiB table, its tag and word
//! loaded, then `K` register-only `add`s that wait on nothing, then a CAS of the word), timed
//! for several `K`. While a hit and the next one's load fit in the CPU's out-of-order window,
//! the next miss starts before this one ends; past it, every hit pays a whole miss.
//! It explains why a keyed hit, whose instructions do not fit in that window, pays one whole
//! miss. x86-64 only (the `add`s are inline assembly).
//! `cargo bench -p flowgate-benches --bench miss_overlap`.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use common::paired::{median, mode};

/// One pass of hits over the keys: ns per hit.
type Pass = fn(&[Slot], &[u64]) -> f64;

#[repr(C, align(16))]
struct Slot {
    tag: AtomicU64,
    word: AtomicU64,
}

/// A 64-bit mix (the murmur finalizer's first half): where a key's slot is.
#[inline(always)]
fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^ (x >> 29)
}

/// One pass of hits over `keys`, `K` independent `add`s each: ns per hit.
#[cfg(target_arch = "x86_64")]
#[inline(never)]
fn pass<const K: usize>(table: &[Slot], keys: &[u64]) -> f64 {
    let mask = table.len() - 1;
    let start = Instant::now();
    for &k in keys {
        let slot = &table[mix(k) as usize & mask];
        // Relaxed: a synthetic load, not a protocol.
        let tag = slot.tag.load(Ordering::Relaxed);
        let mut old = slot.word.load(Ordering::Relaxed);
        // SAFETY: `K` adds to a scratch register the assembly declares as its output; no memory,
        // no stack, no flags anyone reads.
        unsafe {
            core::arch::asm!(".rept {k}", "add {t}, 1", ".endr", k = const K, t = out(reg) _,
                options(nomem, nostack));
        }
        // Release/Relaxed: the orderings of a limiter's CAS (the same locked `cmpxchg`).
        while let Err(seen) =
            slot.word
                .compare_exchange_weak(old, old ^ tag, Ordering::Release, Ordering::Relaxed)
        {
            old = seen;
        }
    }
    start.elapsed().as_nanos() as f64 / keys.len() as f64
}

#[cfg(target_arch = "x86_64")]
fn main() {
    // `cargo bench` passes --bench; under `cargo test` this is a smoke run on a small table.
    let Some(bench) = mode() else { return };
    let (bytes, hits, rounds) = if bench {
        (32 << 20, 200_000, 5)
    } else {
        (1 << 16, 1_000, 1)
    };
    let table: Vec<Slot> = (0..bytes / 16)
        .map(|i| Slot {
            tag: AtomicU64::new(i as u64),
            word: AtomicU64::new(0),
        })
        .collect();
    let mut x = 0x9e37_79b9_7f4a_7c15_u64;
    let keys: Vec<u64> = (0..hits)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        })
        .collect();
    let cases: [(usize, Pass); 8] = [
        (0, pass::<0>),
        (40, pass::<40>),
        (80, pass::<80>),
        (100, pass::<100>),
        (140, pass::<140>),
        (160, pass::<160>),
        (200, pass::<200>),
        (250, pass::<250>),
    ];
    // The cases take turns, so that a drift of the machine moves them all.
    let mut times = vec![Vec::new(); cases.len()];
    for _ in 0..rounds {
        for (i, (_, run)) in cases.iter().enumerate() {
            times[i].push(run(&table, &keys));
        }
    }
    for ((k, _), t) in cases.iter().zip(&mut times) {
        println!("K = {k:3} adds per hit: {:6.1} ns per hit", median(t));
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn main() {}
