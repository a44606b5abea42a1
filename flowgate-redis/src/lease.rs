//! Leases: cells taken from Redis in one call and spent locally ([`Cells`], under a mutex), in
//! a bounded, sharded map keyed by the buckets they came from.
//!
//! # The bound
//! Redis grants a lease's cells under the same GCRA as any request, so every cell admitted
//! here was admitted there. What leasing changes is *when* a cell is spent: up to one lease
//! lifetime after Redis booked it. In any window, the cells admitted across all processes are
//! at most what Redis alone would admit in that window plus the cells outstanding in leases
//! when it began: at most one lease per process and decision key set.

// The map's lock guards which lease entries exist (found or made under it, never a
// decision's state); each lease's cells sit under a mutex of their own, taken for a few
// instructions per decision spent from it; the counter is a statistic.
use core::sync::atomic::AtomicU64;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crossbeam_utils::CachePadded;

/// The most cells one lease holds.
pub const MAX_LEASE_CELLS: u32 = (1 << 24) - 1;

/// What a lease holds: the cells left, the lease's deadline (ms since the limiter was built,
/// by its clock), and the tightest quota as the grant left it (its debt and bucket index).
/// Each leased cell is spent once or taken back once, never both: every change is made under
/// the mutex.
#[derive(Debug, Default)]
pub(crate) struct Cells(Mutex<Held>);

#[derive(Debug, Default, Clone, Copy)]
struct Held {
    cells: u32,
    deadline: u64,
    debt: u64,
    bucket: usize,
}

impl Cells {
    /// The lease, for a few instructions. Every change leaves a whole lease, so one that a
    /// panicking thread left is still one.
    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes `n` cells if the lease holds them and has not expired at `now_ms`; returns the
    /// gauge recorded with the grant (debt, bucket) and the cells left.
    pub(crate) fn spend(&self, n: u32, now_ms: u64) -> Option<(u64, usize, u32)> {
        let mut held = self.held();
        if held.cells < n || now_ms >= held.deadline {
            return None;
        }
        held.cells -= n;
        Some((held.debt, held.bucket, held.cells))
    }

    /// Takes every cell left, expired or not, leaving the lease empty.
    pub(crate) fn take_rest(&self) -> u32 {
        core::mem::take(&mut self.held().cells)
    }

    /// Fills the lease with `cells` (at most [`MAX_LEASE_CELLS`]) until `deadline_ms`,
    /// recording the grant's gauge. Only the task that renews the lease calls this, after
    /// [`take_rest`](Self::take_rest).
    pub(crate) fn fill(&self, cells: u32, deadline_ms: u64, debt: u64, bucket: usize) {
        *self.held() = Held {
            cells: cells.min(MAX_LEASE_CELLS),
            deadline: deadline_ms,
            debt,
            bucket,
        };
    }

    /// Whether the lease has nothing left to spend at `now_ms`.
    pub(crate) fn is_spent(&self, now_ms: u64) -> bool {
        let held = self.held();
        held.cells == 0 || now_ms >= held.deadline
    }
}

/// One lease: its cells, and a lock that lets one task at a time ask Redis for the next one,
/// holding the TAT (µs) the last lease call wrote to each bucket: what the lease's unused cells
/// are given back against, only where a bucket still holds it (`undo.lua`).
#[derive(Debug, Default)]
pub(crate) struct Lease {
    pub(crate) cells: Cells,
    pub(crate) renewing: tokio::sync::Mutex<Vec<u64>>,
}

/// One entry: the buckets' keys and quotas (to give cells back) and the lease.
pub(crate) struct Entry {
    pub(crate) keys: Vec<Vec<u8>>,
    pub(crate) quotas: Vec<super::script::Bucket>,
    pub(crate) lease: Lease,
}

type Shard = Mutex<HashMap<Vec<Vec<u8>>, Arc<Entry>, ahash::RandomState>>;

/// The leases of a limiter, by the keys of the buckets they were taken from, in a bounded,
/// sharded map (the lock is held only to find or insert an entry, never across a call).
pub(crate) struct Leases {
    shards: Box<[CachePadded<Shard>]>,
    hasher: ahash::RandomState,
    per_shard: usize,
    /// The clock's reading when the limiter was built: leases count milliseconds from it.
    built: u64,
}

const SHARDS: usize = 16;

impl Leases {
    pub(crate) fn new(max: usize, built: u64) -> Self {
        Self {
            built,
            shards: (0..SHARDS)
                .map(|_| CachePadded::new(Mutex::default()))
                .collect(),
            hasher: ahash::RandomState::new(),
            per_shard: max.div_ceil(SHARDS).max(1),
        }
    }

    /// Milliseconds from the limiter's construction to the clock's reading `now`: the time
    /// of a lease's deadline ([`Cells`]).
    pub(crate) fn millis(&self, now: u64) -> u64 {
        now.saturating_sub(self.built) / 1_000_000
    }

    fn shard(&self, keys: &[Vec<u8>]) -> &Shard {
        let hash = self.hasher.hash_one(keys);
        &self.shards[(hash >> 60) as usize % SHARDS]
    }

