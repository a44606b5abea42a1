//! [`KeyedRateLimiter`]: one bucket per key (user, IP, API key, endpoint) in a bounded,
//! cache-padded, sharded table.
//!
//! # Memory model
//! The table is sized once, at construction, for `max_keys` keys, and never grows:
//!
//! * Each key takes one 16-byte slot: an 8-byte tag (the key's 64-bit hash) and the 8-byte
//!   bucket word. **The key itself is not stored**, whatever its type: a `String` key costs the
//!   same 16 bytes as a `u64`, and inserting one allocates nothing.
//! * Shards are at most 3/4 full, so a table holds about `4/3 × max_keys` slots: **21⅓ bytes per
//!   key of capacity**, plus 128 bytes per shard, allocated and zeroed by [`Builder::build`]
//!   (21.7 bytes per key measured at a million keys). Resident memory is that from the start and
//!   never more ([`KeyedRateLimiter::memory_bytes`] gives the exact figure). Each shard also
//!   has room for five standard deviations of the random spread of keys over shards (at a
//!   million keys 1.4 % more with 8 shards, 8 % with 256; a shard of 64 keys gets room for
//!   112), so that one shard does not fill before the table does.
//!
//! # Keys are fingerprints
//! Keys are told apart by a 64-bit hash from `ahash`, seeded at random per process (per limiter),
//! so nobody outside the process can choose keys that collide or crowd one shard. Two distinct
//! keys share a bucket only if their hashes are equal: among `n` keys alive at once the chance
//! that any two do is at most `n² / 2⁶⁵` (2.7 × 10⁻⁸ for a million keys, 2.7 × 10⁻⁶ for ten
//! million), and with `t` quota tiers (see [`Builder::tier`]) at most `n² / 2^(65 − ⌈log₂ t⌉)`.
//! Such a pair shares one quota: each of the two keys can be refused early, neither can exceed
//! the quota. [`Builder::hash_seed`] fixes the seed for reproducible runs, at the price of that
//! protection.
//!
//! # Eviction changes no decision
//! A bucket that is full at `now` ([`Algorithm::is_idle`]: a GCRA bucket whose arrival time is
//! not after `now`; a window counter with nothing counted in the windows that still weigh)
//! answers every later request exactly as a new bucket would, so it can be forgotten without any
//! decision changing. flowgate forgets only such buckets, in three ways, none of which ever holds
//! a shard's lock for more than a bounded number of slots:
//!
//! * an insert reuses an idle slot on its key's probe chain;
//! * an insert into a full shard sweeps the next 64 slots of that shard;
//! * [`KeyedRateLimiter::sweep`] visits the next `budget` slots of the table (256 per lock hold,
//!   plus the rest of the shard again in the rare pass where a probe chain wraps around it),
//!   and [`KeyedRateLimiter::spawn_sweeper`] runs it over the whole table periodically on a
//!   thread of its own.
//!
//! Exceptions, all conservative or bounded:
//!
//! * With [`Initial::Cells`](crate::Initial) a new bucket starts partly empty, so a forgotten
//!   full bucket comes back with fewer cells than it had: never an extra cell.
//! * A bucket forgotten at `t` and asked again with a reading before `t` (a stale `*_at` reading,
//!   or a clock stepped back) starts full at that reading: like any stale reading on a single
//!   limiter, up to `age / interval` cells early, at most one burst.
//! * A forgotten key that comes back is a new key: with a quota on new keys it needs a cell
//!   from that quota, and a full table may refuse it ([`Cause::TableFull`](crate::Cause)), where
//!   a table that had kept its idle bucket would have admitted it.
//! * An [`Algorithm`] of your own is never evicted unless it implements [`Algorithm::is_idle`].
//! * [`SlidingLog`](crate::SlidingLog) keeps one slot per request (8 × limit bytes), so it is not
//!   offered per key; the window counters give the same shape in 8 bytes.
//!
//! # A full table
//! When a new key finds no room (the table at `max_keys`, or its shard full) and no idle key on
//! its probe chain or among the next 64 slots of its shard, [`WhenFull`] decides, and keys
//! already tracked are never affected (idle keys in other shards wait for a sweep):
//! [`WhenFull::Refuse`] refuses the new key ([`Cause::TableFull`](crate::Cause)),
//! [`WhenFull::AdmitUntracked`] answers it as a new bucket would without keeping one. A quota on new keys ([`Builder::new_keys`]) bounds both: the rate
//! at which a flood of new keys can fill the table, and the rate of untracked admissions.
//!
//! # Concurrency
//! A check of a key the table holds takes no lock and allocates nothing: one hash, a probe of a
//! few adjacent slots (usually one cache line), and the same compare-and-swap on the bucket word
//! as [`RateLimiter`]. Inserting, evicting and moving keys takes the shard's
//! lock; see `keyed::slot` for how a lock-free check and a locked move of the same key agree.
//! A request about a key the table does not hold (a new key, or a peek or refund of an unknown
//! one) confirms the miss under the shard's lock, so a flood of unknown keys serializes per
//! shard while known keys go on without waiting.

