//! The seam between a policy set and the place it decides: [`Backend`]. The HTTP middleware,
//! the asynchronous waits and the metrics are written once against it and never name a
//! backend. A [`Policies`](crate::Policies) set is the in-process backend (it decides at once,
//! without an allocation or an await point); `flowgate-redis` implements the same trait for
//! sets whose buckets live in Redis.
//!
//! ```
//! use flowgate::backend::Backend;
//! use flowgate::policy::{Policies, Policy};
//!
//! /// Written once: any backend, in process or remote.
//! async fn admit(limits: &impl Backend<str>, user: &str) -> bool {
//!     matches!(limits.check_n(user, 1).await, Ok(verdict) if verdict.is_allowed())
//! }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let limits = Policies::<str>::builder()
//!     .policy(Policy::keyed("user", |user: &str| user).quota("2/min".parse()?))
//!     .build()?;
//! assert!(admit(&limits, "alice").await);
//! assert!(admit(&limits, "alice").await);
//! assert!(!admit(&limits, "alice").await);
//! # Ok(())
//! # }
//! # block_on(run()).unwrap();
//! # fn block_on<F: core::future::Future>(f: F) -> F::Output {
//! #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
//! # }
//! ```
//!
//! Every answer says where it came from ([`Source`]): the buckets themselves, a lease, or a
//! failure policy that decided because the backend could not ([`Failure`]).

mod verdict;

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use std::sync::Arc;

use crate::outcome::policy::{Error, Refused};
use crate::outcome::Attempt;
use crate::outcome::{DryRun, InsufficientCapacity, QuotaState};
use crate::quota::Quota;

pub use verdict::{Failure, Source, Verdict};

/// A middleware's decision: admitted or refused (with the refusal's reason), or `n` beyond an
/// enforcing quota's capacity.
pub type Answer = Result<Result<(), Refused>, InsufficientCapacity>;

/// Where a policy set decides: in this process, or elsewhere (a server). See the
/// [module docs](self).
///
/// Every method decides all or nothing across the set's policies and quotas, as
/// [`Policies::check_n`](crate::Policies::check_n) does, and reports the states of quotas
/// as [`QuotaState`]s.
///
/// A backend that decides at once (in process) does the work of `check_n`, `check_up_to`,
/// `look`, `reset` and `attempt` when the method is called, and its future only hands the
/// answer over; a remote backend's future does the work when it is first polled. Await what
/// you call: a future dropped unawaited has taken its cells in process, and nothing remotely.
pub trait Backend<R: ?Sized>: Send + Sync + 'static {
    /// A [`decide`](Self::decide) that has to wait for an answer: [`AtOnce`] (no such value)
    /// for a backend that always answers at once, else a [`Remote`] future.
    type Pending: Pending;

    /// Decides `n` cells for `request` (`n = 0` takes nothing), for a caller that wants only a
    /// yes or no and, if `states` is given, the state of every enforcing quota that applies:
    /// after an admission, as the admission left them; after a refusal or for too many cells,
    /// as they stood at the decision's reading, the refusing quota reported with nothing left.
    ///
    /// A backend that answers at once returns [`Decision::Now`], having told `states`; one
    /// that has to wait returns [`Decision::Pending`], whose [`Settled`] carries the states.
    fn decide<S: States>(
        &self,
        request: &R,
        n: u32,
        states: Option<&mut S>,
    ) -> Decision<Self::Pending>;

    /// Takes `n` cells from every quota of every policy that applies, or nothing; `n = 0`
    /// reports the quotas as they are. The verdict describes the tightest enforcing quota, or
    /// the refusing one and when to retry.
    ///
    /// # Errors
    /// [`InsufficientCapacity`] when `n` exceeds an enforcing quota's capacity.
    fn check_n(
        &self,
        request: &R,
        n: u32,
    ) -> impl Future<Output = Result<Verdict, InsufficientCapacity>> + Send;

    /// Takes as many cells as the tightest enforcing quota holds, up to `n`, and says how
    /// many (`1 ≤ k ≤ n` when admitted, `0` for `n = 0`), or the refusal of one cell.
    fn check_up_to(&self, request: &R, n: u32) -> impl Future<Output = (u32, Verdict)> + Send;

    /// The state of every enforcing quota that applies to `request`, in evaluation order,
    /// taking nothing.
    ///
    /// # Errors
    /// The [`Failure`] if the backend could not be read (nothing was visited).
    fn look(&self, request: &R) -> impl Future<Output = Result<Vec<QuotaState>, Failure>> + Send;

    /// Forgets what `request`'s keys used: every keyed policy's buckets for its key start over,
    /// as if the key had never been seen. Global policies' buckets (every client's) are left
    /// alone.
    ///
    /// # Errors
    /// The [`Failure`] if the backend could not be reached (then nothing is known to be reset).
    fn reset(&self, request: &R) -> impl Future<Output = Result<(), Failure>> + Send;

    /// Each policy, in evaluation order, with its quotas as the backend enforces them.
    fn policies(&self) -> Vec<PolicyInfo>;

    /// The backend's clock reading in nanoseconds, for waits that measure what they spent.
    fn now(&self) -> u64;

    /// One attempt of a wait: decides `n` cells now, admitting a delayed booking only within
    /// `left` nanoseconds (a booking further ahead is given back, and refused with its wait).
    ///
    /// By default, [`check_n`](Self::check_n)'s verdict: an admission goes ahead after its
    /// delay, booking nothing to give back; a refusal is retried after its wait while that is
    /// within `left`.
    fn attempt(
        &self,
        request: &R,
        n: u32,
        left: u64,
    ) -> impl Future<Output = Attempt<Self::Booking<'_>>> + Send {
        // The verdict's future alone: the attempt holds nothing of the request.
        let verdict = self.check_n(request, n);
        async move {
            match verdict.await {
                Err(capacity) => Attempt::Fail(Error::Capacity(capacity)),
                Ok(verdict) => Attempt::retrying(verdict.outcome(), n, left),
            }
        }
    }

    /// A booking an [`attempt`](Self::attempt) made ahead of time: given back if its wait is
    /// dropped before the booking's time. [`Unbooked`] for a backend that never books ahead.
    type Booking<'a>: crate::outcome::GiveBack + Send
    where
        Self: 'a;
}

