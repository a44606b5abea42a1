#![allow(missing_docs)]
//! Paired timing of keyed checks at a million keys: flowgate, governor and the hardware floors
//! (hash + one dependent 16-byte load + CAS, `common::floor`) take turns in short batches
//! (10 000 decisions each, 300 rounds under `cargo bench`, the order rotated every round), and
//! each figure is the median of the per-round ratios, which cancels the drift of this shared
//! machine.
//!
//! The headline draws each decision's key at random, each side from a stream of its own
//! (`Rounds::drawing`): what a server that takes its key from a request gets. Beside it, "key in
//! hand": the sides walk one pre-drawn sequence in order (`Rounds::walking`); it is reported,
//! never instead. A `String` key drawn at random is picked from a table of a million strings,
//! as a server's parsed key would be (two more misses per decision, the same for both crates).
//!
//! The floors: the *throughput* floor on a 16 MiB table (consecutive hits overlap in the CPU's
//! out-of-order window), and the *latency* floor on a 16 MiB and a 64 MiB table (each hit's
//! address waits for the previous hit's load: one whole cache miss per hit).
//!
//! Both conventions: the **whole result** kept (`black_box(limiter.check_key(k))`, the
//! headline) and `is_ok()` only. One thread, then two threads on the same tables (each thread
//! timed in itself). Then batches of 16 random keys: `check_keys` against 16 checks in turn.
//! `cargo bench -p flowgate-benches --bench keyed_paired`.

mod common;

use std::hint::black_box;

use common::floor;
use common::paired::{below, mode, Rounds};
use common::*;

/// The sides of one case: flowgate and governor with the whole result, then with `is_ok()`,
/// then the floors: throughput at 16 MiB, latency at 16 MiB and at 64 MiB.
type Sides<'a, T> = [&'a (dyn Fn(T) -> bool + Sync); 7];
/// The same sides deciding on a key at hand.
type InHand<'a, T> = [&'a (dyn Fn(&T) -> bool + Sync); 7];

/// A case's sides, each deciding on the key its argument `$x` gives: `$ours` for flowgate
/// (`$l`), `$theirs` for governor (`$g`), `$hashed` for the floors' tables `$f16` and `$f64`.
macro_rules! sides {
    ($l:ident, $g:ident, $f16:ident, $f64:ident, |$x:ident| $ours:expr, $theirs:expr, $hashed:expr) => {
        [
            &|$x| black_box($l.check_key($ours)).is_ok(),
            &|$x| black_box($g.check_key($theirs)).is_ok(),
            &|$x| $l.check_key($ours).is_ok(),
            &|$x| $g.check_key($theirs).is_ok(),
            &|$x| $f16.decide($hashed),
            &|$x| $f16.decide_chained($hashed),
            &|$x| $f64.decide_chained($hashed),
        ]
    };
}

fn print(name: &str, r: &Rounds) {
    println!(
        "{name:<36} whole: flowgate {:7.2} ns  governor {:7.2} ns  ratio {:.3}  flowgate/latency16 {:.2}  flowgate/latency64 {:.2}  flowgate/throughput16 {:.2}",
        r.median(0), r.median(1), r.ratio(0, 1), r.ratio(0, 5), r.ratio(0, 6), r.ratio(0, 4)
    );
    println!(
        "{:<36} is_ok: flowgate {:7.2} ns  governor {:7.2} ns  ratio {:.3}  flowgate/latency16 {:.2}  (floors: throughput16 {:.2}, latency16 {:.2}, latency64 {:.2} ns)",
        "", r.median(2), r.median(3), r.ratio(2, 3), r.ratio(2, 5), r.median(4), r.median(5), r.median(6)
    );
}

/// Keys in a batch.
const BATCH_KEYS: usize = 16;

