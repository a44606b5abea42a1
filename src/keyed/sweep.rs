//! Forgetting idle keys: [`KeyedRateLimiter::sweep`], a bounded step over the table (see
//! `sweeper` for a thread that runs it periodically, with `std`).

use core::hash::Hash;

use super::KeyedRateLimiter;
use crate::algorithm::Algorithm;
use crate::clock::Clock;

/// # Sweeping
impl<K: ?Sized + Hash, C: Clock, A: Algorithm> KeyedRateLimiter<K, C, A> {
    /// Visits the next `budget` slots of the table (continuing where the last sweep stopped, and
    /// wrapping around) and forgets the idle buckets among them; returns how many. Holds a
    /// shard's lock for 256 slots at a time. `sweep(self.stats().slots)` visits every slot.
    pub fn sweep(&self, budget: usize) -> usize {
        // A fresh reading per step: later readings only find more buckets idle.
        self.store
            .sweep(budget, &self.tiers, || self.store.clock().now())
    }
}
