#![allow(missing_docs)]
//! Instruction counts of one request through the HTTP middleware, for `valgrind
//! --tool=callgrind` (`scripts/instructions.sh`): flowgate's `RateLimitLayer` and
//! `tower_governor`'s `GovernorLayer` (benches/common/http_sides.rs), and the bare inner service whose
//! count is every side's baseline. A binary of its own, so that the HTTP stack does not change
//! how the other instruction binaries are compiled.

mod common;
#[path = "common/http_sides.rs"]
mod sides;

use std::hint::black_box;

use common::{hot_loop, instruction_main, unknown_case};
use sides::{serve, Sides, CLIENTS};

const CASES: &[&str] = &[
    "http_bare",
    "http_flowgate_draft_headers",
    "http_flowgate_legacy_headers",
    "http_flowgate_no_headers",
    "http_tower_governor",
    "http_tower_governor_headers",
];

fn run(case: &str, n: u64) {
    let mut sides = Sides::new();
    let mut i = 0;
    macro_rules! side {
        ($service:expr) => {
            hot_loop(n, || {
                i = (i + 1) % CLIENTS;
                assert!(black_box(serve($service, i)));
            })
        };
    }
    match case {
        "http_bare" => side!(&mut sides.bare),
        "http_flowgate_draft_headers" => side!(&mut sides.flowgate),
        "http_flowgate_legacy_headers" => side!(&mut sides.flowgate_legacy),
        "http_flowgate_no_headers" => side!(&mut sides.flowgate_no_headers),
        "http_tower_governor" => side!(&mut sides.tower_governor),
        "http_tower_governor_headers" => side!(&mut sides.tower_governor_headers),
        other => unknown_case(other, CASES),
    }
}

fn main() {
    instruction_main("http instructions", CASES, run);
}
