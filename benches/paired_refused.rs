#![allow(missing_docs)]
//! `paired`'s refusal case in a binary of its own: a refusal writes nothing, so its floor is
//! the clock read and a load (`common::floor::Direct::refuse`).
//! `cargo bench -p flowgate-benches --bench paired_refused`.

mod common;

use common::paired::{direct_rounds, report_direct};
use common::*;
use std::hint::black_box;

fn main() {
    let Some(rounds) = direct_rounds() else {
        return;
    };
    let (l, g) = (flowgate_refusing(), governor_refusing());
    let (l2, g2) = (flowgate_refusing(), governor_refusing());
    let booked = common::floor::Direct::booked();
    report_direct(
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
