//! [`Policy`] and [`PoliciesBuilder`]: what a policy set is made of, validated once by
//! [`PoliciesBuilder::build`], and the [`PolicyError`]s that reject a bad one.

use core::fmt;
use core::hash::Hash;
use core::time::Duration;

use crossbeam_utils::CachePadded;

use super::key::{Extract, Key};
use super::layer::{Layer, Store, Table};
use super::live::LiveQuota;
use super::{Policies, MAX_QUOTAS};
use crate::algorithm::{Algorithm, Gcra};
use crate::cell::Cell;
use crate::clock::{Clock, QuantaClock};
use crate::keyed::{KeyedError, KeyedRateLimiter, WhenFull};
use crate::primitive::{AtomicU64, Mutex};
use crate::quota::Quota;

/// Keys a keyed policy's tables hold unless told otherwise.
pub const DEFAULT_POLICY_KEYS: usize = 1 << 16;

/// One named policy: a key extractor (or none, for a global policy), its quotas, and how it
/// behaves. Add it to a set with [`PoliciesBuilder::policy`].
pub struct Policy<R: ?Sized> {
    pub(crate) name: String,
    pub(crate) extract: Option<Extract<R>>,
    pub(crate) quotas: Vec<Quota>,
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
        F: Fn(&R, &mut Key) + Send + Sync + 'static,
    {
        Self::with_extract(name.into(), Some(Box::new(key)))
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

    /// Adds a quota: a request must conform to every quota of the policy.
    pub fn quota(mut self, quota: Quota) -> Self {
        self.quotas.push(quota);
        self
    }

    /// Adds several quotas.
    pub fn quotas(mut self, quotas: impl IntoIterator<Item = Quota>) -> Self {
        self.quotas.extend(quotas);
        self
    }

    /// Dry-run mode: evaluated and counted, never refusing (see the
    /// [module docs](super#dry-runs)).
    pub fn dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }

