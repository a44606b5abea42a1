//! The actix-web middleware (feature `actix`): [`RateLimitLayer::actix`] turns a layer into an
//! actix [`Transform`] that decides each request with the layer's own policies, client-address
//! rule, cost function, headers, refusal bodies (gRPC included) and delay — the tower service's
//! code, run over a copy of the request's head in the `http` crate's types (actix-web 4 uses
//! `http` 0.2), and its answers copied back.
//!
//! [`Transform`]: https://docs.rs/actix-web/4/actix_web/dev/trait.Transform.html

use core::convert::Infallible;
use core::future::{ready, Future, Ready};
use core::pin::Pin;
use core::task::{Context, Poll};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;

use actix_web::body::EitherBody;
use actix_web::dev::{Service, ServiceRequest, ServiceResponse, Transform};
use actix_web::http::header as actix_header;
use actix_web::{Error, HttpResponse};
use bytes::Bytes;
use http::{HeaderMap, Request, Response};

use super::future::{Concluded, Judged};
use super::headers::{RATELIMIT, RATELIMIT_POLICY, X_RATELIMIT_SOURCE};
use super::inbound::MatchedRoute;
use super::service::{judge, unkeyed};
use super::{peer_addr, Inbound, RateLimitLayer, Shared};
use crate::backend::Backend;

impl<B: Backend<Inbound>> RateLimitLayer<B> {
    /// This layer as actix-web middleware, for `App::wrap` or `Scope::wrap`: the same
    /// decisions, headers and refusals as the tower service.
    ///
    /// ```
    /// use actix_web::{web, App};
    /// use flowgate::http::{Inbound, RateLimitLayer};
    /// use flowgate::policy::{Policies, Policy};
    ///
    /// let policies = Policies::<Inbound>::builder()
    ///     .policy(
    ///         Policy::keyed_with("per-client-per-route", |r: &Inbound, key| {
    ///             // The route pattern actix matched (`/users/{id}`), else the path.
    ///             key.add(&r.client_ip()).add(r.route_or_path());
    ///         })
    ///         .quota("20/min".parse()?),
    ///     )
    ///     .build()?;
    /// let limit = RateLimitLayer::new(policies).actix();
    /// let app = App::new()
    ///     .wrap(limit)
    ///     .route("/users/{id}", web::get().to(|| async { "user" }));
    /// // HttpServer::new(move || App::new().wrap(limit.clone())...): one set for every worker.
    /// # let _ = app;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn actix(&self) -> ActixRateLimit<B> {
        ActixRateLimit {
            shared: Arc::clone(&self.shared),
        }
    }
}

/// actix-web middleware made by [`RateLimitLayer::actix`]; clones share one policy set.
#[must_use = "middleware does nothing until an App or Scope wraps it"]
pub struct ActixRateLimit<B> {
    shared: Arc<Shared<B>>,
}

impl<B> Clone for ActixRateLimit<B> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<B> core::fmt::Debug for ActixRateLimit<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ActixRateLimit").finish_non_exhaustive()
    }
}

impl<S, T, B> Transform<S, ServiceRequest> for ActixRateLimit<B>
where
    S: Service<ServiceRequest, Response = ServiceResponse<T>, Error = Error> + 'static,
    T: 'static,
    B: Backend<Inbound>,
{
    type Response = ServiceResponse<EitherBody<T>>;
    type Error = Error;
    type Transform = ActixRateLimitService<S, B>;
    type InitError = ();
    type Future = Ready<Result<Self::Transform, ()>>;

    fn new_transform(&self, service: S) -> Self::Future {
        ready(Ok(ActixRateLimitService {
            inner: Rc::new(service),
            shared: Arc::clone(&self.shared),
        }))
    }
}

/// The service [`ActixRateLimit`] wraps around an actix service.
#[must_use = "services do nothing unless called"]
pub struct ActixRateLimitService<S, B> {
    inner: Rc<S>,
    shared: Arc<Shared<B>>,
}

impl<S, B> core::fmt::Debug for ActixRateLimitService<S, B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ActixRateLimitService")
            .finish_non_exhaustive()
    }
}

type Answer<B> = Result<ServiceResponse<EitherBody<B>>, Error>;