mod builder;
pub(crate) mod slot;
mod sweeper;
mod table;

use core::fmt;
use core::hash::Hash;

pub use builder::{Builder, KeyedError, WhenFull};
pub use sweeper::Sweeper;

use self::slot::{Tag, FIRST_TAG};
use self::table::{Entry, Held, Shard, Table};
use crate::algorithm::{Algorithm, Gcra, Step};
use crate::clock::{Clock, QuantaClock};
use crate::decision::{Allowed, Cause, Gauge, InsufficientCapacity, Refused};
use crate::limiter::RateLimiter;
use crate::quota::Quota;

/// Chooses a key's tier: an index into the limiter's algorithms (0 is the default one).
type Classify<K> = Box<dyn Fn(&K) -> usize + Send + Sync>;

/// A bucket's word before and after a decision's write, if it wrote one.
pub(crate) type Wrote = Option<(u64, u64)>;

/// The tag of a key whose hash (tier bits included) is `hash`: hashes below [`FIRST_TAG`] (only
/// 0 and 1, with tier 0) join bit 62's keys.
#[inline(always)]
pub(crate) fn tag_of(hash: u64) -> Tag {
    if hash < FIRST_TAG {
        hash | 1 << 62
    } else {
        hash
    }
}

/// `algorithm.check` of `n` cells at `now`, noting in `wrote` the word it saw and the word it
/// asked to write (the last run is the one that took effect).
#[inline(always)]
pub(crate) fn recording<'a, A: Algorithm>(
    algorithm: &'a A,
    now: u64,
    n: u32,
    wrote: &'a mut Wrote,
) -> impl FnMut(u64) -> Step<Result<Allowed, Refused>> + 'a {
    move |word| {
        let step = algorithm.check(word, now, n);
        *wrote = match step {
            Step::Write(new, _) => Some((word, new)),
            Step::Keep(_) => None,
        };
        step
    }
}

/// A rate limiter with one bucket per key, for keys of type `K` (any `Hash` type, unsized ones
/// like `str` included), deciding with the [`Algorithm`] `A` on the clock `C`.
///
/// ```
/// use flowgate::{KeyedRateLimiter, Quota};
///
/// let limiter = KeyedRateLimiter::<str>::new(Quota::per_second(2)?, 100_000)?;
/// assert!(limiter.check_key("alice").is_ok());
/// assert!(limiter.check_key("alice").is_ok());
/// assert!(limiter.check_key("alice").is_err()); // alice's 2 cells are spent
/// assert!(limiter.check_key("bob").is_ok()); // bob has his own bucket
/// assert_eq!(limiter.len(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// See the [`keyed` module docs](crate::keyed) for the memory model, eviction, and what happens
/// when the table is full; [`Builder`] for every option (per-key quota tiers, a quota on new
/// keys, the clock).
pub struct KeyedRateLimiter<K: ?Sized, C: Clock = QuantaClock, A: Algorithm = Gcra> {
    table: Table,
    tiers: Box<[A]>,
    tier_mask: u64,
    classify: Option<Classify<K>>,
    hasher: ahash::RandomState,
    clock: C,
    when_full: WhenFull,
    new_keys: Option<RateLimiter<C, Gcra>>,
}

