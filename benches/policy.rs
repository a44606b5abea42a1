#![allow(missing_docs)] // criterion_group! generates undocumented items
//! The users' three-layer decision (per user per endpoint → per endpoint → global), flowgate's
//! `Policies` beside three sequential governor checks (two keyed, one direct) in the same run,
//! on 10 000 users × 16 endpoints drawn at random; 1 and 2 threads.
//!
//! `cargo bench -p flowgate-benches --bench policy` (see BENCHMARKS.md for the figures and how
//! they were taken).

mod common;

use std::hint::black_box;

use common::{
    calls, flowgate_policies, two_threads_walking, FlowgateLayers, GovernorLayers, DRAWS,
};
use criterion::{criterion_group, criterion_main, Criterion};

fn three_layers(c: &mut Criterion) {
    let calls = calls();
    let flowgate = flowgate_policies();
    let governor = GovernorLayers::new();
    let sequential = FlowgateLayers::new();
    // Every pair seen once before timing, so that every side measures keys it holds.
    for call in &calls {
        assert!(flowgate.check(call).is_ok());
        assert!(governor.check(call));
        assert!(sequential.check(call));
    }
    let mut group = c.benchmark_group("policy_three_layers");
    let mut i = 0;
    group.bench_function("flowgate", |b| {
        b.iter(|| {
            i = (i + 1) & (DRAWS - 1);
            black_box(flowgate.check(&calls[i]).is_ok())
        })
    });
    group.bench_function("governor", |b| {
        b.iter(|| {
            i = (i + 1) & (DRAWS - 1);
            black_box(governor.check(&calls[i]))
        })
    });
    group.bench_function("flowgate_sequential", |b| {
        b.iter(|| {
            i = (i + 1) & (DRAWS - 1);
            black_box(sequential.check(&calls[i]))
        })
    });
    group.bench_function("flowgate_2_threads", |b| {
        b.iter_custom(|iters| {
            two_threads_walking(iters, &|t, i| {
                let call = &calls[(i as usize + t * DRAWS / 2) & (DRAWS - 1)];
                flowgate.check(call).is_ok()
            })
        })
    });
    group.bench_function("governor_2_threads", |b| {
        b.iter_custom(|iters| {
            two_threads_walking(iters, &|t, i| {
                governor.check(&calls[(i as usize + t * DRAWS / 2) & (DRAWS - 1)])
            })
        })
    });
    group.finish();
}

criterion_group!(benches, three_layers);
criterion_main!(benches);
