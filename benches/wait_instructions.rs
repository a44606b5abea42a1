#![allow(missing_docs)]
//! Instruction counts of an uncontended asynchronous wait, for `valgrind --tool=callgrind`
//! (`scripts/instructions.sh`): flowgate's `until_ready` and governor's `until_ready`,
//! each future polled once with a no-op waker. A binary of its own, so that governor's async
//! code does not change how its plain checks are compiled in the other instruction binaries
//! (it did: governor's direct `check` went from 55 to 95 instructions beside it).

mod common;

use std::hint::black_box;

use common::*;

const CASES: &[&str] = &["flowgate_until_ready", "governor_until_ready"];

fn run(case: &str, n: u64) {
    match case {
        "flowgate_until_ready" => {
            let l = flowgate_allowing();
            let options = flowgate::wait::WaitOptions::new();
            hot_loop(n, || {
                let waited = ready_now(l.until_ready(1, options, |_| async {}));
                assert!(black_box(waited.is_ok()));
            })
        }
        "governor_until_ready" => {
            let l = governor_allowing();
            hot_loop(n, || {
                ready_now(l.until_ready());
                black_box(());
            })
        }
        other => unknown_case(other, CASES),
    }
}

fn main() {
    instruction_main("wait instructions", CASES, run);
}