/// A policy as a backend enforces it: what [`Backend::policies`] lists.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct PolicyInfo {
    /// The policy's name.
    pub name: String,
    /// Whether it is a dry run (reports, never refuses).
    pub dry_run: bool,
    /// Its quotas, as enforced (a remote backend may round them).
    pub quotas: Vec<Quota>,
}

impl PolicyInfo {
    /// The policy `name`, a dry run or not, enforcing `quotas`.
    pub fn new(name: String, dry_run: bool, quotas: Vec<Quota>) -> Self {
        Self {
            name,
            dry_run,
            quotas,
        }
    }
}

/// What a [`Backend::decide`] reports quota states to.
pub trait States {
    /// One enforcing quota's state, in evaluation order.
    fn push(&mut self, state: QuotaState);

    /// Forgets the states pushed so far (a decision that went on to refuse, which then
    /// reports the states it refused at).
    fn clear(&mut self);

    /// An admission's first dry-run policy that would have refused (a refusal carries its
    /// own: [`Refused::dry_run`]). Ignored unless a sink keeps it.
    fn dry_run(&mut self, dry_run: DryRun) {
        let _ = dry_run;
    }
}

impl States for Vec<QuotaState> {
    fn push(&mut self, state: QuotaState) {
        Vec::push(self, state);
    }

    fn clear(&mut self) {
        Vec::clear(self);
    }
}

/// What [`Backend::decide`] gives: the answer now, or a decision under way.
#[derive(Debug)]
pub enum Decision<P> {
    /// Decided at once (the states, if asked for, already told).
    Now(Answer),
    /// To be awaited.
    Pending(P),
}

/// What a pending decision comes to: the answer, where it came from, and the states of the
/// quotas it went through (if they were asked for).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Settled {
    /// Admitted, refused, or too many cells.
    pub answer: Answer,
    /// Where the answer came from.
    pub source: Source,
    /// As [`Backend::decide`] describes them; empty if they were not asked for.
    pub states: Vec<QuotaState>,
    /// An admission's first dry-run policy that would have refused, if the backend tells it
    /// (`None` from [`new`](Self::new)); a refusal carries its own.
    pub dry_run: Option<DryRun>,
}

