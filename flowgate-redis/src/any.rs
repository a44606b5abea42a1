//! [`AnyPolicies`]: one policy set, decided in process or in Redis as chosen when it is built
//! ([`Backend`] in code, `backend` in a configuration file); a [`Backend`](flowgate::backend::Backend)
//! either way, so code written against the seam switches backends by changing the backend and
//! nothing else.
//!
//! ```
//! use flowgate_redis::BuildRedis as _;
//! use flowgate::backend::Backend as _;
//! use flowgate_redis::{AnyPolicies, BackendKind};
//! use flowgate::policy::{Policies, Policy};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // Or `BackendKind::Redis(RedisBackend::new(client))`.
//! let limits: AnyPolicies<str> = Policies::builder()
//!     .policy(Policy::keyed("user", |user: &str| user).quota("2/min".parse()?))
//!     .build_on(BackendKind::InProcess)?;
//! assert!(limits.check_n("alice", 1).await?.is_allowed());
//! assert!(limits.check_n("alice", 1).await?.is_allowed());
//! let refused = limits.check_n("alice", 1).await?.outcome().unwrap_err();
//! assert_eq!(refused.policy(), Some("user"));
//! # Ok(())
//! # }
//! # block_on(run()).unwrap();
//! # fn block_on<F: core::future::Future>(f: F) -> F::Output {
//! #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
//! # }
//! ```

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use std::sync::Arc;

use crate::limiter::{look, reset, RedisLimiter};
use crate::settings::{RedisBackend, RedisConfigError};
use flowgate::backend::{Backend, Decision, Failure, PolicyInfo, Remote, States, Verdict};
use flowgate::clock::{Clock, QuantaClock};
use flowgate::outcome::Attempt;
use flowgate::outcome::{Cited, InsufficientCapacity, QuotaState};
use flowgate::policy::{Booked, Policies, PoliciesBuilder, PolicyError};
use flowgate::quota::Quota;

/// Where a policy set keeps its buckets and decides.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
// A setting, built once per set: its size costs nothing, and a box would cost every user a
// `Box::new` to write one.
#[allow(clippy::large_enum_variant)]
pub enum BackendKind {
    /// In this process: lock-free, no I/O, limits per process.
    #[default]
    InProcess,
    /// In Redis: limits shared by every process on the same prefix.
    Redis(RedisBackend),
}

/// Why a policy set could not be built on its backend.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum BuildError {
    /// The set is invalid on any backend.
    Policy(PolicyError),
    /// Redis cannot run the set as configured.
    Redis(RedisConfigError),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Policy(error) => error.fmt(f),
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

impl From<RedisConfigError> for BuildError {
    fn from(error: RedisConfigError) -> Self {
        match error {
            RedisConfigError::Policy(error) => Self::Policy(error),
            other => Self::Redis(other),
        }
    }
}

/// Building a [`PoliciesBuilder`]'s set in Redis: `use flowgate_redis::BuildRedis`, then
/// `Policies::builder()…build_redis(backend)` where `build()` builds in process.
pub trait BuildRedis<R: ?Sized, C: Clock> {
    /// The policy set, decided in Redis: the same policies (names, keys, quotas, dry runs,
    /// jitter, order) as `build` decides in process, their buckets shared by every process
    /// that uses the same prefix. The set's clock times leases and the local fallback (and,
    /// with [`RedisBackend::client_time`], the decisions). A keyed policy's table settings
    /// ([`Policy::max_keys`](flowgate::Policy::max_keys),
    /// [`Policy::when_full`](flowgate::Policy::when_full)) apply to the local fallback only:
    /// Redis keeps a key until its buckets are full again.
    ///
    /// It connects lazily: a set built while Redis is down decides by its failure policy until
    /// Redis answers.
    ///
    /// # Errors
    /// A [`RedisConfigError`] naming what is wrong: the set itself
    /// ([`RedisConfigError::Policy`], as `build` would say), or what Redis cannot run.
    fn build_redis(self, backend: RedisBackend) -> Result<RedisLimiter<R, C>, RedisConfigError>;

    /// The policy set on `backend`: `build` for [`BackendKind::InProcess`],
    /// [`build_redis`](Self::build_redis) for [`BackendKind::Redis`].
    ///
    /// # Errors
    /// [`BuildError::Policy`] for a set that is invalid anywhere; [`BuildError::Redis`] for
    /// what Redis cannot run.
    fn build_on(self, backend: BackendKind) -> Result<AnyPolicies<R, C>, BuildError>;
}

impl<R, C> BuildRedis<R, C> for PoliciesBuilder<R, C>
where
    R: ?Sized + 'static,
    C: Clock + Clone + Send + Sync + 'static,
{
    fn build_redis(self, backend: RedisBackend) -> Result<RedisLimiter<R, C>, RedisConfigError> {
        crate::limiter::build(self, backend)
    }

    fn build_on(self, backend: BackendKind) -> Result<AnyPolicies<R, C>, BuildError> {
        match backend {
            BackendKind::InProcess => Ok(self.build()?.into()),
            BackendKind::Redis(redis) => Ok(self.build_redis(redis)?.into()),
        }
    }
}

/// Where an [`AnyPolicies`] decides.
enum Inner<R: ?Sized, C: Clock> {
    InProcess(Arc<Policies<R, C>>),
    Redis(RedisLimiter<R, C>),
}

/// A policy set on either backend, chosen when it is built. Cheap to clone (the clones
/// share the set).
pub struct AnyPolicies<R: ?Sized, C: Clock = QuantaClock> {
    inner: Inner<R, C>,
}

