//! [`AnyPolicies`]: one policy set, decided in process or in Redis as chosen when it is built
//! ([`Backend`] in code, `backend` in a configuration file), behind one asynchronous API that
//! answers in the same outcomes either way. Code written against it switches backends by
//! changing the backend and nothing else.
//!
//! ```
//! use flowgate::backend::{AnyPolicies, Backend};
//! use flowgate::policy::{Policies, Policy};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // `Backend::Redis(RedisBackend::new(client))` with the `redis` feature.
//! let backend = Backend::InProcess;
//! let limits: AnyPolicies<str> = Policies::builder()
//!     .policy(Policy::keyed("user", |user: &str| user).quota("2/min".parse()?))
//!     .build_on(backend)?;
//! assert!(limits.check("alice").await.is_ok());
//! assert!(limits.check("alice").await.is_ok());
//! let refused = limits.check("alice").await.unwrap_err();
//! assert_eq!(refused.policy(), Some("user"));
//! # Ok(())
//! # }
//! # block_on(run()).unwrap();
//! # fn block_on<F: core::future::Future>(f: F) -> F::Output {
//! #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
//! # }
//! ```
//!
//! In process, a decision is the [`Policies`] set's own (no await point is ever pending); in
//! Redis it is a `redis::RedisLimiter`'s (feature `redis`), whose failure policy answers
//! when Redis does not. [`AnyPolicies::in_process`] and `AnyPolicies::redis` give the set
//! itself, for what only one backend has (quota replacement and sweeping in process; leases
//! and the Redis counters).

#[cfg(feature = "serde")]
mod config;

use core::fmt;
use core::future::Future;
use core::time::Duration;
use std::sync::Arc;

use crate::clock::{Clock, QuantaClock};
use crate::outcome::{Allowed, Cited, Error, InsufficientCapacity, Refused};
use crate::policy::{Policies, PoliciesBuilder, PolicyError};
use crate::quota::Quota;
#[cfg(feature = "redis")]
use crate::redis::{RedisBackend, RedisConfigError, RedisLimiter};
use crate::wait::WaitOptions;

/// Where a policy set keeps its buckets and decides.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
// A setting, built once per set: its size costs nothing, and a box would cost every user a
// `Box::new` to write one.
#[allow(clippy::large_enum_variant)]
pub enum Backend {
    /// In this process: lock-free, no I/O, limits per process.
    #[default]
    InProcess,
    /// In Redis (feature `redis`): limits shared by every process on the same prefix.
    #[cfg(feature = "redis")]
    Redis(RedisBackend),
}

/// Why a policy set could not be built on its backend.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum BuildError {
    /// The set is invalid on any backend.
    Policy(PolicyError),
    /// Redis cannot run the set as configured (feature `redis`).
    #[cfg(feature = "redis")]
    Redis(RedisConfigError),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Policy(error) => error.fmt(f),
            #[cfg(feature = "redis")]
            Self::Redis(error) => error.fmt(f),
        }
    }
}

impl core::error::Error for BuildError {}

impl From<PolicyError> for BuildError {
    fn from(error: PolicyError) -> Self {
        Self::Policy(error)
    }
}

#[cfg(feature = "redis")]
impl From<RedisConfigError> for BuildError {
    fn from(error: RedisConfigError) -> Self {
        match error {
            RedisConfigError::Policy(error) => Self::Policy(error),
            other => Self::Redis(other),
        }
    }
}

/// Where an [`AnyPolicies`] decides.
pub(crate) enum Inner<R: ?Sized, C: Clock> {
    InProcess(Arc<Policies<R, C>>),
    #[cfg(feature = "redis")]
    Redis(RedisLimiter<R, C>),
}

/// A policy set on either backend; see the [module docs](self). Cheap to clone (the clones
/// share the set).
pub struct AnyPolicies<R: ?Sized, C: Clock = QuantaClock> {
    pub(crate) inner: Inner<R, C>,
}

impl<R: ?Sized, C: Clock> Clone for AnyPolicies<R, C> {
    fn clone(&self) -> Self {
        let inner = match &self.inner {
            Inner::InProcess(set) => Inner::InProcess(Arc::clone(set)),
            #[cfg(feature = "redis")]
            Inner::Redis(set) => Inner::Redis(set.clone()),
        };
        Self { inner }
    }
}

impl<R: ?Sized, C: Clock> fmt::Debug for AnyPolicies<R, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnyPolicies")
            .field("backend", &self.backend_name())
            .field("policies", &self.names())
            .finish_non_exhaustive()
    }
}