impl Settled {
    /// `answer` from `source`, with `states`; the quota that refused (if it did) is reported
    /// with nothing left, whatever the backend put in its state.
    pub fn new(answer: Answer, source: Source, mut states: Vec<QuotaState>) -> Self {
        if let Ok(Err(refused)) = &answer {
            if let Some(by) = refused.by() {
                for state in states.iter_mut().filter(|state| *state.by() == *by) {
                    *state = state.none_left();
                }
            }
        }
        Self {
            answer,
            source,
            states,
            dry_run: None,
        }
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::AtOnce {}
    impl Sealed for super::Remote {}
}

/// The pending decision of a [`Backend`]: [`AtOnce`] or [`Remote`], nothing else (sealed), so
/// that the middleware knows from the type alone whether a request can wait for its
/// decision, and asks nothing of an in-process user's service for a case that never happens.
pub trait Pending: sealed::Sealed + Future<Output = Settled> + Send + 'static {}

impl Pending for AtOnce {}
impl Pending for Remote {}

/// The [`Backend::Pending`] of a backend that always decides at once: no value of it exists.
#[derive(Debug)]
pub enum AtOnce {}

impl Future for AtOnce {
    type Output = Settled;

    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Settled> {
        match *self {}
    }
}

/// The [`Backend::Pending`] of a backend that waits for a server: its decision, boxed (one
/// allocation beside a round trip).
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct Remote(Pin<Box<dyn Future<Output = Settled> + Send>>);

impl Remote {
    /// The decision `future` will settle.
    pub fn new(future: impl Future<Output = Settled> + Send + 'static) -> Self {
        Self(Box::pin(future))
    }
}

impl core::fmt::Debug for Remote {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Remote")
    }
}

impl Future for Remote {
    type Output = Settled;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Settled> {
        self.0.as_mut().poll(cx)
    }
}

/// The booking of a backend that never books ahead (its waits retry): no value of it exists.
#[derive(Debug)]
pub enum Unbooked {}

impl crate::outcome::GiveBack for Unbooked {
    fn give_back(self) {
        match self {}
    }
}

impl<R: ?Sized, B: Backend<R>> Backend<R> for Arc<B> {
    type Pending = B::Pending;
    type Booking<'a> = B::Booking<'a>;

    #[inline]
    fn decide<S: States>(
        &self,
        request: &R,
        n: u32,
        states: Option<&mut S>,
    ) -> Decision<B::Pending> {
        (**self).decide(request, n, states)
    }

    fn check_n(
        &self,
        request: &R,
        n: u32,
    ) -> impl Future<Output = Result<Verdict, InsufficientCapacity>> + Send {
        (**self).check_n(request, n)
    }

    fn check_up_to(&self, request: &R, n: u32) -> impl Future<Output = (u32, Verdict)> + Send {
        (**self).check_up_to(request, n)
    }

    fn look(&self, request: &R) -> impl Future<Output = Result<Vec<QuotaState>, Failure>> + Send {
        (**self).look(request)
    }

    fn reset(&self, request: &R) -> impl Future<Output = Result<(), Failure>> + Send {
        (**self).reset(request)
    }

    fn policies(&self) -> Vec<PolicyInfo> {
        (**self).policies()
    }

    fn now(&self) -> u64 {
        (**self).now()
    }

    fn attempt(
        &self,
        request: &R,
        n: u32,
        left: u64,
    ) -> impl Future<Output = Attempt<Self::Booking<'_>>> + Send {
        (**self).attempt(request, n, left)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::{Gauge, PolicyQuota};

    /// Whatever a backend reports of the quota that refused, a settled refusal says it has
    /// nothing left; the other quotas, and an admission's states, are as reported.
    #[test]
    fn a_settled_refusal_reports_its_quota_with_nothing_left() {
        let (first, second) = (
            PolicyQuota::intern("settled", 0, 0),
            PolicyQuota::intern("settled", 0, 1),
        );
        let quota = Quota::per_second(10).unwrap();
        let states = || {
            vec![
                QuotaState::new(first, quota, Gauge::new(2, 1, 10, 0)),
                QuotaState::new(second, quota, Gauge::new(1, 1, 10, 0)),
            ]
        };
        let bucket = crate::Refused::new(Gauge::new(8, 1, 10, 0), 1);
        let refused = Refused::new(bucket, Some(first), None, 0);
        let settled = Settled::new(Ok(Err(refused)), Source::Buckets, states());
        let left: Vec<_> = settled
            .states
            .iter()
            .map(|state| state.gauge().remaining())
            .collect();
        assert_eq!(left, [0, 9]);
        let admitted = Settled::new(Ok(Ok(())), Source::Buckets, states());
        let left: Vec<_> = admitted
            .states
            .iter()
            .map(|state| state.gauge().remaining())
            .collect();
        assert_eq!(left, [8, 9]);
    }
}
