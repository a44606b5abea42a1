//! A guide to flowgate: choosing an algorithm, a rate and a burst; keyed limits and their
//! memory; policies; waiting; HTTP; Redis; metrics; and coming from governor. A module of
//! documentation only: every snippet below runs as a doctest, except the Redis one (compiled
//! only: it needs a server) and governor's (run as `integration/tests/guide_governor.rs`).
//!
//! # Choosing an algorithm
//!
//! The classic algorithms (token bucket, leaky bucket, fixed and sliding windows) each trade
//! precision, memory and burst behaviour differently; flowgate has them all, each a pure function of one 64-bit word (the [`algorithm`](crate::algorithm) module has the
//! full table). The differences show best under the fixed-window boundary attack: 120 requests
//! a minute allowed, a client sends 120 in the last ten seconds of a minute and 120 in the first
//! ten of the next. This picture is what the simulator draws (`cargo run --release --features
//! simulate --example simulate -- --svg docs/boundary.svg`): a panel per algorithm, the cells
//! offered in grey, the cells admitted as a line, and each total after the algorithm's name:
//!
#![doc = include_str!("../docs/boundary.svg")]
//!
//! * **GCRA** ([`Gcra`](crate::Gcra), the default; a token bucket): a burst, then one cell
//!   per interval. 159 of the 240: its 120-cell burst, then 2 per second for 20 s. Exact to the
//!   nanosecond, 8 bytes, the cheapest decision. Choose it unless you need one of the others.
//! * **Leaky bucket as a meter**: the same decisions as GCRA, seen as a draining queue.
//! * **Leaky bucket as a shaper** and **credit**: admit a request *to go ahead later*
//!   ([`Allowed::delay`](crate::Allowed::delay)), up to a maximum queueing delay: 179, spread
//!   over time. For work you can postpone (a job scheduler), not for answering a client now.
//! * **Fixed window** and **interval refill**: all 240 in 20 s, twice the limit: the boundary
//!   problem. Cheap and easy to explain; fine when an occasional 2× is harmless.
//! * **Sliding window counter**: 139; weighs the previous window's count, an approximation.
//! * **Sliding log** ([`SlidingLog`](crate::SlidingLog)): exactly 120 in any 60 s, at the cost
//!   of one slot per cell of the limit.
//!
//! The same comparison in code, on your own traffic (here at explicit readings of a manual
//! clock, so a minute passes instantly):
//!
//! ```
//! use flowgate::algorithm::FixedWindow;
//! use flowgate::clock::ManualClock;
//! use flowgate::{Algorithm, Gcra, Quota, RateLimiter};
//!
//! let quota = Quota::per_minute(120)?;
//! // 120 requests over 50–60 s and 120 over 60–70 s, in ns from the trace's start.
//! let times: Vec<u64> = (0..240).map(|i| 50_000_000_000 + i * 10_000_000_000 / 120).collect();
//! fn admitted(algorithm: impl Algorithm, times: &[u64]) -> usize {
//!     // Windows start at multiples of 60 s of the clock: so does the trace.
//!     let start = 60_000_000_000;
//!     let clock = ManualClock::starting_at(start);
//!     let limiter = RateLimiter::with_algorithm(algorithm, clock.clone());
//!     times
//!         .iter()
//!         .filter(|&&t| {
//!             clock.set(start + t);
//!             limiter.check().is_ok()
//!         })
//!         .count()
//! }
//! assert_eq!(admitted(FixedWindow::new(&quota)?, &times), 240);
//! assert_eq!(admitted(Gcra::new(&quota), &times), 159);
//! # Ok::<(), flowgate::QuotaError>(())
//! ```
//!
//! # Choosing a rate and a burst
//!
//! A [`Quota`](crate::Quota) is a rate (`count` cells per `period`) and a burst (how many cells
//! may go at once; by default `count`). The burst is the one to think about:
//!
//! * **Burst = count** (the default) lets a client that was quiet spend a whole period's
//!   allowance at once: right for interactive clients that come in bursts.
//! * **A small burst** smooths traffic: `"100/s burst 10"` admits at most 10 at once and then one
//!   every 10 ms. Protects a backend that cannot absorb spikes.
//! * **Initial fill**: a fresh bucket is full by default, so a new client may send a burst at
//!   once; `initial 0` makes it earn its cells (so that a fresh bucket does not admit its
//!   initial cells plus a full period's worth in its first period).
//! * **Several windows at once**, such as 200 per 10 s and 5000 per hour: a
//!   [policy](#policies-several-quotas-several-layers) with several quotas, not one quota.
//!
//! ```
//! use std::time::Duration;
//! use flowgate::{Quota, RateLimiter};
//!
//! let smooth: Quota = "100/s burst 10".parse()?;
//! assert_eq!((smooth.burst(), smooth.interval()), (10, Duration::from_millis(10)));
//! let earned: Quota = "60/min burst 10 initial 0".parse()?;
//! let limiter = RateLimiter::new(earned);
//! assert!(limiter.check().is_err(), "a fresh bucket with initial 0 has nothing yet");
//! // Bad input is a typed error that names the problem; nothing panics.
//! assert!("0/s".parse::<Quota>().is_err());
//! assert!(Quota::per_second(10)?.with_burst(0).is_err());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Keyed limits: memory and eviction
//!
//! A [`KeyedRateLimiter`](crate::KeyedRateLimiter) keeps one bucket per key in a table
//! allocated once for `max_keys` (about 18.3 bytes per key of capacity: a 64-bit fingerprint of
//! the key and the bucket's word; the key itself is never stored). Size it for the keys active
//! at once, not for every key ever seen: a bucket that is full again is forgotten by the next
//! insert that meets it, by [`sweep`](crate::KeyedRateLimiter::sweep), or by a sweeper thread,
//! and forgetting a full bucket changes no decision (with a partial initial fill, a forgotten
//! bucket comes back with fewer cells than it had: stricter, never looser; the
//! [`keyed`](crate::keyed) module lists every exception). When the table is full of active keys, new
//! keys are refused or admitted untracked ([`WhenFull`](crate::WhenFull)), and a quota on new
//! keys bounds how fast a flood of fresh keys can fill it.
//!
//! ```
//! use flowgate::{Gcra, KeyedRateLimiter, Quota, WhenFull};
//!
//! let limiter = KeyedRateLimiter::<str>::builder(Gcra::new(&Quota::per_minute(100)?))
//!     .max_keys(100_000)
//!     .when_full(WhenFull::Refuse)
//!     .new_keys(Quota::per_second(1_000)?)
//!     .build()?;
//! assert!(limiter.stats().memory_bytes < 3 * 1024 * 1024, "about 2.1 MB for 100 000 keys");
//! assert_eq!(limiter.check_key("203.0.113.7")?.remaining(), 99);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Policies: several quotas, several layers
//!
//! [`Policies`](crate::Policies) decides a request against named policies in order, say per
//! user per endpoint, then per endpoint, then global, each with one or more quotas, all or
//! nothing: a refused request takes no cell anywhere. A refusal names its policy and quota, and
//! its retry-after can carry jitter so that refused clients do not all come back at once. A
//! policy in dry-run mode is evaluated and counted but never refuses: the way to try a new limit
//! on live traffic.
//!
//! A quota is GCRA unless given another one-word algorithm with
//! [`Policy::quota_with`](crate::policy::Policy::quota_with): a fixed window for a daily count
//! (`"20000/day fixed"`), a sliding window counter for a login route (`"5/min sliding"`), a
//! leaky-bucket shaper whose admissions carry a delay (`"10/s burst 1 shaper 2s"`). Every kind
//! is undone exactly when a later quota refuses.
//!
//! ```
//! use std::time::Duration;
//! use flowgate::algorithm::AnyAlgorithm;
//! use flowgate::policy::{Policies, Policy};
//!
//! struct Request { user: String, endpoint: &'static str }
//!
//! let policies = Policies::<Request>::builder()
//!     .policy(
//!         Policy::keyed_with("user-endpoint", |r: &Request, key| {
//!             key.add(&r.user).add(r.endpoint);
//!         })
//!         .quota("2/min".parse()?)
//!         .jitter(Duration::from_millis(100), Duration::from_millis(500)),
//!     )
//!     .policy(
//!         Policy::keyed("endpoint", |r: &Request| r.endpoint)
//!             .quota("1000/min".parse()?)
//!             .quota_with("50000/day fixed".parse::<AnyAlgorithm>()?),
//!     )
//!     .policy(Policy::global("all").quota("10000/min".parse()?))
//!     .policy(Policy::global("stricter, on trial").quota("1/min".parse()?).dry_run(true))
//!     .build()?;
//!
//! let r = Request { user: "alice".into(), endpoint: "/search" };
//! let first = policies.check(&r).expect("admitted");
//! assert_eq!(first.dry_run().map(|d| d.by().policy()), None);
//! // The trial policy would refuse the second, but only counts it.
//! let second = policies.check(&r).expect("admitted");
//! assert_eq!(second.dry_run().map(|d| d.by().policy()), Some("stricter, on trial"));
//! let third = policies.check(&r).unwrap_err();
//! assert_eq!(third.by().map(|by| by.policy()), Some("user-endpoint"));
//! assert!(third.retry_after() >= Duration::from_millis(100));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Waiting instead of being refused
//!
//! Every limiter kind waits for its cells through one blocking door
//! ([`RateLimiter::wait`](crate::RateLimiter::wait), `wait_key`, `Policies::wait`), which
//! sleeps through the limiter's clock, and one asynchronous door
//! ([`RateLimiter::until_ready`](crate::RateLimiter::until_ready), `until_key_ready`,
//! `Policies::until_ready`, and [`wait::until_ready`](crate::wait::until_ready) for any
//! backend), which sleeps through the timer you pass (`tokio::time::sleep`, or any other
//! executor's). Each takes the cell count and [`WaitOptions`](crate::WaitOptions): a bound and
//! jitter. A wait that could not end within its bound fails at once and takes nothing.
//!
//! ```
//! use std::time::Duration;
//! use flowgate::{clock::ManualClock, Quota, RateLimiter, WaitOptions};
//!
//! let clock = ManualClock::new(); // sleeping on it moves it: no real time passes
//! let limiter = RateLimiter::with_clock(Quota::per_second(2)?, clock.clone());
//! limiter.wait(2, WaitOptions::new())?;
//! limiter.wait(1, WaitOptions::new())?;
//! assert_eq!(clock.get(), 500_000_000);
//! assert!(limiter.wait(1, WaitOptions::new().at_most(Duration::from_millis(100))).is_err());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Taking what there is: batches
//!
//! A consumer of batches (a queue drainer, a bulk sender) wants as many cells as there are,
//! not all or nothing: `check_up_to(n)` takes `min(n, what the bucket holds)` in one atomic
//! step and says how many. Keyed limiters have `check_key_up_to`; a policy set takes what its
//! tightest quota allows.
//!
//! ```
//! use flowgate::{clock::ManualClock, Quota, RateLimiter};
//!
//! let limiter = RateLimiter::with_clock(Quota::per_second(50)?, ManualClock::new());
//! let queued = 120;
//! let (send_now, _) = limiter.check_up_to(queued).unwrap();
//! assert_eq!(send_now, 50); // the other 70 wait for the next call
//! # Ok::<(), flowgate::QuotaError>(())
//! ```
//!
//! # Streams and sinks (feature `futures`)
//!
//! `flowgate::stream::RateLimited` wraps a `Stream` and `RateLimitedSink` wraps a `Sink`, so
//! items go on no faster than a limiter allows, each costing one cell or what a cost function
//! says (bytes for a bandwidth limit). `stream::Over::new(policies, user)` pays a policy set
//! instead, in process or in Redis. They sleep on tokio's timer through `new`, and on any
//! executor's through `with_timer`; `with_jitter` spreads the retries of adapters refused
//! together. Here on futures-timer's timer, with no tokio anywhere (the limiter's default clock
//! keeps real time, as that timer does):
//!
#![cfg_attr(feature = "futures", doc = "```no_run")]
#![cfg_attr(not(feature = "futures"), doc = "```ignore")]
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use std::{sync::Arc, time::Duration};
//! use futures_util::StreamExt;
//! use flowgate::{stream::RateLimited, RateLimiter};
//!
//! let rows_per_second = Arc::new(RateLimiter::new("500/s".parse()?));
//! let rows = futures_util::stream::iter(0..2_000);
//! let mut paced = RateLimited::with_timer(rows, rows_per_second, futures_timer::Delay::new)
//!     .with_jitter(Duration::ZERO, Duration::from_millis(5));
//! while let Some(row) = paced.next().await { /* write it */ }
//! # Ok(()) }
//! ```
//!
//! # Without `std`
//!
//! With `default-features = false`, quotas, every one-word algorithm and `RateLimiter` work
//! in `#![no_std]` code on a clock you supply (`clock::FnClock` over a timer); the `alloc`
//! feature adds the keyed table (give it a hash seed) and the sliding log. The crate docs'
//! "Without `std`" says what else changes.
//!
//! # HTTP (feature `tower`)
//!
//! `flowgate::http::RateLimitLayer` puts a [policy set](#policies-several-quotas-several-layers)
//! over `flowgate::http::Inbound` (the request's head and its client's address) in front of any
//! tower service: axum, hyper, tonic. The feature `axum` reads axum's `ConnectInfo` (the peer
//! address) and `MatchedPath` (the route).
//!
//! * **The key** is what a policy's extractor adds from the `Inbound`: the client's address
//!   (`client_ip()`; `by_client_ip` as a whole extractor), the route (`route_or_path()`: the
//!   route as declared, `/users/{id}`, so that clients cannot invent keys; the raw path only
//!   where no route matched), a header such as an API key, or several of them at once.
//! * **The client's address** is the peer's. `X-Forwarded-For` (or `Forwarded`, `X-Real-IP`)
//!   counts only when the peer is a proxy you trust (`ClientIp::trust` with `Cidr`s): read from
//!   the right, the first address that is not a trusted proxy is the client, and what the
//!   client wrote further left is ignored. IPv6 clients are keyed by their /64.
//! * **Per route**: key a policy by the route (`per-client`, `per-route` below), skip the routes
//!   a policy does not cover (`key.skip()` in its extractor), or give a route a layer of its
//!   own (`/login` below). Layers nest: a request to `/login` passes both.
//!
// Compiled with the `axum` feature only (a plain `cargo test` builds none of it).
#![cfg_attr(feature = "axum", doc = "```")]
#![cfg_attr(not(feature = "axum"), doc = "```ignore")]
//! use std::net::SocketAddr;
//! use axum::{routing::{get, post}, Router};
//! use flowgate::http::{by_client_ip, ClientIp, Inbound, RateLimitLayer};
//! use flowgate::policy::{Policies, Policy};
//! # use {axum::{body::Body, extract::ConnectInfo}, tower_service::Service};
//! # let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
//! # let send = |app: &Router, request: http::Request<Body>| runtime.block_on(async {
//! #     let mut app = app.clone();
//! #     std::future::poll_fn(|cx| Service::<http::Request<Body>>::poll_ready(&mut app, cx)).await?;
//! #     app.call(request).await }).unwrap();
//! // Our load balancers are in 10.0.0.0/8: from them, the client is read from X-Forwarded-For.
//! let client_ip = ClientIp::peer().trust(["10.0.0.0/8".parse()?]);
//!
//! let api = Policies::<Inbound>::builder()
//!     .policy(
//!         Policy::keyed_with("per-client", |r: &Inbound, key| {
//!             key.add(&r.client_ip()).add(r.route_or_path());
//!         })
//!         .quota("60/min".parse()?),
//!     )
//!     .policy(Policy::keyed("per-route", |r: &Inbound| r.route_or_path()).quota("1000/s".parse()?))
//!     .build()?;
//! let login = Policies::<Inbound>::builder()
//!     .policy(Policy::keyed_with("login", by_client_ip).quota("5/min".parse()?))
//!     .build()?;
//! let login = RateLimitLayer::new(login).client_ip(client_ip.clone());
//!
//! let app: Router = Router::new()
//!     .route("/users/{id}", get(|| async { "a user" }))
//!     .route("/login", post(|| async { "welcome" }).layer(login))
//!     // `route_layer`: after routing, so the policies see the matched route.
//!     .route_layer(RateLimitLayer::new(api).client_ip(client_ip));
//!
//! // Serve it with the peer's address in every request (`ConnectInfo<SocketAddr>`):
//! let make_service = app.clone().into_make_service_with_connect_info::<SocketAddr>();
//! // With axum's `http1` feature (a default one), in an async main:
//! // let listener = tokio::net::TcpListener::bind("0.0.0.0:3000").await?;
//! // axum::serve(listener, make_service).await?;
//! # drop(make_service);
//!
//! // A client behind the load balancer (`send`: to the app, as that server would).
//! let from_lb = |path: &str| {
//!     let mut request = http::Request::post(path)
//!         .header("x-forwarded-for", "6.6.6.6, 203.0.113.7") // 6.6.6.6: the client's own text
//!         .body(Body::empty())
//!         .unwrap();
//!     request.extensions_mut().insert(ConnectInfo(SocketAddr::from(([10, 0, 0, 1], 40000))));
//!     request
//! };
//! for _ in 0..5 { assert_eq!(send(&app, from_lb("/login")).status(), 200); }
//! let refused = send(&app, from_lb("/login")); // the sixth within the minute, from 203.0.113.7
//! assert_eq!(refused.status(), 429);
//! assert_eq!(refused.headers()["retry-after"], "12"); // 5/min: a cell every 12 s
//! assert!(refused.headers()["ratelimit"].to_str()?.starts_with(r#""login";r=0;t=12"#));
//!
//! // Without `ConnectInfo` (an app served with `into_make_service()`), no client can be told.
//! let unknown = http::Request::get("/users/7").body(Body::empty())?;
//! assert_eq!(send(&app, unknown).status(), 500);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! **The answers.** An admitted response carries the IETF draft's headers, one item per quota
//! that applied: `RateLimit-Policy: "per-client";q=60;w=60` (`q` cells per `w` seconds) and
//! `RateLimit: "per-client";r=59;t=1` (`r` cells left, `t` seconds until more come); nested
//! layers append theirs, and `HeaderStyle` adds the legacy `X-RateLimit-*` or turns them off.
//! A refusal is `429 Too Many Requests` with `Retry-After` in whole seconds, rounded up and
//! never 0 (a client that waits that long is admitted), the same headers, and an
//! `application/problem+json` body naming the policy. A request costing more than a burst can
//! never pass: `429` without `Retry-After`. **Without `ConnectInfo`** the layer cannot tell
//! clients apart; rather than put them all in one bucket, silently, it answers `500` with a
//! problem body before any policy runs, and counts it (`RateLimitLayer::unkeyed`); one shared
//! bucket is an explicit choice (`ClientIp::when_missing(Unkeyed::Shared)`).
//!
//! ## The decision in the handler
//!
//! `RateLimitLayer::attach_decisions(true)` puts the decision in each admitted request's
//! extensions, as a `flowgate::http::Ruling`: every enforcing quota that applied with its cells
//! left, the tightest, and the first dry-run policy that would have refused. axum reads it as
//! `Extension<Ruling>`, actix-web as `ReqData<Ruling>`, tonic from the request's
//! `extensions()`. `permissive(true)` lets every request through with its ruling, refusals
//! included (`Ruling::refusal`), for the handler to decide; a refusal takes no cells.
//!
#![cfg_attr(feature = "axum", doc = "```")]
#![cfg_attr(not(feature = "axum"), doc = "```ignore")]
//! use axum::{routing::get, Extension, Router};
//! use flowgate::http::{by_client_ip, Inbound, RateLimitLayer, Ruling};
//! use flowgate::policy::{Policies, Policy};
//!
//! async fn search(Extension(ruling): Extension<Ruling>) -> String {
//!     match (ruling.refusal(), ruling.tightest()) {
//!         (Some(refusal), _) => format!("degraded results ({refusal})"),
//!         (None, Some(quota)) => format!("results ({} searches left)", quota.gauge().remaining()),
//!         (None, None) => "results".into(),
//!     }
//! }
//!
//! let policies = Policies::<Inbound>::builder()
//!     .policy(Policy::keyed_with("per-client", by_client_ip).quota("10/min".parse()?))
//!     .build()?;
//! let app: Router = Router::new()
//!     .route("/search", get(search))
//!     .route_layer(RateLimitLayer::new(policies).permissive(true));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! **actix-web** (feature `actix`): `RateLimitLayer::actix()` is the same layer as actix-web
//! middleware, with the same answers header for header. **gRPC**: the layer goes on tonic's
//! own server (the feature `tonic` reads the peer's address from tonic's `TcpConnectInfo`, over
//! plain TCP), or
//! on an axum router of tonic's routes (`Routes::into_axum_router`). A call (content type
//! `application/grpc`) is refused as gRPC, `RESOURCE_EXHAUSTED` (`grpc-status: 8`) with the
//! policy's name and the wait in `RetryInfo`, which tonic clients read.
//!
#![cfg_attr(feature = "tonic", doc = "```")]
#![cfg_attr(not(feature = "tonic"), doc = "```ignore")]
//! use flowgate::http::{by_client_ip, Inbound, RateLimitLayer};
//! use flowgate::policy::{Policies, Policy};
//! use tonic::transport::Server;
//! # #[derive(Clone)]
//! # struct GreeterServer;
//! # impl tonic::server::NamedService for GreeterServer { const NAME: &'static str = "Greeter"; }
//! # impl tower_service::Service<http::Request<tonic::body::Body>> for GreeterServer {
//! #     type Response = http::Response<tonic::body::Body>;
//! #     type Error = std::convert::Infallible;
//! #     type Future = std::future::Ready<Result<Self::Response, Self::Error>>;
//! #     fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> { std::task::Poll::Ready(Ok(())) }
//! #     fn call(&mut self, _: http::Request<tonic::body::Body>) -> Self::Future { std::future::ready(Ok(http::Response::new(tonic::body::Body::empty()))) }
//! # }
//!
//! let policies = Policies::<Inbound>::builder()
//!     .policy(Policy::keyed_with("per-client", by_client_ip).quota("100/s".parse()?))
//!     .build()?;
//! let server = Server::builder()
//!     .layer(RateLimitLayer::new(policies))
//!     .add_service(GreeterServer); // tonic-build's `GreeterServer::new(MyGreeter)`
//! // In an async main:
//! let serving = server.serve("127.0.0.1:50051".parse()?);
//! // serving.await?;
//! # drop(serving);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The rest (a cost per request, bodies, delayed refusals, the layer over Redis) is in the
//! [`flowgate::http`][http] docs; `cargo run -p flowgate-integration --example http_server`
//! serves three layers.
//!
#![cfg_attr(feature = "tower", doc = "[http]: crate::http")]
#![cfg_attr(not(feature = "tower"), doc = "[http]: #http-feature-tower")]
//! # Redis (the `flowgate-redis` crate)
//!
//! When one service runs on many hosts, a per-process limit multiplies by the number of hosts.
//! The `flowgate-redis` crate builds the same policy set in Redis (`build_redis` from its
//! `BuildRedis` trait, where `build` builds in process): one Lua script per request, the same
//! answers as in process, a failure policy for when Redis is away, and optional leases that
//! spend cells locally with one round trip per batch. Its docs hold the walk-through.
//!
//! Code that should not care where it decides is written against the
//! [`Backend`](crate::backend::Backend) trait, which both sets implement; the HTTP layer and
//! [`wait::until_ready`](crate::wait::until_ready) take any backend. A configuration
//! file chooses with `backend = "redis"` and a `[redis]` table, read by `flowgate_redis::Config`.
//! `cargo run -p flowgate-integration --example service`:
//! an axum service whose API limits are shared by every instance.
//!
//! # Metrics (feature `metrics`)
//!
//! Cells admitted, refused and dry-run-refused per policy and quota, keys held and evicted,
//! Redis failures and fallbacks, through the `metrics` facade: install your exporter's recorder
//! before building the limiters. The list is in the [crate docs](crate#metrics).
//!
//! # Coming from governor
//!
//! | governor | flowgate |
//! |---|---|
//! | `Quota::per_second(nonzero!(10u32)).allow_burst(nonzero!(3u32))` | `Quota::per_second(10)?.with_burst(3)?` or `"10/s burst 3".parse()?` |
//! | `RateLimiter::direct(quota)` | `RateLimiter::new(quota)` |
//! | `check()`: `Result<(), NotUntil>` | `check()`: `Result<Allowed, Refused>` (remaining, limit, reset, retry-after) |
//! | `check_n(n)`: `Result<Result<(), NotUntil>, InsufficientCapacity>` | `check_n(n)`: the same shape, with `Allowed` / `Refused` |
//! | `not_until.wait_time_from(clock.now())` | `refused.retry_after()` |
//! | `RateLimiter::keyed(quota)` (a map that grows) | `KeyedRateLimiter::new(quota, max_keys)?` (a bounded table) |
//! | `retain_recent()`, `shrink_to_fit()` | `sweep(budget)`, `spawn_sweeper(every)`; memory is fixed |
//! | `until_ready().await`, `until_n_ready(n)`, `Jitter` | `until_ready(n, options, tokio::time::sleep).await` (any timer), `WaitOptions::jitter` |
//! | `FakeRelativeClock` | `ManualClock` (can also step back) |
//! | three limiters checked in turn | one `Policies`, all or nothing |
//! | `tower_governor` | `flowgate::http` (feature `tower`) |
//! | `actix-governor` | `RateLimitLayer::actix()` (feature `actix`) |
//! | `ratelimit_stream()`, `ratelimit_sink()` | `stream::RateLimited`, `stream::RateLimitedSink` (feature `futures`), items weighted by a cost function |
//! | `…_with_jitter(jitter)`, any executor's timer | `.with_jitter(min, max)`, `with_timer(inner, limiter, sleep)` |
//! | `default-features = false` (no_std) | the same: `RateLimiter<FnClock>` on your clock |
//!
//! The same limit on both, decided alike on fake clocks (not compiled here: governor is not a
//! dependency of flowgate; `integration/tests/guide_governor.rs` is this block, run):
//!
//! ```ignore
//! use std::num::NonZeroU32;
//! use std::time::Duration;
//!
//! // governor
//! let clock = governor::clock::FakeRelativeClock::default();
//! let quota = governor::Quota::per_second(NonZeroU32::new(10).unwrap())
//!     .allow_burst(NonZeroU32::new(3).unwrap());
//! let theirs = governor::RateLimiter::direct_with_clock(quota, clock.clone());
//!
//! // flowgate
//! let manual = flowgate::clock::ManualClock::new();
//! let ours = flowgate::RateLimiter::with_clock("10/s burst 3".parse()?, manual.clone());
//!
//! for step in 0..20 {
//!     assert_eq!(theirs.check().is_ok(), ours.check().is_ok(), "step {step}");
//!     clock.advance(Duration::from_millis(35));
//!     manual.advance(Duration::from_millis(35));
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