impl<R: ?Sized, C: Clock> From<Policies<R, C>> for AnyPolicies<R, C> {
    fn from(set: Policies<R, C>) -> Self {
        Self::from(Arc::new(set))
    }
}

impl<R: ?Sized, C: Clock> From<Arc<Policies<R, C>>> for AnyPolicies<R, C> {
    fn from(set: Arc<Policies<R, C>>) -> Self {
        Self {
            inner: Inner::InProcess(set),
        }
    }
}

#[cfg(feature = "redis")]
impl<R: ?Sized, C: Clock> From<RedisLimiter<R, C>> for AnyPolicies<R, C> {
    fn from(set: RedisLimiter<R, C>) -> Self {
        Self {
            inner: Inner::Redis(set),
        }
    }
}

impl<R: ?Sized, C: Clock> AnyPolicies<R, C> {
    /// Takes one cell from every quota of every policy that applies to `request`, or nothing.
    ///
    /// # Errors
    /// [`Refused`] names the refusing policy and quota and says when to retry.
    pub async fn check(&self, request: &R) -> Result<Allowed<Cited>, Refused<Cited>> {
        match self.check_n(request, 1).await {
            Ok(answer) => answer,
            // One cell never exceeds a capacity (every capacity is at least 1).
            Err(capacity) => Err(capacity.never()),
        }
    }

    /// Takes `n` cells from every quota of every policy that applies, or nothing; `n = 0`
    /// takes nothing and reports the quotas as they are.
    ///
    /// # Errors
    /// The outer `Err` is [`InsufficientCapacity`] when `n` exceeds the capacity of a quota of
    /// an enforcing policy that applies: the request can never succeed. The inner `Err` is a
    /// [`Refused<Cited>`](Refused), naming the refusing policy and quota.
    pub async fn check_n(
        &self,
        request: &R,
        n: u32,
    ) -> Result<Result<Allowed<Cited>, Refused<Cited>>, InsufficientCapacity> {
        match &self.inner {
            Inner::InProcess(set) => set.check_n(request, n),
            #[cfg(feature = "redis")]
            Inner::Redis(set) => Ok(set.check_n(request, n).await?.outcome()),
        }
    }

    /// Takes as many cells as the tightest enforcing quota that applies to `request` holds
    /// now, up to `n`, and says how many: `Ok((k, allowed))` with `1 ≤ k ≤ n` (`(0, state)`
    /// for `n = 0`), or the refusal of one cell. Dry-run policies do not limit `k`; `n` may
    /// exceed every burst. [`Policies::check_up_to`] in process; in Redis
    /// `RedisLimiter::check_up_to`, which counts and takes in one script call (no lease), and
    /// whose failure policy answers when Redis does not.
    ///
    /// ```
    /// use flowgate::backend::{AnyPolicies, Backend};
    /// use flowgate::policy::{Policies, Policy};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let limits: AnyPolicies<str> = Policies::builder()
    ///     .policy(Policy::keyed("user", |user: &str| user).quota("5/min".parse()?))
    ///     .build_on(Backend::InProcess)?;
    /// assert_eq!(limits.check_up_to("alice", 8).await?.0, 5);
    /// assert!(limits.check_up_to("alice", 8).await.is_err());
    /// # Ok(())
    /// # }
    /// # block_on(run()).unwrap();
    /// # fn block_on<F: core::future::Future>(f: F) -> F::Output {
    /// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`Refused<Cited>`](Refused), as [`check`](Self::check) refuses one cell.
    pub async fn check_up_to(
        &self,
        request: &R,
        n: u32,
    ) -> Result<(u32, Allowed<Cited>), Refused<Cited>> {
        match &self.inner {
            Inner::InProcess(set) => set.check_up_to(request, n),
            #[cfg(feature = "redis")]
            Inner::Redis(set) => {
                let (taken, verdict) = set.check_up_to(request, n).await;
                verdict.outcome().map(|allowed| (taken, allowed))
            }
        }
    }

    /// Takes `n` cells from every quota that applies to `request`, sleeping through `sleep`
    /// until all admit at once, within `options`' bound: the set's own wait (see
    /// [`Policies::until_ready_with`], and `RedisLimiter::until_ready_with`, which retries
    /// each refusal after its retry-after and never reserves).
    ///
    /// # Errors
    /// [`Error::Capacity`] if `n` exceeds an enforcing quota's capacity; [`Error::Refused`]
    /// when the wait would exceed the bound, or never ends.
    pub async fn until_ready_with<F: Future<Output = ()>>(
        &self,
        request: &R,
        n: u32,
        options: WaitOptions,
        sleep: impl FnMut(Duration) -> F,
    ) -> Result<Allowed<Cited>, Error<Cited>> {
        match &self.inner {
            Inner::InProcess(set) => set.until_ready_with(request, n, options, sleep).await,
            #[cfg(feature = "redis")]
            Inner::Redis(set) => set.until_ready_with(request, n, options, sleep).await,
        }
    }

