//! The hardware floors a decision is measured against, in the same run as flowgate and
//! governor: what no limiter of this shape can go below on this machine.
//!
//! * [`Direct`]: one `rdtsc` and one uncontended compare-and-swap on a word in L1 (a load for
//!   the expected value, then the CAS): a single bucket's clock read and update with no
//!   arithmetic at all. [`Direct::refuse`] is a refusal's floor: the `rdtsc` and the load,
//!   compared, and nothing written.
//! * [`Sweep`]: what evicting every key of a table costs a lock-free table whose checkers
//!   update a slot with a compare-and-swap: each key's slot closed with one atomic
//!   read-modify-write of its word (so that a checker's CAS racing the eviction fails instead
//!   of being lost), then its tag cleared; the slots visited last to first, as a sweep does.
//! * [`Keyed`]: the key's hash (the same `ahash` a keyed limiter uses), one dependent 16-byte
//!   load from a table of `bytes` (a tag and a word on one line), and one compare-and-swap of
//!   the word: a keyed hit with no probe, no clock and no decision. At 16 MiB the table does
//!   not fit this machine's 8 MiB L3; at 64 MiB it does not fit its TLB either. Allocated as
//!   an ordinary `Vec`, without huge pages.
//!
//!   Two floors come from it. [`Keyed::decide`] lets consecutive hits overlap as far as the
//!   CPU's out-of-order window allows (a short loop keeps several cache misses in flight at
//!   once: the *throughput* floor). [`Keyed::decide_chained`] makes each hit's address depend
//!   on the word the previous hit loaded on the same thread, so no two misses overlap: the
//!   *latency* floor, one full cache miss per hit, which is what a hit costs a caller that does
//!   anything else between two of them.

use std::cell::Cell;
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
        // Release/Relaxed: the orderings of a limiter's own CAS (`cell`), so the floor pays what
        // it pays; on x86-64 any ordering is the same locked `cmpxchg`.
        while let Err(seen) =
            self.word
                .compare_exchange_weak(old, now, Ordering::Release, Ordering::Relaxed)
        {
            old = seen;
        }
        true
    }
}

impl Direct {
    /// A bucket booked to the end of time: every [`refuse`](Self::refuse) finds it full.
    pub fn booked() -> Self {
        Self {
            word: AtomicU64::new(u64::MAX),
        }
    }

    /// One refusal: `rdtsc`, a load of the word, their comparison (the bucket is booked past
    /// the reading); nothing written.
    #[inline(always)]
    pub fn refuse(&self) -> bool {
        let now = ticks();
        // Relaxed: a floor, not a protocol (a limiter's load is Acquire: the same `mov`).
        self.word.load(Ordering::Relaxed) > now
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
    /// Zero, but not known to be zero by the compiler or the CPU: what chains one hit's load
    /// to the next hit's address ([`Keyed::decide_chained`]).
    zero: u64,
}

thread_local! {
    /// The last chained hit's word, masked to zero: the next chained hit on this thread waits
    /// for it.
    static CHAIN: Cell<u64> = const { Cell::new(0) };
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
            zero: std::hint::black_box(0),
        }
    }

    /// One "hit": hash, dependent load of the slot, CAS of its word. Consecutive hits may
    /// overlap (the throughput floor).
    #[inline(always)]
    pub fn decide<K: std::hash::Hash + ?Sized>(&self, key: &K) -> bool {
        self.hit(self.hasher.hash_one(key)).1
    }

    /// [`decide`](Self::decide) whose address waits for the word the previous chained hit on
    /// this thread loaded: no two misses overlap (the latency floor).
    #[inline(always)]
    pub fn decide_chained<K: std::hash::Hash + ?Sized>(&self, key: &K) -> bool {
        CHAIN.with(|chain| {
            let (word, ok) = self.hit(self.hasher.hash_one(key) ^ chain.get());
            chain.set(word & self.zero);
            ok
        })
    }

    /// The hit at `hash`: the word it loaded, and success.
    #[inline(always)]
    fn hit(&self, hash: u64) -> (u64, bool) {
        let slot = &self.slots[hash as usize & (self.slots.len() - 1)];
        // Relaxed: a floor, not a protocol. The tag feeds the CAS, so the load cannot be
        // skipped.
        let tag = slot.tag.load(Ordering::Relaxed);
        let mut old = slot.word.load(Ordering::Relaxed);
        // Release/Relaxed: as a keyed slot's CAS (`cell`); the same locked `cmpxchg` on x86-64.
        while let Err(seen) =
            slot.word
                .compare_exchange_weak(old, old ^ tag, Ordering::Release, Ordering::Relaxed)
        {
            old = seen;
        }
        (old, tag != 0)
    }
}

/// A table of `slots` 16-byte slots holding `keys` keys spread evenly over it, like a keyed
/// limiter's table at its load factor.
pub struct Sweep {
    slots: Vec<Slot>,
}

impl Sweep {
    /// `keys` (at most `slots`) keys in `slots` slots.
    pub fn new(slots: usize, keys: usize) -> Self {
        assert!(keys <= slots);
        // Slot i holds a key when ⌊i·keys/slots⌋ steps: exactly `keys` of them, evenly spread.
        let holds = |i: usize| (i + 1) * keys / slots != i * keys / slots;
        let slots = (0..slots)
            .map(|i| Slot {
                tag: AtomicU64::new(if holds(i) { i as u64 | 1 } else { 0 }),
                word: AtomicU64::new(i as u64),
            })
            .collect();
        Self { slots }
    }

    /// Evicts every key, last slot first: for each, one atomic read-modify-write of its word
    /// (the close) and a store of an empty tag. How many.
    pub fn evict_all(&self) -> usize {
        let mut evicted = 0;
        for slot in self.slots.iter().rev() {
            // Acquire: a sweep's look at a tag (the same `mov` on x86-64).
            let tag = slot.tag.load(Ordering::Acquire);
            if tag == 0 {
                continue;
            }
            // Release: a close's flip (`Cell::flip`); on x86-64 any ordering is the same
            // `lock xor`.
            let word = slot
                .word
                .fetch_xor(0x9e37_79b9_7f4a_7c15, Ordering::Release);
            // A sweep decides on the word its close read (a key used since the look stays);
            // here every key is idle, and this comparison stands for that check.
            if word != u64::MAX {
                // Release: a clear (`Slot::clear`).
                slot.tag.store(0, Ordering::Release);
                evicted += 1;
            }
        }
        evicted
    }
}
