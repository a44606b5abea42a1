//! Paired timing of two flowgate commits in one process (scripts/baseline-ab): the same calls,
//! alternating batches of 10 000 decisions (300 rounds, the order swapped every round), the
//! figure the median of the per-round ratios new / base. One binary holds both crates, so that
//! the two sides share the process's allocator, page layout and machine state: what separate
//! bench binaries cannot cancel. Cases: the users' three layers through `Policies` (with
//! `is_ok()` and with the whole decision), the per-user-per-endpoint policy alone, and the
//! same three checks as plain limiters in turn. Arguments pick cases by a part of their names.

use std::hint::black_box;
use std::time::Instant;

const USERS: usize = 10_000;
const ENDPOINTS: usize = 16;
const DRAWS: usize = 1 << 20;
const BATCH: usize = 10_000;
const ROUNDS: usize = 300;

/// A request as a server has it.
pub struct Call {
    pub user: u64,
    pub endpoint: u32,
}

fn draws(n: usize, seed: u64) -> Vec<u32> {
    let mut x = 0x9e37_79b9_7f4a_7c15_u64 ^ seed.wrapping_mul(0xa076_1d64_78bd_642f);
    (0..DRAWS)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as u32
        })
        .collect()
}

/// One side: the same code over either crate.
macro_rules! side {
    ($krate:ident, $side:ident) => {
        mod $side {
            use super::{Call, DRAWS, ENDPOINTS, USERS};
            use $krate::clock::{Clock, QuantaClock};
            use $krate::policy::{Policies, Policy};
            use $krate::{Gcra, KeyedRateLimiter, Quota, RateLimiter};

            pub struct Side {
                layers: Policies<Call>,
                per_user: Policies<Call>,
                user_endpoint: KeyedRateLimiter<(u64, u32)>,
                endpoint: KeyedRateLimiter<u32>,
                global: RateLimiter,
            }

            pub fn new() -> Side {
                let quota = Quota::per_hour(4_000_000_000).unwrap();
                let clock = QuantaClock::new();
                let gcra = Gcra::new(&quota);
                let keys = USERS * ENDPOINTS;
                let per_user = || {
                    Policy::keyed_with("per-user-per-endpoint", |c: &Call, k| {
                        k.add(&c.user).add(&c.endpoint);
                    })
                    .quota(quota)
                    .max_keys(keys)
                };
                Side {
                    layers: Policies::builder()
                        .policy(per_user())
                        .policy(Policy::keyed("per-endpoint", |c: &Call| &c.endpoint).quota(quota))
                        .policy(Policy::global("global").quota(quota))
                        .build()
                        .unwrap(),
                    per_user: Policies::builder().policy(per_user()).build().unwrap(),
                    user_endpoint: KeyedRateLimiter::builder(gcra)
                        .clock(clock.clone())
                        .max_keys(keys)
                        .build()
                        .unwrap(),
                    endpoint: KeyedRateLimiter::builder(gcra)
                        .clock(clock.clone())
                        .build()
                        .unwrap(),
                    global: RateLimiter::with_clock(quota, clock),
                }
            }

            fn walk(
                from: usize,
                calls: (&[u32], &[u32]),
                mut f: impl FnMut(Call) -> bool,
            ) -> usize {
                let mut admitted = 0;
                for i in from..from + super::BATCH {
                    let i = i & (DRAWS - 1);
                    let call = Call {
                        user: u64::from(calls.0[i]),
                        endpoint: calls.1[i],
                    };
                    admitted += usize::from(f(call));
                }
                admitted
            }

            #[inline(never)]
            pub fn layers(s: &Side, from: usize, calls: (&[u32], &[u32])) -> usize {
                walk(from, calls, |c| s.layers.check(&c).is_ok())
            }

            #[inline(never)]
            pub fn layers_whole(s: &Side, from: usize, calls: (&[u32], &[u32])) -> usize {
                walk(from, calls, |c| {
                    std::hint::black_box(s.layers.check(&c)).is_ok()
                })
            }

            #[inline(never)]
            pub fn per_user(s: &Side, from: usize, calls: (&[u32], &[u32])) -> usize {
                walk(from, calls, |c| s.per_user.check(&c).is_ok())
            }

            /// The plain per-user-per-endpoint table after one more pass over every call: keys
            /// it holds, and the share of the pass's checks that created their key (a new key
            /// takes an idle key's slot on its probe chain unless its home line has a free slot
            /// to spare, and with these quotas every key is idle by its next request).
            pub fn churn(s: &Side, calls: (&[u32], &[u32])) -> (usize, f64) {
                let before = s.user_endpoint.stats().created;
                for from in (0..DRAWS).step_by(super::BATCH) {
                    sequential(s, from, calls);
                }
                let after = s.user_endpoint.stats();
                (after.keys, (after.created - before) as f64 / DRAWS as f64)
            }

            #[inline(never)]
            pub fn sequential(s: &Side, from: usize, calls: (&[u32], &[u32])) -> usize {
                walk(from, calls, |c| {
                    s.user_endpoint
                        .check_key(&(c.user, c.endpoint))
                        .is_ok()
                        && s.endpoint.check_key(&c.endpoint).is_ok()
                        && s.global.check().is_ok()
                })
            }
        }
    };
}

