#![allow(missing_docs)] // criterion_group! generates undocumented items
//! Single-bucket decisions, flowgate and governor side by side in each group, so one report
//! holds the ratio measured in the same run: allowed, refused, `check_n`, the clocks, and two
//! threads contending on one bucket.
//!
//! `cargo bench -p flowgate-benches --bench direct` (see BENCHMARKS.md for the figures and how
//! they were taken).

mod common;

use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use common::*;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use flowgate::clock::{Clock, CoarseClock, QuantaClock, StdClock};
use flowgate::RateLimiter;

fn allowed(c: &mut Criterion) {
    let mut g = c.benchmark_group("allowed");
    let l = flowgate_allowing();
    g.bench_function("flowgate", |b| {
        b.iter(|| assert!(black_box(l.check().is_ok())))
    });
    let coarse = RateLimiter::with_clock(
        allowing_quota(),
        CoarseClock::new(Duration::from_millis(1)).unwrap(),
    );
    g.bench_function("flowgate_coarse_clock", |b| {
        b.iter(|| assert!(black_box(coarse.check().is_ok())))
    });
    let std = RateLimiter::with_clock(allowing_quota(), StdClock::new());
    g.bench_function("flowgate_std_clock", |b| {
        b.iter(|| assert!(black_box(std.check().is_ok())))
    });
    let gov = governor_allowing();
    g.bench_function("governor", |b| {
        b.iter(|| assert!(black_box(gov.check().is_ok())))
    });
    g.finish();
}

fn refused(c: &mut Criterion) {
    let mut g = c.benchmark_group("refused");
    let l = flowgate_refusing();
    g.bench_function("flowgate", |b| {
        b.iter(|| assert!(black_box(l.check().is_err())))
    });
    let gov = governor_refusing();
    g.bench_function("governor", |b| {
        b.iter(|| assert!(black_box(gov.check().is_err())))
    });
    g.finish();
}

fn check_n(c: &mut Criterion) {
    let mut g = c.benchmark_group("check_n_5");
    let l = flowgate_allowing();
    g.bench_function("flowgate", |b| {
        b.iter(|| assert!(matches!(black_box(l.check_n(black_box(5))), Ok(Ok(_)))))
    });
    let gov = governor_allowing();
    let five = NonZeroU32::new(5).unwrap();
    g.bench_function("governor", |b| {
        b.iter(|| assert!(matches!(black_box(gov.check_n(black_box(five))), Ok(Ok(_)))))
    });
    g.finish();
}

fn clocks(c: &mut Criterion) {
    let mut g = c.benchmark_group("clock_now");
    let q = QuantaClock::new();
    g.bench_function("flowgate_quanta", |b| b.iter(|| black_box(q.now())));
    let qc = quanta::Clock::new();
    g.bench_function("quanta_now", |b| b.iter(|| black_box(qc.now())));
    g.bench_function("std_instant", |b| b.iter(|| black_box(Instant::now())));
    g.finish();
}

/// Two threads, each making `iters` allowed decisions on one shared bucket; the reported time
/// per iteration covers 2 decisions (throughput is in decisions).
fn contention(c: &mut Criterion) {
    let mut g = c.benchmark_group("contention_2_threads");
    g.throughput(Throughput::Elements(2));
    let l = flowgate_allowing();
    g.bench_function("flowgate", |b| {
        b.iter_custom(|iters| two_threads(iters, &|| l.check().is_ok()))
    });
    let gov = governor_allowing();
    g.bench_function("governor", |b| {
        b.iter_custom(|iters| two_threads(iters, &|| gov.check().is_ok()))
    });
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(50)
}

criterion_group! { name = benches; config = config(); targets = allowed, refused, check_n, clocks, contention }
criterion_main!(benches);
