//! [`Store`]: a bounded table of tagged bucket words, with the rule for a full table and the
//! quota on new keys. It speaks tags, not keys: a keyed limiter hashes its keys into tags, a
//! policy derives its own, and both ask the same store, passing the algorithm each bucket runs
//! ([`Tiers`]).
//!
//! This is the surface the keyed limiter and the policies share; nothing else of the table is
//! visible outside `keyed`. A key the lock-free probe misses is created in [`insert`].

mod insert;

use core::fmt;

use super::slot::{Slot, Tag, FIRST_TAG};
use super::table::{SizeError, Table};
use super::WhenFull;
use crate::algorithm::{Algorithm, Gcra, Step};
use crate::cell::{recording, Wrote};
use crate::clock::Clock;
use crate::limiter::RateLimiter;
use crate::observe::TableMetrics;
use crate::outcome::{Allowed, Refused};
use crate::quota::Quota;

/// Most quota tiers (the tier takes the low bits of a key's tag).
pub(crate) const MAX_TIERS: usize = 256;

/// Why a [`Builder`](super::Builder) could not build a limiter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyedError {
    /// `max_keys` was 0.
    NoKeys,
    /// `max_keys` above 2⁴⁰, or a table that could not be allocated.
    TooManyKeys {
        /// The `max_keys` asked for.
        max_keys: usize,
    },
    /// More than 256 quota tiers.
    TooManyTiers,
    /// A shard count that is 0 or not a power of two.
    Shards {
        /// The shard count asked for.
        shards: usize,
    },
    /// Built without the `std` feature and without [`Builder::hash_seed`](super::Builder::hash_seed): there is no
    /// randomness source to seed the key hash from, and a hash seeded the same in every build
    /// would let anyone choose keys that share buckets or crowd one shard.
    NoHashSeed,
}

impl fmt::Display for KeyedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoKeys => write!(f, "a keyed limiter needs max_keys of at least 1"),
            Self::TooManyKeys { max_keys } => write!(
                f,
                "a table for {max_keys} keys cannot be allocated (at most 2^40 keys, 16 bytes \
                 per slot)"
            ),
            Self::TooManyTiers => write!(f, "at most {MAX_TIERS} quota tiers"),
            Self::Shards { shards } => {
                write!(f, "the shard count must be a power of two, not {shards}")
            }
            Self::NoHashSeed => write!(
                f,
                "without the std feature a keyed limiter needs a random hash seed from the \
                 caller (Builder::hash_seed)"
            ),
        }
    }
}

impl core::error::Error for KeyedError {}
/// Most keys: 2⁴⁰ (a table of about 23 TB), far beyond any machine, to keep sizes in range.
const MAX_KEYS: usize = 1 << 40;
/// Fewest keys per shard when the shard count is chosen automatically.
const MIN_KEYS_PER_SHARD: usize = 64;
/// Most shards chosen automatically.
const MAX_AUTO_SHARDS: usize = 256;

/// The algorithm each bucket of a store runs, by its tag: what a store asks on its cold paths
/// (a key it must create, a bucket it must clamp after a clock step) and when it judges other
/// keys idle (to reuse their slots, or in a sweep).
pub(crate) trait Tiers {
    /// The algorithm type.
    type Algorithm: Algorithm;

    /// Calls `f` with the algorithm of the bucket `tag`.
    fn with<R>(&self, tag: Tag, f: impl FnOnce(&Self::Algorithm) -> R) -> R;
}

/// One algorithm for every bucket of a store (a policy's quota, read once for a cold path or a
/// sweep).
pub(crate) struct One<'a, A>(pub(crate) &'a A);

impl<A: Algorithm> Tiers for One<'_, A> {
    type Algorithm = A;

    #[inline(always)]
    fn with<R>(&self, _tag: Tag, f: impl FnOnce(&A) -> R) -> R {
        f(self.0)
    }
}

