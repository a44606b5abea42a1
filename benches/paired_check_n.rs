#![allow(missing_docs)]
//! `paired`'s weighted case (`check_n(10)`, admitted) in a binary of its own.
//! `cargo bench -p flowgate-benches --bench paired_check_n`.

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
    let ten = std::num::NonZeroU32::new(10).unwrap();
    report_direct(
        rounds,
        "check_n(10)",
        [
            &|| matches!(black_box(l.check_n(black_box(10))), Ok(Ok(_))),
            &|| matches!(black_box(g.check_n(black_box(ten))), Ok(Ok(_))),
            &|| matches!(l2.check_n(black_box(10)), Ok(Ok(_))),
            &|| matches!(g2.check_n(black_box(ten)), Ok(Ok(_))),
            &|| floor.decide(),
        ],
    );
}
