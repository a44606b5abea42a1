#![allow(missing_docs)] // criterion_group! generates undocumented items
//! Every algorithm in one criterion run, governor's GCRA as the reference column: allowed,
//! refused, and two threads contending on one bucket.
//!
//! `cargo bench -p flowgate-benches --bench algorithms` (see BENCHMARKS.md for the figures and how
//! they were taken).

mod common;

use std::hint::black_box;
use std::time::Duration;

use common::*;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

fn allowed(c: &mut Criterion) {
    let mut g = c.benchmark_group("algorithms_allowed");
    for name in ALGORITHMS {
        let l = algorithm(name, true);
        g.bench_function(*name, |b| b.iter(|| assert!(black_box(l.check()))));
    }
    g.finish();
}

fn refused(c: &mut Criterion) {
    let mut g = c.benchmark_group("algorithms_refused");
    for name in ALGORITHMS {
        let l = algorithm(name, false);
        g.bench_function(*name, |b| b.iter(|| assert!(!black_box(l.check()))));
    }
    g.finish();
}

fn contention(c: &mut Criterion) {
    let mut g = c.benchmark_group("algorithms_contention_2_threads");
    g.throughput(Throughput::Elements(2));
    for name in ALGORITHMS {
        let l = algorithm(name, true);
        // At 10⁹/s the log's 1000-slot ring laps every ~30 µs, so a thread stalled that long
        // between claiming and recording a slot makes the other refuse (the documented brief
        // under-admission): for the log, count decisions whatever their outcome.
        let must_admit = *name != "sliding_log";
        g.bench_function(*name, |b| {
            b.iter_custom(|iters| two_threads(iters, &|| l.check() || !must_admit))
        });
    }
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30)
}

criterion_group! { name = benches; config = config(); targets = allowed, refused, contention }
criterion_main!(benches);
