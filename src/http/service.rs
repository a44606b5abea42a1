//! [`RateLimitService`]: the tower service a [`RateLimitLayer`](super::RateLimitLayer) wraps
//! around another, which decides each request before the inner service sees it.

use core::task::{Context, Poll};
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, Request, Response};

use super::headers::{QuotaHeaders, Ready};
use super::refusal::{refusal_of, Answer, Refusal};
use super::{peer_addr, Inbound, ResponseFuture, Shared, Unkeyed};
use crate::backend::{AnyPolicies, Inner};
use crate::clock::{Clock, QuantaClock};
use crate::outcome::{Cited, InsufficientCapacity, QuotaState, Refused};
use crate::policy::{Policies, Silent, Visit};

/// The service [`RateLimitLayer`](super::RateLimitLayer) wraps around another: it decides each request before the
/// inner service sees it.
#[must_use = "services do nothing unless called"]
pub struct RateLimitService<S, C: Clock = QuantaClock> {
    pub(super) inner: S,
    pub(super) shared: Arc<Shared<C>>,
}

impl<S: Clone, C: Clock> Clone for RateLimitService<S, C> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<S: core::fmt::Debug, C: Clock> core::fmt::Debug for RateLimitService<S, C> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RateLimitService")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S, C: Clock> RateLimitService<S, C> {
    /// The policy set.
    pub fn policies(&self) -> &AnyPolicies<Inbound, C> {
        &self.shared.policies
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

/// # Deciding in process
impl<C: Clock> Shared<C> {
    /// Decides `inbound` at `cost` cells in process: an admission's quota headers (if the
    /// style has any: the states the decision left every enforcing quota in), or the refusal.
    /// `reading` gets the decision's clock reading, if it took one.
    pub(super) fn decide(
        &self,
        policies: &Policies<Inbound, C>,
        inbound: &Inbound,
        cost: u32,
        reading: &core::cell::Cell<Option<u64>>,
    ) -> Result<Result<Option<Box<Ready>>, Refused<Cited>>, InsufficientCapacity> {
        if !self.style.any() {
            if cost == 0 {
                // Takes nothing, as `check_n(request, 0)`: admitted.
                return Ok(Ok(None));
            }
            // Nothing to report: a yes or no, with no admission put together.
            let answer = policies.decide(inbound, cost, || policies.clock().now(), Silent)?;
            return Ok(answer.map(|()| None));
        }
        let now = || {
            let now = policies.clock().now();
            reading.set(Some(now));
            now
        };
        if cost == 0 {
            let states = |visit: &mut dyn FnMut(QuotaState)| {
                policies.inspect_at(inbound, now(), visit);
            };
            return Ok(Ok(Some(Box::new(self.headers_of(None, states)))));
        }
        let mut headers = QuotaHeaders::new(self.style, &self.cache);
        let visit = Visit(|state: QuotaState| self.push(&mut headers, &state));
        let answer = policies.decide(inbound, cost, now, visit)?;
        Ok(answer.map(|()| Some(Box::new(headers.finish()))))
    }

    /// The quota headers of the states `states` visits. For a refusal, the quota that refused
    /// is reported with nothing left for the request (its `r` is 0, and `Retry-After` is never
    /// earlier than its `t`), whatever the backend.
    pub(super) fn headers_of(
        &self,
        refusal: Option<&Refusal>,
        states: impl FnOnce(&mut dyn FnMut(QuotaState)),
    ) -> Ready {
        let by = match refusal {
            Some(Refusal::Limited(refused)) => refused.by(),
            _ => None,
        };
        let mut headers = QuotaHeaders::new(self.style, &self.cache);
        states(&mut |state| {
            let state = match by {
                Some(by) if *by == *state.by() => state.none_left(),
                _ => state,
            };
            self.push(&mut headers, &state);
        });
        headers.finish()
    }

    fn push(&self, headers: &mut QuotaHeaders, state: &QuotaState) {
        let several = self
            .several
            .get(state.policy_index())
            .copied()
            .unwrap_or(true);
        headers.push(state, several);
    }
}

/// A request whose client could not be told: counted, and refused if the rule says so.
#[cold]
#[inline(never)]
pub(super) fn unkeyed<C: Clock>(shared: &Shared<C>, request: &HeaderMap) -> Option<Answer> {
    // Relaxed: a statistic.
    shared.unkeyed.fetch_add(1, Ordering::Relaxed);
    shared.unkeyed_metric.increment(1);
    match shared.client_ip.missing() {
        Unkeyed::Refuse(status) => Some(refusal_of(
            shared,
            &Refusal::Unkeyed(status),
            || None,
            request,
        )),
        Unkeyed::Shared => None,
    }
}

/// Decides `request` (whose client is `client`) with `policies` in process: the quota headers
/// an admission carries (if the style has any), or the refusal.
#[inline]
pub(super) fn judge<B, C: Clock>(
    shared: &Shared<C>,
    policies: &Policies<Inbound, C>,
    request: &Request<B>,
    client: Option<IpAddr>,
) -> Result<Option<Box<Ready>>, Box<Answer>> {
    Inbound::scope(request, client, |inbound| {
        let cost = shared.cost.as_ref().map_or(1, |cost| cost(inbound));
        let reading = core::cell::Cell::new(None);
        let refusal = match shared.decide(policies, inbound, cost, &reading) {
            Ok(Ok(headers)) => return Ok(headers),
            Ok(Err(refused)) => Refusal::Limited(refused),
            Err(capacity) => Refusal::Oversized(capacity),
        };
        // Every quota as it stood at the decision's own reading (a request of too many cells
        // read none).
        let now = reading.get().unwrap_or_else(|| policies.clock().now());
        let states = |visit: &mut dyn FnMut(QuotaState)| policies.inspect_at(inbound, now, visit);
        let quotas = || Some(shared.headers_of(Some(&refusal), states));
        // Boxed: a refusal is the rare answer, and the admission's result stays small.
        Err(Box::new(refusal_of(
            shared,
            &refusal,
            quotas,
            inbound.headers(),
        )))
    })
}

impl<S, C, ReqBody, ResBody> tower_service::Service<Request<ReqBody>> for RateLimitService<S, C>
where
    S: tower_service::Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
    C: Clock + Send + Sync + 'static,
    ResBody: From<Bytes>,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, ResBody, S, ReqBody>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let shared = &*self.shared;
        let client = shared
            .client_ip
            .resolve(peer_addr(request.extensions()), request.headers());
        if client.is_none() {
            if let Some((response, delay)) = unkeyed(shared, request.headers()) {
                return ResponseFuture::refused(response.map(ResBody::from), delay);
            }
        }
        // One arm without the `redis` feature.
        #[allow(clippy::infallible_destructuring_match)]
        let policies = match &shared.policies.inner {
            Inner::InProcess(policies) => policies,
            #[cfg(feature = "redis")]
            Inner::Redis(limiter) => {
                let (parts, body) = request.into_parts();
                let request = Request::from_parts(parts, ());
                let decision = super::remote::decision(&self.shared, limiter, request, client);
                // The service made ready goes with the request; a clone takes its place
                // (tower's way of calling a service later).
                let clone = self.inner.clone();
                let ready = core::mem::replace(&mut self.inner, clone);
                return ResponseFuture::deciding(decision, ready, body);
            }
        };
        match judge(shared, policies, &request, client) {
            Ok(headers) => ResponseFuture::admitted(self.inner.call(request), headers),
            Err(refused) => {
                let (response, delay) = *refused;
                ResponseFuture::refused(response.map(ResBody::from), delay)
            }
        }
    }
}
