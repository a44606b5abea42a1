//! [`RateLimitService`]: the tower service a [`RateLimitLayer`](super::RateLimitLayer) wraps
//! around another, which decides each request through the layer's backend before the inner
//! service sees it, and what a decision comes to (quota headers or a refusal), written once
//! for every backend.

use core::task::{Context, Poll};
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use http::{HeaderMap, HeaderValue, Request, Response};

use super::future::{Conclude, Concluded, Defer, Hold as _, Judged};
use super::headers::{QuotaHeaders, Ready};
use super::refusal::{refusal_of, Refusal, Ruling};
use super::{peer_addr, Inbound, ResponseBody, ResponseFuture, Shared, Unkeyed};
use crate::backend::{Backend, Decision, Settled, States};
use crate::outcome::{DryRun, QuotaState};
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

/// The quota headers a decision's states make, and the [`Ruling`] if the layer attaches it.
struct Collect<'a, B> {
    shared: &'a Shared<B>,
    headers: QuotaHeaders<'a>,
    ruling: Option<Box<Ruling>>,
}

impl<B> States for Collect<'_, B> {
    #[inline]
    fn push(&mut self, state: QuotaState) {
        self.shared.push(&mut self.headers, &state);
        if let Some(ruling) = &mut self.ruling {
            ruling.states.push(state);
        }
    }

    fn clear(&mut self) {
        self.headers = QuotaHeaders::new(self.shared.style, &self.shared.cache);
        if let Some(ruling) = &mut self.ruling {
            ruling.states.clear();
        }
    }

    fn dry_run(&mut self, dry_run: DryRun) {
        if let Some(ruling) = &mut self.ruling {
            ruling.dry_run = Some(dry_run);
        }
    }
}

impl<'a, B> Collect<'a, B> {
    #[inline(always)]
    fn new(shared: &'a Shared<B>) -> Self {
        // The ruling first: the headers, made last, are built in place (made before, they
        // were copied).
        let ruling = shared.rulings().then(Box::default);
        Self {
            shared,
            ruling,
            headers: QuotaHeaders::new(shared.style, &shared.cache),
        }
    }

    /// An admission: the quota headers, if the style has any, and the ruling.
    #[inline(always)]
    fn admit<P>(self) -> Judged<P> {
        let headers = self
            .shared
            .style
            .any()
            .then(|| Box::new(self.headers.finish()));
        Judged::Admit(headers, self.ruling)
    }

    /// A refusal, answered with the quota headers as they stand; let through with its ruling
    /// in permissive mode.
    fn refuse<P>(self, refusal: Refusal, request: &HeaderMap) -> Judged<P> {
        let Self {
            shared,
            headers,
            ruling,
        } = self;
        shared.refuse(refusal, ruling, || Some(headers.finish()), request)
    }
}

impl<B> Shared<B> {
    /// Whether the inner service gets a [`Ruling`].
    fn rulings(&self) -> bool {
        self.attach || self.permissive
    }

    fn push(&self, headers: &mut QuotaHeaders, state: &QuotaState) {
        let several = self
            .several
            .get(state.by().policy_index())
            .copied()
            .unwrap_or(true);
        headers.push(state, several);
    }

    /// The refusal's answer (with the quota headers `quotas` gives), or, in permissive mode,
    /// the request let through with its ruling.
    fn refuse<P>(
        &self,
        refusal: Refusal,
        ruling: Option<Box<Ruling>>,
        quotas: impl FnOnce() -> Option<Ready>,
        request: &HeaderMap,
    ) -> Judged<P> {
        if self.permissive {
            let mut ruling = ruling.unwrap_or_default();
            if let Refusal::Limited(refused) = refusal {
                ruling.dry_run = refused.dry_run();
            }
            if !refusal.describes_quotas() {
                ruling.states.clear();
            }
            ruling.refusal = Some(refusal);
            return Judged::Admit(None, Some(ruling));
        }
        Judged::Refuse(Box::new(refusal_of(self, &refusal, quotas, request)))
    }

