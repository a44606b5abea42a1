//! A check of a key the table holds allocates nothing, whatever the key type; neither does
//! inserting a new key (the table is allocated once, at construction, and keys are not stored).
//!
//! Alone in its test binary, with a counting global allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use flowgate::clock::ManualClock;
use flowgate::{Gcra, KeyedRateLimiter, Quota};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call unchanged to the system allocator, which upholds the contract.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
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

fn allocations_during(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    f();
    ALLOCATIONS.load(Ordering::Relaxed) - before
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
                assert!(matches!(numbers.check_key_n(&key, 2), Ok(Ok(_))));
                numbers.refund_key(&key, 1);
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
