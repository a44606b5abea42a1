#![allow(missing_docs)]
//! Paired timing of keyed checks at a million keys: flowgate, governor and the hardware floors
//! (hash + one dependent 16-byte load + CAS, `common::floor`) take turns in short batches
//! (10 000 decisions each, 300 rounds under `cargo bench`, the order rotated every round)
//! walking the same random draws, and each figure is the median of the per-round ratios, which
//! cancels the drift of this shared machine.
//!
//! The floors: the *throughput* floor on a 16 MiB table (consecutive hits overlap in the CPU's
//! out-of-order window), and the *latency* floor on a 16 MiB and a 64 MiB table (each hit's
//! address waits for the previous hit's load: one whole cache miss per hit). The issue's
//! "dependent-load floor" is the latency floor at 16 MiB.
//!
//! Both conventions: the **whole result** kept (`black_box(limiter.check_key(k))`, the
//! headline) and `is_ok()` only. One thread, then two threads on the same tables.
//! `cargo bench -p flowgate-benches --bench keyed_paired`.

mod common;

use std::hash::Hash;
use std::hint::black_box;

use common::floor;
use common::paired::{mode, Rounds};
use common::*;

/// The sides of one case: flowgate and governor with the whole result, then with `is_ok()`,
/// then the floors: throughput at 16 MiB, latency at 16 MiB and at 64 MiB.
type Sides<'a, T> = [&'a (dyn Fn(&T) -> bool + Sync); 7];

fn report<T: Sync>(rounds: usize, name: &str, draws: &[T], sides: Sides<'_, T>, threads: usize) {
    let r = Rounds::walking(rounds, draws, &sides, threads);
    println!(
        "{name:<26} whole: flowgate {:7.2} ns  governor {:7.2} ns  ratio {:.3}  flowgate/latency16 {:.2}  flowgate/latency64 {:.2}  flowgate/throughput16 {:.2}",
        r.median(0), r.median(1), r.ratio(0, 1), r.ratio(0, 5), r.ratio(0, 6), r.ratio(0, 4)
    );
    println!(
        "{:<26} is_ok: flowgate {:7.2} ns  governor {:7.2} ns  ratio {:.3}  flowgate/latency16 {:.2}  (floors: throughput16 {:.2}, latency16 {:.2}, latency64 {:.2} ns)",
        "", r.median(2), r.median(3), r.ratio(2, 3), r.ratio(2, 5), r.median(4), r.median(5), r.median(6)
    );
}

/// One side, boxed.
type Side<'a, T> = Box<dyn Fn(&T) -> bool + Sync + 'a>;

/// The floors' sides for a key: throughput at 16 MiB, latency at 16 MiB and at 64 MiB.
fn floors<'a, K: Hash + ?Sized, T>(
    f16: &'a floor::Keyed,
    f64: &'a floor::Keyed,
    key: impl Fn(&T) -> &K + Copy + Sync + 'a,
) -> [Side<'a, T>; 3] {
    [
        Box::new(move |t| f16.decide(key(t))),
        Box::new(move |t| f16.decide_chained(key(t))),
        Box::new(move |t| f64.decide_chained(key(t))),
    ]
}

fn main() {
    // `cargo bench` passes --bench; under `cargo test` this is a smoke run on 1 000 keys.
    let Some(bench) = mode() else { return };
    let (keys, rounds) = if bench { (1_000_000, 300) } else { (1_000, 4) };
    let (f16, f64) = (floor::Keyed::new(16 << 20), floor::Keyed::new(64 << 20));
    let d = draws(keys, 0);
    let d64: Vec<u64> = d.iter().map(|&k| u64::from(k)).collect();
    {
        let (l, g) = (flowgate_u64(keys), governor_u64(keys));
        let [a, b, c] = floors(&f16, &f64, |k: &u64| k);
        let sides: Sides<'_, u64> = [
            &|k| black_box(l.check_key(k)).is_ok(),
            &|k| black_box(g.check_key(k)).is_ok(),
            &|k| l.check_key(k).is_ok(),
            &|k| g.check_key(k).is_ok(),
            &*a,
            &*b,
            &*c,
        ];
        for threads in [1, 2] {
            let name = format!("u64, {keys} keys, {threads} thr");
            report(rounds, &name, &d64, sides, threads);
        }
    }
    let names = string_keys(keys);
    let d = in_hand(&names, &d);
    let (l, g) = (flowgate_str(&names), governor_string(&names));
    let [a, b, c] = floors(&f16, &f64, |k: &String| k.as_str());
    let sides: Sides<'_, String> = [
        &|k| black_box(l.check_key(k.as_str())).is_ok(),
        &|k| black_box(g.check_key(k)).is_ok(),
        &|k| l.check_key(k.as_str()).is_ok(),
        &|k| g.check_key(k).is_ok(),
        &*a,
        &*b,
        &*c,
    ];
    report(rounds, &format!("String, {keys} keys"), &d, sides, 1);
}
