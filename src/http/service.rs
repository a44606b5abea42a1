//! [`RateLimitService`]: the tower service a [`RateLimitLayer`](super::RateLimitLayer) wraps
//! around another, which decides each request through the layer's backend before the inner
//! service sees it, and what a decision comes to (quota headers or a refusal), written once
//! for every backend.

use core::task::{Context, Poll};
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response};

use super::future::{Conclude, Concluded, Conclusion, Defer, Hold as _};
use super::headers::{QuotaHeaders, Ready};
use super::refusal::{refusal_of, Answer, Refusal};
use super::{peer_addr, Inbound, ResponseFuture, Shared, Unkeyed};
use crate::backend::{Backend, Decision, Settled, States};
use crate::outcome::QuotaState;
use crate::policy::Policies;

/// The service [`RateLimitLayer`](super::RateLimitLayer) wraps around another: it decides each
/// request before the inner service sees it, through the layer's [`Backend`].
#[must_use = "services do nothing unless called"]
pub struct RateLimitService<S, B = Policies<Inbound>> {
    pub(super) inner: S,
    pub(super) shared: Arc<Shared<B>>,
}

impl<S: Clone, B> Clone for RateLimitService<S, B> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<S: core::fmt::Debug, B> core::fmt::Debug for RateLimitService<S, B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RateLimitService")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S, B> RateLimitService<S, B> {
    /// The policy set.
    pub fn policies(&self) -> &B {
        &self.shared.policies
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

/// The quota headers a decision's states make.
struct Collect<'a, B> {
    shared: &'a Shared<B>,
    headers: QuotaHeaders<'a>,
}

impl<B> States for Collect<'_, B> {
    #[inline]
    fn push(&mut self, state: QuotaState) {
        self.shared.push(&mut self.headers, &state);
    }

    fn clear(&mut self) {
        self.headers = QuotaHeaders::new(self.shared.style, &self.shared.cache);
    }
}

impl<B> Shared<B> {
    fn push(&self, headers: &mut QuotaHeaders, state: &QuotaState) {
        let several = self
            .several
            .get(state.by().policy_index())
            .copied()
            .unwrap_or(true);
        headers.push(state, several);
    }

    /// What a settled decision comes to: the admission's quota headers, or the refusal; and
    /// the `X-RateLimit-Source` value if the layer writes one.
    pub(super) fn conclude(&self, settled: Settled, request: &HeaderMap) -> Concluded {
        let source = self.source_header.then(|| settled.source.to_string());
        let header = source.and_then(|source| HeaderValue::try_from(source).ok());
        Concluded(self.conclusion(settled, request), header)
    }

    fn conclusion(&self, settled: Settled, request: &HeaderMap) -> Conclusion {
        let refusal = match settled.answer {
            Ok(Ok(())) => {
                let headers = self.style.any().then(|| {
                    let mut collect = Collect::new(self);
                    settled.states.into_iter().for_each(|s| collect.push(s));
                    Box::new(collect.headers.finish())
                });
                return Conclusion::Admit(headers);
            }
            Ok(Err(refused)) => Refusal::Limited(refused),
            Err(capacity) => Refusal::Oversized(capacity),
        };
        // The refusing quota has nothing left in the states (`Settled::new` sees to it).
        let quotas = || {
            let mut collect = Collect::new(self);
            settled.states.into_iter().for_each(|s| collect.push(s));
            Some(collect.headers.finish())
        };
        let (response, delay) = refusal_of(self, &refusal, quotas, request);
        Conclusion::Refuse(response, delay)
    }
}

impl<'a, B> Collect<'a, B> {
    fn new(shared: &'a Shared<B>) -> Self {
        Self {
            shared,
            headers: QuotaHeaders::new(shared.style, &shared.cache),
        }
    }
}

/// A request whose client could not be told: counted, and refused if the rule says so.
#[cold]
#[inline(never)]
pub(super) fn unkeyed<B>(shared: &Shared<B>, request: &HeaderMap) -> Option<Answer> {
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

/// What deciding a request came to: the quota headers an admission carries (if the style has
/// any), the refusal (boxed: the rare answer, and the admission's result stays small), or a
/// decision still pending.
pub(super) enum Judged<P> {
    Admit(Option<Box<Ready>>),
    Refuse(Box<Answer>),
    Pending(P),
}

/// Decides `request` (whose client is `client`) through the layer's backend.
#[inline]
pub(super) fn judge<Q, B: Backend<Inbound>>(
    shared: &Shared<B>,
    request: &Request<Q>,
    client: Option<IpAddr>,
) -> Judged<B::Pending> {
    Inbound::scope(request, client, |inbound| {
        let cost = shared.cost.as_ref().map_or(1, |cost| cost(inbound));
        let policies: &B = &shared.policies;
        if !shared.style.any() {
            // Nothing to report: a yes or no.
            let answer = match policies.decide(inbound, cost, None::<&mut Collect<'_, B>>) {
                Decision::Now(answer) => answer,
                Decision::Pending(pending) => return Judged::Pending(pending),
            };
            let refusal = match answer {
                Ok(Ok(())) => return Judged::Admit(None),
                Ok(Err(refused)) => Refusal::Limited(refused),
                Err(capacity) => Refusal::Oversized(capacity),
            };
            let answer = refusal_of(shared, &refusal, || None, inbound.headers());
            return Judged::Refuse(Box::new(answer));
        }
        let mut collect = Collect::new(shared);
        let answer = match policies.decide(inbound, cost, Some(&mut collect)) {
            Decision::Now(answer) => answer,
            Decision::Pending(pending) => return Judged::Pending(pending),
        };
        let refusal = match answer {
            Ok(Ok(())) => return Judged::Admit(Some(Box::new(collect.headers.finish()))),
            Ok(Err(refused)) => Refusal::Limited(refused),
            Err(capacity) => Refusal::Oversized(capacity),
        };
        let quotas = || Some(collect.headers.finish());
        Judged::Refuse(Box::new(refusal_of(
            shared,
            &refusal,
            quotas,
            inbound.headers(),
        )))
    })
}

/// How the layer's shared settings conclude from a decision that settles later.
pub(super) fn concluding<B: Backend<Inbound>>(shared: &Arc<Shared<B>>) -> Conclude {
    let shared = Arc::clone(shared);
    Box::new(move |settled, headers| shared.conclude(settled, headers))
}

impl<S, B, ReqBody, ResBody> tower_service::Service<Request<ReqBody>> for RateLimitService<S, B>
where
    S: tower_service::Service<Request<ReqBody>, Response = Response<ResBody>>,
    B: Backend<Inbound>,
    B::Pending: Defer<S, ReqBody, ResBody>,
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
        if client.is_none() {
            if let Some((response, delay)) = unkeyed(shared, request.headers()) {
                return ResponseFuture::refused(response.map(ResBody::from), delay);
            }
        }
        match judge(shared, &request, client) {
            Judged::Admit(headers) => ResponseFuture::admitted(self.inner.call(request), headers),
            Judged::Refuse(refused) => {
                let (response, delay) = *refused;
                ResponseFuture::refused(response.map(ResBody::from), delay)
            }
            Judged::Pending(pending) => {
                let conclude = concluding(&self.shared);
                ResponseFuture::later(pending.defer(&mut self.inner, request, conclude))
            }
        }
    }
}