/// Counters of what a keyed table has done, summed over its shards.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct KeyedStats {
    /// Keys held now.
    pub keys: usize,
    /// Keys inserted since the limiter was built.
    pub created: u64,
    /// Idle keys forgotten to make room or by sweeps.
    pub evicted: u64,
    /// Requests from new keys admitted without a bucket ([`WhenFull::AdmitUntracked`]).
    pub untracked: u64,
    /// Requests from new keys refused because the table was full ([`WhenFull::Refuse`]).
    pub refused_full: u64,
}

impl<K: ?Sized + Hash> KeyedRateLimiter<K> {
    /// A GCRA limiter applying `quota` to each key, holding at most `max_keys` keys and refusing
    /// new keys when full and nothing is idle; see [`KeyedRateLimiter::builder`] for the rest.
    ///
    /// # Errors
    /// As [`Builder::build`].
    pub fn new(quota: Quota, max_keys: usize) -> Result<Self, KeyedError> {
        Self::builder(Gcra::new(&quota)).max_keys(max_keys).build()
    }
}

impl<K: ?Sized + Hash, A: Algorithm> KeyedRateLimiter<K, QuantaClock, A> {
    /// A builder of a limiter deciding with `algorithm` for every key (tier 0).
    pub fn builder(algorithm: A) -> Builder<K, QuantaClock, A> {
        Builder::new(algorithm)
    }
}

/// # Checking
impl<K: ?Sized + Hash, C: Clock, A: Algorithm> KeyedRateLimiter<K, C, A> {
    /// Takes one cell from `key`'s bucket if one is available now.
    ///
    /// # Performance
    /// One hash, one clock read, a probe and one CAS for a key the table holds; a new key also
    /// takes its shard's lock. See `BENCHMARKS.md`.
    #[inline]
    pub fn check_key(&self, key: &K) -> Result<Allowed, Refused> {
        let (tag, algorithm) = self.locate(key);
        // Every algorithm's capacity is at least 1, so one cell is within it.
        self.decide(tag, algorithm, 1, || self.clock.now(), &mut None)
    }

    /// [`check_key`](Self::check_key) at `now` (a reading of this limiter's clock).
    #[inline]
    pub fn check_key_at(&self, key: &K, now: u64) -> Result<Allowed, Refused> {
        let (tag, algorithm) = self.locate(key);
        // Every algorithm's capacity is at least 1, so one cell is within it.
        self.decide(tag, algorithm, 1, || now, &mut None)
    }

    /// Takes `n` cells from `key`'s bucket if they are all available now; otherwise takes
    /// nothing. `n = 0` takes nothing, creates no bucket, and reports the bucket's state.
    ///
    /// # Errors
    /// The outer `Err` is [`InsufficientCapacity`] when `n` exceeds the key's burst: that request
    /// can never succeed. The inner `Err` is a [`Refused`] that says when it can.
    #[inline]
    pub fn check_key_n(
        &self,
        key: &K,
        n: u32,
    ) -> Result<Result<Allowed, Refused>, InsufficientCapacity> {
        self.check_key_n_with(key, n, || self.clock.now())
    }

    /// [`check_key_n`](Self::check_key_n) at `now` (a reading of this limiter's clock).
    ///
    /// # Errors
    /// As [`check_key_n`](Self::check_key_n).
    #[inline]
    pub fn check_key_n_at(
        &self,
        key: &K,
        n: u32,
        now: u64,
    ) -> Result<Result<Allowed, Refused>, InsufficientCapacity> {
        self.check_key_n_with(key, n, || now)
    }

    #[inline(always)]
    fn check_key_n_with(
        &self,
        key: &K,
        n: u32,
        now: impl FnOnce() -> u64,
    ) -> Result<Result<Allowed, Refused>, InsufficientCapacity> {
        if n == 0 {
            return self.peek_key_at(key, 0, now());
        }
        let (tag, algorithm) = self.locate(key);
        InsufficientCapacity::check(n, algorithm.capacity())?;
        Ok(self.decide(tag, algorithm, n, now, &mut None))
    }

    /// The decision [`check_key_n`](Self::check_key_n) would make now, without taking anything
    /// or creating a bucket (an unknown key is answered as a new bucket would be).
    ///
    /// # Errors
    /// As [`check_key_n`](Self::check_key_n).
    pub fn peek_key(
        &self,
        key: &K,
        n: u32,
    ) -> Result<Result<Allowed, Refused>, InsufficientCapacity> {
        self.peek_key_at(key, n, self.clock.now())
    }

