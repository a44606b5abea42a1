#![allow(missing_docs)]
//! Paired timing of single-bucket decisions: flowgate, governor and the hardware floor
//! (`rdtsc` + CAS, `common::floor`) take turns in short batches (10 000 decisions each, 400
//! rounds under `cargo bench`, the order rotated every round), and each figure is the median of
//! the per-round ratios, which cancels the drift of a shared, noisy machine.
//!
//! Both conventions, each on limiters of its own: the **whole result** kept
//! (`black_box(limiter.check())`, governor's benchmark convention: a caller that refuses reads
//! the wait to answer 429), and `is_ok()` only (a caller that only branches). The headline is the
//! whole result. The floor of an admission is `rdtsc` + CAS, of a refusal `rdtsc` + a load
//! (`common::floor`). `cargo bench -p flowgate-benches --bench paired`.

mod common;

use common::floor;
use common::paired::{batch, mode, Rounds, BATCH};
use common::*;
use std::hint::black_box;

/// One case: flowgate and governor in both conventions, and the floor, in one set of rounds;
/// and where the target for it (0.85× governor, whole) lies against the floor: below
/// 1.00, no limiter that does the floor's work can meet it.
fn report(rounds: usize, name: &str, sides: [&dyn Fn() -> bool; 5]) {
    let r = Rounds::run(rounds, sides.len(), |i| batch(sides[i]));
    print(name, &r);
    println!(
        "{:<22} target 0.85x governor (whole) = {:.2}x the floor",
        "",
        0.85 * r.ratio(1, 4)
    );
}

/// Prints one case's figures: contenders 0–1 flowgate and governor with the whole result,
/// 2–3 with `is_ok()`, 4 the floor.
fn print(name: &str, r: &Rounds) {
    println!(
        "{name:<22} whole:  flowgate {:6.2} ns  governor {:6.2} ns  ratio {:.3}  flowgate/floor {:.2}  governor/floor {:.2}",
        r.median(0), r.median(1), r.ratio(0, 1), r.ratio(0, 4), r.ratio(1, 4)
    );
    println!(
        "{:<22} is_ok:  flowgate {:6.2} ns  governor {:6.2} ns  ratio {:.3}  flowgate/floor {:.2}  (floor {:.2} ns)",
        "", r.median(2), r.median(3), r.ratio(2, 3), r.ratio(2, 4), r.median(4)
    );
}

/// Decisions per thread in one two-thread batch: long enough (milliseconds) that the threads'
/// staggered start after the barrier (tens of microseconds) does not leave one thread alone on
/// the bucket for a measurable share of the batch.
const TWO_THREAD_BATCH: usize = 20 * BATCH;

/// Two threads deciding on one bucket at once, `TWO_THREAD_BATCH` decisions each: wall time per
/// decision.
fn two(decide: &(dyn Fn() -> bool + Sync)) -> f64 {
    two_threads(TWO_THREAD_BATCH as u64, decide).as_nanos() as f64 / (2 * TWO_THREAD_BATCH) as f64
}

fn main() {
    // `cargo bench` passes --bench; under `cargo test` this is a smoke run of 4 rounds.
    let Some(bench) = mode() else { return };
    let rounds = if bench { 400 } else { 4 };
    let floor = floor::Direct::default();
    let f = || floor.decide();
    {
        let (l, g) = (flowgate_allowing(), governor_allowing());
        let (l2, g2) = (flowgate_allowing(), governor_allowing());
        report(
            rounds,
            "allowed",
            [
                &|| black_box(l.check()).is_ok(),
                &|| black_box(g.check()).is_ok(),
                &|| l2.check().is_ok(),
                &|| g2.check().is_ok(),
                &f,
            ],
        );
    }
    {
        // A refusal writes nothing: its floor is the clock read and a load (`Direct::refuse`).
        let (l, g) = (flowgate_refusing(), governor_refusing());
        let (l2, g2) = (flowgate_refusing(), governor_refusing());
        let booked = floor::Direct::booked();
        report(
            rounds,
            "refused",
            [
                &|| black_box(l.check()).is_err(),
                &|| black_box(g.check()).is_err(),
                &|| l2.check().is_err(),
                &|| g2.check().is_err(),
                &|| booked.refuse(),
            ],
        );
    }
    {
        let (l, g) = (flowgate_allowing(), governor_allowing());
        let (l2, g2) = (flowgate_allowing(), governor_allowing());
        let ten = std::num::NonZeroU32::new(10).unwrap();
        report(
            rounds,
            "check_n(10)",
            [
                &|| matches!(black_box(l.check_n(black_box(10))), Ok(Ok(_))),
                &|| matches!(black_box(g.check_n(black_box(ten))), Ok(Ok(_))),
                &|| matches!(l2.check_n(black_box(10)), Ok(Ok(_))),
                &|| matches!(g2.check_n(black_box(ten)), Ok(Ok(_))),
                &f,
            ],
        );
    }
    {
        // Two threads on one bucket: the floor is two threads' CAS on one word.
        let (l, g) = (flowgate_allowing(), governor_allowing());
        let (l2, g2) = (flowgate_allowing(), governor_allowing());
        let sides: [&(dyn Fn() -> bool + Sync); 5] = [
            &|| black_box(l.check()).is_ok(),
            &|| black_box(g.check()).is_ok(),
            &|| l2.check().is_ok(),
            &|| g2.check().is_ok(),
            &|| floor.decide(),
        ];
        let r = Rounds::run((rounds / 8).max(1), sides.len(), |i| two(sides[i]));
        print("2 threads, one bucket", &r);
        println!(
            "{:<22} throughput flowgate/governor: whole {:.2}x  is_ok {:.2}x",
            "",
            1.0 / r.ratio(0, 1),
            1.0 / r.ratio(2, 3)
        );
    }
}
