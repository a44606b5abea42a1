//! [`Policy`] and [`PoliciesBuilder`]: what a policy set is made of, validated once by
//! [`PoliciesBuilder::build`].

use core::fmt;
use core::hash::Hash;
use core::time::Duration;

use crossbeam_utils::CachePadded;

use super::error::BuildError;
use super::key::{Extract, Key};
use super::layer::{Buckets, Layer, Place};
use super::rules::Rules;
use super::{Policies, MAX_QUOTAS};
use crate::algorithm::{Algorithm, AnyAlgorithm};
use crate::cell::Cell;
use crate::clock::{Clock, QuantaClock};
use crate::keyed::{self, Options, Store, WhenFull};
use crate::observe::{QuotaMetrics, TableMetrics};
use crate::outcome::PolicyQuota;
use crate::primitive::AtomicU64;
use crate::quota::Quota;

/// Keys a keyed policy's tables hold unless told otherwise.
pub const DEFAULT_POLICY_KEYS: usize = 1 << 16;

/// One named policy: a key extractor (or none, for a global policy), its quotas, and how it
/// behaves. Add it to a set with [`PoliciesBuilder::policy`].
#[must_use = "a policy does nothing until a set is given it (`PoliciesBuilder::policy`)"]
pub struct Policy<R: ?Sized> {
    pub(crate) name: String,
    pub(crate) extract: Option<Extract<R>>,
    pub(crate) quotas: Vec<AnyAlgorithm>,
    pub(crate) dry_run: bool,
    pub(crate) jitter: (Duration, Duration),
    pub(crate) max_keys: usize,
    pub(crate) when_full: WhenFull,
}

impl<R: ?Sized> Policy<R> {
    /// A policy every request goes through, sharing one bucket per quota (a server-wide limit).
    pub fn global(name: impl Into<String>) -> Self {
        Self::with_extract(name.into(), None)
    }

    /// A policy with one bucket per key, the key being a part of the request the closure
    /// borrows (a user name, an endpoint, an address).
    ///
    /// ```
    /// use flowgate::policy::Policy;
    /// struct Request { user: String }
    /// let per_user = Policy::keyed("per-user", |r: &Request| &r.user);
    /// ```
    pub fn keyed<T, F>(name: impl Into<String>, key: F) -> Self
    where
        T: Hash + ?Sized,
        F: for<'a> Fn(&'a R) -> &'a T + Send + Sync + 'static,
    {
        let extract = move |request: &R, k: &mut Key| {
            k.add(key(request));
        };
        Self::with_extract(name.into(), Some(Box::new(extract)))
    }

    /// A policy with one bucket per key, the key being whatever the closure adds to [`Key`]:
    /// several parts (user and endpoint), computed parts, or none ([`Key::skip`]: the policy
    /// does not apply to that request).
    pub fn keyed_with<F>(name: impl Into<String>, key: F) -> Self
    where
        F: Fn(&R, &mut Key<'_>) + Send + Sync + 'static,
    {
        Self::with_extract(name.into(), Some(Box::new(key)))
    }

    /// A policy like this one (its dry run, jitter and table settings) under `name`, keyed by
    /// `extract` (global if `None`), without quotas: what a backend builds its own policies
    /// from (a Redis set's local fallback, keyed by the Redis keys).
    pub fn like<T: ?Sized>(&self, name: String, extract: Option<Extract<T>>) -> Policy<T> {
        Policy {
            name,
            extract,
            quotas: Vec::new(),
            dry_run: self.dry_run,
            jitter: self.jitter,
            max_keys: self.max_keys,
            when_full: self.when_full,
        }
    }

    fn with_extract(name: String, extract: Option<Extract<R>>) -> Self {
        Self {
            name,
            extract,
            quotas: Vec::new(),
            dry_run: false,
            jitter: (Duration::ZERO, Duration::ZERO),
            max_keys: DEFAULT_POLICY_KEYS,
            when_full: WhenFull::Refuse,
        }
    }

    /// Adds a quota, enforced with GCRA: a request must conform to every quota of the policy.
    pub fn quota(self, quota: Quota) -> Self {
        self.quota_with(quota)
    }

    /// Adds several quotas, each enforced with GCRA.
    pub fn quotas(mut self, quotas: impl IntoIterator<Item = Quota>) -> Self {
        self.quotas
            .extend(quotas.into_iter().map(AnyAlgorithm::from));
        self
    }

    /// Adds a quota enforced with any one-word algorithm: a fixed window for a daily count, a
    /// sliding window counter for a login route, a leaky-bucket shaper whose admissions carry
    /// a delay. `"20000/day fixed".parse()` gives one from text (see [`AnyAlgorithm`]).
    ///
    /// ```
    /// use flowgate::algorithm::{FixedWindow, SlidingWindow};
    /// use flowgate::policy::Policy;
    ///
    /// struct Login { user: String }
    /// let per_user = Policy::keyed("login", |r: &Login| &r.user)
    ///     .quota_with(SlidingWindow::new(&"5/min".parse()?)?)
    ///     .quota_with(FixedWindow::new(&"20/day".parse()?)?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn quota_with(mut self, algorithm: impl Into<AnyAlgorithm>) -> Self {
        self.quotas.push(algorithm.into());
        self
    }

    /// Dry-run mode: evaluated and counted, never refusing (see the
    /// [module docs](super#dry-runs)).
    pub fn dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }

    /// Adds a uniform random jitter in `[min, max]` to the retry-after of this policy's
    /// refusals, so that refused clients do not all come back at once (a minimum and maximum
    /// retry-after, as ASP.NET rate-limiting samples configure them). None by default.
    pub fn jitter(mut self, min: Duration, max: Duration) -> Self {
        self.jitter = (min, max);
        self
    }

    /// The most keys each of a keyed policy's tables holds (65 536 unless set); see
    /// [`Builder::max_keys`](crate::Builder::max_keys).
    pub fn max_keys(mut self, max_keys: usize) -> Self {
        self.max_keys = max_keys;
        self
    }

    /// What a keyed policy does with a new key when its table is full; see [`WhenFull`].
    pub fn when_full(mut self, when_full: WhenFull) -> Self {
        self.when_full = when_full;
        self
    }

    /// The policy's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its quotas' algorithms, in order.
    pub fn algorithms(&self) -> &[AnyAlgorithm] {
        &self.quotas
    }

    /// Whether it is a dry run; whether it is keyed; its retry-after jitter `(min, max)`.
    pub fn settings(&self) -> (bool, bool, (Duration, Duration)) {
        (self.dry_run, self.extract.is_some(), self.jitter)
    }
}

