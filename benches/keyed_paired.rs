#![allow(missing_docs)]
//! Paired timing of keyed checks at a million keys: flowgate and governor alternate in short
//! batches (10 000 decisions each, 300 rounds under `cargo bench`, order swapped every round)
//! walking the same random draws, and the figure is the median of the per-round ratios, which
//! cancels the drift of this shared machine (governor's own time moved 150–260 ns between
//! criterion runs). `cargo bench --bench keyed_paired`.

mod common;

use std::cell::Cell;

use common::paired::{mode, pair, walk};
use common::*;

fn report<T>(
    rounds: usize,
    name: &str,
    draws: &[T],
    ours: &dyn Fn(&T) -> bool,
    theirs: &dyn Fn(&T) -> bool,
) {
    let (at_ours, at_theirs) = (Cell::new(0), Cell::new(0));
    let (a, b, ratio) = pair(rounds, &mut || walk(draws, &at_ours, ours), &mut || {
        walk(draws, &at_theirs, theirs)
    });
    println!(
        "{name:<22} flowgate {a:7.2} ns  governor {b:7.2} ns  ratio (median of rounds) {ratio:.3}  \
         throughput {:.2}x",
        1.0 / ratio
    );
}

fn main() {
    // `cargo bench` passes --bench; under `cargo test` this is a smoke run on 1 000 keys.
    let Some(bench) = mode() else { return };
    let (keys, rounds) = if bench { (1_000_000, 300) } else { (1_000, 4) };
    let d = draws(keys, 0);
    {
        let (l, g) = (flowgate_u64(keys), governor_u64(keys));
        report(
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
    report(
        rounds,
        &format!("String, {keys} keys"),
        &d,
        &|k| l.check_key(k.as_str()).is_ok(),
        &|k| g.check_key(k).is_ok(),
    );
}
