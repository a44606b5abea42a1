//! Loom models of `check_up_to`: takers racing for the cells of one bucket, each taking as many
//! as it finds, up to its limit. Each asserts that together they take exactly what the bucket
//! held (no cell taken twice, none left behind while a taker wanted more) and that the bucket
//! accounts for every cell taken. The keyed model races two takers on a key neither has created,
//! which drives the keyed path that counts again after another request created the key; the
//! policy model, two takers whose counts both see the whole bucket, which drives the policy
//! set's path that counts again after its `check_n` of the count is refused.
//!
//! Run: `RUSTFLAGS="--cfg flowgate_loom" cargo test --release -p flowgate-loom-tests`
#![cfg(flowgate_loom)]

use flowgate::clock::ManualClock;
use flowgate::loom::fail_next_cas;
use flowgate::policy::{Policies, Policy};
use flowgate::{Gcra, KeyedRateLimiter, Quota, RateLimiter};
use flowgate_loom_tests::{frozen, model};
use loom::sync::Arc;
use loom::thread;

/// `burst` cells per hour: nothing refills during a model.
fn quota(burst: u32) -> Quota {
    Quota::per_hour(burst).unwrap()
}

/// Each `(n, spurious)` taker asks for up to `n` cells (after `spurious` forced CAS failures);
/// returns what each took.
fn takers<T: Send + 'static>(
    shared: &Arc<T>,
    requests: &[(u32, u32)],
    take: fn(&T, u32) -> u32,
) -> Vec<u32> {
    let handles: Vec<_> = requests
        .iter()
        .map(|&(n, spurious)| {
            let shared = shared.clone();
            thread::spawn(move || {
                fail_next_cas(spurious);
                take(&shared, n)
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

fn single(limiter: &RateLimiter<ManualClock>, n: u32) -> u32 {
    limiter.check_up_to(n).map_or(0, |(k, _)| k)
}

/// Two takers of up to 3 from a bucket of 4: 3 and 1, in either order, and the bucket is empty.
#[test]
fn two_takers_share_what_is_there() {
    model(|| {
        let limiter = frozen(4);
        let mut took = takers(&limiter, &[(3, 0), (3, 0)], single);
        took.sort_unstable();
        assert_eq!(took, [1, 3]);
        assert_eq!(limiter.available(), 0);
    });
}

/// The same with spurious CAS failures on both takers: a retried count is taken afresh.
#[test]
fn spurious_failures_count_again() {
    model(|| {
        let limiter = frozen(3);
        let took = takers(&limiter, &[(2, 1), (2, 2)], single);
        assert_eq!(took.iter().sum::<u32>(), 3);
        assert!(took.iter().all(|&k| k >= 1));
        assert_eq!(limiter.available(), 0);
    });
}

fn keyed(limiter: &KeyedRateLimiter<u64, ManualClock>, n: u32) -> u32 {
    limiter.check_key_up_to(&7, n).map_or(0, |(k, _)| k)
}

/// Two takers of up to 2 on a key nobody has created, burst 3: whichever creates it takes 2, the
/// other counts again from the bucket it finds and takes 1.
#[test]
fn two_takers_on_a_new_key() {
    model(|| {
        let limiter = KeyedRateLimiter::<u64, _, _>::builder_with_clock(
            Gcra::new(&quota(3)),
            ManualClock::starting_at(1_000),
        )
        .max_keys(4)
        .shards(1)
        .hash_seed(3)
        .build()
        .unwrap();
        let limiter = Arc::new(limiter);
        let mut took = takers(&limiter, &[(2, 0), (2, 0)], keyed);
        took.sort_unstable();
        assert_eq!(took, [1, 2]);
        assert_eq!(limiter.peek_key(&7, 0).unwrap().unwrap().remaining(), 0);
    });
}

fn policy(policies: &Policies<u64, ManualClock>, n: u32) -> u32 {
    policies.check_up_to(&1, n).map_or(0, |(k, _)| k)
}

/// Two takers of up to 2 through a policy set (per key 3 an hour, globally 5 an hour): the
/// per-key quota is the tightest, so they take 2 and 1, and both buckets account for the 3.
#[test]
fn two_takers_through_a_policy_set() {
    model(|| {
        let policies = Policies::<u64>::builder()
            .clock(ManualClock::starting_at(1_000))
            .hash_seed(3)
            .policy(
                Policy::keyed("per-key", |k: &u64| k)
                    .quota(quota(3))
                    .max_keys(4),
            )
            .policy(Policy::global("all").quota(quota(5)))
            .build()
            .unwrap();
        let policies = Arc::new(policies);
        let mut took = takers(&policies, &[(2, 0), (2, 0)], policy);
        took.sort_unstable();
        assert_eq!(took, [1, 2]);
        let left: Vec<u32> = {
            let mut left = Vec::new();
            policies.inspect(&1, |state| left.push(state.gauge().remaining()));
            left
        };
        assert_eq!(left, [0, 2]);
    });
}
