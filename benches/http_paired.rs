#![allow(missing_docs)]
//! Paired timing of the HTTP middleware's overhead: the bare inner service, a flowgate layer
//! and a tower_governor layer (benches/common/http_sides.rs) are timed in short batches one
//! after the other (10 000 requests each, 300 rounds under `cargo bench`, the order rotated
//! every round), and the figure is the median over rounds of
//! `(flowgate − bare) / (tower_governor − bare)`: each round's three batches run within
//! milliseconds of each other, which cancels the drift of this shared machine that separates
//! criterion's measurements (its `bare` moved from 60 to 134 ns between runs of one hour).
//! `cargo bench -p flowgate-benches --bench http_paired`.

mod common;
#[path = "common/http_sides.rs"]
mod sides;

use std::convert::Infallible;
use std::hint::black_box;
use std::time::Instant;

use common::paired::{median, mode, BATCH};
use sides::{serve, Sides, CLIENTS};
use tower::Service;

/// A service every side is: the request and response types of `sides::serve` (`B` the response
/// body: axum's, or the layer's around it).
trait Side<B>: Service<http::Request<()>, Response = http::Response<B>, Error = Infallible> {}

impl<S, B> Side<B> for S where
    S: Service<http::Request<()>, Response = http::Response<B>, Error = Infallible>
{
}

/// Times one batch of requests through `service`, ns per request.
fn batch<B>(service: &mut impl Side<B>, at: &mut usize) -> f64 {
    let start = Instant::now();
    for _ in 0..BATCH {
        *at = (*at + 1) % CLIENTS;
        assert!(black_box(serve(service, *at)));
    }
    start.elapsed().as_nanos() as f64 / BATCH as f64
}

/// Medians of the three sides' times and of the per-round overhead ratio.
fn overhead<B, C>(
    rounds: usize,
    bare: &mut sides::Inner,
    ours: &mut impl Side<B>,
    theirs: &mut impl Side<C>,
) -> [f64; 4] {
    let (mut t0, mut t1, mut t2, mut ratio) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut at = [0; 3];
    for round in 0..rounds {
        let mut times = [0.0; 3];
        for k in 0..3 {
            let side = (round + k) % 3;
            times[side] = match side {
                0 => batch(bare, &mut at[0]),
                1 => batch(ours, &mut at[1]),
                _ => batch(theirs, &mut at[2]),
            };
        }
        t0.push(times[0]);
        t1.push(times[1]);
        t2.push(times[2]);
        ratio.push((times[1] - times[0]) / (times[2] - times[0]));
    }
    [
        median(&mut t0),
        median(&mut t1),
        median(&mut t2),
        median(&mut ratio),
    ]
}

fn print(name: &str, [bare, ours, theirs, ratio]: [f64; 4]) {
    println!(
        "{name:<44} bare {bare:6.1} ns  flowgate {ours:6.1} ns  tower_governor {theirs:6.1} ns  \
         overhead ratio (median of rounds) {ratio:.3}"
    );
}

fn main() {
    let Some(bench) = mode() else { return };
    let rounds = if bench { 300 } else { 3 };
    let mut s = Sides::new();
    print(
        "draft headers / tower_governor use_headers",
        overhead(
            rounds,
            &mut s.bare,
            &mut s.flowgate,
            &mut s.tower_governor_headers,
        ),
    );
    print(
        "legacy headers / tower_governor use_headers",
        overhead(
            rounds,
            &mut s.bare,
            &mut s.flowgate_legacy,
            &mut s.tower_governor_headers,
        ),
    );
    print(
        "no headers / tower_governor default",
        overhead(
            rounds,
            &mut s.bare,
            &mut s.flowgate_no_headers,
            &mut s.tower_governor,
        ),
    );
}
