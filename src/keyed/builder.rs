//! [`Builder`]: every option of a [`KeyedRateLimiter`], validated once by [`Builder::build`].

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;
use core::hash::Hash;
use core::marker::PhantomData;

use super::store::{KeyedError, Options, Store, MAX_TIERS};
use super::{Classify, KeyedRateLimiter, Tag, Tiers};
use crate::algorithm::{Algorithm, Gcra};
use crate::clock::Clock;
#[cfg(feature = "std")]
use crate::clock::QuantaClock;
use crate::observe::TableMetrics;
use crate::quota::Quota;

/// Keys a limiter holds unless told otherwise: 2²⁰, about 22 MB of table.
const DEFAULT_MAX_KEYS: usize = 1 << 20;

/// What a full table does with a request from a key it does not hold, when no idle key can make
/// room. Keys it holds are never affected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WhenFull {
    /// Refuse the request ([`Cause::TableFull`](crate::Cause::TableFull)). Safe for the quota,
    /// but during a flood of new keys, newcomers are locked out until keys go idle: pair it with
    /// a quota on new keys ([`Builder::new_keys`]) so that a flood fills the table only slowly.
    #[default]
    Refuse,
    /// Admit the request as a new bucket would, without keeping a bucket: the key's next request
    /// is a new key again. Nobody is locked out, but every untracked key gets a full burst per
    /// request; pair it with a quota on new keys ([`Builder::new_keys`]), which then caps
    /// untracked admissions too.
    AdmitUntracked,
}

/// A limiter's algorithms, one per tier, picked by the low bits of a key's tag.
#[derive(Debug)]
pub(super) struct TierSet<A> {
    pub(super) algorithms: Box<[A]>,
    /// The tag bits that hold the tier.
    pub(super) mask: u64,
}

impl<A: Algorithm> Tiers for TierSet<A> {
    type Algorithm = A;

    #[inline]
    fn with<R>(&self, tag: Tag, f: impl FnOnce(&A) -> R) -> R {
        let tier = (tag & self.mask) as usize;
        f(self.algorithms.get(tier).unwrap_or(&self.algorithms[0]))
    }
}

/// Options of a [`KeyedRateLimiter`], from [`KeyedRateLimiter::builder`].
///
/// ```
/// use flowgate::{clock::ManualClock, Gcra, KeyedRateLimiter, Quota, WhenFull};
///
/// let clock = ManualClock::new();
/// let limiter = KeyedRateLimiter::<str, _, _>::builder(Gcra::new(&Quota::per_second(5)?))
///     .tier(Gcra::new(&Quota::per_second(50)?)) // tier 1: premium keys
///     .classify(|key: &str| usize::from(key.starts_with("pro-")))
///     .max_keys(10_000)
///     .when_full(WhenFull::Refuse)
///     .new_keys(Quota::per_second(1_000)?)
///     .clock(clock.clone())
///     .build()?;
/// assert_eq!(limiter.check_key("free-1").unwrap().limit(), 5);
/// assert_eq!(limiter.check_key("pro-1").unwrap().limit(), 50);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "a builder does nothing until `build` is called"]
pub struct Builder<K: ?Sized, C, A> {
    tiers: Vec<A>,
    classify: Option<Classify<K>>,
    clock: C,
    max_keys: usize,
    when_full: WhenFull,
    new_keys: Option<Quota>,
    shards: Option<usize>,
    seed: Option<u64>,
    metrics: TableMetrics,
    key: PhantomData<fn(&K)>,
}

impl<K: ?Sized + Hash, C: Clock, A: Algorithm> Builder<K, C, A> {
    pub(super) fn new(algorithm: A, clock: C) -> Self {
        Self {
            tiers: vec![algorithm],
            classify: None,
            clock,
            max_keys: DEFAULT_MAX_KEYS,
            when_full: WhenFull::default(),
            new_keys: None,
            shards: None,
            seed: None,
            metrics: TableMetrics::none(),
            key: PhantomData,
        }
    }
}