/// A keyed table's sizes, and counters of what it has done, summed over its shards.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct KeyedStats {
    /// Keys held now.
    pub keys: usize,
    /// The most keys the table holds.
    pub max_keys: usize,
    /// Slots in the table: a [`sweep`](crate::KeyedRateLimiter::sweep) of this many visits them
    /// all.
    pub slots: usize,
    /// Shards in the table.
    pub shards: usize,
    /// Bytes of the table: slots and shard headers, all allocated at construction (the
    /// limiter's algorithms and clock are not counted).
    pub memory_bytes: usize,
    /// Keys inserted since the limiter was built.
    pub created: u64,
    /// Idle keys forgotten to make room or by sweeps.
    pub evicted: u64,
    /// Requests from new keys admitted without a bucket ([`WhenFull::AdmitUntracked`]).
    pub untracked: u64,
    /// Requests from new keys refused because the table was full ([`WhenFull::Refuse`]).
    pub refused_full: u64,
}

/// A bucket a lock-free probe found ([`Store::find`]). Its slot may stop holding the key at any
/// time (an eviction, a move): [`update`](Found::update) then answers `None`.
pub(crate) struct Found<'a> {
    slot: &'a Slot,
    tag: Tag,
}

impl Found<'_> {
    /// Applies `step` to the bucket's word through the cell's loop (see `keyed::slot`); `None`
    /// if the slot stopped holding the key.
    #[inline(always)]
    pub(crate) fn update<T>(&self, step: impl FnMut(u64) -> Step<T>) -> Option<T> {
        self.slot.update(self.tag, step)
    }
}

/// How a store is sized and what it does with new keys.
pub(crate) struct Options {
    pub(crate) max_keys: usize,
    /// A power of two, or `None` for the default (four per CPU).
    pub(crate) shards: Option<usize>,
    pub(crate) when_full: WhenFull,
    pub(crate) new_keys: Option<Quota>,
    pub(crate) metrics: TableMetrics,
}

/// The buckets of a keyed limiter or of one quota of a keyed policy; see the
/// [module docs](self) and the [`keyed` module docs](super) for the table's guarantees.
pub(crate) struct Store<C: Clock> {
    table: Table,
    when_full: WhenFull,
    new_keys: Option<RateLimiter<C, Gcra>>,
    clock: C,
}

impl<C: Clock> Store<C> {
    /// A store sized by `options`, its close nonces seeded by `seed` (which should be as
    /// unknown outside the process as the key hash).
    ///
    /// # Errors
    /// [`KeyedError`] for a zero or impossible `max_keys`, or a shard count that is not a
    /// power of two.
    pub(crate) fn new(options: Options, seed: u64, clock: C) -> Result<Self, KeyedError>
    where
        C: Clone,
    {
        let max_keys = options.max_keys;
        if max_keys == 0 {
            return Err(KeyedError::NoKeys);
        }
        if max_keys > MAX_KEYS {
            return Err(KeyedError::TooManyKeys { max_keys });
        }
        let (shards, min_per_shard) = match options.shards {
            Some(shards) if !shards.is_power_of_two() || shards > MAX_KEYS => {
                return Err(KeyedError::Shards { shards })
            }
            Some(shards) => (shards.min(max_keys.next_power_of_two()), 1),
            None => (default_shards(), MIN_KEYS_PER_SHARD),
        };
        let table = Table::new(max_keys, shards, min_per_shard, seed, options.metrics)
            .map_err(|SizeError::TooLarge| KeyedError::TooManyKeys { max_keys })?;
        Ok(Self {
            table,
            when_full: options.when_full,
            new_keys: options
                .new_keys
                .map(|quota| RateLimiter::with_clock(quota, clock.clone())),
            clock,
        })
    }