impl<R: ?Sized> fmt::Debug for Policy<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Policy")
            .field("name", &self.name)
            .field("keyed", &self.extract.is_some())
            .field("quotas", &self.quotas)
            .field("dry_run", &self.dry_run)
            .field("jitter", &self.jitter)
            .field("max_keys", &self.max_keys)
            .field("when_full", &self.when_full)
            .finish()
    }
}

/// Builds a [`Policies`] set: the policies in evaluation order, and the clock.
#[must_use = "a builder does nothing until it builds a set (`build`, or `build_redis` of flowgate-redis)"]
pub struct PoliciesBuilder<R: ?Sized, C: Clock = QuantaClock> {
    policies: Vec<Policy<R>>,
    clock: C,
    hash_seed: Option<u64>,
}

impl<R: ?Sized> PoliciesBuilder<R, QuantaClock> {
    pub(crate) fn new() -> Self {
        Self {
            policies: Vec::new(),
            clock: QuantaClock::new(),
            hash_seed: None,
        }
    }
}

impl<R: ?Sized, C: Clock> PoliciesBuilder<R, C> {
    /// Decides on `clock` (a [`ManualClock`](crate::clock::ManualClock) in tests).
    pub fn clock<C2: Clock>(self, clock: C2) -> PoliciesBuilder<R, C2> {
        PoliciesBuilder {
            policies: self.policies,
            clock,
            hash_seed: self.hash_seed,
        }
    }

    /// Appends a policy: policies are evaluated in the order they are added.
    pub fn policy(mut self, policy: Policy<R>) -> Self {
        self.policies.push(policy);
        self
    }

    /// Fixes the keyed policies' hash seed (see
    /// [`Builder::hash_seed`](crate::Builder::hash_seed)); random by default.
    pub fn hash_seed(mut self, seed: u64) -> Self {
        self.hash_seed = Some(seed);
        self
    }

    /// The policy set.
    ///
    /// # Errors
    /// [`BuildError`]: no policy, a policy without a name or quotas, two policies with one
    /// name, more than [`MAX_QUOTAS`] quotas in all, a jitter whose minimum is above its maximum
    /// or beyond 292 years, or a keyed policy whose table cannot be built.
    pub fn build(self) -> Result<Policies<R, C>, BuildError>
    where
        C: Clone,
    {
        let now = self.clock.now();
        let hash_seed = self.hash_seed;
        let (policies, clock) = self.into_checked()?;
        let rules = policies.iter().flat_map(|(p, _)| p.quotas.iter().copied());
        let rules = Rules::new(rules.collect());
        let mut layers: Vec<Layer<R, C>> = Vec::with_capacity(policies.len());
        let mut first = 0;
        for (index, (policy, jitter)) in policies.into_iter().enumerate() {
            let quotas = policy.quotas.len();
            layers.push(layer(
                policy,
                (index, first, jitter),
                now,
                &clock,
                hash_seed,
            )?);
            first += quotas;
        }
        Ok(Policies {
            layers: layers.into_boxed_slice(),
            rules,
            clock,
        })
    }