impl<K: ?Sized + Hash, C: Clock, A: Algorithm> Builder<K, C, A> {
    /// The clock (default: `QuantaClock`, with the `std` feature).
    pub fn clock<C2: Clock>(self, clock: C2) -> Builder<K, C2, A> {
        Builder {
            tiers: self.tiers,
            classify: self.classify,
            clock,
            max_keys: self.max_keys,
            when_full: self.when_full,
            new_keys: self.new_keys,
            shards: self.shards,
            seed: self.seed,
            metrics: self.metrics,
            key: PhantomData,
        }
    }

    /// The most keys the table holds (default 2²⁰). The table is allocated for them at once:
    /// about 18.3 bytes per key for large tables, more for small ones (see the
    /// [`keyed` module docs](crate::keyed)).
    pub fn max_keys(mut self, max_keys: usize) -> Self {
        self.max_keys = max_keys;
        self
    }

    /// What to do with a new key when the table is full and nothing is idle (default
    /// [`WhenFull::Refuse`]).
    pub fn when_full(mut self, when_full: WhenFull) -> Self {
        self.when_full = when_full;
        self
    }

    /// A quota on creating keys: every request that would create a bucket (or, with
    /// [`WhenFull::AdmitUntracked`], be admitted without one) first takes a cell from this
    /// GCRA bucket, shared by all new keys; when it refuses, the request is refused with
    /// [`Cause::NewKeys`](crate::Cause::NewKeys) and nothing is created. It is asked only once
    /// the key is sure to get a bucket (there is room) or to be admitted untracked, so a refusal
    /// for a full table takes no cell from it.
    pub fn new_keys(mut self, quota: Quota) -> Self {
        self.new_keys = Some(quota);
        self
    }

    /// Adds a quota tier: tier 1 is the first added, and so on; tier 0 is the builder's
    /// algorithm. [`classify`](Self::classify) picks a key's tier. A key's tier is part of its
    /// identity: the same key in two tiers has two buckets.
    pub fn tier(mut self, algorithm: A) -> Self {
        self.tiers.push(algorithm);
        self
    }

    /// How to pick a key's tier (default: tier 0 for every key). An index without a tier picks
    /// tier 0. Called once per check, so it should be cheap, and it must give the same tier for
    /// the same key: a key given two tiers has two buckets, one per tier.
    pub fn classify(mut self, classify: impl Fn(&K) -> usize + Send + Sync + 'static) -> Self {
        self.classify = Some(Box::new(classify));
        self
    }

    /// The shard count, a power of two (default: four per available CPU, rounded up to a power
    /// of two, at most 256, and fewer if shards would hold fewer than 64 keys each). A count
    /// above `max_keys` is cut to `max_keys` rounded up to a power of two. More shards mean
    /// less lock contention on inserts, but each shard keeps room for its own spread, and a new
    /// key finds room only in its own shard (idle keys elsewhere wait for a sweep).
    pub fn shards(mut self, shards: usize) -> Self {
        self.shards = Some(shards);
        self
    }

    /// Seeds the key hash, for reproducible layouts (simulations, tests), or, in a build without
    /// `std`, from a random source of the caller's (a hardware RNG, a seed stored at
    /// provisioning): there [`build`](Self::build) fails without it
    /// ([`KeyedError::NoHashSeed`]). The default seed (with `std`) is random per limiter, so that
    /// nobody can choose keys that collide or crowd one shard; with a known seed, somebody can.
    pub fn hash_seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Reports the keys this limiter holds (`flowgate_keys`) and evicts
    /// (`flowgate_keys_evicted_total`) under the label `limiter = name`, through the `metrics`
    /// facade (feature `metrics`; without it, or without this call, nothing is reported).
    pub fn metrics_label(mut self, name: &str) -> Self {
        self.metrics = TableMetrics::of_limiter(name);
        self
    }