    /// The tag of a key whose hash (tier bits included) is `hash`: hashes below [`FIRST_TAG`]
    /// (only 0 and 1, with tier 0) join bit 62's keys.
    #[inline(always)]
    pub(crate) fn tag(hash: u64) -> Tag {
        if hash < FIRST_TAG {
            hash | 1 << 62
        } else {
            hash
        }
    }

    /// Decides `n` cells (`1 ≤ n ≤ capacity`) for the bucket `tag` with `algorithm` at the
    /// reading `now()`, taken after the probe for the key's slot has issued its loads (so that
    /// the clock read overlaps a miss on the slot). `wrote` ends up holding the bucket's word
    /// before and after the decision's write, if it wrote one, for [`restore`](Self::restore).
    ///
    /// `algorithm` serves the lock-free path only, so that its fields can stay in registers;
    /// the cold path (a key the table does not hold, created here) asks `tiers` for the
    /// bucket's algorithm (the same one: a policy passes its one reading of the quota for
    /// both). `clamp` is called after a refusal that found the bucket booked further ahead
    /// than the reading explains: [`catch_up`](Self::catch_up) with the same algorithm for a
    /// keyed limiter; a policy clamps with its quota as it is then, which may have been
    /// replaced since the decision read it.
    ///
    /// One function, not a clamping wrapper around a non-clamping one: nested, the keyed check
    /// compiled to about 40 more instructions, and a caller clamping after it moved the answer.
    #[inline(always)]
    pub(crate) fn decide<A: Algorithm, T: Tiers>(
        &self,
        tag: Tag,
        (algorithm, tiers): (&A, &T),
        (n, clamp): (u32, impl FnOnce()),
        now: impl FnOnce() -> u64,
        wrote: &mut Wrote,
    ) -> Result<Allowed, Refused> {
        let found = self.find(tag);
        let now = now();
        // Recorded here, not through `wrote`: a caller that ignores the words (a plain check)
        // then stores nothing, since only the cold path below would otherwise see them.
        let mut words = None;
        let answer = match found.and_then(|f| f.update(recording(algorithm, now, n, &mut words))) {
            Some(answer) => answer,
            // A lock-free attempt that lost the slot (closed or moved) left words never written:
            // the insert's replace them, through a local of this branch, so that `words` never
            // escapes the inlined hot path (nor is the answer moved out of a returned pair).
            None => {
                let mut inserted = None;
                let answer = self.insert(tag, tiers, (now, n), &mut inserted);
                words = inserted;
                answer
            }
        };
        *wrote = words;
        if let Err(refused) = &answer {
            if refused.clock_behind() {
                clamp();
            }
        }
        answer
    }

    /// Starts loading the bucket `tag`'s home line into the caches (see `Table::prefetch`).
    #[inline(always)]
    pub(crate) fn prefetch(&self, tag: Tag) {
        self.table.prefetch(tag);
    }