/// Batches of 16 random keys: flowgate's `check_keys` (one clock reading, every line asked for
/// first) against governor's 16 checks in turn, in both conventions; flowgate's 16 `check_key`
/// in turn; and the throughput floor (16 independent hits). Times per key.
fn batches(
    rounds: usize,
    keys: usize,
    l: &flowgate::KeyedRateLimiter<u64>,
    g: &governor::DefaultKeyedRateLimiter<u64>,
    f16: &floor::Keyed,
) {
    // 16 keys from one random number: xorshift steps, each scaled below `keys`.
    let batch = |mut x: u64| {
        core::array::from_fn::<u64, BATCH_KEYS, _>(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            below(x, keys) as u64
        })
    };
    let sides: [&(dyn Fn(u64) -> bool + Sync); 6] = [
        &|x| {
            let k = batch(x);
            black_box(l.check_keys(k.each_ref()))
                .iter()
                .all(Result::is_ok)
        },
        &|x| batch(x).iter().all(|k| black_box(g.check_key(k)).is_ok()),
        &|x| l.check_keys(batch(x).each_ref()).iter().all(Result::is_ok),
        &|x| batch(x).iter().all(|k| g.check_key(k).is_ok()),
        &|x| batch(x).iter().all(|k| black_box(l.check_key(k)).is_ok()),
        &|x| batch(x).iter().all(|k| f16.decide(k)),
    ];
    let r = Rounds::drawing(rounds, &sides, 1);
    let per_key = |i| r.median(i) / BATCH_KEYS as f64;
    println!(
        "{:<36} whole: flowgate {:7.2} ns/key  governor {:7.2} ns/key  ratio {:.3}  flowgate/throughput16 {:.2}  flowgate one by one {:7.2} ns/key",
        format!("u64, {keys} keys, batch of {BATCH_KEYS}"), per_key(0), per_key(1), r.ratio(0, 1), r.ratio(0, 5), per_key(4)
    );
    println!(
        "{:<36} is_ok: flowgate {:7.2} ns/key  governor {:7.2} ns/key  ratio {:.3}  flowgate/throughput16 {:.2}  (floor: throughput16 {:.2} ns/key)",
        "", per_key(2), per_key(3), r.ratio(2, 3), r.ratio(2, 5), per_key(5)
    );
}

fn main() {
    // `cargo bench` passes --bench; under `cargo test` this is a smoke run on 1 000 keys.
    let Some(bench) = mode() else { return };
    let (keys, rounds) = if bench { (1_000_000, 300) } else { (1_000, 4) };
    let (f16, f64) = (floor::Keyed::new(16 << 20), floor::Keyed::new(64 << 20));
    let d = draws(keys, 0);
    {
        let (l, g) = (flowgate_u64(keys), governor_u64(keys));
        let drawn: Sides<'_, u64> = sides!(
            l,
            g,
            f16,
            f64,
            |x| &(below(x, keys) as u64),
            &(below(x, keys) as u64),
            &(below(x, keys) as u64)
        );
        for threads in [1, 2] {
            let name = format!("u64, {keys} keys, {threads} thr, random key");
            print(&name, &Rounds::drawing(rounds, &drawn, threads));
        }
        batches(rounds, keys, &l, &g, &f16);
        let d64: Vec<u64> = d.iter().map(|&k| u64::from(k)).collect();
        let in_hand: InHand<'_, u64> = sides!(l, g, f16, f64, |k| k, k, k);
        let name = format!("u64, {keys} keys, 1 thr, key in hand");
        print(&name, &Rounds::walking(rounds, &d64, &in_hand, 1));
    }
    let names = string_keys(keys);
    let (l, g) = (flowgate_str(&names), governor_string(&names));
    // A random key is picked from the million strings, as a server's parsed key would be.
    let drawn: Sides<'_, u64> = sides!(
        l,
        g,
        f16,
        f64,
        |x| names[below(x, keys)].as_str(),
        &names[below(x, keys)],
        names[below(x, keys)].as_str()
    );
    print(
        &format!("String, {keys} keys, 1 thr, random key"),
        &Rounds::drawing(rounds, &drawn, 1),
    );
    // In hand: copies of the drawn strings in draw order, read in sequence.
    let copies = in_hand(&names, &d);
    let in_hand: InHand<'_, String> = sides!(l, g, f16, f64, |k| k.as_str(), k, k.as_str());
    print(
        &format!("String, {keys} keys, 1 thr, key in hand"),
        &Rounds::walking(rounds, &copies, &in_hand, 1),
    );
}
