#![allow(dead_code)] // each bench binary that includes this file uses part of it
//! The HTTP middleware benches' services, built the same way for flowgate and tower_governor:
//! one limit per client address (1024 clients, taken from axum's `ConnectInfo`), a quota no
//! request in a benchmark exhausts (1 per second with a burst of 10⁹: every key stays booked,
//! so none is ever idle and evicted; a quota of 10⁹ per second would leave every key idle
//! between its requests and measure flowgate's table making room), and an inner service that
//! answers at once. Every side gets
//! the same request, built the same way, so the difference to `bare` is the middleware.

use std::convert::Infallible;
use std::future::Ready;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use axum::body::Body;
use axum::extract::ConnectInfo;
use flowgate::http::{by_client_ip, HeaderStyle, Inbound, RateLimitLayer, RateLimitService};
use flowgate::policy::{Policies, Policy};
use flowgate::Quota;
use governor::middleware::{NoOpMiddleware, StateInformationMiddleware};
use http::{Request, Response};
use tower::{Layer, Service};
use tower_governor::governor::Governor;
use tower_governor::governor::GovernorConfigBuilder;
use tower_governor::key_extractor::PeerIpKeyExtractor;
use tower_governor::GovernorLayer;

pub const CLIENTS: usize = 1024;
const BURST: u32 = 1_000_000_000;

pub type Inner =
    tower::util::ServiceFn<fn(Request<()>) -> Ready<Result<Response<Body>, Infallible>>>;

fn answer(_request: Request<()>) -> Ready<Result<Response<Body>, Infallible>> {
    std::future::ready(Ok(Response::new(Body::empty())))
}

pub fn inner() -> Inner {
    tower::service_fn(answer as fn(_) -> _)
}

/// The `i`-th client's request (its address in `ConnectInfo`, as axum serves it).
pub fn request(i: usize) -> Request<()> {
    let octets = ((i % CLIENTS) as u32 + 1).to_be_bytes();
    let ip = IpAddr::V4(Ipv4Addr::new(10, octets[1], octets[2], octets[3]));
    let mut request = Request::new(());
    request
        .extensions_mut()
        .insert(ConnectInfo(SocketAddr::new(ip, 40_000)));
    request
}

pub fn flowgate(style: HeaderStyle) -> RateLimitService<Inner> {
    let policies = Policies::<Inbound>::builder()
        .policy(
            Policy::keyed_with("per-client", by_client_ip)
                .quota(Quota::per_second(1).unwrap().with_burst(BURST).unwrap()),
        )
        .build()
        .unwrap();
    RateLimitLayer::new(policies).headers(style).layer(inner())
}

pub type TowerGovernor = Governor<PeerIpKeyExtractor, NoOpMiddleware, Inner, Body>;
pub type TowerGovernorHeaders =
    Governor<PeerIpKeyExtractor, StateInformationMiddleware, Inner, Body>;

pub fn tower_governor() -> TowerGovernor {
    let config = GovernorConfigBuilder::default()
        .per_second(1)
        .burst_size(BURST)
        .finish()
        .unwrap();
    GovernorLayer::new(config).layer(inner())
}

/// With `use_headers`: `x-ratelimit-limit` and `-remaining` on admitted responses.
pub fn tower_governor_headers() -> TowerGovernorHeaders {
    let config = GovernorConfigBuilder::default()
        .per_second(1)
        .burst_size(BURST)
        .use_headers()
        .finish()
        .unwrap();
    GovernorLayer::new(config).layer(inner())
}

/// One request through `service`, answered at once; whether it was admitted.
#[inline(always)]
pub fn serve<S, B>(service: &mut S, i: usize) -> bool
where
    S: Service<Request<()>, Response = Response<B>, Error = Infallible>,
{
    let response = crate::common::ready_now(service.call(request(i))).unwrap();
    response.status().is_success()
}

/// Every side's service, each client seen once (so every side measures keys it holds).
pub struct Sides {
    pub bare: Inner,
    pub flowgate: RateLimitService<Inner>,
    pub flowgate_legacy: RateLimitService<Inner>,
    pub flowgate_no_headers: RateLimitService<Inner>,
    pub tower_governor: TowerGovernor,
    pub tower_governor_headers: TowerGovernorHeaders,
}

impl Sides {
    pub fn new() -> Self {
        let mut sides = Self {
            bare: inner(),
            flowgate: flowgate(HeaderStyle::DRAFT),
            flowgate_legacy: flowgate(HeaderStyle::LEGACY),
            flowgate_no_headers: flowgate(HeaderStyle::NONE),
            tower_governor: tower_governor(),
            tower_governor_headers: tower_governor_headers(),
        };
        for i in 0..CLIENTS {
            assert!(serve(&mut sides.bare, i));
            assert!(serve(&mut sides.flowgate, i));
            assert!(serve(&mut sides.flowgate_legacy, i));
            assert!(serve(&mut sides.flowgate_no_headers, i));
            assert!(serve(&mut sides.tower_governor, i));
            assert!(serve(&mut sides.tower_governor_headers, i));
        }
        sides
    }
}
