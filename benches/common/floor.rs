//! The hardware floors a decision is measured against, in the same run as flowgate and
//! governor: what no limiter of this shape can go below on this machine.
//!
//! * [`Direct`]: one `rdtsc` and one uncontended compare-and-swap on a word in L1 (a load for
//!   the expected value, then the CAS): a single bucket's clock read and update with no
//!   arithmetic at all.
//! * [`Keyed`]: the key's hash (the same `ahash` a keyed limiter uses), one dependent 16-byte
//!   load from a table of `bytes` (a tag and a word on one line), and one compare-and-swap of
//!   the word: a keyed hit with no probe, no clock and no decision. At 16 MiB the table does
//!   not fit this machine's 8 MiB L3; at 64 MiB it does not fit its TLB either. Allocated as
//!   an ordinary `Vec`, without huge pages.

use std::sync::atomic::{AtomicU64, Ordering};

/// A reading of the CPU's time-stamp counter (elsewhere, of a monotonic clock).
#[inline(always)]
pub fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `rdtsc` exists on every x86-64 CPU and touches no memory.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        ORIGIN
            .get_or_init(std::time::Instant::now)
            .elapsed()
            .as_nanos() as u64
    }
}

/// One bucket word: `rdtsc` + load + CAS.
#[derive(Default)]
pub struct Direct {
    word: AtomicU64,
}

impl Direct {
    /// One "decision": a CAS loop, which uncontended succeeds at its first attempt and under
    /// contention retries as a limiter's would.
    #[inline(always)]
    pub fn decide(&self) -> bool {
        let now = ticks();
        // Relaxed: a floor, not a protocol; the CAS's lock prefix is what is measured.
        let mut old = self.word.load(Ordering::Relaxed);
        while let Err(seen) =
            self.word
                .compare_exchange_weak(old, now, Ordering::Release, Ordering::Relaxed)
        {
            old = seen;
        }
        true
    }
}

/// A 16-byte slot: a tag and a word on one line.
#[repr(C, align(16))]
struct Slot {
    tag: AtomicU64,
    word: AtomicU64,
}

/// A table of `bytes` of 16-byte slots, indexed by the key's hash.
pub struct Keyed {
    slots: Vec<Slot>,
    hasher: ahash::RandomState,
}

impl Keyed {
    /// A table of `bytes` (a power of two of at least 16), every slot written once (resident).
    pub fn new(bytes: usize) -> Self {
        assert!(bytes.is_power_of_two() && bytes >= 16);
        let slots = (0..bytes / 16)
            .map(|i| Slot {
                tag: AtomicU64::new(i as u64 | 1),
                word: AtomicU64::new(0),
            })
            .collect();
        Self {
            slots,
            hasher: ahash::RandomState::new(),
        }
    }

    /// One "hit": hash, dependent load of the slot, CAS of its word.
    #[inline(always)]
    pub fn decide<K: std::hash::Hash + ?Sized>(&self, key: &K) -> bool {
        let hash = self.hasher.hash_one(key);
        let slot = &self.slots[hash as usize & (self.slots.len() - 1)];
        // Relaxed: a floor, not a protocol. The tag feeds the CAS, so the load cannot be
        // skipped.
        let tag = slot.tag.load(Ordering::Relaxed);
        let mut old = slot.word.load(Ordering::Relaxed);
        while let Err(seen) =
            slot.word
                .compare_exchange_weak(old, old ^ tag, Ordering::Release, Ordering::Relaxed)
        {
            old = seen;
        }
        tag != 0
    }
}
