#![allow(missing_docs)]
//! Paired timing of keyed checks at a million keys: flowgate and governor alternate in short
//! batches (10 000 decisions each, 300 rounds under `cargo bench`, order swapped every round)
//! walking the same random draws, and the figure is the median of the per-round ratios, which
//! cancels the drift of this shared machine (governor's own time moved 150–260 ns between
//! criterion runs). `cargo bench --bench keyed_paired`.

mod common;

use std::cell::Cell;
use std::hint::black_box;
use std::time::Instant;

use common::*;

const BATCH: usize = 10_000;

/// Times the next `BATCH` draws (continuing where the last batch of this walk stopped).
fn batch<T>(draws: &[T], at: &Cell<usize>, decide: &dyn Fn(&T) -> bool) -> f64 {
    let start = Instant::now();
    for _ in 0..BATCH {
        let i = at.get();
        at.set((i + 1) & (DRAWS - 1));
        assert!(black_box(decide(&draws[i])));
    }
    start.elapsed().as_nanos() as f64 / BATCH as f64
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn pair<T>(
    rounds: usize,
    name: &str,
    draws: &[T],
    ours: &dyn Fn(&T) -> bool,
    theirs: &dyn Fn(&T) -> bool,
) {
    let (at_ours, at_theirs) = (Cell::new(0), Cell::new(0));
    let (mut a, mut b, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let (x, y) = if round % 2 == 0 {
            let x = batch(draws, &at_ours, ours);
            (x, batch(draws, &at_theirs, theirs))
        } else {
            let y = batch(draws, &at_theirs, theirs);
            (batch(draws, &at_ours, ours), y)
        };
        a.push(x);
        b.push(y);
        ratio.push(x / y);
    }
    println!(
        "{name:<22} flowgate {:7.2} ns  governor {:7.2} ns  ratio (median of rounds) {:.3}  \
         throughput {:.2}x",
        median(&mut a),
        median(&mut b),
        median(&mut ratio),
        1.0 / median(&mut ratio)
    );
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    // `cargo bench` passes --bench; under `cargo test` this is a smoke run on 1 000 keys.
    let bench = std::env::args().any(|a| a == "--bench");
    let (keys, rounds) = if bench { (1_000_000, 300) } else { (1_000, 4) };
    let d = draws(keys, 0);
    {
        let (l, g) = (flowgate_u64(keys), governor_u64(keys));
        pair(
            rounds,
            &format!("u64, {keys} keys"),
            &d,
            &|&k| l.check_key(&u64::from(k)).is_ok(),
            &|&k| g.check_key(&u64::from(k)).is_ok(),
        );
    }
    let names = string_keys(keys);
    let d = in_hand(&names, &d);
    let (l, g) = (flowgate_str(&names), governor_string(&names));
    pair(
        rounds,
        &format!("String, {keys} keys"),
        &d,
        &|k| l.check_key(k.as_str()).is_ok(),
        &|k| g.check_key(k).is_ok(),
    );
}
