#![allow(missing_docs)]
//! What the size of a decision's result costs a caller that keeps it: a direct `check()` kept
//! whole (`Result<Allowed, Refused>`, 56 bytes since the outcomes cite nothing for a single
//! limiter; 80 before), the same decision narrowed to its gauge (`Result<Gauge, Gauge>`, 40
//! bytes), `is_ok()` only, and governor's whole result, paired in rounds as the `paired*` benches
//! do (`benches/common/paired.rs`). A measurement for the design of the outcome types, not a target of its own.
//! `cargo bench -p flowgate-benches --bench result_size`.

mod common;

use common::paired::{batch, mode, Rounds};
use common::*;
use std::hint::black_box;

fn main() {
    let Some(bench) = mode() else { return };
    let rounds = if bench { 300 } else { 4 };
    for (name, allowing) in [("allowed", true), ("refused", false)] {
        let flowgate = || {
            if allowing {
                flowgate_allowing()
            } else {
                flowgate_refusing()
            }
        };
        let (whole, narrow, branch) = (flowgate(), flowgate(), flowgate());
        let governor = if allowing {
            governor_allowing()
        } else {
            governor_refusing()
        };
        let sides: [&dyn Fn() -> bool; 4] = [
            &|| black_box(whole.check()).is_ok() == allowing,
            &|| {
                let gauges = narrow.check().map(|a| a.gauge()).map_err(|r| r.gauge());
                black_box(gauges).is_ok() == allowing
            },
            &|| branch.check().is_ok() == allowing,
            &|| black_box(governor.check()).is_ok() == allowing,
        ];
        let r = Rounds::run(rounds, sides.len(), |i| batch(sides[i]));
        println!(
            "{name:<8} whole {:6.2} ns ({:.3}x governor)  gauge only {:6.2} ns ({:.3}x)  is_ok {:6.2} ns ({:.3}x)  governor whole {:6.2} ns",
            r.median(0), r.ratio(0, 3), r.median(1), r.ratio(1, 3), r.median(2), r.ratio(2, 3), r.median(3)
        );
    }
}