    /// [`peek_key`](Self::peek_key) at `now`.
    ///
    /// # Errors
    /// As [`check_key_n`](Self::check_key_n).
    pub fn peek_key_at(
        &self,
        key: &K,
        n: u32,
        now: u64,
    ) -> Result<Result<Allowed, Refused>, InsufficientCapacity> {
        let (tag, algorithm) = self.locate(key);
        InsufficientCapacity::check(n, algorithm.capacity())?;
        let word = self
            .word_of(tag)
            .unwrap_or_else(|| algorithm.initial_word(now));
        if n == 0 {
            return Ok(Ok(algorithm.state(word, now)));
        }
        Ok(algorithm.peek(word, now, n))
    }

    /// Gives `n` cells back to `key`'s bucket, never beyond its capacity; nothing if the table
    /// does not hold the key (a new bucket is already as full as it starts).
    pub fn refund_key(&self, key: &K, n: u32) {
        self.refund_key_at(key, n, self.clock.now());
    }

    /// [`refund_key`](Self::refund_key) at `now`.
    pub fn refund_key_at(&self, key: &K, n: u32, now: u64) {
        let (tag, algorithm) = self.locate(key);
        let shard = self.table.shard(tag);
        let refund = |word| algorithm.refund(word, now, n);
        if let Some(Some(())) = self.table.find(shard, tag).map(|s| s.update(tag, refund)) {
            return;
        }
        let held = shard.lock();
        if let Some(slot) = self.table.find_locked(shard, &held, tag) {
            slot.update(tag, refund);
        }
    }

    /// Forgets `key`'s bucket: its next request finds a new one, as [`Quota::initial`] says.
    /// Whether the table held the key.
    pub fn reset_key(&self, key: &K) -> bool {
        let (tag, _) = self.locate(key);
        let shard = self.table.shard(tag);
        let mut held = shard.lock();
        self.table.remove(shard, &mut held, tag)
    }

    /// The key's tag and the algorithm of its tier.
    #[inline(always)]
    fn locate(&self, key: &K) -> (Tag, &A) {
        let hash = self.hasher.hash_one(key);
        let tier = match &self.classify {
            None => 0,
            Some(classify) => Some(classify(key))
                .filter(|&tier| tier < self.tiers.len())
                .unwrap_or(0),
        };
        (
            tag_of(hash & !self.tier_mask | tier as u64),
            &self.tiers[tier],
        )
    }

    /// The algorithm of the tier recorded in `tag`.
    #[inline]
    fn tier_of(&self, tag: Tag) -> &A {
        let tier = (tag & self.tier_mask) as usize;
        self.tiers.get(tier).unwrap_or(&self.tiers[0])
    }

    /// Decides `n` cells for `tag` at the reading `now()`, taken after the probe for the key's
    /// slot has issued its loads. `wrote` ends up holding the bucket's word before and after the
    /// decision's write, if it wrote one (a multi-quota decision's undo; dead code otherwise).
    #[inline(always)]
    fn decide(
        &self,
        tag: Tag,
        algorithm: &A,
        n: u32,
        now: impl FnOnce() -> u64,
        wrote: &mut Wrote,
    ) -> Result<Allowed, Refused> {
        let shard = self.table.shard(tag);
        let slot = self.table.find(shard, tag);
        // Read once the probe has issued its loads: the clock read overlaps a miss on the slot.
        let now = now();
        let answer = match slot.and_then(|s| s.update(tag, recording(algorithm, now, n, wrote))) {
            Some(answer) => answer,
            None => self.insert(shard, tag, algorithm, now, n, wrote),
        };
        if let Err(refused) = &answer {
            if refused.clock_behind {
                self.catch_up(shard, tag, algorithm);
            }
        }
        answer
    }