    /// Builds the limiter, allocating its table.
    ///
    /// # Errors
    /// [`KeyedError`] for a zero or impossible `max_keys`, more than 256 tiers, a shard
    /// count that is not a power of two, or (without `std`) no [`hash_seed`](Self::hash_seed).
    pub fn build(self) -> Result<KeyedRateLimiter<K, C, A>, KeyedError>
    where
        C: Clone,
    {
        if self.tiers.len() > MAX_TIERS {
            return Err(KeyedError::TooManyTiers);
        }
        if !cfg!(feature = "std") && self.seed.is_none() {
            return Err(KeyedError::NoHashSeed);
        }
        let hasher = hasher(self.seed);
        // The close nonces' seed, from the hasher: as unknown outside the process as the hash.
        let nonces = hasher.hash_one(0x6e6f_6e63_6573_u64);
        let options = Options {
            max_keys: self.max_keys,
            shards: self.shards,
            when_full: self.when_full,
            new_keys: self.new_keys,
            metrics: self.metrics,
        };
        let store = Store::new(options, nonces, self.clock)?;
        let tier_bits = usize::BITS - (self.tiers.len() - 1).leading_zeros();
        Ok(KeyedRateLimiter {
            store,
            tiers: TierSet {
                algorithms: self.tiers.into_boxed_slice(),
                mask: (1u64 << tier_bits) - 1,
            },
            classify: self.classify,
            hasher,
        })
    }
}

/// # Building
#[cfg(feature = "std")]
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

#[cfg(feature = "std")]
impl<K: ?Sized + Hash, A: Algorithm> KeyedRateLimiter<K, QuantaClock, A> {
    /// A builder of a limiter deciding with `algorithm` for every key (tier 0), on the default
    /// clock.
    pub fn builder(algorithm: A) -> Builder<K, QuantaClock, A> {
        Builder::new(algorithm, QuantaClock::new())
    }
}

impl<K: ?Sized + Hash, C: Clock, A: Algorithm> KeyedRateLimiter<K, C, A> {
    /// A builder of a limiter deciding with `algorithm` for every key (tier 0), on `clock`:
    /// what a build without `std` starts from, as it has no default clock (nor a random hash
    /// seed: give [`Builder::hash_seed`] too).
    ///
    /// ```
    /// use flowgate::{clock::ManualClock, Gcra, KeyedRateLimiter, Quota};
    ///
    /// let limiter = KeyedRateLimiter::<u64, _>::builder_with_clock(
    ///     Gcra::new(&Quota::per_second(1)?),
    ///     ManualClock::new(),
    /// )
    /// .max_keys(1_000)
    /// .hash_seed(0x5eed)
    /// .build()?;
    /// assert!(limiter.check_key(&7).is_ok());
    /// assert!(limiter.check_key(&7).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn builder_with_clock(algorithm: A, clock: C) -> Builder<K, C, A> {
        Builder::new(algorithm, clock)
    }
}

/// The key hasher: seeded with `seed` (reproducible), or at random (the default).
pub(crate) fn hasher(seed: Option<u64>) -> ahash::RandomState {
    match seed {
        Some(seed) => ahash::RandomState::with_seeds(
            seed,
            seed.rotate_left(16) ^ 0x243f_6a88_85a3_08d3,
            seed.rotate_left(32) ^ 0x1319_8a2e_0370_7344,
            seed.rotate_left(48) ^ 0xa409_3822_299f_31d0,
        ),
        None => ahash::RandomState::new(),
    }
}

impl<K: ?Sized, C: fmt::Debug, A: fmt::Debug> fmt::Debug for Builder<K, C, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("tiers", &self.tiers)
            .field("max_keys", &self.max_keys)
            .field("when_full", &self.when_full)
            .field("new_keys", &self.new_keys)
            .field("shards", &self.shards)
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}
