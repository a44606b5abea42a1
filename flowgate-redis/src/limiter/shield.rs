//! The hot-key shield: a bucket Redis refused is refused in this process until it can
//! conform, so that a client hammering a refused key costs Redis about one call per retry
//! interval, not one per request.
//!
//! Exact, for a set that takes no lease and decides no request across cluster slots (the
//! shield is off for the others): a refusal of `n` cells at the server's reading `s` with a
//! wait `w` says the bucket holds fewer than `n` cells until `s + w`, and what other processes
//! of such a set do (they only take cells) cannot make it conform sooner. Cells that come back
//! (a lease given back, a cross-slot take undone, in a process configured otherwise), a reset
//! elsewhere, or a server clock stepping forward can; so an entry lasts at most [`AT_MOST`],
//! which bounds what the shield can refuse that Redis would admit. It counts from when the call
//! was sent (before `s`), so it stops refusing no later than Redis would, and it refuses only
//! requests for `n` cells or more (fewer may conform earlier). A reset in this process forgets
//! the keys. A refusal from the shield reports the bucket as Redis last did
//! ([`Source::Shield`]).
//!
//! [`Source::Shield`]: flowgate::backend::Source::Shield

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::nanos;
use crate::script::{Plan, Prepared};
use flowgate::backend::{Source, Verdict};
use flowgate::outcome::Cause;
use flowgate::policy::Refused;

/// Shards of the map: decisions on different buckets rarely wait for each other.
const SHARDS: usize = 16;

/// The longest an entry lasts, in ns: a flood costs Redis about a call per second per bucket
/// and process at least, and what the shield cannot see costs at most this.
pub(crate) const AT_MOST: u64 = 1_000_000_000;

/// Buckets Redis refused, by Redis key, at most about `max` of them.
pub(crate) struct Shield {
    shards: Box<[Mutex<Map>]>,
    /// Entries held, over every shard (0: nothing to look up).
    held: AtomicUsize,
    /// No entry lasts past this reading: once it is passed, every entry is dropped.
    last: AtomicU64,
    max: usize,
}

type Map = HashMap<Vec<u8>, Entry, ahash::RandomState>;

#[derive(Clone, Copy)]
struct Entry {
    /// No request for `cells` or more conforms before this reading (ns, the limiter's clock).
    conforms: u64,
    /// The entry lasts until then: `conforms`, or [`AT_MOST`] after the call if sooner.
    until: u64,
    cells: u32,
    /// The refusal Redis gave, and its policy's jitter (ns, uniform in the range).
    refused: Refused,
    jitter: (u64, u64),
}

impl Shield {
    /// A shield of at most about `max` buckets; none for 0.
    pub(crate) fn new(max: usize) -> Option<Self> {
        (max > 0).then(|| Self {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            held: AtomicUsize::new(0),
            last: AtomicU64::new(0),
            max,
        })
    }

    fn shard(&self, key: &[u8]) -> MutexGuard<'_, Map> {
        let hash = ahash::RandomState::with_seeds(1, 2, 3, 4).hash_one(key);
        let shard = &self.shards[usize::try_from(hash % SHARDS as u64).unwrap_or(0)];
        shard.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The shield's refusal of `n` cells of `plan` at the reading `now`, if one of its buckets
    /// is shielded for `n` cells or fewer, counted against its quota as Redis's refusals are;
    /// expired entries on the way are dropped.
    pub(crate) fn refusal<R: ?Sized>(
        &self,
        policies: &[Prepared<R>],
        plan: &Plan,
        n: u32,
        now: u64,
    ) -> Option<Verdict> {
        let refused = self.refused(plan, n, now)?;
        if let Some(by) = refused.by() {
            policies[by.policy_index()].metrics[by.quota_index()].refused(u64::from(n));
        }
        Some(Verdict::new(Err(refused), Source::Shield))
    }

    fn refused(&self, plan: &Plan, n: u32, now: u64) -> Option<Refused> {
        // Relaxed: a hint that the map is empty; an entry added meanwhile is found next time.
        if self.held.load(Ordering::Relaxed) == 0 {
            return None;
        }
        // Relaxed: an entry recorded meanwhile raises it; one dropped here early is asked of
        // Redis again (never a refusal lost, only a call more).
        if now >= self.last.load(Ordering::Relaxed) {
            for shard in &self.shards {
                let mut shard = shard.lock().unwrap_or_else(PoisonError::into_inner);
                // Relaxed: a count, under the shard's lock.
                self.held.fetch_sub(shard.len(), Ordering::Relaxed);
                shard.clear();
            }
            return None;
        }
        for key in &plan.keys {
            let mut shard = self.shard(key);
            let Some(entry) = shard.get(key.as_slice()).copied() else {
                continue;
            };
            if entry.until <= now {
                shard.remove(key.as_slice());
                // Relaxed: a count, under the shard's lock.
                self.held.fetch_sub(1, Ordering::Relaxed);
            } else if n >= entry.cells {
                let wait = entry.conforms.saturating_sub(now).max(1);
                let jitter = flowgate::policy::refusal_jitter(entry.jitter, wait);
                let bucket = flowgate::Refused::new(entry.refused.gauge(), wait);
                return Some(Refused::new(bucket, entry.refused.by(), None, jitter));
            }
        }
        None
    }

    /// Shields the bucket that refused `n` cells of `plan`, if Redis's buckets did (`verdict`),
    /// for a call sent at the reading `sent`.
    pub(crate) fn record<R: ?Sized>(
        &self,
        policies: &[Prepared<R>],
        plan: &Plan,
        (n, sent): (u32, u64),
        verdict: &Verdict,
    ) {
        let (Err(refused), Source::Buckets) = (verdict.outcome(), verdict.source()) else {
            return;
        };
        let wait = nanos(refused.conforms_after());
        let Some(by) = refused.by().filter(|_| refused.cause() == Cause::Quota) else {
            return;
        };
        let jitter = policies[by.policy_index()].jitter;
        let at = (plan.refs.iter()).position(|&r| r == (by.policy_index(), by.quota_index()));
        let Some(key) = at.and_then(|bucket| plan.keys.get(bucket)) else {
            return;
        };
        let (conforms, until) = (
            sent.saturating_add(wait),
            sent.saturating_add(wait.min(AT_MOST)),
        );
        // Relaxed: see `refused`.
        self.last.fetch_max(until, Ordering::Relaxed);
        let mut shard = self.shard(key);
        if !shard.contains_key(key.as_slice()) {
            // Relaxed, here and below: a count, each change under a shard's lock.
            if self.held.load(Ordering::Relaxed) >= self.max {
                let before = shard.len();
                shard.retain(|_, entry| entry.until > sent);
                self.held.fetch_sub(before - shard.len(), Ordering::Relaxed);
                if self.held.load(Ordering::Relaxed) >= self.max {
                    return;
                }
            }
            self.held.fetch_add(1, Ordering::Relaxed);
        }
        let cells = n;
        shard.insert(
            key.clone(),
            Entry {
                conforms,
                until,
                cells,
                refused,
                jitter,
            },
        );
    }

    /// Forgets `keys` (a reset).
    pub(crate) fn forget(&self, keys: &[&[u8]]) {
        for key in keys {
            if self.shard(key).remove(*key).is_some() {
                // Relaxed: as above.
                self.held.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}
