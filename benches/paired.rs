#![allow(missing_docs)]
//! Paired timing: flowgate and governor alternate in short batches (10 000 decisions each,
//! 400 rounds under `cargo bench`, order swapped every round), and the figure is the median of the per-round
//! ratios. On a shared, noisy machine this cancels the drift that separates two criterion
//! measurements taken seconds apart. `cargo bench --bench paired`.

mod common;

use common::paired::{batch, mode, pair};
use common::*;

fn report(rounds: usize, name: &str, ours: &dyn Fn() -> bool, theirs: &dyn Fn() -> bool) {
    let (a, b, ratio) = pair(rounds, &mut || batch(ours), &mut || batch(theirs));
    println!(
        "{name:<28} flowgate {a:6.2} ns  governor {b:6.2} ns  ratio (median of rounds) {ratio:.3}"
    );
}

fn main() {
    // `cargo bench` passes --bench; under `cargo test` this is a smoke run of 4 rounds.
    let Some(bench) = mode() else { return };
    let rounds = if bench { 400 } else { 4 };
    let (l, g) = (flowgate_allowing(), governor_allowing());
    report(rounds, "allowed", &|| l.check().is_ok(), &|| {
        g.check().is_ok()
    });
    let (l, g) = (flowgate_refusing(), governor_refusing());
    report(rounds, "refused", &|| l.check().is_err(), &|| {
        g.check().is_err()
    });
    let (l, g) = (flowgate_allowing(), governor_allowing());
    let five = std::num::NonZeroU32::new(5).unwrap();
    report(
        rounds,
        "check_n(5)",
        &|| matches!(l.check_n(5), Ok(Ok(_))),
        &|| matches!(g.check_n(five), Ok(Ok(_))),
    );
}
