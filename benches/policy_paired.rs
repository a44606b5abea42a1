#![allow(missing_docs)]
//! Paired timing of the users' three-layer decision: flowgate's `Policies` and three sequential
//! governor checks alternate in short batches (10 000 decisions each, 300 rounds under
//! `cargo bench`, order swapped every round) over the same random calls, and the figure is the
//! median of the per-round ratios, which cancels the drift of this shared machine (governor's
//! criterion time for the same work moved 164–212 ns between runs of one day). One thread,
//! then two threads on the same sets. `cargo bench --bench policy_paired`.

mod common;

use std::cell::Cell;
use std::hint::black_box;

use common::paired::{mode, pair, walk, walk_two_threads};
use common::{calls, flowgate_policies, FlowgateLayers, GovernorLayers};

fn print(name: &str, (a, b, ratio): (f64, f64, f64)) {
    println!(
        "{name:<38} flowgate {a:7.2} ns  other {b:7.2} ns  ratio (median of rounds) {ratio:.3}"
    );
}

fn main() {
    let Some(bench) = mode() else { return };
    let rounds = if bench { 300 } else { 4 };
    let calls = calls();
    let policies = flowgate_policies();
    let governor = GovernorLayers::new();
    let sequential = FlowgateLayers::new();
    // Every pair seen once before timing, so that every side measures keys it holds.
    for call in &calls {
        assert!(policies.check(call).is_ok());
        assert!(governor.check(call));
        assert!(sequential.check(call));
    }
    let at = [Cell::new(0), Cell::new(0), Cell::new(0)];
    let ours = |c: &_| policies.check(c).is_ok();
    // The whole decision, as a caller who writes headers keeps it (governor's convention).
    let whole = |c: &_| black_box(policies.check(c)).is_ok();
    let theirs = |c: &_| governor.check(c);
    let plain = |c: &_| sequential.check(c);
    print(
        "three layers / governor, 1 thread",
        pair(rounds, &mut || walk(&calls, &at[0], &ours), &mut || {
            walk(&calls, &at[1], &theirs)
        }),
    );
    print(
        "three layers, whole decision / governor",
        pair(rounds, &mut || walk(&calls, &at[0], &whole), &mut || {
            walk(&calls, &at[1], &theirs)
        }),
    );
    print(
        "three layers / governor, 2 threads",
        pair(
            rounds,
            &mut || walk_two_threads(&calls, &at[0], &ours),
            &mut || walk_two_threads(&calls, &at[1], &theirs),
        ),
    );
    print(
        "three layers / flowgate sequential",
        pair(rounds, &mut || walk(&calls, &at[0], &ours), &mut || {
            walk(&calls, &at[2], &plain)
        }),
    );
}
