//! [`Mutex`]: the keyed table's shard lock in a build without `std`, where there is no lock of
//! the operating system's to take. A test-and-test-and-set spin lock: the shard locks are held
//! for a bounded number of slots (an insert, a removal, at most 256 slots of a sweep), never
//! across a decision of a key the table holds, so a waiter spins for a bounded time.
//!
//! A build with `std` uses `std::sync::Mutex` instead, and the loom build loom's; this one is
//! compiled into the unit tests as well, which check it with real threads.

use core::cell::UnsafeCell;
use core::fmt;
use core::ops::{Deref, DerefMut};

use crossbeam_utils::Backoff;

use super::{AtomicBool, Ordering};

/// A lock around a `T`, taken by spinning.
pub(crate) struct Mutex<T> {
    locked: AtomicBool,
    data: UnsafeCell<T>,
}

// SAFETY: the lock hands out the data to one thread at a time (a guard exists only while
// `locked` is true, set by that thread's successful compare-and-swap), so sharing the lock
// between threads shares only `T` moved between them, which `T: Send` allows.
unsafe impl<T: Send> Sync for Mutex<T> {}

/// Proof that the holder owns the lock: the data, until it drops.
#[must_use = "if unused the lock is released at once"]
pub(crate) struct MutexGuard<'a, T> {
    mutex: &'a Mutex<T>,
}

impl<T> Mutex<T> {
    /// An unlocked lock around `data`.
    pub(crate) const fn new(data: T) -> Self {
        Self {
            locked: AtomicBool::new(false),
            data: UnsafeCell::new(data),
        }
    }

    /// Takes the lock, spinning (with crossbeam's exponential backoff) while another thread
    /// holds it.
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        let backoff = Backoff::new();
        loop {
            // Acquire on success: what the last holder wrote before its Release in `drop` is
            // visible to this one. Relaxed on failure: nothing is read through a failed attempt.
            if self
                .locked
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return MutexGuard { mutex: self };
            }
            // Relaxed: only a hint that the lock looks free; the compare-and-swap above decides.
            while self.locked.load(Ordering::Relaxed) {
                backoff.snooze();
            }
        }
    }
}

impl<T> Deref for MutexGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: this guard exists only while its thread holds the lock, so no other reference
        // to the data exists (see `lock`).
        unsafe { &*self.mutex.data.get() }
    }
}

impl<T> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes this the guard's only borrow of the data.
        unsafe { &mut *self.mutex.data.get() }
    }
}

impl<T> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        // Release: this holder's writes to the data happen before the next holder's Acquire.
        self.mutex.locked.store(false, Ordering::Release);
    }
}

impl<T> fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mutex").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::Mutex;

    /// Four threads each add 1 ten thousand times, reading and writing the count in two steps
    /// under the lock: a lock that let two holders in at once would lose increments.
    #[test]
    fn holders_exclude_each_other() {
        const EACH: u64 = 10_000;
        let count = Mutex::new(0u64);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..EACH {
                        let mut held = count.lock();
                        let seen = *held;
                        std::hint::black_box(());
                        *held = seen + 1;
                    }
                });
            }
        });
        assert_eq!(*count.lock(), 4 * EACH);
    }
}
