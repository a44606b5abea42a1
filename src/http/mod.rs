//! HTTP middleware in tower's shape (feature `tower`): [`RateLimitLayer`] wraps any service of
//! `http` requests, as axum, hyper and tonic's server serve them (its responses' body is a
//! [`ResponseBody`]: the inner service's, or a refusal's), and decides each request with a
//! policy set over [`Inbound`], the request's head: a [`Policies`] set in process, or the same
//! set decided in Redis (see [Over Redis](#over-redis)); for actix-web, [`RateLimitLayer::actix`].
//!
//! ```
//! use std::net::SocketAddr;
//! use axum::{routing::get, Router};
//! use flowgate::http::{Inbound, RateLimitLayer};
//! use flowgate::policy::{Policies, Policy};
//!
//! let policies = Policies::<Inbound>::builder()
//!     // Three layers: per client per endpoint, per endpoint, and global.
//!     .policy(
//!         Policy::keyed_with("per-client-per-endpoint", |r: &Inbound, key| {
//!             key.add(&r.client_ip()).add(r.route_or_path());
//!         })
//!         .quota("20/min".parse()?),
//!     )
//!     .policy(Policy::keyed("per-endpoint", |r: &Inbound| r.route_or_path()).quota("1000/s".parse()?))
//!     .policy(Policy::global("global").quota("5000/s".parse()?))
//!     .build()?;
//!
//! let app: Router = Router::new()
//!     .route("/search", get(|| async { "results" }))
//!     // After routing, `Inbound::route` sees the matched route (`/users/{id}`). With
//!     // `Router::layer` it does too, and the 404 fallback is limited by its raw path.
//!     .route_layer(RateLimitLayer::new(policies));
//! // Serve it with the peer address in the request's extensions:
//! // axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>())
//! # let _ = app.into_make_service_with_connect_info::<SocketAddr>();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # What a response carries
//! * **Admitted**: the inner service's response, plus the IETF draft's quota headers
//!   (draft-ietf-httpapi-ratelimit-headers-10), one item per quota of every enforcing policy
//!   that applied, in evaluation order — `RateLimit-Policy: "per-client";q=20;w=60` (the quota:
//!   `q` cells per `w` seconds, see below) and `RateLimit: "per-client";r=19;t=3` (`r` cells
//!   left, `t` seconds until more quota comes, that is until the bucket holds one more cell,
//!   rounded up; 0 when it is full; a refusal's `Retry-After` is never earlier than the `t` of
//!   a quota with nothing left). A policy with several quotas
//!   names its items `"policy.0"`, `"policy.1"`, … (names are written as structured-field
//!   strings: characters outside printable ASCII become `?`, so give policies distinct ASCII
//!   names). Nested layers append their items. [`HeaderStyle`] adds the legacy
//!   `X-RateLimit-Limit` / `-Remaining` / `-Reset` (the tightest quota: fewest cells left, then
//!   longest reset; `Reset` in seconds until that bucket is full again) or turns them off.
//! * **Refused for now** ([`Refusal::Limited`]): `429 Too Many Requests`, `Retry-After` in whole
//!   seconds rounded up and never 0 (RFC 9110: a client that waits that long is admitted if
//!   nothing else is taken meanwhile; it includes the policy's jitter), the same quota headers
//!   as they stand, and an `application/problem+json` body naming the refusing policy
//!   ([`Refusal::problem`]; [`RateLimitLayer::refusal_response`] replaces it, and the status,
//!   for every kind of refusal below).
//! * **Never admissible** ([`Refusal::Oversized`]: the request's [cost](RateLimitLayer::cost)
//!   exceeds a quota's burst; or a wait beyond the clock's horizon): `429` without
//!   `Retry-After`.
//! * **A full table** (a keyed policy with no room for a new client, [`Cause::TableFull`]):
//!   `429` with `Retry-After` as a hint only (room appears when another client goes idle) and
//!   no quota headers; likewise, with its exact wait, a new client the quota on new keys
//!   refused. Size [`Policy::max_keys`](crate::Policy::max_keys) for the clients you
//!   expect: keyed by /64, one holder of a /48 can present 65 536 clients.
//! * **No client address**, when the rule says refuse ([`Unkeyed::Refuse`]): that status.
//! * **A key extractor's rejection** ([`Key::reject`](crate::policy::Key::reject): a missing
//!   or malformed API key, say): its status and message, no `Retry-After` and no quota
//!   headers; what earlier policies took is given back.
//! * **The limiter unavailable** (Redis did not answer, `OnFailure::Closed`:
//!   [`Cause::Unavailable`]): `503` with the policy's `Retry-After`, no quota headers and a body
//!   naming no policy (`the rate limiter is unavailable: retry after 1 s`).
//! * **A gRPC call**: any refusal above, as gRPC ([`Refusal::grpc_code`]: `grpc-status: 8`; 14
//!   when the limiter is unavailable; a rejection's status mapped, 16 for a 401).
//!
//! A quota `count/period` is advertised as `q=count;w=period` in whole seconds; a period that
//! is not a whole number of seconds is widened to the next one and `q` scaled down to it
//! (`10/500ms` is `q=20;w=1`), so the advertised rate never exceeds the real one. Quotas are
//! GCRA buckets: `q` is the rate, and `r` and `X-RateLimit-Limit` count the quota's burst, which
//! exceeds `q` for a quota built `with_burst` above its count.
//!
//! # Client addresses
//! [`Inbound::client_ip`] is resolved by [`ClientIp`] before the policies run:
//! * The **peer address** comes from the request's extensions: axum's
//!   `ConnectInfo<SocketAddr>` (feature `axum`), tonic's `TcpConnectInfo` (feature `tonic`:
//!   tonic's server inserts it over plain TCP; over TLS it inserts a `TlsConnectInfo`, which is
//!   not read: insert the peer's `SocketAddr` in a layer before this one), or a `SocketAddr` /
//!   `IpAddr` that a plain hyper server inserts per connection.
//! * `Forwarded`, `X-Forwarded-For` and `X-Real-IP` are **ignored unless** the operator trusts
//!   proxies ([`ClientIp::trust`]): any client can write them. With trusted proxies, the chain
//!   is read from the right, and the first address that is not a trusted proxy is the client;
//!   what lies left of it (the client's own text) is never parsed. Trust only the proxies'
//!   addresses: a client inside a trusted network can name any address of it.
//! * IPv6 clients are keyed by their **/64** (one client owns a whole /64 and can rotate through
//!   it; [`ClientIp::ipv6_prefix`] changes it). IPv4-mapped addresses count as IPv4, and so do
//!   the NAT64 well-known prefix (`64:ff9b::a.b.c.d`) and the IPv4-compatible form
//!   (`::a.b.c.d`): each IPv4 host behind a NAT64 gateway is a client of its own
//!   ([`ClientIp::embedded_ipv4`] turns that off).
//! * A request whose client cannot be told follows [`Unkeyed`]: by default it is refused with
//!   `500` and a problem body before any policy runs, and counted
//!   ([`RateLimitLayer::unkeyed`]): a server that does not pass the peer address would
//!   otherwise put every client in one bucket, silently. Sharing one bucket
//!   ([`Unkeyed::Shared`]) is an explicit choice.
//!
//! Other keys come from [`Inbound`]: a header (an API key), the matched route or the path, the
//! method, the extensions, or anything a closure computes from them. An extractor that finds
//! no key can also [`skip`](crate::policy::Key::skip) its policy, or
//! [`reject`](crate::policy::Key::reject) the request with a status and a message.
//!
//! # Sharing and cost
//! The policies live in one [`Arc`] that every clone of the service shares
//! (unlike per-clone limiters, tower#794), so a service cloned per connection or per request
//! still enforces one limit. [`RateLimitLayer::policies`] gives the backend back. Per request the
//! middleware lends the request's head to the policies as an [`Inbound`] (no copy, no
//! allocation), makes one policy decision, and formats the quota headers on the stack (one
//! allocation per header value and one for the set the response future carries;
//! `RateLimit-Policy` is made once per layer for the usual response). With
//! [`HeaderStyle::NONE`] the decision is a plain yes or no and nothing is allocated for an
//! admission. `BENCHMARKS.md` compares it with `tower_governor`.
//!
//! # Any backend
//! The layer decides through any [`Backend`]: a [`Policies`] set decides at once, on the
//! calling thread, and asks nothing more of the inner service. A remote set (a Redis one, built
//! with `build_redis`) is shared by every instance of the service, with the same responses as
//! in process (the same 429 body, `Retry-After`, quota headers of every quota the decision went
//! through, cost function, client addresses and refusal delay; `tests/http_redis.rs` compares
//! them response by response). Its keys and cost are read at once; the inner service, made
//! ready, and the request wait for the decision (the service is cloned to take its place, so it
//! must be `Clone`, as axum's are: [`Defer`]). When the server does not answer, the set's
//! failure policy decides: flowgate-redis's default fails open, admitting every such request
//! (its start-up log says so). With the defaults, two instances at twice the quota with both
//! CPUs busy make no decision that way and stay below the bound (`cargo bench -p
//! flowgate-benches --bench redis_defaults` measures it). The inner service finds where an admission came from in the
//! request's extensions, and [`RateLimitLayer::source_header`] tells the client.
//!
//! # Delaying refusals
//! [`RateLimitLayer::delay_refusals`] holds a refusal for a while before sending it (for
//! clients that ignore `Retry-After`), on tokio's timer, without holding a thread. Outside a
//! tokio runtime the refusal is sent at once; inside one, the runtime must have its time driver
//! (`#[tokio::main]` and `Builder::enable_all` do), or tokio panics as `tokio::time::sleep`
//! does. A held refusal costs its future's memory until it is sent.
//!
//! [`Cause::TableFull`]: crate::Cause::TableFull
//! [`Cause::Unavailable`]: crate::Cause::Unavailable
//!
//! [`Policies`]: crate::Policies

