//! A check of a key the table holds allocates nothing, whatever the key type; neither does
//! inserting a new key (the table is allocated once, at construction, and keys are not stored).
//!
//! Alone in its test binary, with a counting global allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use flowgate::clock::ManualClock;
use flowgate::{Gcra, KeyedRateLimiter, Quota};

struct Counting;

thread_local! {
    /// Allocations made by this thread: the test harness allocates on its own threads (starting
    /// the other test, reporting results) while a test counts. A `const` initializer, so that
    /// reading it never allocates.
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards every call unchanged to the system allocator, which upholds the contract.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: the caller's guarantees about `layout` are passed on as they are.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` above with this `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made by the calling thread while `f` runs.
fn allocations_during(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

#[test]
fn checks_and_inserts_allocate_nothing() {
    let quota = Quota::per_second(1_000).unwrap();
    let numbers = KeyedRateLimiter::<u64, _, _>::builder(Gcra::new(&quota))
        .clock(ManualClock::new())
        .max_keys(10_000)
        .build()
        .unwrap();
    let names: Vec<String> = (0..1_000).map(|i| format!("user-{i}|/api/books")).collect();
    let strings = KeyedRateLimiter::<str, _, _>::builder(Gcra::new(&quota))
        .clock(ManualClock::new())
        .max_keys(10_000)
        .build()
        .unwrap();

    let inserts = allocations_during(|| {
        for key in 0..1_000u64 {
            assert!(numbers.check_key(&key).is_ok());
        }
        for name in &names {
            assert!(strings.check_key(name).is_ok());
        }
    });
    let lookups = allocations_during(|| {
        for _ in 0..10 {
            for key in 0..1_000u64 {
                assert!(numbers.check_key(&key).is_ok());
                let (_, receipt) = numbers.reserve_key(&key, 2).unwrap().unwrap();
                assert!(numbers.give_back(receipt));
            }
            for name in &names {
                assert!(strings.check_key(name).is_ok());
                assert!(matches!(strings.peek_key(name, 1), Ok(Ok(_))));
            }
        }
    });
    assert_eq!((inserts, lookups), (0, 0));
    assert_eq!((numbers.len(), strings.len()), (1_000, 1_000));
}

/// A policy decision (three layers, borrowed string keys, admissions and refusals with their
/// undo and jitter) allocates nothing either, once the thread holds its copy of the set's
/// quotas (its first look at the set makes it); after the quotas are replaced, the thread's
/// next decision copies the new list (two allocations: the list and its count, on a line of
/// their own) and the ones after it allocate nothing.
#[test]
fn policy_decisions_allocate_nothing() {
    use flowgate::policy::{Policies, Policy};
    struct Call {
        user: String,
        endpoint: &'static str,
    }
    let policies = Policies::<Call>::builder()
        .clock(ManualClock::new())
        .policy(
            Policy::keyed_with("per-user-per-endpoint", |c: &Call, k| {
                k.add(&c.user).add(c.endpoint);
            })
            .quotas([Quota::per_second(5).unwrap(), Quota::per_hour(100).unwrap()]),
        )
        .policy(
            Policy::keyed("per-endpoint", |c: &Call| c.endpoint)
                .quota(Quota::per_hour(50).unwrap()),
        )
        .policy(
            Policy::global("global")
                .quota(Quota::per_hour(40).unwrap())
                .jitter(
                    core::time::Duration::ZERO,
                    core::time::Duration::from_millis(5),
                ),
        )
        .build()
        .unwrap();
    let calls: Vec<Call> = (0..20)
        .map(|i| Call {
            user: format!("user-{i}"),
            endpoint: ["/a", "/b"][i % 2],
        })
        .collect();
    let (mut admitted, mut refused) = (0, 0);
    policies.inspect(&calls[0], |_| {});
    let allocations = allocations_during(|| {
        for _ in 0..3 {
            for call in &calls {
                match policies.check(call) {
                    Ok(_) => admitted += 1,
                    Err(_) => refused += 1,
                }
            }
        }
    });
    assert_eq!(allocations, 0);
    // The global quota's 40 cells, then refusals by every layer in turn.
    assert_eq!((admitted, refused), (40, 20));
    let raised = [Quota::per_hour(1000).unwrap()];
    policies.replace_quotas("global", &raised).unwrap();
    let mut limit = 0;
    let mut refusal = || limit = policies.check(&calls[0]).map_or_else(|r| r.limit(), |_| 0);
    let copied = allocations_during(&mut refusal);
    assert_eq!(copied, 2, "the thread's copy of the new list");
    assert_eq!(allocations_during(&mut refusal), 0);
    // Refused under the new quota: a bucket booked an hour ahead is empty under any hourly one.
    assert_eq!(limit, 1000);
}