    /// [`until_ready_with`](Self::until_ready_with) on `tokio::time::sleep`, with no bound
    /// (feature `tokio`).
    ///
    /// # Errors
    /// As [`until_ready_with`](Self::until_ready_with).
    #[cfg(feature = "tokio")]
    pub async fn until_ready(&self, request: &R, n: u32) -> Result<Allowed<Cited>, Error<Cited>> {
        self.until_ready_with(request, n, WaitOptions::new(), tokio::time::sleep)
            .await
    }

    /// [`until_ready`](Self::until_ready) for at most `max_wait` (feature `tokio`).
    ///
    /// # Errors
    /// As [`until_ready_with`](Self::until_ready_with).
    #[cfg(feature = "tokio")]
    pub async fn until_ready_within(
        &self,
        request: &R,
        n: u32,
        max_wait: Duration,
    ) -> Result<Allowed<Cited>, Error<Cited>> {
        let options = WaitOptions::new().at_most(max_wait);
        self.until_ready_with(request, n, options, tokio::time::sleep)
            .await
    }

    /// The policies' names, in evaluation order.
    pub fn names(&self) -> Vec<&str> {
        match &self.inner {
            Inner::InProcess(set) => set.names().collect(),
            #[cfg(feature = "redis")]
            Inner::Redis(set) => set.names().collect(),
        }
    }

    /// The quotas of the policy `name` as the backend enforces them (in Redis, intervals
    /// rounded up to whole µs).
    ///
    /// # Errors
    /// [`PolicyError::UnknownPolicy`] if no policy has that name.
    pub fn quotas(&self, name: &str) -> Result<Vec<Quota>, PolicyError> {
        match &self.inner {
            Inner::InProcess(set) => set.quotas(name),
            #[cfg(feature = "redis")]
            Inner::Redis(set) => set.quotas(name),
        }
    }

    /// Each policy's name, whether it is a dry run, and its quotas as enforced, in evaluation
    /// order.
    #[cfg(feature = "tower")]
    pub(crate) fn describe(&self) -> Vec<(String, bool, Vec<Quota>)> {
        match &self.inner {
            Inner::InProcess(set) => (set.stats().into_iter())
                .map(|stats| {
                    let quotas = set.quotas(&stats.name).unwrap_or_default();
                    (stats.name, stats.dry_run, quotas)
                })
                .collect(),
            #[cfg(feature = "redis")]
            Inner::Redis(set) => set.describe(),
        }
    }

    /// `"in_process"` or `"redis"`.
    pub fn backend_name(&self) -> &'static str {
        match &self.inner {
            Inner::InProcess(_) => "in_process",
            #[cfg(feature = "redis")]
            Inner::Redis(_) => "redis",
        }
    }

    /// The in-process set, if that is the backend.
    pub fn in_process(&self) -> Option<&Arc<Policies<R, C>>> {
        match &self.inner {
            Inner::InProcess(set) => Some(set),
            #[cfg(feature = "redis")]
            Inner::Redis(_) => None,
        }
    }

    /// The Redis set, if that is the backend (feature `redis`).
    #[cfg(feature = "redis")]
    pub fn redis(&self) -> Option<&RedisLimiter<R, C>> {
        match &self.inner {
            Inner::Redis(set) => Some(set),
            Inner::InProcess(_) => None,
        }
    }
}

impl<R: ?Sized + 'static, C: Clock + Clone + Send + Sync + 'static> PoliciesBuilder<R, C> {
    /// The policy set on `backend`: [`build`](Self::build) for [`Backend::InProcess`],
    /// `build_redis` for `Backend::Redis`.
    ///
    /// # Errors
    /// [`BuildError::Policy`] for a set that is invalid anywhere; with the `redis` feature,
    /// `BuildError::Redis` for what Redis cannot run.
    pub fn build_on(self, backend: Backend) -> Result<AnyPolicies<R, C>, BuildError> {
        match backend {
            Backend::InProcess => Ok(self.build()?.into()),
            #[cfg(feature = "redis")]
            Backend::Redis(redis) => Ok(self.build_redis(redis)?.into()),
        }
    }
}
