#![allow(missing_docs)]
//! Instruction counts per keyed decision, for `valgrind --tool=callgrind`: flowgate's keyed
//! limiter and governor's `DefaultKeyedRateLimiter` on 1 000 keys visited in turn (all in
//! cache, so the count is the work, not the memory). A binary of its own, apart from
//! `benches/instructions.rs`, so that governor's keyed code does not change how its direct
//! `check` is inlined there.
//!
//! Usage: `scripts/instructions.sh` (which runs these too) or `keyed_instructions CASE N`.

mod common;

use std::hint::black_box;
use std::num::NonZeroU32;

use common::*;

const CASES: &[&str] = &[
    "flowgate_keyed_u64",
    "flowgate_keyed_u64_whole",
    "flowgate_keyed_u64_1m",
    "flowgate_keyed_u64_1m_whole",
    "governor_keyed_u64",
    "flowgate_keyed_str",
    "governor_keyed_string",
    "flowgate_policy_three_layers",
    "flowgate_policy_three_layers_whole",
    "flowgate_policy_three_quotas",
    "flowgate_policy_three_quotas_whole",
    "flowgate_policy_three_quotas_remaining",
    "governor_three_checks",
    "flowgate_three_checks",
    "flowgate_sweep_256_slots",
];

/// Keys of the keyed cases: 1 000, visited in turn (a counter, no division).
const KEYS: u64 = 1_000;

/// The next key index after `k`.
#[inline(always)]
fn next(k: &mut u64) -> u64 {
    *k = if *k + 1 == KEYS { 0 } else { *k + 1 };
    *k
}

/// Keys of the million-key cases, visited with a stride coprime to their number (every key in
/// turn, neighbours far apart in the table).
const MILLION: u64 = 1_000_000;
const STRIDE: u64 = 7_919;

/// `KEYS` calls: 1 000 (user, endpoint) pairs over 16 endpoints, each already seen.
fn policy_calls() -> Vec<Call> {
    (0..KEYS)
        .map(|i| Call {
            user: i,
            endpoint: (i % u64::from(ENDPOINTS)) as u32,
        })
        .collect()
}

/// One keyed policy with three quotas per user (the "200/10 s and 5000/h and 20000/day" shape,
/// at `PER_HOUR`-sized rates so that every check is admitted), `KEYS` users, each filled with
/// `FILL` cells so that no bucket goes idle (and none is evicted) during a run: every check is
/// a hit.
fn flowgate_three_quotas() -> flowgate::policy::Policies<u64> {
    use flowgate::policy::{Policies, Policy};
    let policies = Policies::builder()
        .policy(
            Policy::keyed("per-user", |u: &u64| u)
                .quotas([keyed_quota(), keyed_quota(), keyed_quota()])
                .max_keys(KEYS as usize),
        )
        .build()
        .unwrap();
    for user in 0..KEYS {
        assert!(matches!(policies.check_n(&user, FILL), Ok(Ok(_))));
    }
    policies
}

fn names() -> Vec<String> {
    (0..KEYS).map(|i| format!("user-{i}|/api/books")).collect()
}