#[cfg(feature = "actix")]
mod actix;
mod cidr;
mod client_ip;
#[cfg(feature = "serde")]
mod config;
mod future;
mod grpc;
mod headers;
mod inbound;
mod refusal;
mod service;
mod text;

use core::time::Duration;
// Not crate::primitive's (loom's, in the model build): a statistic counted by one fetch_add,
// which orders nothing.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http::Response;

#[cfg(feature = "actix")]
pub use actix::{ActixRateLimit, ActixRateLimitService};
pub use cidr::{Cidr, CidrError};
pub use client_ip::{ClientIp, ForwardedHeader, Unkeyed};
pub use future::{ResponseBody, ResponseFuture};
pub use headers::HeaderStyle;
pub(crate) use inbound::peer_addr;
pub use inbound::{by_client_ip, Inbound};
pub use refusal::{Refusal, Ruling};
pub use service::RateLimitService;

pub use future::Defer;

use self::headers::{Item, PolicyCache};
use crate::backend::Backend;
use crate::observe::{self, Counter};
use crate::policy::Policies;

type Cost = Arc<dyn Fn(&Inbound) -> u32 + Send + Sync>;
type Respond = Arc<dyn Fn(&Refusal) -> Response<Bytes> + Send + Sync>;

/// The configuration every service of one layer shares.
pub(crate) struct Shared<B> {
    /// The backend (an `Arc`: a layer's settings are copied on write, never its buckets).
    policies: Arc<B>,
    /// Per policy, in evaluation order: whether it has more than one quota (its header items
    /// are then numbered).
    several: Box<[bool]>,
    /// `RateLimit-Policy` when every enforcing quota applies, as built.
    cache: PolicyCache,
    client_ip: ClientIp,
    cost: Option<Cost>,
    style: HeaderStyle,
    delay: Duration,
    respond: Option<Respond>,
    /// Whether responses decided remotely say where the decision came from.
    source_header: bool,
    /// Whether handlers see the decision ([`Ruling`]); whether refusals are let through with it.
    attach: bool,
    permissive: bool,
    /// Requests whose client could not be told (shared by every clone of the layer).
    unkeyed: Arc<AtomicU64>,
    /// The same, for the `metrics` feature.
    unkeyed_metric: Counter,
}