    /// What a settled decision comes to: the admission's quota headers and ruling, or the
    /// refusal; and the `X-RateLimit-Source` value if the layer writes one.
    pub(super) fn conclude(&self, settled: Settled, request: &HeaderMap) -> Concluded {
        let source = self.source_header.then(|| settled.source.to_string());
        let header = source.and_then(|source| HeaderValue::try_from(source).ok());
        let mut collect = Collect::new(self);
        settled.states.into_iter().for_each(|s| collect.push(s));
        let judged = match settled.answer {
            Ok(Ok(())) => {
                if let Some(dry_run) = settled.dry_run {
                    collect.dry_run(dry_run);
                }
                collect.admit()
            }
            // The refusing quota has nothing left in the states (`Settled::new` sees to it).
            Ok(Err(refused)) => collect.refuse(Refusal::Limited(refused), request),
            Err(capacity) => collect.refuse(Refusal::Oversized(capacity), request),
        };
        Concluded(judged, header)
    }
}

/// A request whose client could not be told: counted, and refused (or let through, in
/// permissive mode) if the rule says so; `None` to decide it in the shared bucket.
#[cold]
#[inline(never)]
pub(super) fn unkeyed<B, P>(shared: &Shared<B>, request: &HeaderMap) -> Option<Judged<P>> {
    // Relaxed: a statistic.
    shared.unkeyed.fetch_add(1, Ordering::Relaxed);
    shared.unkeyed_metric.increment(1);
    match shared.client_ip.missing() {
        Unkeyed::Refuse(status) => {
            let ruling = shared.rulings().then(Box::default);
            Some(shared.refuse(Refusal::Unkeyed(status), ruling, || None, request))
        }
        Unkeyed::Shared => None,
    }
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
        if !shared.style.any() && !shared.rulings() {
            // Nothing to report: a yes or no.
            let answer = match policies.decide(inbound, cost, None::<&mut Collect<'_, B>>) {
                Decision::Now(answer) => answer,
                Decision::Pending(pending) => return Judged::Pending(pending),
            };
            let refusal = match answer {
                Ok(Ok(())) => return Judged::Admit(None, None),
                Ok(Err(refused)) => Refusal::Limited(refused),
                Err(capacity) => Refusal::Oversized(capacity),
            };
            return shared.refuse(refusal, None, || None, inbound.headers());
        }
        let mut collect = Collect::new(shared);
        let answer = match policies.decide(inbound, cost, Some(&mut collect)) {
            Decision::Now(answer) => answer,
            Decision::Pending(pending) => return Judged::Pending(pending),
        };
        let refusal = match answer {
            Ok(Ok(())) if shared.style.any() => {
                return Judged::Admit(Some(Box::new(collect.headers.finish())), collect.ruling)
            }
            Ok(Ok(())) => return Judged::Admit(None, collect.ruling),
            Ok(Err(refused)) => Refusal::Limited(refused),
            Err(capacity) => Refusal::Oversized(capacity),
        };
        let Collect {
            headers, ruling, ..
        } = collect;
        shared.refuse(
            refusal,
            ruling,
            || Some(headers.finish()),
            inbound.headers(),
        )
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
{
    type Response = Response<ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, ResBody, S::Error>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<ReqBody>) -> Self::Future {
        let shared = &*self.shared;
        let client = shared
            .client_ip
            .resolve(peer_addr(request.extensions()), request.headers());
        let judged = match client {
            None => unkeyed(shared, request.headers()),
            Some(_) => None,
        };
        let judged = match judged {
            Some(judged) => judged,
            None => judge(shared, &request, client),
        };
        match judged {
            Judged::Admit(headers, ruling) => {
                if let Some(ruling) = ruling {
                    let outer = request.extensions_mut().remove();
                    request.extensions_mut().insert(ruling.after(outer));
                }
                ResponseFuture::admitted(self.inner.call(request), headers)
            }
            Judged::Refuse(refused) => {
                let (response, delay) = *refused;
                ResponseFuture::refused(response, delay)
            }
            Judged::Pending(pending) => {
                let conclude = concluding(&self.shared);
                ResponseFuture::later(pending.defer(&mut self.inner, request, conclude))
            }
        }
    }
}