impl<S, T, B> Service<ServiceRequest> for ActixRateLimitService<S, B>
where
    S: Service<ServiceRequest, Response = ServiceResponse<T>, Error = Error> + 'static,
    T: 'static,
    B: Backend<Inbound>,
{
    type Response = ServiceResponse<EitherBody<T>>;
    type Error = Error;
    type Future = Pin<Box<dyn Future<Output = Answer<T>>>>;

    fn poll_ready(&self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&self, request: ServiceRequest) -> Self::Future {
        let shared = &*self.shared;
        let head = head_of(&request);
        let client = shared
            .client_ip
            .resolve(peer_addr(head.extensions()), head.headers());
        let judged = match client {
            None => unkeyed(shared, head.headers()),
            Some(_) => None,
        };
        let inner = Rc::clone(&self.inner);
        match judged.unwrap_or_else(|| judge(shared, &head, client)) {
            Judged::Pending(pending) => {
                let shared = Arc::clone(&self.shared);
                Box::pin(async move {
                    let settled = pending.await;
                    let source = settled.source;
                    let Concluded(judged, header) = shared.conclude(settled, head.headers());
                    actix_web::HttpMessage::extensions_mut(&request).insert(source);
                    let mut answer = answer(inner, request, judged).await;
                    if let (Ok(response), Some(header)) = (&mut answer, header) {
                        let one = HeaderMap::from_iter([(X_RATELIMIT_SOURCE, header)]);
                        copy_headers(&one, response.headers_mut());
                    }
                    answer
                })
            }
            Judged::Admit(headers, ruling) => {
                Box::pin(answer(inner, request, Judged::Admit(headers, ruling)))
            }
            Judged::Refuse(refused) => Box::pin(answer(inner, request, Judged::Refuse(refused))),
        }
    }
}

/// What a decision comes to: the inner service's response, with the quota headers added and
/// the ruling in the request's extensions; or the refusal.
async fn answer<S, T>(
    inner: Rc<S>,
    request: ServiceRequest,
    judged: Judged<Infallible>,
) -> Answer<T>
where
    S: Service<ServiceRequest, Response = ServiceResponse<T>, Error = Error> + 'static,
{
    match judged {
        Judged::Admit(headers, ruling) => {
            if let Some(ruling) = ruling {
                let mut extensions = actix_web::HttpMessage::extensions_mut(&request);
                let outer = extensions.remove();
                extensions.insert(ruling.after(outer));
            }
            admit(inner.call(request), headers.map(|h| *h)).await
        }
        Judged::Refuse(refused) => {
            let (response, delay) = *refused;
            refuse(request, response, delay).await
        }
        Judged::Pending(never) => match never {},
    }
}

/// The inner service's response, with the quota headers added.
async fn admit<B>(
    answer: impl Future<Output = Result<ServiceResponse<B>, Error>>,
    headers: Option<super::headers::Ready>,
) -> Answer<B> {
    let mut response = answer.await?;
    if let Some(headers) = headers {
        let mut map = HeaderMap::new();
        headers.write(&mut map);
        let to = response.headers_mut();
        // As in tower's service: the draft's lists are appended (nested layers add up), the
        // legacy headers replace what an inner layer wrote.
        for name in map.keys() {
            if name != RATELIMIT && name != RATELIMIT_POLICY {
                to.remove(name.as_str());
            }
        }
        copy_headers(&map, to);
    }
    Ok(response.map_into_left_body())
}

/// The refusal, held for its delay (on tokio's timer, which actix's runtime runs on).
async fn refuse<B>(
    request: ServiceRequest,
    response: Response<Bytes>,
    delay: Option<core::time::Duration>,
) -> Answer<B> {
    if let Some(delay) = delay {
        tokio::time::sleep(delay).await;
    }
    let (parts, body) = response.into_parts();
    let status = actix_web::http::StatusCode::from_u16(parts.status.as_u16())
        .unwrap_or(actix_web::http::StatusCode::TOO_MANY_REQUESTS);
    let mut answer = HttpResponse::with_body(status, body).map_into_boxed_body();
    copy_headers(&parts.headers, answer.headers_mut());
    Ok(request.into_response(answer).map_into_right_body())
}

/// The request's head in the `http` crate's types, for the policies' [`Inbound`]: method, URI,
/// headers, the peer's address, and the route pattern actix matched.
///
/// [`Inbound`]: super::Inbound
fn head_of(request: &ServiceRequest) -> Request<()> {
    let mut head = Request::new(());
    if let Ok(method) = http::Method::from_bytes(request.method().as_str().as_bytes()) {
        *head.method_mut() = method;
    }
    if let Ok(uri) = http::Uri::try_from(request.uri().to_string()) {
        *head.uri_mut() = uri;
    }
    let headers = head.headers_mut();
    headers.reserve(request.headers().len());
    for (name, value) in request.headers() {
        let name = http::HeaderName::from_bytes(name.as_str().as_bytes());
        let value = http::HeaderValue::from_bytes(value.as_bytes());
        if let (Ok(name), Ok(value)) = (name, value) {
            headers.append(name, value);
        }
    }
    if let Some(peer) = request.peer_addr() {
        head.extensions_mut().insert::<SocketAddr>(peer);
    }
    if let Some(pattern) = request.match_pattern() {
        head.extensions_mut().insert(MatchedRoute(pattern));
    }
    head
}

/// Appends every header of `from` to actix's `to`.
fn copy_headers(from: &HeaderMap, to: &mut actix_header::HeaderMap) {
    for (name, value) in from {
        let name = actix_header::HeaderName::from_bytes(name.as_str().as_bytes());
        let value = actix_header::HeaderValue::from_bytes(value.as_bytes());
        if let (Ok(name), Ok(value)) = (name, value) {
            to.append(name, value);
        }
    }
}
