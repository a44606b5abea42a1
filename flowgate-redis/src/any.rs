//! [`AnyPolicies`]: one policy set, decided in process or in Redis as chosen when it is built
//! (in code, or by `backend` in a configuration file); a [`Backend`] either way, so code written
//! against the seam switches backends by changing the set and nothing else. And
//! [`BuildRedis`], which builds a set in Redis.
//!
//! ```
//! use flowgate::backend::Backend as _;
//! use flowgate::policy::{Policies, Policy};
//! use flowgate_redis::AnyPolicies;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // Or `AnyPolicies::from(builder.build_redis(RedisBackend::new(client))?)`.
//! let limits = AnyPolicies::from(
//!     Policies::<str>::builder()
//!         .policy(Policy::keyed("user", |user: &str| user).quota("2/min".parse()?))
//!         .build()?,
//! );
//! assert!(limits.check_n("alice", 1).await?.is_allowed());
//! assert!(limits.check_n("alice", 1).await?.is_allowed());
//! let refused = limits.check_n("alice", 1).await?.outcome().unwrap_err();
//! assert_eq!(refused.by().map(|by| by.policy()), Some("user"));
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

use crate::error::RedisConfigError;
use crate::limiter::{look, reset, RedisLimiter};
use crate::settings::RedisBackend;
use flowgate::backend::{Backend, Decision, Failure, PolicyInfo, Remote, States, Verdict};
use flowgate::clock::{Clock, QuantaClock};
use flowgate::outcome::Attempt;
use flowgate::outcome::{InsufficientCapacity, QuotaState};
use flowgate::policy::{Booked, Policies, PoliciesBuilder};

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
}

impl<R, C> BuildRedis<R, C> for PoliciesBuilder<R, C>
where
    R: ?Sized + 'static,
    C: Clock + Clone + Send + Sync + 'static,
{
    fn build_redis(self, backend: RedisBackend) -> Result<RedisLimiter<R, C>, RedisConfigError> {
        crate::limiter::build(self, backend)
    }
}

/// A policy set on either backend, chosen when it is built. Cheap to clone (the clones share
/// the set).
#[non_exhaustive]
pub enum AnyPolicies<R: ?Sized, C: Clock = QuantaClock> {
    /// In this process: lock-free, no I/O, limits per process.
    InProcess(Arc<Policies<R, C>>),
    /// In Redis: limits shared by every process on the same prefix.
    Redis(RedisLimiter<R, C>),
}

impl<R: ?Sized, C: Clock> Clone for AnyPolicies<R, C> {
    fn clone(&self) -> Self {
        match self {
            Self::InProcess(set) => Self::InProcess(Arc::clone(set)),
            Self::Redis(set) => Self::Redis(set.clone()),
        }
    }
}

impl<R: ?Sized, C: Clock> fmt::Debug for AnyPolicies<R, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InProcess(set) => {
                let names: Vec<_> = set.names().collect();
                f.debug_tuple("InProcess").field(&names).finish()
            }
            Self::Redis(set) => f.debug_tuple("Redis").field(set).finish(),
        }
    }
}

impl<R: ?Sized, C: Clock> From<Policies<R, C>> for AnyPolicies<R, C> {
    fn from(set: Policies<R, C>) -> Self {
        Self::InProcess(Arc::new(set))
    }
}

impl<R: ?Sized, C: Clock> From<Arc<Policies<R, C>>> for AnyPolicies<R, C> {
    fn from(set: Arc<Policies<R, C>>) -> Self {
        Self::InProcess(set)
    }
}

impl<R: ?Sized, C: Clock> From<RedisLimiter<R, C>> for AnyPolicies<R, C> {
    fn from(set: RedisLimiter<R, C>) -> Self {
        Self::Redis(set)
    }
}

impl<R: ?Sized, C: Clock> AnyPolicies<R, C> {
    /// `"in_process"` or `"redis"`.
    pub fn backend_name(&self) -> &'static str {
        match self {
            Self::InProcess(_) => "in_process",
            Self::Redis(_) => "redis",
        }
    }

    /// Whether the backend can decide: always in process; in Redis,
    /// [`RedisLimiter::ready`].
    ///
    /// # Errors
    /// [`RedisConfigError::Unreachable`], naming the server and why.
    pub async fn ready(&self) -> Result<(), RedisConfigError> {
        match self {
            Self::InProcess(_) => Ok(()),
            Self::Redis(limiter) => limiter.ready().await,
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
        match $any {
            AnyPolicies::InProcess(set) => Call::Now(Backend::$call(&**set, $($arg),*)),
            AnyPolicies::Redis($set) => Call::Later(Box::pin($later)),
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
        match self {
            Self::InProcess(set) => match Backend::decide(&**set, request, n, states) {
                Decision::Now(answer) => Decision::Now(answer),
                Decision::Pending(never) => match never {},
            },
            Self::Redis(set) => Backend::decide(set, request, n, states),
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
        match self {
            Self::InProcess(set) => Backend::policies(&**set),
            Self::Redis(set) => Backend::policies(set),
        }
    }

    fn now(&self) -> u64 {
        match self {
            Self::InProcess(set) => set.clock().now(),
            Self::Redis(set) => Backend::now(set),
        }
    }

    fn attempt<'s>(
        &'s self,
        request: &R,
        n: u32,
        left: u64,
    ) -> impl Future<Output = Attempt<Booked<'s, R, C>>> + Send {
        either!(self, attempt(request, n, left), set => {
            let checked = set.checked(set.plan(request, n), n);
            // As the trait's own `attempt`: a Redis decision books nothing ahead.
            async move {
                match checked.await {
                    Ok(verdict) => Attempt::retrying(verdict.outcome(), n, left),
                    Err(capacity) => Attempt::Fail(flowgate::policy::Error::Capacity(capacity)),
                }
            }
        }) as Call<'s, _>
    }
}