impl<R: ?Sized, C: Clock> Clone for AnyPolicies<R, C> {
    fn clone(&self) -> Self {
        let inner = match &self.inner {
            Inner::InProcess(set) => Inner::InProcess(Arc::clone(set)),
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

impl<R: ?Sized, C: Clock> From<RedisLimiter<R, C>> for AnyPolicies<R, C> {
    fn from(set: RedisLimiter<R, C>) -> Self {
        Self {
            inner: Inner::Redis(set),
        }
    }
}

impl<R: ?Sized, C: Clock> AnyPolicies<R, C> {
    /// The policies' names, in evaluation order.
    pub fn names(&self) -> Vec<&str> {
        match &self.inner {
            Inner::InProcess(set) => set.names().collect(),
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
            Inner::Redis(set) => set.quotas(name),
        }
    }

    /// `"in_process"` or `"redis"`.
    pub fn backend_name(&self) -> &'static str {
        match &self.inner {
            Inner::InProcess(_) => "in_process",
            Inner::Redis(_) => "redis",
        }
    }

    /// The in-process set, if that is the backend.
    pub fn in_process(&self) -> Option<&Arc<Policies<R, C>>> {
        match &self.inner {
            Inner::InProcess(set) => Some(set),
            Inner::Redis(_) => None,
        }
    }

    /// The Redis set, if that is the backend.
    pub fn redis(&self) -> Option<&RedisLimiter<R, C>> {
        match &self.inner {
            Inner::Redis(set) => Some(set),
            Inner::InProcess(_) => None,
        }
    }
}

/// A call's answer on either backend: the in-process set's own future (ready at once, no
/// allocation), or a Redis set's, boxed. Neither holds the request.
enum Call<'a, F: Future> {
    Now(F),
    Later(Pin<Box<dyn Future<Output = F::Output> + Send + 'a>>),
}

impl<F: Future + Unpin> Future for Call<'_, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        match self.get_mut() {
            Self::Now(future) => Pin::new(future).poll(cx),
            Self::Later(future) => future.as_mut().poll(cx),
        }
    }
}

/// The call `$call` (a [`Backend`] method, with its arguments after the set) on the set
/// `$any` holds: in process the set's own; in Redis `$later`, given the set as `$set`.
macro_rules! either {
    ($any:expr, $call:ident($($arg:expr),*), $set:ident => $later:expr) => {
        match &$any.inner {
            Inner::InProcess(set) => Call::Now(Backend::$call(&**set, $($arg),*)),
            Inner::Redis($set) => Call::Later(Box::pin($later)),
        }
    };
}

/// A set on either backend is a backend: each call goes to the set it holds.
impl<R, C> Backend<R> for AnyPolicies<R, C>
where
    R: ?Sized + 'static,
    C: Clock + Send + Sync + 'static,
{
    type Pending = Remote;
    type Booking<'a> = Booked<'a, R, C>;

    fn decide<S: States>(&self, request: &R, n: u32, states: Option<&mut S>) -> Decision<Remote> {
        match &self.inner {
            Inner::InProcess(set) => match Backend::decide(&**set, request, n, states) {
                Decision::Now(answer) => Decision::Now(answer),
                Decision::Pending(never) => match never {},
            },
            Inner::Redis(set) => Backend::decide(set, request, n, states),
        }
    }

    fn check_n<'s>(
        &'s self,
        request: &R,
        n: u32,
    ) -> impl Future<Output = Result<Verdict, InsufficientCapacity>> + Send {
        either!(self, check_n(request, n), set => set.checked(set.plan(request, n), n))
            as Call<'s, _>
    }

    fn check_up_to<'s>(
        &'s self,
        request: &R,
        n: u32,
    ) -> impl Future<Output = (u32, Verdict)> + Send {
        either!(self, check_up_to(request, n), set => {
            set.up_to_of(set.plan(request, n.min(1)), n)
        }) as Call<'s, _>
    }

    fn look<'s>(
        &'s self,
        request: &R,
    ) -> impl Future<Output = Result<Vec<QuotaState>, Failure>> + Send {
        either!(self, look(request), set => look(set, set.plan(request, 0))) as Call<'s, _>
    }

    fn reset<'s>(&'s self, request: &R) -> impl Future<Output = Result<(), Failure>> + Send {
        either!(self, reset(request), set => reset(set, set.plan(request, 0))) as Call<'s, _>
    }

    fn policies(&self) -> Vec<PolicyInfo> {
        match &self.inner {
            Inner::InProcess(set) => Backend::policies(&**set),
            Inner::Redis(set) => Backend::policies(set),
        }
    }

    fn now(&self) -> u64 {
        match &self.inner {
            Inner::InProcess(set) => set.clock().now(),
            Inner::Redis(set) => Backend::now(set),
        }
    }

    fn attempt<'s>(
        &'s self,
        request: &R,
        n: u32,
        left: u64,
    ) -> impl Future<Output = Attempt<Booked<'s, R, C>, Cited>> + Send {
        either!(self, attempt(request, n, left), set => {
            let checked = set.checked(set.plan(request, n), n);
            // As the trait's own `attempt`: a Redis decision books nothing ahead.
            async move {
                match checked.await {
                    Ok(verdict) => Attempt::retrying(verdict.outcome(), n, left),
                    Err(capacity) => Attempt::Fail(flowgate::outcome::Error::Capacity(capacity)),
                }
            }
        }) as Call<'s, _>
    }
}
