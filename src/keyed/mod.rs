//! [`KeyedRateLimiter`]: one bucket per key (user, IP, API key, endpoint) in a bounded,
//! cache-padded, sharded table.
//!
//! # Memory model
//! The table is sized once, at construction, for `max_keys` keys, and never grows:
//!
//! * Each key takes one 16-byte slot: an 8-byte tag (the key's 64-bit hash) and the 8-byte
//!   bucket word. **The key itself is not stored**, whatever its type: a `String` key costs the
//!   same 16 bytes as a `u64`, and inserting one allocates nothing.
//! * Shards are at most 7/8 full, so a table holds about `8/7 × max_keys` slots: **18.3 bytes per
//!   key of capacity**, plus 128 bytes per shard, allocated and zeroed by [`Builder::build`].
//!   Resident memory is that from the start and never more ([`KeyedStats::memory_bytes`] gives
//!   the exact figure). Each shard also has room for five standard deviations of the random spread of keys over shards (at a
//!   million keys 1.4 % more with 8 shards, 8 % with 256; a shard of 64 keys gets room for
//!   112), so that one shard does not fill before the table does.
//! * All shards' slots are one allocation. On Linux a table of at least 2 MiB (about 100 000
//!   keys) is aligned to 2 MiB and advised `madvise(MADV_HUGEPAGE)` before it is first
//!   written, so that where transparent huge pages are `always` or `madvise` a hit's page walk
//!   is short (a million keys span ten huge pages instead of about 4 600 small ones). The memory
//!   is the same; a system that declines gives ordinary pages.
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
//! * an insert reuses an idle slot on its key's probe chain, unless the table has room and the
//!   key's home line a free slot to spare (then idle keys stay, so that an owner back within
//!   its interval is found rather than inserted again);
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
//! * A bucket forgotten at `t` and asked again with a reading before `t` (a clock stepped
//!   back) starts full at that reading: like any stale reading on a single limiter, up to
//!   `age / interval` cells early, at most one burst.
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
//! as [`RateLimiter`](crate::RateLimiter). Inserting, evicting and moving keys takes the shard's
//! lock; see `keyed::slot` for how a lock-free check and a locked move of the same key agree.
//! A request about a key the table does not hold (a new key, or a peek or give-back of an
//! unknown one) confirms the miss under the shard's lock, so a flood of unknown keys serializes per
//! shard while known keys go on without waiting.
//!
//! A decision waits for its key's cache line (one miss on a table larger than the caches), and
//! the next decision cannot start its probe before this one's branches resolve. A caller that
//! holds several requests at once decides them with
//! [`check_keys`](KeyedRateLimiter::check_keys), which asks for every key's line first, so their
//! misses overlap.

mod builder;
mod slot;
mod store;
mod sweep;
#[cfg(feature = "std")]
mod sweeper;
mod table;
mod take;
#[cfg(feature = "std")]
mod wait;

use core::fmt;
use core::hash::Hash;

pub(crate) use builder::hasher;
use builder::TierSet;
pub use builder::{Builder, WhenFull};
pub use store::KeyedError;
#[cfg(feature = "std")]
pub use sweeper::Sweeper;

pub(crate) use self::slot::Tag;
pub use self::store::KeyedStats;
pub(crate) use self::store::{One, Options, Store, Tiers};
use crate::algorithm::{Algorithm, Gcra};
use crate::cell::Wrote;
use crate::clock::{Clock, DefaultClock};
use crate::outcome::{Allowed, InsufficientCapacity, Refused};

use alloc::boxed::Box;

