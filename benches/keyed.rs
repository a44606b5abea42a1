#![allow(missing_docs)] // criterion_group! generates undocumented items
//! Keyed limiters, flowgate beside governor's `DefaultKeyedRateLimiter` in the same run: u64 and
//! `String` keys, 1 000 / 100 000 / 1 000 000 keys drawn at random, 1 and 2 threads; and a
//! sweep of a million keys beside governor's `retain_recent`.
//!
//! `cargo bench -p flowgate-benches --bench keyed` (see BENCHMARKS.md for the figures and how they
//! were taken).

mod common;

use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::Duration;

use common::{
    draws, floor, flowgate_str, flowgate_u64, governor_string, governor_u64, in_hand, string_keys,
    two_threads_walking, DRAWS,
};
use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use flowgate::clock::ManualClock;
use flowgate::{Gcra, KeyedRateLimiter, Quota};
use governor::clock::FakeRelativeClock;

/// Table sizes: all three under `cargo bench`, the smallest as a smoke test under `cargo test`.
fn sizes() -> &'static [usize] {
    if std::env::args().any(|arg| arg == "--bench") {
        &[1_000, 100_000, 1_000_000]
    } else {
        &[1_000]
    }
}
/// One decision per iteration on the next drawn key.
fn walk<'a, T>(draws: &'a [T], mut decide: impl FnMut(&T) -> bool + 'a) -> impl FnMut() + 'a {
    let mut i = 0;
    move || {
        let key = &draws[i];
        i = (i + 1) & (DRAWS - 1);
        assert!(black_box(decide(key)));
    }
}

fn one_thread(c: &mut Criterion) {
    let mut g = c.benchmark_group("keyed_u64");
    for &keys in sizes() {
        let d = draws(keys, 0);
        {
            let l = flowgate_u64(keys);
            let mut next = walk(&d, |&k| l.check_key(&u64::from(k)).is_ok());
            g.bench_function(BenchmarkId::new("flowgate", keys), |b| b.iter(&mut next));
        }
        let l = governor_u64(keys);
        let mut next = walk(&d, |&k| l.check_key(&u64::from(k)).is_ok());
        g.bench_function(BenchmarkId::new("governor", keys), |b| b.iter(&mut next));
    }
    g.finish();

    let mut g = c.benchmark_group("keyed_string");
    for &keys in sizes() {
        let names = string_keys(keys);
        let d = in_hand(&names, &draws(keys, 0));
        {
            let l = flowgate_str(&names);
            let mut next = walk(&d, |k| l.check_key(k.as_str()).is_ok());
            g.bench_function(BenchmarkId::new("flowgate", keys), |b| b.iter(&mut next));
        }
        let l = governor_string(&names);
        let mut next = walk(&d, |k| l.check_key(k).is_ok());
        g.bench_function(BenchmarkId::new("governor", keys), |b| b.iter(&mut next));
    }
    g.finish();
}

/// Two threads, each walking its own draws over one shared limiter.
fn pair<T: Sync>(
    iters: u64,
    decide: &(dyn Fn(&T) -> bool + Sync),
    draws: &[Vec<T>; 2],
) -> Duration {
    two_threads_walking(iters, &|thread, i| {
        decide(&draws[thread][i as usize & (DRAWS - 1)])
    })
}

