//! Leases ([`RedisBackend::lease`](crate::RedisBackend::lease)): cells taken from Redis in one
//! call and spent locally ([`Cells`], under a mutex), in a bounded, sharded map keyed by the
//! buckets they came from; a decision through a lease, and the unused cells given back exactly
//! (`undo.lua`: only where a bucket still holds what the lease wrote). Redis grants a lease's
//! cells under the same quotas as any request: leasing changes only *when* a cell is spent (the
//! bound this costs: the crate docs, "Leases").

// The map's lock guards which lease entries exist (found or made under it, never a
// decision's state); each lease's cells sit under a mutex of their own, taken for a few
// instructions per decision spent from it; the counter is a statistic.
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crossbeam_utils::CachePadded;
use tokio::time::{timeout_at, Instant};

use super::verdict::{self, Decided};
use crate::failure::Link;
use crate::script::{self, Bucket, Plan, Prepared, Reply, Undo};
use crate::stats::Count;
use flowgate::backend::Failure;
use flowgate::clock::Clock;

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

/// One lease: the buckets' keys and quotas (to give cells back), its cells, and a lock that
/// lets one task at a time ask Redis for the next one, holding the TAT (µs) the last lease call
/// wrote to each bucket: what the unused cells are given back against.
pub(crate) struct Entry {
    pub(crate) keys: Vec<Vec<u8>>,
    pub(crate) quotas: Vec<Bucket>,
    pub(crate) cells: Cells,
    pub(crate) renewing: tokio::sync::Mutex<Vec<u64>>,
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
    /// Cells per lease, and a lease's lifetime in ms.
    cells: u32,
    lifetime: u64,
}

const SHARDS: usize = 16;