    /// Adds a uniform random jitter in `[min, max]` to the retry-after of this policy's
    /// refusals, so that refused clients do not all come back at once (the users' C# article's
    /// `MinRetryAfterMs` / `MaxRetryAfterMs`). None by default.
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
    /// [`PolicyError`]: no policy, a policy without a name or quotas, two policies with one
    /// name, more than [`MAX_QUOTAS`] quotas in all, a jitter whose minimum is above its maximum
    /// or beyond 292 years, or a keyed policy whose table cannot be built.
    pub fn build(self) -> Result<Policies<R, C>, PolicyError>
    where
        C: Clone,
    {
        if self.policies.is_empty() {
            return Err(PolicyError::NoPolicies);
        }
        let total: usize = self.policies.iter().map(|p| p.quotas.len()).sum();
        if total > MAX_QUOTAS {
            return Err(PolicyError::TooManyQuotas { quotas: total });
        }
        let now = self.clock.now();
        let mut layers = Vec::with_capacity(self.policies.len());
        for (index, policy) in self.policies.into_iter().enumerate() {
            if policy.name.is_empty() {
                return Err(PolicyError::NoName { index });
            }
            if layers.iter().any(|l: &Layer<R, C>| *l.name == *policy.name) {
                return Err(PolicyError::DuplicateName {
                    policy: policy.name,
                });
            }
            if policy.quotas.is_empty() {
                return Err(PolicyError::NoQuotas {
                    policy: policy.name,
                });
            }
            let jitter = match jitter_nanos(policy.jitter) {
                Some(jitter) => jitter,
                None => {
                    return Err(PolicyError::Jitter {
                        policy: policy.name,
                    })
                }
            };
            let store = match policy.extract {
                None => Store::Global(
                    policy
                        .quotas
                        .iter()
                        .map(|q| CachePadded::new(Cell::new(Gcra::new(q).initial_word(now))))
                        .collect(),
                ),
                Some(extract) => {
                    let tables = policy
                        .quotas
                        .iter()
                        .enumerate()
                        .map(|(index, q)| {
                            let mut builder = KeyedRateLimiter::<(), _, _>::builder(Gcra::new(q))
                                .clock(self.clock.clone())
                                .max_keys(policy.max_keys)
                                .when_full(policy.when_full)
                                .policy_metrics(&policy.name, index);
                            if let Some(seed) = self.hash_seed {
                                builder = builder.hash_seed(seed);
                            }
                            builder.build()
                        })
                        .collect::<Result<Box<[Table<C>]>, _>>()
                        .map_err(|error| PolicyError::Keyed {
                            policy: policy.name.clone(),
                            error,
                        })?;
                    let hasher = match self.hash_seed {
                        Some(seed) => ahash::RandomState::with_seeds(seed, !seed, seed ^ 1, 7),
                        None => ahash::RandomState::new(),
                    };
                    Store::Keyed {
                        extract,
                        hasher,
                        tables,
                    }
                }
            };
            let quotas = (policy.quotas.iter().enumerate())
                .map(|(q, quota)| {
                    LiveQuota::new(quota, &policy.name, (layers.len(), q), policy.dry_run)
                })
                .collect();
            layers.push(Layer {
                name: policy.name.into_boxed_str(),
                dry_run: policy.dry_run,
                jitter,
                quotas,
                store,
                refused: CachePadded::new(AtomicU64::new(0)),
            });
        }
        Ok(Policies {
            layers: layers.into_boxed_slice(),
            clock: self.clock,
            replacing: Mutex::new(()),
        })
    }
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

/// Why a policy set could not be built, or a replacement was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PolicyError {
    /// The set has no policy.
    NoPolicies,
    /// The policy at `index` has an empty name.
    NoName {
        /// Its place in the set.
        index: usize,
    },
    /// Two policies have this name.
    DuplicateName {
        /// The name.
        policy: String,
    },
    /// The policy has no quota.
    NoQuotas {
        /// The policy.
        policy: String,
    },
    /// More than [`MAX_QUOTAS`] quotas over all policies.
    TooManyQuotas {
        /// How many there were.
        quotas: usize,
    },
    /// The policy's jitter has its minimum above its maximum, or lasts more than 292 years.
    Jitter {
        /// The policy.
        policy: String,
    },
    /// A keyed policy's table could not be built.
    Keyed {
        /// The policy.
        policy: String,
        /// Why.
        error: KeyedError,
    },
    /// No policy has this name.
    UnknownPolicy {
        /// The name asked for.
        policy: String,
    },
    /// A replacement must keep the policy's number of quotas.
    QuotaCount {
        /// The policy.
        policy: String,
        /// Its number of quotas.
        expected: usize,
        /// The number given.
        found: usize,
    },
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoPolicies => f.write_str("a policy set needs at least one policy"),
            Self::NoName { index } => write!(f, "policy #{index} has an empty name"),
            Self::DuplicateName { policy } => write!(f, "two policies are named '{policy}'"),
            Self::NoQuotas { policy } => write!(f, "policy '{policy}' has no quota"),
            Self::TooManyQuotas { quotas } => write!(
                f,
                "{quotas} quotas in all; a policy set holds at most {MAX_QUOTAS}"
            ),
            Self::Jitter { policy } => write!(
                f,
                "policy '{policy}': the jitter's minimum is above its maximum, or it is longer \
                 than 292 years"
            ),
            Self::Keyed { policy, error } => write!(f, "policy '{policy}': {error}"),
            Self::UnknownPolicy { policy } => write!(f, "no policy is named '{policy}'"),
            Self::QuotaCount {
                policy,
                expected,
                found,
            } => write!(
                f,
                "policy '{policy}' has {expected} quotas; a replacement must give as many, not \
                 {found}"
            ),
        }
    }
}

impl std::error::Error for PolicyError {}
