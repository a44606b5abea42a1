//! [`Policy`]: one named policy of a set, as a user describes it (its key, its quotas, how it
//! behaves), before a [`PoliciesBuilder`](super::PoliciesBuilder) checks it.

use core::fmt;
use core::hash::Hash;
use core::time::Duration;

use super::key::{Extract, Key};
use crate::algorithm::AnyAlgorithm;
use crate::keyed::WhenFull;
use crate::quota::Quota;

/// Keys a keyed policy's tables hold unless told otherwise.
pub const DEFAULT_POLICY_KEYS: usize = 1 << 16;

/// One named policy: a key extractor (or none, for a global policy), its quotas, and how it
/// behaves. Add it to a set with [`PoliciesBuilder::policy`](super::PoliciesBuilder::policy).
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
    /// does not apply to that request; [`Key::reject`]: the request is refused for good).
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
