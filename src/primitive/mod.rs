//! The one place flowgate's atomics and locks come from.
//!
//! In a normal build these are `core`'s atomics (`portable-atomic`'s with that feature, for
//! targets without 64-bit atomics), and the lock is `std`'s (without `std`, the spin lock in
//! `spin`). Built with `--cfg flowgate_loom` they are
//! [loom](https://docs.rs/loom)'s, so the model tests in `loom-tests/` explore every interleaving
//! of the real code. Nothing else names `loom`, and only state that no model needs to explore
//! takes `core::sync::atomic` or `std::sync::Mutex` directly, each with a line saying why: the
//! interned names of policy quotas (`outcome/policy.rs`), and the ids and slot numbers of policy
//! sets (`policy/rules.rs`; the version and the threads' copies are modelled). Thread-locals
//! that a model must see per loom thread come from here too ([`thread_local`]).
//!
//! Every compare-and-swap in the crate goes through [`compare_exchange_weak`], so that the loom
//! build can inject the spurious failures that real hardware (LL/SC on ARM, POWER, RISC-V) is
//! allowed to produce and that loom itself never simulates. A loom model calls
//! `fail_next_cas` (loom build only) to make the current thread's next CAS attempts fail, which drives the retry
//! path of every CAS loop.

#[cfg(all(not(flowgate_loom), any(test, not(feature = "std"))))]
mod spin;

#[cfg(not(flowgate_loom))]
mod imp {
    #[cfg(all(not(feature = "portable-atomic"), any(test, not(feature = "std"))))]
    pub(crate) use core::sync::atomic::AtomicBool;
    #[cfg(not(feature = "portable-atomic"))]
    pub(crate) use core::sync::atomic::AtomicU64;
    pub(crate) use core::sync::atomic::Ordering;
    #[cfg(all(feature = "portable-atomic", any(test, not(feature = "std"))))]
    pub(crate) use portable_atomic::AtomicBool;
    #[cfg(feature = "portable-atomic")]
    pub(crate) use portable_atomic::AtomicU64;

    #[cfg(not(feature = "std"))]
    pub(crate) use super::spin::{Mutex, MutexGuard};
    #[cfg(feature = "std")]
    pub(crate) use std::sync::{Mutex, MutexGuard};

    /// `AtomicU64::compare_exchange_weak`, unchanged.
    #[inline(always)]
    pub(crate) fn compare_exchange_weak(
        atomic: &AtomicU64,
        current: u64,
        new: u64,
        success: Ordering,
        failure: Ordering,
    ) -> Result<u64, u64> {
        atomic.compare_exchange_weak(current, new, success, failure)
    }
}

#[cfg(flowgate_loom)]
mod imp {
    use core::cell::Cell;

    pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};
    pub(crate) use loom::sync::{Mutex, MutexGuard};
    /// Thread-locals whose threads are loom's (the policy rules' tables of copies).
    pub(crate) use loom::thread_local;

    loom::thread_local! {
        static SPURIOUS: Cell<u32> = Cell::new(0);
    }

    /// Makes the calling thread's next `k` compare-and-swap attempts fail spuriously (they return
    /// `Err` with the word's current value and write nothing), as a weak CAS may on real hardware.
    pub fn fail_next_cas(k: u32) {
        SPURIOUS.with(|s| s.set(k));
    }

    /// `AtomicU64::compare_exchange_weak`, which fails spuriously while [`fail_next_cas`]'s budget
    /// lasts.
    pub(crate) fn compare_exchange_weak(
        atomic: &AtomicU64,
        current: u64,
        new: u64,
        success: Ordering,
        failure: Ordering,
    ) -> Result<u64, u64> {
        let spurious = SPURIOUS.with(|s| {
            let left = s.get();
            s.set(left.saturating_sub(1));
            left > 0
        });
        if spurious {
            // A spurious failure reports the value the word holds now, like a real one, read
            // with the caller's failure ordering (a spurious failure is a failure).
            return Err(atomic.load(failure));
        }
        atomic.compare_exchange_weak(current, new, success, failure)
    }
}

#[cfg(flowgate_loom)]
pub use imp::fail_next_cas;
pub(crate) use imp::*;

/// Locks `mutex`, taking the data even if a thread panicked while holding it. flowgate's locked
/// sections run only flowgate's code and the algorithm's, which must not panic (see
/// [`Algorithm`](crate::Algorithm)), so a poisoned lock means a broken algorithm; the data is
/// taken as it is rather than making every later caller panic too.
#[cfg(any(feature = "std", flowgate_loom))]
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Locks `mutex` (a spin lock without `std`, which a panic does not poison).
#[cfg(not(any(feature = "std", flowgate_loom)))]
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock()
}