fn run(case: &str, n: u64) {
    match case {
        "flowgate_policy_three_layers" => {
            let policies = flowgate_policies();
            let calls = policy_calls();
            let mut k = 0;
            hot_loop(n, || {
                let call = &calls[next(&mut k) as usize];
                assert!(black_box(policies.check(call).is_ok()));
            })
        }
        "governor_three_checks" => {
            let layers = GovernorLayers::new();
            let calls = policy_calls();
            let mut k = 0;
            hot_loop(n, || {
                let call = &calls[next(&mut k) as usize];
                assert!(black_box(layers.check(call)));
            })
        }
        "flowgate_three_checks" => {
            let layers = FlowgateLayers::new();
            let calls = policy_calls();
            let mut k = 0;
            hot_loop(n, || {
                let call = &calls[next(&mut k) as usize];
                assert!(black_box(layers.check(call)));
            })
        }
        "flowgate_policy_three_layers_whole" => {
            let policies = flowgate_policies();
            let calls = policy_calls();
            let mut k = 0;
            hot_loop(n, || {
                let call = &calls[next(&mut k) as usize];
                let _ = black_box(policies.check(call));
            })
        }
        "flowgate_policy_three_quotas" => {
            let policies = flowgate_three_quotas();
            let mut k = 0;
            hot_loop(n, || {
                assert!(black_box(policies.check(&next(&mut k)).is_ok()));
            })
        }
        // What a caller who writes rate-limit headers reads: the cells left in the tightest
        // quota (or, refused, in the refusing one).
        "flowgate_policy_three_quotas_remaining" => {
            let policies = flowgate_three_quotas();
            let mut k = 0;
            hot_loop(n, || {
                let _ = black_box(match policies.check(&next(&mut k)) {
                    Ok(allowed) => allowed.remaining(),
                    Err(refused) => refused.remaining(),
                });
            })
        }
        "flowgate_policy_three_quotas_whole" => {
            let policies = flowgate_three_quotas();
            let mut k = 0;
            hot_loop(n, || {
                let _ = black_box(policies.check(&next(&mut k)));
            })
        }
        "flowgate_keyed_u64_whole" => {
            let l = flowgate_u64(KEYS as usize);
            let mut k = 0;
            hot_loop(n, || {
                let _ = black_box(l.check_key(&next(&mut k)));
            })
        }
        "flowgate_keyed_u64_1m" => {
            let l = flowgate_u64(MILLION as usize);
            let mut k = 0;
            hot_loop(n, || {
                k = (k + STRIDE) % MILLION;
                assert!(black_box(l.check_key(&k).is_ok()));
            })
        }
        "flowgate_keyed_u64_1m_whole" => {
            let l = flowgate_u64(MILLION as usize);
            let mut k = 0;
            hot_loop(n, || {
                k = (k + STRIDE) % MILLION;
                let _ = black_box(l.check_key(&k));
            })
        }
        "flowgate_keyed_u64" => {
            let l = flowgate_u64(KEYS as usize);
            let mut k = 0;
            hot_loop(n, || {
                assert!(black_box(l.check_key(&next(&mut k)).is_ok()));
            })
        }
        "governor_keyed_u64" => {
            let l = governor_u64(KEYS as usize);
            let mut k = 0;
            hot_loop(n, || {
                assert!(black_box(l.check_key(&next(&mut k)).is_ok()));
            })
        }
        "flowgate_keyed_str" => {
            let names = names();
            let l = flowgate::KeyedRateLimiter::<str>::new(keyed_quota(), names.len()).unwrap();
            for name in &names {
                assert!(matches!(l.check_key_n(name, FILL), Ok(Ok(_))));
            }
            let mut k = 0;
            hot_loop(n, || {
                let name = names[next(&mut k) as usize].as_str();
                assert!(black_box(l.check_key(name).is_ok()));
            })
        }
        "governor_keyed_string" => {
            let names = names();
            let l = governor_keyed::<String>();
            let fill = NonZeroU32::new(FILL).unwrap();
            for name in &names {
                assert!(matches!(l.check_key_n(name, fill), Ok(Ok(_))));
            }
            let mut k = 0;
            hot_loop(n, || {
                let name = &names[next(&mut k) as usize];
                assert!(black_box(l.check_key(name).is_ok()));
            })
        }
        // A sweep's visit of 256 slots (one lock hold) of a table of 1 000 busy keys, none of
        // them idle: what a sweep costs per slot it passes over (divide by 256).
        "flowgate_sweep_256_slots" => {
            let l = flowgate_u64(KEYS as usize);
            hot_loop(n, || {
                assert_eq!(black_box(l.sweep(256)), 0);
            })
        }
        other => unknown_case(other, CASES),
    }
}

fn main() {
    // With the `metrics` feature, count into a recorder whose counters are atomics, as an
    // exporter's are (`FEATURES=metrics scripts/instructions.sh`: the cost of metrics on).
    #[cfg(feature = "metrics")]
    metrics_util::debugging::DebuggingRecorder::new()
        .install()
        .expect("the only recorder");
    instruction_main("keyed instructions", CASES, run);
}