impl<B> Clone for Shared<B> {
    fn clone(&self) -> Self {
        Self {
            policies: Arc::clone(&self.policies),
            several: self.several.clone(),
            cache: self.cache.clone(),
            client_ip: self.client_ip.clone(),
            cost: self.cost.clone(),
            style: self.style,
            delay: self.delay,
            respond: self.respond.clone(),
            source_header: self.source_header,
            attach: self.attach,
            permissive: self.permissive,
            unkeyed: Arc::clone(&self.unkeyed),
            unkeyed_metric: self.unkeyed_metric.clone(),
        }
    }
}

/// A tower [`Layer`](tower_layer::Layer) that rate-limits HTTP requests with a [`Policies`] set;
/// see the [module docs](self).
#[must_use = "a layer does nothing until it wraps a service"]
pub struct RateLimitLayer<B = Policies<Inbound>> {
    shared: Arc<Shared<B>>,
}

impl<B> Clone for RateLimitLayer<B> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<B: Backend<Inbound>> core::fmt::Debug for RateLimitLayer<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let names: Vec<_> = self
            .shared
            .policies
            .policies()
            .into_iter()
            .map(|p| p.name)
            .collect();
        f.debug_struct("RateLimitLayer")
            .field("policies", &names)
            .field("client_ip", &self.shared.client_ip)
            .field("style", &self.shared.style)
            .field("delay", &self.shared.delay)
            .finish_non_exhaustive()
    }
}

