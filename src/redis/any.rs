//! [`AnyPolicies`]: one policy set, decided in process or in Redis as chosen when it is built
//! ([`Backend`] in code, `backend` in a configuration file); a [`Backend`](super::Backend)
//! either way, so code written against the seam switches backends by changing the backend and
//! nothing else.
//!
//! ```
//! use flowgate::backend::Backend as _;
//! use flowgate::redis::{AnyPolicies, BackendKind};
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

use super::{RedisBackend, RedisConfigError, RedisLimiter};
use crate::backend::{Backend, Decision, Failure, PolicyInfo, Remote, Source, States, Verdict};
use crate::clock::{Clock, QuantaClock};
use crate::outcome::Attempt;
use crate::outcome::{Cited, InsufficientCapacity, QuotaState};
use crate::policy::{Booked, Policies, PoliciesBuilder, PolicyError};
use crate::quota::Quota;

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
    /// In Redis (feature `redis`): limits shared by every process on the same prefix.
    Redis(RedisBackend),
}

/// Why a policy set could not be built on its backend.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum BuildError {
    /// The set is invalid on any backend.
    Policy(PolicyError),
    /// Redis cannot run the set as configured (feature `redis`).
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

/// Where an [`AnyPolicies`] decides.
enum Inner<R: ?Sized, C: Clock> {
    InProcess(Arc<Policies<R, C>>),
    Redis(RedisLimiter<R, C>),
}

/// A policy set on either backend; see the [module docs](self). Cheap to clone (the clones
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

    /// The Redis set, if that is the backend (feature `redis`).
    pub fn redis(&self) -> Option<&RedisLimiter<R, C>> {
        match &self.inner {
            Inner::Redis(set) => Some(set),
            Inner::InProcess(_) => None,
        }
    }
}

impl<R: ?Sized + 'static, C: Clock + Clone + Send + Sync + 'static> PoliciesBuilder<R, C> {
    /// The policy set on `backend`: [`build`](Self::build) for [`BackendKind::InProcess`],
    /// `build_redis` for `BackendKind::Redis`.
    ///
    /// # Errors
    /// [`BuildError::Policy`] for a set that is invalid anywhere; with the `redis` feature,
    /// `BuildError::Redis` for what Redis cannot run.
    pub fn build_on(self, backend: BackendKind) -> Result<AnyPolicies<R, C>, BuildError> {
        match backend {
            BackendKind::InProcess => Ok(self.build()?.into()),
            BackendKind::Redis(redis) => Ok(self.build_redis(redis)?.into()),
        }
    }
}

/// A call's answer on either backend: ready at once (in process, no allocation), or a remote
/// set's future, boxed. It holds nothing of the request.
enum Call<'a, T> {
    Ready(Option<T>),
    Later(Pin<Box<dyn Future<Output = T> + Send + 'a>>),
}

// The answer is never pinned (it is moved out whole), and the future is boxed.
impl<T> Unpin for Call<'_, T> {}

impl<T> Future for Call<'_, T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        match &mut *self {
            // Polled again after its answer: pending for ever, as a finished future may be.
            Self::Ready(value) => value.take().map_or(Poll::Pending, Poll::Ready),
            Self::Later(future) => future.as_mut().poll(cx),
        }
    }
}

/// The answer of the set `$any` holds: in process, `$now` (an answer) with the set as `$set`;
/// in Redis, `$later` (a future that holds nothing of the request), with the set as `$set`.
macro_rules! either {
    ($any:expr, $set:ident => $now:expr, $later:expr) => {
        match &$any.inner {
            Inner::InProcess($set) => Call::Ready(Some($now)),
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
        either!(self, set => Policies::check_n(set, request, n)
            .map(|outcome| Verdict::new(outcome, Source::Buckets)), {
            let plan = set.plan(request, n);
            async move { Ok(set.check_plan(&plan?, n).await) }
        }) as Call<'s, _>
    }

    fn check_up_to<'s>(
        &'s self,
        request: &R,
        n: u32,
    ) -> impl Future<Output = (u32, Verdict)> + Send {
        let in_process = |set: &Policies<R, C>| match set.check_up_to(request, n) {
            Ok((taken, allowed)) => (taken, Verdict::new(Ok(allowed), Source::Buckets)),
            Err(refused) => (0, Verdict::new(Err(refused), Source::Buckets)),
        };
        either!(self, set => in_process(set), set.up_to_of(set.plan(request, n.min(1)), n))
            as Call<'s, _>
    }

    fn look<'s>(
        &'s self,
        request: &R,
    ) -> impl Future<Output = Result<Vec<QuotaState>, Failure>> + Send {
        let in_process = |set: &Policies<R, C>| {
            let mut states = Vec::new();
            set.inspect(request, |state| states.push(state));
            Ok(states)
        };
        either!(self, set => in_process(set), set.look_plan(set.plan(request, 0))) as Call<'s, _>
    }

    fn reset<'s>(&'s self, request: &R) -> impl Future<Output = Result<(), Failure>> + Send {
        either!(self, set => {
            Policies::reset(set, request);
            Ok(())
        }, set.reset_plan(set.plan(request, 0))) as Call<'s, _>
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
        let now = |set: &'s Policies<R, C>| set.attempt(request, n, set.clock().now(), left);
        either!(self, set => now(set), {
            let plan = set.plan(request, n);
            async move {
                match plan {
                    Ok(plan) => set.attempt_of(&plan, n, left).await,
                    Err(capacity) => Attempt::Fail(crate::outcome::Error::Capacity(capacity)),
                }
            }
        }) as Call<'s, _>
    }
}