    /// The slow path: the key was not found without the lock. Look again under it, and insert.
    #[cold]
    #[inline(never)]
    fn insert(
        &self,
        shard: &Shard,
        tag: Tag,
        algorithm: &A,
        now: u64,
        n: u32,
        wrote: &mut Wrote,
    ) -> Result<Allowed, Refused> {
        // A lock-free attempt that ran the step and then lost the slot (closed or moved) left
        // its words here; they were never written. Without this, an untracked admission below
        // would hand them to a policy's undo, which could then take back another request's
        // cells (found in review).
        *wrote = None;
        let mut held = shard.lock();
        let fresh = || algorithm.initial_word(now);
        let idle = self.idle_at(now);
        match self
            .table
            .entry(shard, &mut held, tag, fresh, idle, || self.new_key(now))
        {
            Entry::Found(slot) | Entry::Inserted(slot) => {
                if let Some(answer) = slot.update(tag, recording(algorithm, now, n, wrote)) {
                    return answer;
                }
                // Tags change only under the lock we hold, so the key is still there; were it
                // not, this answers as a new bucket would, writing nothing.
                *wrote = None;
                algorithm.check(fresh(), now, n).answer()
            }
            Entry::Denied(refused) => Err(refused),
            Entry::Full => self.full(&mut held, algorithm, now, n),
        }
    }

    /// Takes a cell from the quota on new keys, if there is one. Asked only once a new key is
    /// certain to be created or admitted untracked, so that no cell ever has to be given back
    /// (a GCRA refund is exact only while the cell's reservation has not run out).
    fn new_key(&self, now: u64) -> Result<(), Refused> {
        match &self.new_keys {
            Some(gate) => gate
                .check_at(now)
                .map(|_| ())
                .map_err(|refused| refused.because(Cause::NewKeys)),
            None => Ok(()),
        }
    }

    /// A new key found no room.
    fn full(
        &self,
        held: &mut Held<'_>,
        algorithm: &A,
        now: u64,
        n: u32,
    ) -> Result<Allowed, Refused> {
        match self.when_full {
            WhenFull::AdmitUntracked => {
                let answer = algorithm
                    .check(algorithm.initial_word(now), now, n)
                    .answer();
                if answer.is_ok() {
                    // An untracked admission takes a new-key cell; a refusal takes none.
                    self.new_key(now)?;
                    held.state.untracked += 1;
                }
                answer
            }
            WhenFull::Refuse => {
                held.state.refused += 1;
                let limit = algorithm.capacity();
                let hint = algorithm.quota().interval_nanos().max(1);
                let gauge = Gauge::new(u64::from(limit), 1, limit, hint);
                Err(Refused::new(gauge, hint).because(Cause::TableFull))
            }
        }
    }

    /// After a refusal flagged "clock behind", clamps the key's bucket against a fresh reading,
    /// as [`RateLimiter`] does.
    #[cold]
    #[inline(never)]
    fn catch_up(&self, shard: &Shard, tag: Tag, algorithm: &A) {
        let skew = self.clock.skew_nanos();
        if let Some(slot) = self.table.find(shard, tag) {
            // The clock is read inside, after each Acquire load of the word (see `cell`).
            slot.clamp(tag, |word| algorithm.catch_up(word, self.clock.now(), skew));
        }
    }

    /// The word of `tag`'s bucket, if the table holds it (exact: a miss is confirmed under the
    /// lock).
    pub(crate) fn word_of(&self, tag: Tag) -> Option<u64> {
        let shard = self.table.shard(tag);
        if let Some(word) = self.table.find(shard, tag).and_then(|s| s.word(tag)) {
            return Some(word);
        }
        let held = shard.lock();
        self.table
            .find_locked(shard, &held, tag)
            .and_then(|slot| slot.word(tag))
    }
}

/// # Tags, for policies
///
/// A policy (see [`crate::policy`]) hashes a request's key once and asks one table per quota
/// with the same tag, passing each quota's algorithm in (a policy's quotas can be replaced while
/// the tables keep their buckets). These calls ignore the limiter's tiers.
impl<K: ?Sized + Hash, C: Clock, A: Algorithm> KeyedRateLimiter<K, C, A> {
    /// Takes `n` cells (`1 ≤ n ≤ capacity`) from the bucket `tag` with `algorithm` at `now`,
    /// creating the bucket if the table does not hold it. `wrote` receives the bucket's word
    /// before and after, if the decision wrote one, for [`restore_tag`](Self::restore_tag).
    #[inline]
    pub(crate) fn commit_tag(
        &self,
        tag: Tag,
        algorithm: &A,
        n: u32,
        now: u64,
        wrote: &mut Wrote,
    ) -> Result<Allowed, Refused> {
        self.decide(tag, algorithm, n, || now, wrote)
    }