impl Leases {
    /// At most `max` leases of `cells` cells each, for `lifetime` ms, timed from the clock's
    /// reading `built`.
    pub(crate) fn new(max: usize, built: u64, (cells, lifetime): (u32, u64)) -> Self {
        Self {
            built,
            cells,
            lifetime,
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
        quotas: &[Bucket],
        now_ms: u64,
        dropped: &Count,
    ) -> Option<Arc<Entry>> {
        // A poisoned shard only means a panic elsewhere while it was held; the map itself is
        // always consistent (each operation is one call), so it is used as it is.
        let mut map = self.shard(keys).lock().unwrap_or_else(|e| e.into_inner());
        if let Some(entry) = map.get(keys) {
            return Some(Arc::clone(entry));
        }
        if map.len() >= self.per_shard {
            map.retain(|_, entry| {
                if Arc::strong_count(entry) > 1 || !entry.cells.is_spent(now_ms) {
                    return true;
                }
                dropped.add(u64::from(entry.cells.take_rest()));
                false
            });
            if map.len() >= self.per_shard {
                return None;
            }
        }
        let entry = Arc::new(Entry {
            keys: keys.to_vec(),
            quotas: quotas.to_vec(),
            cells: Cells::default(),
            renewing: tokio::sync::Mutex::default(),
        });
        map.insert(keys.to_vec(), Arc::clone(&entry));
        Some(entry)
    }

    /// Forgets the leases `pick` chooses that no decision holds, counting their cells in
    /// `dropped` (never given back: their buckets were reset).
    pub(crate) fn forget(&self, pick: impl FnMut(&Entry) -> bool, dropped: &Count) {
        for entry in self.drain(pick) {
            dropped.add(u64::from(entry.cells.take_rest()));
        }
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
}

/// # Decisions through a lease
impl Leases {
    /// The cells to lease for a decision of `n` on `plan`, or `None` to decide without a lease:
    /// when a dry-run policy applies (a lease spends for every bucket alike, and a dry-run
    /// policy's cells are taken only when it would admit), and when a quota is not a schedule
    /// that never delays (a lease spends cells, not places in a queue).
    pub(crate) fn size<R: ?Sized>(
        &self,
        policies: &[Prepared<R>],
        plan: &Plan,
        n: u32,
    ) -> Option<u32> {
        if !plan.dry.is_empty() || plan.refs.is_empty() {
            return None;
        }
        let mut want = self.cells;
        for &(p, q) in &plan.refs {
            let micros = &policies[p].quotas[q];
            if !micros.leasable() {
                return None;
            }
            want = want.min(micros.burst);
        }
        (n >= 1 && n <= want).then_some(want)
    }

    /// Decides `plan` for `n` cells through the lease of `entry`, found at `now` (ms), which one
    /// call renews with up to `want` cells when it holds too few (one task at a time: the others
    /// wait, then spend from it).
    pub(crate) async fn decide<R: ?Sized>(
        &self,
        (link, policies): (&Link, &[Prepared<R>]),
        (plan, entry): (&Plan, Arc<Entry>),
        (n, want): (u32, u32),
        (now, clock): (u64, &impl Clock),
    ) -> Result<Decided, Failure> {
        let counters = &link.counters;
        if let Some(verdict) =
            verdict::spent(policies, plan, entry.cells.spend(n, now), n, counters)
        {
            return Ok(Decided::without_call(verdict));
        }
        // Read only here: a decision the lease answers reads no clock for a deadline. The wait
        // for the lock and the call share it: when Redis is slow, waiters fail by the policy
        // after one timeout, not one per task ahead of them.
        let deadline = link.deadline();
        let Ok(mut wrote) = timeout_at(deadline, entry.renewing.lock()).await else {
            counters.failed(Failure::Timeout);
            return Err(Failure::Timeout);
        };
        let now = self.millis(clock.now());
        if let Some(verdict) =
            verdict::spent(policies, plan, entry.cells.spend(n, now), n, counters)
        {
            return Ok(Decided::without_call(verdict));
        }
        let rest = entry.cells.take_rest();
        if rest > 0 {
            // The expired lease's unused cells first, exactly. Cells not given back stay booked
            // (counted as dropped); only a Redis that does not answer ends the decision here.
            let given = give_rest(link, &entry, &wrote, rest, deadline).await;
            if let Err(failure @ (Failure::Timeout | Failure::Connection | Failure::BreakerOpen)) =
                given
            {
                return Err(failure);
            }
        }
        wrote.clear();
        let call = plan.call((n, want), link.reading(|| clock.now()));
        let reply = link.call(script::decide(), &call, deadline).await?;
        let decided = verdict::decided(policies, plan, n, reply, counters);
        if let Reply::Admitted {
            granted,
            states: ref debts,
            now: Some(at),
            ..
        } = decided.replies[0].1
        {
            // A schedule's state is its TAT less the script's reading.
            wrote.extend(debts.iter().map(|debt| at.saturating_add(*debt)));
            counters.leases.add(1);
            counters.leased_cells.add(u64::from(granted));
            let by = decided
                .verdict
                .outcome()
                .ok()
                .and_then(|allowed| allowed.by());
            let bucket = (0..plan.refs.len())
                .position(|b| {
                    by.is_some_and(|by| core::ptr::eq(by, verdict::by(policies, plan, b)))
                })
                .unwrap_or(0);
            // The script grants n ≤ granted ≤ want; a reply outside that is clamped.
            entry.cells.fill(
                granted.min(want).saturating_sub(n),
                now.saturating_add(self.lifetime),
                debts.get(bucket).copied().unwrap_or(0),
                bucket,
            );
        }
        Ok(decided)
    }

    /// Gives back the unused cells of every lease `pick` chooses that no decision holds, and
    /// forgets those leases; the cells given back. After a call that timed out or lost its
    /// connection, the remaining leases are dropped without a call (counted in
    /// [`RedisStats::dropped_cells`](crate::RedisStats::dropped_cells)), so that returning them
    /// with Redis down takes one timeout, not one per lease.
    pub(crate) async fn give_back(&self, link: &Link, pick: impl FnMut(&Entry) -> bool) -> u64 {
        let mut returned = 0;
        let mut unreachable = false;
        for entry in self.drain(pick) {
            // Free: no decision holds a drained entry, so none is renewing it.
            let Ok(wrote) = entry.renewing.try_lock() else {
                continue;
            };
            let rest = entry.cells.take_rest();
            if rest == 0 {
                continue;
            }
            if unreachable {
                link.counters.dropped_cells.add(u64::from(rest));
                continue;
            }
            // Each call its own timeout: a lease given back is no decision anyone waits on.
            match give_rest(link, &entry, &wrote, rest, link.deadline()).await {
                Ok(true) => returned += u64::from(rest),
                Ok(false) => {}
                Err(failure) => {
                    unreachable = matches!(
                        failure,
                        Failure::Timeout | Failure::Connection | Failure::BreakerOpen
                    );
                }
            }
        }
        returned
    }
}

/// Gives back `rest` unused cells of the lease of `entry`, which wrote the TATs `wrote`, by
/// `deadline`: each bucket's TAT moves back over them only if it is still the one the lease
/// wrote (`undo.lua`); if another decision was taken on top of the lease since, its cells stay
/// booked, since that decision was admitted against them. Whether every bucket took them back;
/// counted as returned if so, as dropped otherwise.
async fn give_rest(
    link: &Link,
    entry: &Entry,
    wrote: &[u64],
    rest: u32,
    deadline: Instant,
) -> Result<bool, Failure> {
    let counters = &link.counters;
    let mut undo = Undo::default();
    for ((key, &tat), quota) in entry.keys.iter().zip(wrote).zip(&entry.quotas) {
        // A lease is only taken from schedules (`size`).
        if let Bucket::Schedule { interval, .. } = *quota {
            let back = tat.saturating_sub(u64::from(rest).saturating_mul(interval));
            undo.push(key, tat.to_string().into(), Some(back.to_string().into()));
        }
    }
    let command = |verb: &str, script: &str| undo.command(verb, script);
    let key = entry.keys.first().map_or(&[][..], Vec::as_slice);
    let all = match link.eval(script::undo(), (key, command), deadline).await {
        Ok(::redis::Value::Int(given)) => given == undo.len() as i64 && !undo.is_empty(),
        Ok(_) => false,
        Err(failure) => {
            counters.dropped_cells.add(u64::from(rest));
            return Err(failure);
        }
    };
    let counter = if all {
        &counters.returned_cells
    } else {
        &counters.dropped_cells
    };
    counter.add(u64::from(rest));
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let leases = Leases::new(SHARDS, 0, (1, 1)); // one entry per shard
        let counters = crate::stats::Counters::new("test");
        let dropped = &counters.dropped_cells;
        let keys = |i: usize| vec![format!("k{i}").into_bytes()];
        // Fill shards until one refuses a second, live entry.
        let mut live = Vec::new();
        let mut refused = None;
        for i in 0..1_000 {
            match leases.entry(&keys(i), &[], 0, dropped) {
                Some(entry) => {
                    entry.cells.fill(7, 50, 0, 0);
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
        assert!(leases.entry(&keys(refused), &[], 50, dropped).is_some());
        assert_eq!(dropped.get(), 7);
    }
}