    /// The policies and the clock, once every rule that holds on any backend is checked (as
    /// [`build`](Self::build) checks them): what a backend that keeps buckets elsewhere builds
    /// from.
    ///
    /// # Errors
    /// The [`BuildError`] [`build`](Self::build) would return for a set invalid anywhere.
    pub fn into_policies(self) -> Result<(Vec<Policy<R>>, C), BuildError> {
        let (checked, clock) = self.into_checked()?;
        Ok((
            checked.into_iter().map(|(policy, _)| policy).collect(),
            clock,
        ))
    }

    /// The policies, each with its jitter in ns, and the clock, once every rule that holds on
    /// any backend is checked: at least one policy, each named (uniquely) and with quotas, at
    /// most [`MAX_QUOTAS`] in all, and jitters that fit.
    pub(crate) fn into_checked(self) -> Result<(Checked<R>, C), BuildError> {
        if self.policies.is_empty() {
            return Err(BuildError::NoPolicies);
        }
        let total: usize = self.policies.iter().map(|p| p.quotas.len()).sum();
        if total > MAX_QUOTAS {
            return Err(BuildError::TooManyQuotas { quotas: total });
        }
        let mut checked: Checked<R> = Vec::with_capacity(self.policies.len());
        for (index, policy) in self.policies.into_iter().enumerate() {
            if policy.name.is_empty() {
                return Err(BuildError::NoName { index });
            }
            if checked.iter().any(|(p, _)| p.name == policy.name) {
                return Err(BuildError::DuplicateName {
                    policy: policy.name,
                });
            }
            if policy.quotas.is_empty() {
                return Err(BuildError::NoQuotas {
                    policy: policy.name,
                });
            }
            let Some(jitter) = jitter_nanos(policy.jitter) else {
                return Err(BuildError::Jitter {
                    policy: policy.name,
                });
            };
            checked.push((policy, jitter));
        }
        Ok((checked, self.clock))
    }
}

/// A set's policies once checked, each with its jitter in ns.
pub(crate) type Checked<R> = Vec<(Policy<R>, (u64, u64))>;

/// Policy `index` of a set (checked, with its jitter in ns; its quotas' algorithms from
/// `first` on in the set's rules), with its buckets created at `now` on `clock`.
fn layer<R: ?Sized, C: Clock + Clone>(
    policy: Policy<R>,
    (index, first, jitter): (usize, usize, (u64, u64)),
    now: u64,
    clock: &C,
    hash_seed: Option<u64>,
) -> Result<Layer<R, C>, BuildError> {
    let places = (policy.quotas.iter().enumerate())
        .map(|(q, quota)| Place {
            by: PolicyQuota::intern(&policy.name, index, q),
            dry_run: policy.dry_run,
            metrics: QuotaMetrics::new(&policy.name, &quota.to_string()),
        })
        .collect();
    let name = policy.name.as_str().into();
    let dry_run = policy.dry_run;
    let buckets = buckets(policy, now, clock, hash_seed)?;
    Ok(Layer {
        name,
        dry_run,
        jitter,
        first,
        places,
        buckets,
        refused: CachePadded::new(AtomicU64::new(0)),
    })
}

/// Where `policy`'s buckets will live, created at `now`: a cell per quota, or a store per quota
/// keyed by the policy's extractor (the stores of one policy share its key hash; their close
/// nonces come from it too, as unknown outside the process as the hash).
fn buckets<R: ?Sized, C: Clock + Clone>(
    policy: Policy<R>,
    now: u64,
    clock: &C,
    hash_seed: Option<u64>,
) -> Result<Buckets<R, C>, BuildError> {
    let Some(extract) = policy.extract else {
        let cells = policy.quotas.iter();
        let cells = cells.map(|q| CachePadded::new(Cell::new(q.initial_word(now))));
        return Ok(Buckets::Global(cells.collect()));
    };
    let hasher = keyed::hasher(hash_seed);
    let stores = (0..policy.quotas.len())
        .map(|q| {
            let options = Options {
                max_keys: policy.max_keys,
                shards: None,
                when_full: policy.when_full,
                new_keys: None,
                metrics: TableMetrics::of_policy(&policy.name, &policy.quotas[q].to_string()),
            };
            let seed = hasher.hash_one((0x6e6f_6e63_6573_u64, q));
            Store::new(options, seed, clock.clone())
        })
        .collect::<Result<_, _>>()
        .map_err(|error| BuildError::Keyed {
            policy: policy.name.clone(),
            error,
        })?;
    Ok(Buckets::Keyed {
        extract,
        hasher,
        stores,
    })
}

/// A jitter range in nanoseconds, if `min ≤ max` and both fit in 292 years.
fn jitter_nanos((min, max): (Duration, Duration)) -> Option<(u64, u64)> {
    let min = u64::try_from(min.as_nanos()).ok()?;
    let max = u64::try_from(max.as_nanos()).ok()?;
    (min <= max && max <= crate::quota::MAX_WINDOW_NANOS).then_some((min, max))
}

impl<R: ?Sized, C: Clock + fmt::Debug> fmt::Debug for PoliciesBuilder<R, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoliciesBuilder")
            .field("policies", &self.policies)
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}