    /// The slot of the bucket `tag`, if a lock-free probe finds it there (not found: a new key,
    /// or one being moved; the caller takes the slow path, [`commit_tag`](Self::commit_tag)).
    /// A found slot may stop holding `tag` at any time: [`Slot::update`] says so.
    #[inline(always)]
    pub(crate) fn probe_tag(&self, tag: Tag) -> Option<&slot::Slot> {
        self.table.find(self.table.shard(tag), tag)
    }

    /// [`check_key_n_at`](Self::check_key_n_at) with `n ≥ 1`, noting in `wrote` the bucket's
    /// words before and after a write; with the key's tag, and whether its algorithm shapes
    /// (admits with a delay), for the waits (`crate::wait`).
    pub(crate) fn check_key_recording(
        &self,
        key: &K,
        n: u32,
        now: u64,
        wrote: &mut Wrote,
    ) -> Result<(Result<Allowed, Refused>, Tag, bool), InsufficientCapacity> {
        let (tag, algorithm) = self.locate(key);
        InsufficientCapacity::check(n, algorithm.capacity())?;
        let answer = self.decide(tag, algorithm, n, || now, wrote);
        Ok((answer, tag, algorithm.max_delay_nanos() > 0))
    }

    /// After a refusal flagged "clock behind" of the bucket `tag` seen by a peek, clamps it
    /// against a fresh reading, as a refused check does.
    pub(crate) fn catch_up_tag(&self, tag: Tag, algorithm: &A) {
        self.catch_up(self.table.shard(tag), tag, algorithm);
    }

    /// Undoes a write of [`commit_tag`](Self::commit_tag): puts `before` back if the bucket `tag`
    /// still holds `after`, following the key if the table moved it. Whether it did; a bucket
    /// that changed since (another request built on the write) or went away is left alone.
    pub(crate) fn restore_tag(&self, tag: Tag, before: u64, after: u64) -> bool {
        let shard = self.table.shard(tag);
        if let Some(done) = self
            .table
            .find(shard, tag)
            .and_then(|slot| slot.restore(tag, after, before))
        {
            return done;
        }
        // Moving, or moved: nothing moves while the lock is held.
        let held = shard.lock();
        self.table
            .find_locked(shard, &held, tag)
            .and_then(|slot| slot.restore(tag, after, before))
            .unwrap_or(false)
    }
}

/// # Eviction and size
impl<K: ?Sized + Hash, C: Clock, A: Algorithm> KeyedRateLimiter<K, C, A> {
    /// Visits the next `budget` slots of the table (continuing where the last sweep stopped, and
    /// wrapping around) and forgets the idle buckets among them; returns how many. Holds a
    /// shard's lock for 256 slots at a time (and, in the rare step where a probe chain wraps
    /// around a shard's end, looks at that shard's last slots again). `sweep(self.slots())`
    /// visits every slot.
    pub fn sweep(&self, budget: usize) -> usize {
        // A fresh reading per step: later readings only find more buckets idle.
        self.sweep_with(budget, || self.clock.now())
    }

    /// [`sweep`](Self::sweep) judging idleness at `now` (a reading of this limiter's clock).
    pub fn sweep_at(&self, budget: usize, now: u64) -> usize {
        self.sweep_with(budget, || now)
    }

    /// Sweeps `budget` slots, each step judging idleness at the reading `now()`.
    fn sweep_with(&self, budget: usize, now: impl Fn() -> u64) -> usize {
        let mut evicted = 0;
        for (shard, range) in self.table.claim_sweep(budget) {
            let now = now();
            let mut held = shard.lock();
            evicted += self
                .table
                .sweep_shard(shard, &mut held, range, self.idle_at(now));
        }
        evicted
    }