    /// The entry for `keys`, created if there is room. A full shard first drops the entries
    /// spent at `now_ms`, adding the cells they still held to `dropped`; if none is, `None`:
    /// the decision goes to Redis without a lease.
    pub(crate) fn entry(
        &self,
        keys: &[Vec<u8>],
        quotas: &[super::script::Bucket],
        now_ms: u64,
        dropped: &AtomicU64,
    ) -> Option<Arc<Entry>> {
        // A poisoned shard only means a panic elsewhere while it was held; the map itself is
        // always consistent (each operation is one call), so it is used as it is.
        let mut map = self.shard(keys).lock().unwrap_or_else(|e| e.into_inner());
        if let Some(entry) = map.get(keys) {
            return Some(Arc::clone(entry));
        }
        if map.len() >= self.per_shard {
            map.retain(|_, entry| {
                if Arc::strong_count(entry) > 1 || !entry.lease.cells.is_spent(now_ms) {
                    return true;
                }
                super::stats::add(dropped, u64::from(entry.lease.cells.take_rest()));
                false
            });
            if map.len() >= self.per_shard {
                return None;
            }
        }
        let entry = Arc::new(Entry {
            keys: keys.to_vec(),
            quotas: quotas.to_vec(),
            lease: Lease::default(),
        });
        map.insert(keys.to_vec(), Arc::clone(&entry));
        Some(entry)
    }

    /// Removes the entries `pick` chooses that no decision holds, and returns them.
    pub(crate) fn drain(&self, mut pick: impl FnMut(&Entry) -> bool) -> Vec<Arc<Entry>> {
        let mut out = Vec::new();
        for shard in self.shards.iter() {
            let mut map = shard.lock().unwrap_or_else(|e| e.into_inner());
            map.retain(|_, entry| {
                // An entry a decision holds (it may be renewing it) stays: its cells would be
                // filled into a lease nobody can find.
                if Arc::strong_count(entry) == 1 && pick(entry) {
                    out.push(Arc::clone(entry));
                    false
                } else {
                    true
                }
            });
        }
        out
    }

    /// Whether the lease of `entry` is spent at `now_ms` (for [`drain`](Self::drain)).
    pub(crate) fn expired(entry: &Entry, now_ms: u64) -> bool {
        entry.lease.cells.is_spent(now_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::sync::atomic::Ordering;

    #[test]
    fn spends_until_empty_or_expired_and_gives_the_rest_back_once() {
        let lease = Cells::default();
        assert_eq!(lease.spend(1, 0), None, "an empty lease");
        lease.fill(5, 100, 42, 3);
        assert_eq!(lease.spend(2, 10), Some((42, 3, 3)));
        assert_eq!(lease.spend(4, 10), None, "3 left");
        assert_eq!(lease.spend(3, 100), None, "expired at its deadline");
        assert_eq!(lease.spend(3, 99), Some((42, 3, 0)));
        assert_eq!(lease.take_rest(), 0);
        lease.fill(5, 100, 0, 0);
        assert_eq!(lease.spend(1, 10), Some((0, 0, 4)));
        assert_eq!(lease.take_rest(), 4);
        assert_eq!(lease.take_rest(), 0, "given back once");
        assert_eq!(lease.spend(1, 10), None);
    }

    #[test]
    fn concurrent_spenders_and_a_taker_account_for_every_cell() {
        let lease = Arc::new(Cells::default());
        lease.fill(10_000, u64::MAX, 0, 0);
        let spenders: Vec<_> = (0..3)
            .map(|_| {
                let lease = Arc::clone(&lease);
                std::thread::spawn(move || {
                    let mut spent = 0u32;
                    while lease.spend(1, 0).is_some() {
                        spent += 1;
                    }
                    spent
                })
            })
            .collect();
        let rest = lease.take_rest();
        let spent: u32 = spenders.into_iter().map(|s| s.join().unwrap()).sum();
        assert_eq!(spent + rest, 10_000);
    }

    #[test]
    fn a_full_map_drops_spent_leases_only() {
        let leases = Leases::new(SHARDS, 0); // one entry per shard
        let dropped = AtomicU64::new(0);
        let keys = |i: usize| vec![format!("k{i}").into_bytes()];
        // Fill shards until one refuses a second, live entry.
        let mut live = Vec::new();
        let mut refused = None;
        for i in 0..1_000 {
            match leases.entry(&keys(i), &[], 0, &dropped) {
                Some(entry) => {
                    entry.lease.cells.fill(7, 50, 0, 0);
                    live.push(entry);
                }
                None => {
                    refused = Some(i);
                    break;
                }
            }
        }
        let refused = refused.expect("a shard fills up");
        drop(live);
        // At 50 ms every lease has expired: the entry is made by dropping one, cells counted.
        assert!(leases.entry(&keys(refused), &[], 50, &dropped).is_some());
        assert_eq!(dropped.load(Ordering::Relaxed), 7);
    }
}
