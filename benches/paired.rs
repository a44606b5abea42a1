#![allow(missing_docs)]
//! Paired timing: flowgate and governor alternate in short batches (10 000 decisions each,
//! 400 rounds under `cargo bench`, order swapped every round), and the figure is the median of the per-round
//! ratios. On a shared, noisy machine this cancels the drift that separates two criterion
//! measurements taken seconds apart. `cargo bench --bench paired`.

mod common;

use std::hint::black_box;
use std::time::Instant;

use common::*;

const BATCH: u32 = 10_000;

fn batch(decide: &dyn Fn() -> bool) -> f64 {
    let start = Instant::now();
    for _ in 0..BATCH {
        assert!(black_box(decide()));
    }
    start.elapsed().as_nanos() as f64 / f64::from(BATCH)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn pair(rounds: usize, name: &str, ours: &dyn Fn() -> bool, theirs: &dyn Fn() -> bool) {
    let (mut a, mut b, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let (x, y) = if round % 2 == 0 {
            let x = batch(ours);
            (x, batch(theirs))
        } else {
            let y = batch(theirs);
            (batch(ours), y)
        };
        a.push(x);
        b.push(y);
        ratio.push(x / y);
    }
    println!(
        "{name:<28} flowgate {:6.2} ns  governor {:6.2} ns  ratio (median of rounds) {:.3}",
        median(&mut a),
        median(&mut b),
        median(&mut ratio)
    );
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    // `cargo bench` passes --bench; under `cargo test` this is a smoke run of 4 rounds.
    let rounds = if std::env::args().any(|a| a == "--bench") {
        400
    } else {
        4
    };
    let (l, g) = (flowgate_allowing(), governor_allowing());
    pair(rounds, "allowed", &|| l.check().is_ok(), &|| {
        g.check().is_ok()
    });
    let (l, g) = (flowgate_refusing(), governor_refusing());
    pair(rounds, "refused", &|| l.check().is_err(), &|| {
        g.check().is_err()
    });
    let (l, g) = (flowgate_allowing(), governor_allowing());
    let five = std::num::NonZeroU32::new(5).unwrap();
    pair(
        rounds,
        "check_n(5)",
        &|| matches!(l.check_n(5), Ok(Ok(_))),
        &|| matches!(g.check_n(five), Ok(Ok(_))),
    );
}