    /// The bucket `tag`, if a lock-free probe finds it. Not finding it is no proof of absence (a
    /// key being moved): [`decide`](Self::decide) looks again under the shard's lock.
    #[inline(always)]
    pub(crate) fn find(&self, tag: Tag) -> Option<Found<'_>> {
        let slot = self.table.find(tag)?;
        Some(Found { slot, tag })
    }

    /// After a refusal flagged "clock behind" (by a decision, or by a peek at
    /// [`word`](Self::word)), clamps the bucket `tag` against a fresh reading of the store's
    /// clock with its algorithm in `tiers`, as a single limiter does.
    #[cold]
    #[inline(never)]
    pub(crate) fn catch_up<T: Tiers>(&self, tag: Tag, tiers: &T) {
        let skew = self.clock.skew_nanos();
        if let Some(slot) = self.table.find(tag) {
            tiers.with(tag, |algorithm| {
                // The clock is read inside, after each Acquire load of the word (see `cell`).
                slot.clamp(tag, |word| algorithm.catch_up(word, self.clock.now(), skew));
            });
        }
    }

    /// Applies `step` to the bucket `tag` if the table holds it (exact: a miss is confirmed
    /// under the shard's lock); `None` if it does not. Creates nothing.
    pub(crate) fn update<T>(&self, tag: Tag, mut step: impl FnMut(u64) -> Step<T>) -> Option<T> {
        if let Some(answer) = self.table.find(tag).and_then(|s| s.update(tag, &mut step)) {
            return Some(answer);
        }
        // Moving, or absent: nothing moves while the lock is held.
        let held = self.table.shard(tag).lock();
        self.table
            .find_locked(&held, tag)
            .and_then(|slot| slot.update(tag, step))
    }

    /// The word of the bucket `tag`, if the table holds it.
    pub(crate) fn word(&self, tag: Tag) -> Option<u64> {
        self.update(tag, Step::Keep)
    }

    /// Undoes a write of [`decide`](Self::decide): puts `before` back if the bucket `tag` still
    /// holds `after`, following the key if the table moved it. Whether it did; a bucket that
    /// changed since (another request built on the write) or went away is left alone.
    pub(crate) fn restore(&self, tag: Tag, before: u64, after: u64) -> bool {
        if let Some(done) = self
            .table
            .find(tag)
            .and_then(|slot| slot.restore(tag, after, before))
        {
            return done;
        }
        // Moving, or moved: nothing moves while the lock is held.
        let held = self.table.shard(tag).lock();
        self.table
            .find_locked(&held, tag)
            .and_then(|slot| slot.restore(tag, after, before))
            .unwrap_or(false)
    }

    /// Forgets the bucket `tag`; whether the table held it.
    pub(crate) fn remove(&self, tag: Tag) -> bool {
        let shard = self.table.shard(tag);
        let mut held = shard.lock();
        self.table.remove(shard, &mut held, tag)
    }

    /// Visits the next `budget` slots of the table (continuing where the last sweep stopped,
    /// and wrapping around) and forgets the buckets idle at the reading `now()` (one per step
    /// of 256 slots) by their algorithm in `tiers`; returns how many.
    pub(crate) fn sweep<T: Tiers>(&self, budget: usize, tiers: &T, now: impl Fn() -> u64) -> usize {
        let mut evicted = 0;
        for (shard, range) in self.table.claim_sweep(budget) {
            let now = now();
            let mut held = shard.lock();
            let idle = |tag: Tag, word: u64| tiers.with(tag, |a| a.is_idle(word, now));
            evicted += self.table.sweep_shard(shard, &mut held, range, idle);
        }
        evicted
    }

    /// What the table has done so far (takes each shard's lock in turn).
    pub(crate) fn stats(&self) -> KeyedStats {
        let mut stats = KeyedStats {
            max_keys: self.table.max_keys(),
            slots: self.table.slots(),
            shards: self.table.shards().len(),
            memory_bytes: self.table.memory_bytes(),
            ..KeyedStats::default()
        };
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

    /// The table: its sizes and layout.
    pub(crate) fn table(&self) -> &Table {
        &self.table
    }

    /// The store's clock (fresh readings for clamps, the quota on new keys).
    pub(crate) fn clock(&self) -> &C {
        &self.clock
    }

    /// What a full table does with a new key.
    pub(crate) fn when_full(&self) -> WhenFull {
        self.when_full
    }

    /// The quota on new keys, if there is one.
    pub(crate) fn new_keys(&self) -> Option<&Quota> {
        self.new_keys.as_ref().map(RateLimiter::quota)
    }
}

/// Four shards per available CPU, as a power of two, at most 256.
#[cfg(feature = "std")]
fn default_shards() -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cpus * 4).next_power_of_two().min(MAX_AUTO_SHARDS)
}

/// Without `std` there is no CPU count to ask: four shards, what a single-core machine gets
/// (a multi-core one without `std` sets [`shards`](crate::keyed::Builder::shards)).
#[cfg(not(feature = "std"))]
fn default_shards() -> usize {
    4
}
