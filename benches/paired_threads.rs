#![allow(missing_docs)]
//! `paired`'s contended case in a binary of its own: two threads deciding on one bucket at
//! once, timed inside each worker (`common::two_threads`); the floor is two threads' CAS on
//! one word. `cargo bench -p flowgate-benches --bench paired_threads`.

mod common;

use common::paired::{direct_rounds, print_direct, Rounds, BATCH};
use common::*;
use std::hint::black_box;

/// Decisions per thread in one batch: long enough (milliseconds) that the threads' staggered
/// start after the barrier (tens of microseconds) does not leave one thread alone on the
/// bucket for a measurable share of the batch.
const TWO_THREAD_BATCH: usize = 20 * BATCH;

fn main() {
    let Some(rounds) = direct_rounds() else {
        return;
    };
    let floor = common::floor::Direct::default();
    let (l, g) = (flowgate_allowing(), governor_allowing());
    let (l2, g2) = (flowgate_allowing(), governor_allowing());
    let sides: [&(dyn Fn() -> bool + Sync); 5] = [
        &|| black_box(l.check()).is_ok(),
        &|| black_box(g.check()).is_ok(),
        &|| l2.check().is_ok(),
        &|| g2.check().is_ok(),
        &|| floor.decide(),
    ];
    // Wall time per decision of a batch: both threads' decisions.
    let two = |i: usize| {
        let time = two_threads(TWO_THREAD_BATCH as u64, sides[i]);
        time.as_nanos() as f64 / (2 * TWO_THREAD_BATCH) as f64
    };
    let r = Rounds::run((rounds / 8).max(1), sides.len(), two);
    print_direct("2 threads, one bucket", &r);
    println!(
        "{:<22} throughput flowgate/governor: whole {:.2}x  is_ok {:.2}x",
        "",
        1.0 / r.ratio(0, 1),
        1.0 / r.ratio(2, 3)
    );
}
