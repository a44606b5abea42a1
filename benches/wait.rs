#![allow(missing_docs)] // criterion_group! generates undocumented items
//! An uncontended asynchronous wait (the cell is there: no sleep), flowgate's `until_ready`
//! beside governor's `until_ready`, both polled once without a runtime, in the same run; and
//! the blocking `wait` beside a plain `check`.
//!
//! `cargo bench -p flowgate-benches --bench wait` (see BENCHMARKS.md for the figures and how they
//! were taken).

mod common;

use std::hint::black_box;

use common::{flowgate_allowing, governor_allowing, ready_now};
use criterion::{criterion_group, criterion_main, Criterion};
use flowgate::WaitOptions;

fn uncontended(c: &mut Criterion) {
    let flowgate = flowgate_allowing();
    let governor = governor_allowing();
    let mut group = c.benchmark_group("until_ready_uncontended");
    group.bench_function("flowgate", |b| {
        b.iter(|| {
            black_box(ready_now(flowgate.until_ready(1, WaitOptions::new(), |_| async {})).is_ok())
        })
    });
    group.bench_function("governor", |b| {
        b.iter(|| {
            ready_now(governor.until_ready());
            black_box(())
        })
    });
    group.bench_function("flowgate_blocking_wait", |b| {
        b.iter(|| black_box(flowgate.wait(1, WaitOptions::new()).is_ok()))
    });
    group.bench_function("flowgate_check", |b| {
        b.iter(|| black_box(flowgate.check().is_ok()))
    });
    group.finish();
}

criterion_group!(benches, uncontended);
criterion_main!(benches);