side!(flowgate_base, base);
side!(flowgate_new, new);

type Case<S> = fn(&S, usize, (&[u32], &[u32])) -> usize;

fn main() {
    let users = draws(USERS, 11);
    let endpoints = draws(ENDPOINTS, 12);
    let calls = (&users[..], &endpoints[..]);
    let (b, n) = (base::new(), new::new());
    let cases: [(&str, Case<base::Side>, Case<new::Side>); 4] = [
        ("three layers, is_ok", base::layers, new::layers),
        (
            "three layers, whole decision",
            base::layers_whole,
            new::layers_whole,
        ),
        ("per-user policy alone", base::per_user, new::per_user),
        (
            "three plain checks in turn",
            base::sequential,
            new::sequential,
        ),
    ];
    // Arguments pick cases by a part of their names (none: every case).
    let only: Vec<String> = std::env::args().skip(1).collect();
    let cases = cases.into_iter().filter(|(name, ..)| {
        only.is_empty() || only.iter().any(|part| name.contains(part.as_str()))
    });
    let cases: Vec<_> = cases.collect();
    // Every call once on each side before timing.
    for (_, fb, fnew) in &cases {
        for from in (0..DRAWS).step_by(BATCH) {
            black_box(fb(&b, from, calls));
            black_box(fnew(&n, from, calls));
        }
    }
    for (name, fb, fnew) in cases {
        let mut ratios = Vec::with_capacity(ROUNDS);
        let (mut total_base, mut total_new) = (0.0, 0.0);
        for round in 0..ROUNDS {
            let from = round * BATCH;
            let time = |base_side: bool| {
                let start = Instant::now();
                if base_side {
                    black_box(fb(&b, from, calls));
                } else {
                    black_box(fnew(&n, from, calls));
                }
                start.elapsed().as_secs_f64()
            };
            let (tb, tn) = if round % 2 == 0 {
                let tb = time(true);
                (tb, time(false))
            } else {
                let tn = time(false);
                (time(true), tn)
            };
            total_base += tb;
            total_new += tn;
            ratios.push(tn / tb);
        }
        ratios.sort_by(f64::total_cmp);
        let per = 1e9 / (ROUNDS * BATCH) as f64;
        println!(
            "{name:<30} base {:7.2} ns  new {:7.2} ns  new/base (median of rounds) {:.3}",
            total_base * per,
            total_new * per,
            ratios[ROUNDS / 2]
        );
    }
    for (name, (keys, created)) in [
        ("base", base::churn(&b, calls)),
        ("new", new::churn(&n, calls)),
    ] {
        println!(
            "{name}: the plain per-user-per-endpoint table holds {keys} keys; {:.0} % of a pass's checks created their key",
            created * 100.0
        );
    }
}