fn contention(c: &mut Criterion) {
    let mut g = c.benchmark_group("keyed_u64_2_threads");
    g.throughput(Throughput::Elements(2));
    for &keys in sizes() {
        let d = [draws(keys, 1), draws(keys, 2)];
        {
            let l = flowgate_u64(keys);
            g.bench_function(BenchmarkId::new("flowgate", keys), |b| {
                b.iter_custom(|iters| pair(iters, &|&k| l.check_key(&u64::from(k)).is_ok(), &d))
            });
        }
        let l = governor_u64(keys);
        g.bench_function(BenchmarkId::new("governor", keys), |b| {
            b.iter_custom(|iters| pair(iters, &|&k| l.check_key(&u64::from(k)).is_ok(), &d))
        });
    }
    g.finish();

    let mut g = c.benchmark_group("keyed_string_2_threads");
    g.throughput(Throughput::Elements(2));
    for &keys in sizes() {
        let names = string_keys(keys);
        let d = [
            in_hand(&names, &draws(keys, 1)),
            in_hand(&names, &draws(keys, 2)),
        ];
        {
            let l = flowgate_str(&names);
            let decide = |k: &String| l.check_key(k.as_str()).is_ok();
            g.bench_function(BenchmarkId::new("flowgate", keys), |b| {
                b.iter_custom(|iters| pair(iters, &decide, &d))
            });
        }
        let l = governor_string(&names);
        let decide = |k: &String| l.check_key(k).is_ok();
        g.bench_function(BenchmarkId::new("governor", keys), |b| {
            b.iter_custom(|iters| pair(iters, &decide, &d))
        });
    }
    g.finish();
}

/// A million keys (under `cargo bench`), a second after each took one cell of 1/s: all idle.
/// flowgate sweeps the whole table (every key evicted, 256 slots per lock hold) or, with the
/// clock not advanced, visits every key and evicts none; governor's `retain_recent` removes them
/// all. The floor evicts as many keys from a table as large with one atomic read-modify-write
/// each.
fn sweep(c: &mut Criterion) {
    let keys = *sizes().last().unwrap();
    let quota = Quota::per_second(1).unwrap();
    let mut g = c.benchmark_group("keyed_sweep");
    g.sample_size(10);
    let filled = |advance: bool| {
        let clock = ManualClock::new();
        let l = KeyedRateLimiter::<u64, _, _>::builder(Gcra::new(&quota))
            .clock(clock.clone())
            .max_keys(keys)
            .build()
            .unwrap();
        for key in 0..keys as u64 {
            assert!(l.check_key(&key).is_ok());
        }
        if advance {
            clock.advance(Duration::from_secs(1));
        }
        l
    };
    g.bench_function(BenchmarkId::new("flowgate_all_idle", keys), |b| {
        b.iter_batched(
            || filled(true),
            |l| {
                assert_eq!(l.sweep(l.stats().slots), keys);
                l
            },
            BatchSize::PerIteration,
        )
    });
    let busy = filled(false);
    g.bench_function(BenchmarkId::new("flowgate_none_idle", keys), |b| {
        b.iter(|| assert_eq!(busy.sweep(busy.stats().slots), 0))
    });
    let slots = busy.stats().slots;
    drop(busy);
    // The floor of an eviction by a close that fails racing checkers' CAS: one atomic
    // read-modify-write per key (common::floor::Sweep), over a table of flowgate's size.
    g.bench_function(BenchmarkId::new("floor_one_rmw_per_key", keys), |b| {
        b.iter_batched(
            || floor::Sweep::new(slots, keys),
            |table| {
                assert_eq!(table.evict_all(), keys);
                table
            },
            BatchSize::PerIteration,
        )
    });
    g.bench_function(
        BenchmarkId::new("governor_retain_recent_all_idle", keys),
        |b| {
            b.iter_batched(
                || {
                    let clock = FakeRelativeClock::default();
                    let q = governor::Quota::per_second(NonZeroU32::new(1).unwrap());
                    let l = governor::RateLimiter::dashmap_with_clock(q, clock.clone());
                    for key in 0..keys as u64 {
                        assert!(l.check_key(&key).is_ok());
                    }
                    // governor keeps a key whose arrival time equals `now`: one more second.
                    clock.advance(Duration::from_secs(2));
                    l
                },
                |l| {
                    l.retain_recent();
                    assert!(l.is_empty());
                    l
                },
                BatchSize::PerIteration,
            )
        },
    );
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20)
}

criterion_group! { name = benches; config = config(); targets = one_thread, contention, sweep }
criterion_main!(benches);
