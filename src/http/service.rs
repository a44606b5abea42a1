//! [`RateLimitService`]: the tower service a [`RateLimitLayer`](super::RateLimitLayer) wraps
//! around another, which decides each request before the inner service sees it.

use core::task::{Context, Poll};
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response};

use super::refusal::{self, Refusal};
use super::{peer_addr, Inbound, ResponseFuture, Shared, Unkeyed};
use crate::clock::{Clock, QuantaClock};
use crate::outcome::Cause;
use crate::policy::Policies;

/// The service [`RateLimitLayer`](super::RateLimitLayer) wraps around another: it decides each request before the
/// inner service sees it.
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
    pub fn policies(&self) -> &Arc<Policies<Inbound, C>> {
        &self.shared.policies
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

/// The answer to a refused request: its response, held for the configured delay.
fn refuse<F, B: From<Bytes>, C: Clock>(
    shared: &Shared<C>,
    refusal: &Refusal,
    inbound: Option<&Inbound>,
) -> ResponseFuture<F, B> {
    // A table-full refusal gets no quota headers: the tables do not hold the client, so they
    // would describe a fresh bucket next to a 429.
    let table_full = matches!(refusal, Refusal::Limited(r) if r.cause() == Cause::TableFull);
    let quotas = match inbound {
        Some(inbound) if shared.style.any() && !table_full => Some(shared.inspect(inbound)),
        _ => None,
    };
    let response = refusal::respond(shared, refusal, quotas);
    // A delay needs tokio's timer; outside a runtime the refusal goes at once.
    let delay = (!shared.delay.is_zero() && tokio::runtime::Handle::try_current().is_ok())
        .then_some(shared.delay);
    ResponseFuture::refused(response, delay)
}

impl<S, C, ReqBody, ResBody> tower_service::Service<Request<ReqBody>> for RateLimitService<S, C>
where
    S: tower_service::Service<Request<ReqBody>, Response = Response<ResBody>>,
    C: Clock,
    ResBody: From<Bytes>,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, ResBody>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let shared = &*self.shared;
        let client = shared
            .client_ip
            .resolve(peer_addr(request.extensions()), request.headers());
        if let (None, Unkeyed::Refuse(status)) = (client, shared.client_ip.missing()) {
            return refuse(shared, &Refusal::Unkeyed(status), None);
        }
        let decided = Inbound::scope(&request, client, |inbound| {
            let cost = shared.cost.as_ref().map_or(1, |cost| cost(inbound));
            let refusal = match shared.decide(inbound, cost) {
                Ok(Ok(headers)) => return Ok(headers),
                Ok(Err(refused)) => Refusal::Limited(refused),
                Err(capacity) => Refusal::Oversized(capacity),
            };
            Err(refuse(shared, &refusal, Some(inbound)))
        });
        match decided {
            Ok(headers) => ResponseFuture::admitted(self.inner.call(request), headers),
            Err(refused) => refused,
        }
    }
}
