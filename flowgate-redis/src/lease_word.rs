//! The lease word: cells taken from a shared bucket in one go, spent locally by a
//! compare-and-swap loop, and taken back at once ([`LeaseWord`]). The Redis limiter's leases
//! (`redis::lease`) hold one each.
//!
//! # The word
//! `deadline << 24 | cells`: the cells left (low 24 bits) and the lease's deadline in
//! milliseconds since the limiter was built, by its clock (high 40 bits, about 34 years). `0` is an empty lease.
//! A cell is spent by a compare-and-swap that needs `cells ≥ n` and `now < deadline`; the rest
//! is taken back by one `swap(0)`. So each leased cell is either spent once or given back once,
//! never both, whatever the interleaving (`loom-tests/tests/lease.rs`).

use std::sync::atomic::{AtomicU64, Ordering};

/// The most cells one lease holds.
pub const MAX_LEASE_CELLS: u32 = (1 << CELL_BITS) - 1;
const CELL_BITS: u32 = 24;
const CELL_MASK: u64 = (1 << CELL_BITS) - 1;
/// The latest deadline the word holds, in ms.
const MAX_DEADLINE: u64 = (1 << (64 - CELL_BITS)) - 1;

/// A lease's word and the gauge recorded with its grant.
#[derive(Debug)]
pub struct LeaseWord {
    word: AtomicU64,
    /// The tightest quota as the grant left it: `debt << 16 | bucket index`.
    gauge: AtomicU64,
}

impl Default for LeaseWord {
    fn default() -> Self {
        Self::new()
    }
}

impl LeaseWord {
    /// An empty lease.
    pub fn new() -> Self {
        Self {
            word: AtomicU64::new(0),
            gauge: AtomicU64::new(0),
        }
    }

    /// Takes `n` cells if the lease holds them and has not expired at `now_ms`; returns the
    /// gauge recorded with the grant they came from or a later one (`debt`, bucket), and the
    /// cells left.
    pub fn spend(&self, n: u32, now_ms: u64) -> Option<(u64, usize, u32)> {
        // Acquire: pairs with the Release in `fill`, so the gauge read below is the grant's.
        let mut word = self.word.load(Ordering::Acquire);
        loop {
            let cells = (word & CELL_MASK) as u32;
            let deadline = word >> CELL_BITS;
            if cells < n || now_ms >= deadline {
                return None;
            }
            let next = word - u64::from(n);
            // Acquire either way: the word it returns may be a new grant's, read as above.
            match self
                .word
                .compare_exchange_weak(word, next, Ordering::Acquire, Ordering::Acquire)
            {
                Ok(_) => {
                    // Relaxed: ordered after the grant's Release store by the Acquire above.
                    let gauge = self.gauge.load(Ordering::Relaxed);
                    let left = (next & CELL_MASK) as u32;
                    return Some((gauge >> 16, (gauge & 0xffff) as usize, left));
                }
                Err(actual) => word = actual,
            }
        }
    }

    /// Takes every cell left, expired or not, leaving the lease empty.
    pub fn take_rest(&self) -> u32 {
        // Relaxed: a single-word state machine; the cells taken are counted, nothing else is
        // read through this word.
        (self.word.swap(0, Ordering::Relaxed) & CELL_MASK) as u32
    }

    /// Fills the lease with `cells` until `deadline_ms`, recording the grant's gauge. Only the
    /// task that renews the lease calls this, after [`take_rest`](Self::take_rest).
    pub fn fill(&self, cells: u32, deadline_ms: u64, debt: u64, bucket: usize) {
        let gauge = debt.min(u64::MAX >> 16) << 16 | (bucket as u64 & 0xffff);
        // Relaxed: published by the Release store of the word below.
        self.gauge.store(gauge, Ordering::Relaxed);
        let word =
            deadline_ms.min(MAX_DEADLINE) << CELL_BITS | u64::from(cells.min(MAX_LEASE_CELLS));
        // Release: a spender that sees these cells also sees the gauge stored above.
        self.word.store(word, Ordering::Release);
    }

    /// Whether the lease has nothing left to spend at `now_ms`.
    pub fn is_spent(&self, now_ms: u64) -> bool {
        // Relaxed: a hint for eviction; `take_rest` decides what is really left.
        let word = self.word.load(Ordering::Relaxed);
        word & CELL_MASK == 0 || now_ms >= word >> CELL_BITS
    }
}