impl<B: Backend<Inbound>> RateLimitLayer<B> {
    /// A layer deciding every request through `policies`, any [`Backend`]: a
    /// [`Policies`] set (owned, or an `Arc` shared with the rest of the program), or a remote
    /// one; each request costing one cell, with the draft's quota headers, the peer as the
    /// client, and the default problem body.
    pub fn new(policies: B) -> Self {
        let mut several = Vec::new();
        let mut items = Vec::new();
        for (policy_index, policy) in policies.policies().into_iter().enumerate() {
            several.push(policy.quotas.len() > 1);
            if policy.dry_run {
                continue;
            }
            for (quota_index, quota) in policy.quotas.into_iter().enumerate() {
                items.push(Item {
                    policy_index,
                    quota_index,
                    quota,
                    name: policy.name.as_str().into(),
                    several: several[policy_index],
                });
            }
        }
        Self {
            shared: Arc::new(Shared {
                policies: Arc::new(policies),
                several: several.into_boxed_slice(),
                cache: PolicyCache::new(items),
                client_ip: ClientIp::peer(),
                cost: None,
                style: HeaderStyle::DRAFT,
                delay: Duration::ZERO,
                respond: None,
                source_header: false,
                attach: false,
                permissive: false,
                unkeyed: Arc::new(AtomicU64::new(0)),
                unkeyed_metric: observe::unkeyed_counter(),
            }),
        }
    }

    /// How the client's address is told ([`ClientIp::peer`] by default).
    pub fn client_ip(mut self, client_ip: ClientIp) -> Self {
        self.shared_mut().client_ip = client_ip;
        self
    }

    /// The cells a request takes (1 by default; 0 takes nothing and reports the quotas). A
    /// cost above a quota's burst is refused as [`Refusal::Oversized`].
    pub fn cost(mut self, cost: impl Fn(&Inbound) -> u32 + Send + Sync + 'static) -> Self {
        self.shared_mut().cost = Some(Arc::new(cost));
        self
    }

    /// Which quota headers responses carry ([`HeaderStyle::DRAFT`] by default).
    pub fn headers(mut self, style: HeaderStyle) -> Self {
        self.shared_mut().style = style;
        self
    }

    /// Whether a response whose decision a remote backend made (admitted or refused) carries
    /// `X-RateLimit-Source`: where the decision came from, as [`Source`](crate::backend::Source)
    /// writes it (`decided by the buckets`, `failed open: timed out`, …). Off by default. A
    /// set in process always decides by its buckets and writes no such header. Whether on or
    /// not, the inner service finds the `Source` of a remote admission in the request's
    /// extensions.
    pub fn source_header(mut self, on: bool) -> Self {
        self.shared_mut().source_header = on;
        self
    }

