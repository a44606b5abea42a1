#![allow(missing_docs)] // criterion_group! generates undocumented items
//! The HTTP middleware's cost per request, in process (no socket): flowgate's `RateLimitLayer`
//! beside `tower_governor`'s `GovernorLayer` in the same run, both limiting per client address
//! over 1024 clients, and the bare inner service (the request's own cost, the same for all).
//! The middleware's overhead is a side's time minus `bare`'s.
//!
//! `cargo bench -p flowgate-benches --bench http` (see BENCHMARKS.md for the figures and how they
//! were taken).

mod common;
#[path = "common/http_sides.rs"]
mod sides;

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use sides::{serve, Sides, CLIENTS};

fn middleware(c: &mut Criterion) {
    let mut sides = Sides::new();
    let mut group = c.benchmark_group("http_per_request");
    let mut i = 0;
    macro_rules! side {
        ($name:literal, $service:expr) => {
            group.bench_function($name, |b| {
                b.iter(|| {
                    i = (i + 1) % CLIENTS;
                    black_box(serve($service, i))
                })
            });
        };
    }
    side!("bare", &mut sides.bare);
    side!("flowgate_draft_headers", &mut sides.flowgate);
    side!("flowgate_legacy_headers", &mut sides.flowgate_legacy);
    side!("flowgate_no_headers", &mut sides.flowgate_no_headers);
    side!("tower_governor", &mut sides.tower_governor);
    side!("tower_governor_headers", &mut sides.tower_governor_headers);
    group.finish();
}

criterion_group!(benches, middleware);
criterion_main!(benches);