    /// Whether a slot's bucket is idle at `now`, judged by the algorithm of its tag's tier.
    fn idle_at(&self, now: u64) -> impl Fn(Tag, u64) -> bool + '_ {
        move |tag, word| self.tier_of(tag).is_idle(word, now)
    }

    /// Keys held now (takes each shard's lock in turn).
    pub fn len(&self) -> usize {
        self.stats().keys
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The most keys the table holds.
    pub fn max_keys(&self) -> usize {
        self.table.max_keys()
    }

    /// Slots in the table (a [`sweep`](Self::sweep) of this many visits them all).
    pub fn slots(&self) -> usize {
        self.table.slots()
    }

    /// Shards in the table.
    pub fn shards(&self) -> usize {
        self.table.shards().len()
    }

    /// The shard `key` lives in (for diagnostics: shard balance, and tests of the hash seed).
    pub fn shard_of(&self, key: &K) -> usize {
        self.table.shard_index(self.locate(key).0)
    }

    /// Where `key`'s bucket is now, as (shard, slot), if the table holds it. For tests of the
    /// table's moves; not a stable interface.
    #[doc(hidden)]
    pub fn position_of(&self, key: &K) -> Option<(usize, usize)> {
        let (tag, _) = self.locate(key);
        let shard = self.table.shard(tag);
        let held = shard.lock();
        let slot = self.table.find_locked(shard, &held, tag)?;
        Some((
            self.table.shard_index(tag),
            self.table.position(shard, slot),
        ))
    }

    /// `key`'s home: the (shard, slot) its probe starts from. For tests; not a stable interface.
    #[doc(hidden)]
    pub fn home_of(&self, key: &K) -> (usize, usize) {
        let (tag, _) = self.locate(key);
        (self.table.shard_index(tag), self.table.home(tag))
    }

    /// Bytes of the table: slots and shard headers, all allocated at construction (the limiter's
    /// algorithms and clock are not counted).
    pub fn memory_bytes(&self) -> usize {
        self.table.memory_bytes()
    }

    /// What the table has done so far (takes each shard's lock in turn).
    pub fn stats(&self) -> KeyedStats {
        let mut stats = KeyedStats::default();
        for shard in self.table.shards() {
            let held = shard.lock();
            stats.keys += held.state.live;
            stats.created += held.state.created;
            stats.evicted += held.state.evicted;
            stats.untracked += held.state.untracked;
            stats.refused_full += held.state.refused;
        }
        stats
    }

    /// The limiter's clock, whose readings the `*_at` methods expect.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// The algorithm of tier `tier` (0 is the default), if there is one.
    pub fn tier(&self, tier: usize) -> Option<&A> {
        self.tiers.get(tier)
    }

    /// What a full table does with a new key.
    pub fn when_full(&self) -> WhenFull {
        self.when_full
    }
}

impl<K: ?Sized, C: Clock + fmt::Debug, A: Algorithm + fmt::Debug> fmt::Debug
    for KeyedRateLimiter<K, C, A>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedRateLimiter")
            .field("tiers", &self.tiers)
            .field("max_keys", &self.table.max_keys())
            .field("shards", &self.table.shards().len())
            .field("when_full", &self.when_full)
            .field("new_keys", &self.new_keys.as_ref().map(RateLimiter::quota))
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(flowgate_loom)))]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    /// `wrote` reports only a word that was written: an untracked admission of a new key (no
    /// room) writes none, whatever a failed lock-free attempt left in `wrote` before the slow
    /// path. A policy's undo would otherwise compare-and-swap words nobody wrote.
    #[test]
    fn an_untracked_admission_reports_no_write() {
        let quota = Quota::per_hour(10).unwrap();
        let table = KeyedRateLimiter::<(), _, _>::builder(Gcra::new(&quota))
            .clock(ManualClock::new())
            .max_keys(1)
            .when_full(WhenFull::AdmitUntracked)
            .build()
            .unwrap();
        let gcra = Gcra::new(&quota);
        let mut wrote = None;
        assert!(table
            .commit_tag(tag_of(1 << 40), &gcra, 1, 1_000, &mut wrote)
            .is_ok());
        assert!(wrote.is_some(), "the first key is inserted and written");
        // As a lock-free attempt that lost its slot leaves it.
        let mut wrote = Some((7, 8));
        assert!(table
            .commit_tag(tag_of(2 << 40), &gcra, 1, 1_000, &mut wrote)
            .is_ok());
        assert_eq!(wrote, None, "no room: admitted untracked, nothing written");
    }
}