    /// Whether the inner service finds the decision in each request's extensions, as a
    /// [`Ruling`]: the quotas that applied (policy, quota, cells left, reset) and the first
    /// dry-run policy that would have refused. Off by default: attaching costs an allocation
    /// per request. The [guide](crate::guide#the-decision-in-the-handler) shows a handler
    /// reading it.
    pub fn attach_decisions(mut self, on: bool) -> Self {
        self.shared_mut().attach = on;
        self
    }

    /// Lets every request through to the inner service, refused or not, with the decision
    /// attached as a [`Ruling`] ([`Ruling::refusal`] says why the layer would have refused),
    /// for the handler to decide: a whole layer on trial, or a service that answers refusals
    /// itself. A refusal takes no cells, so requests let through cost the buckets nothing;
    /// their responses carry no quota headers and no `Retry-After`, and are never delayed
    /// ([`delay_refusals`](Self::delay_refusals) does not apply). Off by default.
    pub fn permissive(mut self, on: bool) -> Self {
        self.shared_mut().permissive = on;
        self
    }

    /// Holds every refusal for `delay` before answering (zero, the default, answers at once);
    /// see the [module docs](self#delaying-refusals).
    pub fn delay_refusals(mut self, delay: Duration) -> Self {
        self.shared_mut().delay = delay;
        self
    }

    /// The one place that answers every kind of refusal: a policy's, a request too large, a
    /// full table, an unavailable limiter, a key extractor's rejection, a client whose address
    /// could not be told. `respond` returns the response (status, headers, body), to which the
    /// middleware adds `Retry-After` and the quota headers. The default is
    /// [`Refusal::response`]: [`Refusal::status`] with the [`Refusal::problem`] body. A gRPC
    /// call gets the code of the response's status (as [`Refusal::grpc_code`] maps it) and the
    /// refusal's [`detail`](Refusal::detail), nothing else. The status is used as given (a 2xx
    /// too).
    ///
    /// ```
    /// use flowgate::http::{RateLimitLayer, Refusal};
    /// use http::header::WWW_AUTHENTICATE;
    /// use http::{HeaderValue, StatusCode};
    /// # let policies = flowgate::Policies::<flowgate::http::Inbound>::builder()
    /// #     .policy(flowgate::Policy::global("all").quota("100/s".parse()?))
    /// #     .build()?;
    ///
    /// let layer = RateLimitLayer::new(policies).refusal_response(|refusal: &Refusal| {
    ///     let mut response = refusal.response();
    ///     // A key extractor's 401 says how to authenticate (RFC 9110).
    ///     if response.status() == StatusCode::UNAUTHORIZED {
    ///         let bearer = HeaderValue::from_static("Bearer");
    ///         response.headers_mut().insert(WWW_AUTHENTICATE, bearer);
    ///     }
    ///     response
    /// });
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn refusal_response(
        mut self,
        respond: impl Fn(&Refusal) -> Response<Bytes> + Send + Sync + 'static,
    ) -> Self {
        self.shared_mut().respond = Some(Arc::new(respond));
        self
    }

    /// The backend the layer decides through, as given to [`new`](Self::new). A [`Policies`]
    /// set has [`stats`](crate::Policies::stats), [`sweep`](crate::Policies::sweep) and
    /// [`replace_quotas`](crate::Policies::replace_quotas); another backend has what its own type
    /// offers (flowgate-redis's `AnyPolicies` is an enum: match it for the set inside).
    pub fn policies(&self) -> &B {
        &self.shared.policies
    }

    /// Requests whose client address could not be told, since the layer was built (refused
    /// or not, as [`Unkeyed`] says).
    pub fn unkeyed(&self) -> u64 {
        // Relaxed: a statistic.
        self.shared.unkeyed.load(Ordering::Relaxed)
    }

    fn shared_mut(&mut self) -> &mut Shared<B> {
        Arc::make_mut(&mut self.shared)
    }
}

impl<S, B> tower_layer::Layer<S> for RateLimitLayer<B> {
    type Service = RateLimitService<S, B>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimitService {
            inner,
            shared: Arc::clone(&self.shared),
        }
    }
}