/// Chooses a key's tier: an index into the limiter's algorithms (0 is the default one).
type Classify<K> = Box<dyn Fn(&K) -> usize + Send + Sync>;

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
pub struct KeyedRateLimiter<K: ?Sized, C: Clock = DefaultClock, A: Algorithm = Gcra> {
    store: Store<C>,
    tiers: TierSet<A>,
    classify: Option<Classify<K>>,
    hasher: ahash::RandomState,
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
        self.decide(tag, algorithm, 1, || self.store.clock().now(), &mut None)
    }

    /// Takes one cell from each of `keys`' buckets, as [`check_key`](Self::check_key) does for
    /// each in turn, at one reading of the clock: for a server or proxy that holds several
    /// requests at once. Every key's home cache line is asked for before the first key is
    /// decided (a prefetch, on x86-64), so the memory loads of the batch overlap instead of
    /// following one another. A key given twice takes two cells, in the batch's order. The
    /// later keys are decided at the batch's one reading, which is older by the time they are:
    /// a few microseconds at most unless a new key waits for its shard's lock, and an older
    /// reading only refuses more.
    ///
    /// ```
    /// use flowgate::{KeyedRateLimiter, Quota};
    ///
    /// let limiter = KeyedRateLimiter::<str>::new(Quota::per_second(1)?, 1_000)?;
    /// let [alice, bob, again] = limiter.check_keys(["alice", "bob", "alice"]);
    /// assert!(alice.is_ok() && bob.is_ok());
    /// assert!(again.is_err()); // alice's one cell went to her first request
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Performance
    /// As many hashes, probes and CASes as keys, and one clock reading; a new key also takes its
    /// shard's lock. See `BENCHMARKS.md`.
    #[inline]
    pub fn check_keys<const N: usize>(&self, keys: [&K; N]) -> [Result<Allowed, Refused>; N] {
        let located = keys.map(|key| self.locate(key));
        for &(tag, _) in &located {
            self.store.prefetch(tag);
        }
        let now = self.store.clock().now();
        located.map(|(tag, algorithm)| self.decide(tag, algorithm, 1, || now, &mut None))
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
        let now = || self.store.clock().now();
        Ok(self.check_key_n_with(key, n, now, &mut None)?.0)
    }

    /// `n` cells of `key`'s bucket at the reading `now()`, noting in `wrote` what was written;
    /// the answer and the bucket's tag.
    #[inline(always)]
    fn check_key_n_with(
        &self,
        key: &K,
        n: u32,
        now: impl FnOnce() -> u64,
        wrote: &mut Wrote,
    ) -> Result<(Result<Allowed, Refused>, Tag), InsufficientCapacity> {
        if n == 0 {
            return Ok((self.peek_key_at(key, 0, now())?, 0));
        }
        let (tag, algorithm) = self.locate(key);
        InsufficientCapacity::check(n, algorithm.capacity())?;
        Ok((self.decide(tag, algorithm, n, now, wrote), tag))
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
        self.peek_key_at(key, n, self.store.clock().now())
    }

    /// [`peek_key`](Self::peek_key) at `now`.
    ///
    /// # Errors
    /// As [`check_key_n`](Self::check_key_n).
    pub(crate) fn peek_key_at(
        &self,
        key: &K,
        n: u32,
        now: u64,
    ) -> Result<Result<Allowed, Refused>, InsufficientCapacity> {
        let (tag, algorithm) = self.locate(key);
        InsufficientCapacity::check(n, algorithm.capacity())?;
        let word = self
            .store
            .word(tag)
            .unwrap_or_else(|| algorithm.initial_word(now));
        if n == 0 {
            return Ok(Ok(algorithm.state(word, now)));
        }
        Ok(algorithm.peek(word, now, n))
    }

    /// Whether the table holds `key`'s bucket now, found as a decision finds it (lock-free when
    /// it is there; a miss is confirmed under the shard's lock): not before its first
    /// admission, nor after [`reset_key`](Self::reset_key) or its eviction, nor for a key
    /// admitted untracked ([`WhenFull::AdmitUntracked`]).
    pub fn contains_key(&self, key: &K) -> bool {
        self.store.word(self.locate(key).0).is_some()
    }

    /// Forgets `key`'s bucket: its next request finds a new one, as [`Quota::initial`](crate::Quota::initial) says.
    /// Whether the table held the key.
    pub fn reset_key(&self, key: &K) -> bool {
        self.store.remove(self.locate(key).0)
    }

    /// The key's tag and the algorithm of its tier.
    #[inline(always)]
    pub(super) fn locate(&self, key: &K) -> (Tag, &A) {
        let hash = self.hasher.hash_one(key);
        let tiers = &self.tiers.algorithms;
        let tier = match &self.classify {
            None => 0,
            Some(classify) => Some(classify(key))
                .filter(|&tier| tier < tiers.len())
                .unwrap_or(0),
        };
        let tag = Store::<C>::tag(hash & !self.tiers.mask | tier as u64);
        (tag, &tiers[tier])
    }

    /// Decides `n` cells for the bucket `tag`, whose algorithm is `algorithm`, at the reading
    /// `now()`; `wrote` as [`Store::decide`] says.
    #[inline(always)]
    pub(super) fn decide(
        &self,
        tag: Tag,
        algorithm: &A,
        n: u32,
        now: impl FnOnce() -> u64,
        wrote: &mut Wrote,
    ) -> Result<Allowed, Refused> {
        let clamp = || self.store.catch_up(tag, &self.tiers);
        self.store
            .decide(tag, (algorithm, &self.tiers), (n, clamp), now, wrote)
    }
}

/// # Eviction and size
impl<K: ?Sized + Hash, C: Clock, A: Algorithm> KeyedRateLimiter<K, C, A> {
    /// Keys held now (takes each shard's lock in turn).
    pub fn len(&self) -> usize {
        self.stats().keys
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The shard `key` lives in (for diagnostics: shard balance, and tests of the hash seed).
    pub fn shard_of(&self, key: &K) -> usize {
        self.store.table().shard_index(self.locate(key).0)
    }

    /// Where `key`'s bucket is now, as (shard, slot), if the table holds it (tests of the
    /// table's moves, and the loom models).
    #[cfg(any(test, flowgate_loom))]
    pub fn position_of(&self, key: &K) -> Option<(usize, usize)> {
        self.store.table().position_of(self.locate(key).0)
    }

    /// `key`'s home: the (shard, slot) its probe starts from (tests, and the loom models).
    #[cfg(any(test, flowgate_loom))]
    pub fn home_of(&self, key: &K) -> (usize, usize) {
        let tag = self.locate(key).0;
        let table = self.store.table();
        (table.shard_index(tag), table.home(tag))
    }

    /// The table's sizes, and what it has done so far (takes each shard's lock in turn).
    pub fn stats(&self) -> KeyedStats {
        self.store.stats()
    }

    /// The limiter's clock, which its decisions read.
    pub fn clock(&self) -> &C {
        self.store.clock()
    }
}

impl<K: ?Sized, C: Clock + fmt::Debug, A: Algorithm + fmt::Debug> fmt::Debug
    for KeyedRateLimiter<K, C, A>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let table = self.store.table();
        f.debug_struct("KeyedRateLimiter")
            .field("tiers", &self.tiers.algorithms)
            .field("max_keys", &table.max_keys())
            .field("shards", &table.shards().len())
            .field("when_full", &self.store.when_full())
            .field("new_keys", &self.store.new_keys())
            .field("clock", self.store.clock())
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(flowgate_loom)))]
mod tests;
