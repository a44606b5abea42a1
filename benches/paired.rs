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
//! (`common::floor`).
//!
//! One case per binary, so that no side's `check` is inlined or not because of another case's
//! calls: this one is an admission (`cargo bench -p flowgate-benches --bench paired`); the
//! others are `paired_refused`, `paired_check_n` and `paired_threads`.

mod common;

use common::paired::{direct_rounds, report_direct};
use common::*;
use std::hint::black_box;

fn main() {
    let Some(rounds) = direct_rounds() else {
        return;
    };
    let floor = common::floor::Direct::default();
    let (l, g) = (flowgate_allowing(), governor_allowing());
    let (l2, g2) = (flowgate_allowing(), governor_allowing());
    report_direct(
        rounds,
        "allowed",
        [
            &|| black_box(l.check()).is_ok(),
            &|| black_box(g.check()).is_ok(),
            &|| l2.check().is_ok(),
            &|| g2.check().is_ok(),
            &|| floor.decide(),
        ],
    );
}
