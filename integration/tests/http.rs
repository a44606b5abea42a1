//! The HTTP middleware over real sockets: an axum (or plain hyper) server on 127.0.0.1:0 and a
//! hyper client. Quotas run on a manual clock, so every header value is checked against the
//! quota arithmetic and nothing depends on how fast the machine is. Every loop is bounded.

#[path = "support/http_client.rs"]
mod http_client;

#[path = "support/axum_server.rs"]
mod axum_server;

#[path = "support/ruling.rs"]
mod ruling;

use std::net::SocketAddr;
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use axum_server::serve;
use bytes::Bytes;
use flowgate::clock::ManualClock;
use flowgate::http::{
    by_client_ip, ClientIp, ForwardedHeader, HeaderStyle, Inbound, RateLimitLayer, Refusal, Ruling,
    Unkeyed,
};
use flowgate::policy::{Policies, Policy};
use http::{HeaderMap, Request, StatusCode};
use http_body_util::Full;
use http_client::HttpClient;
use tokio::net::TcpListener;

struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }
}

async fn get_with(
    client: &HttpClient,
    address: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> Reply {
    let (status, headers, body) = http_client::get(client, address, path, headers).await;
    Reply {
        status,
        headers,
        body: String::from_utf8(body.to_vec()).unwrap(),
    }
}

fn app(layer: RateLimitLayer<Policies<Inbound, ManualClock>>) -> Router {
    Router::new()
        .route("/", get(|| async { "ok" }))
        .route("/users/{id}", get(|| async { "user" }))
        .route_layer(layer)
}

/// Without quota headers (`HeaderStyle::NONE`, decided on the yes-or-no path): the same
/// admissions and refusals, a `Retry-After` on the 429 but no quota header anywhere, a free
/// request (cost 0) admitted even when the bucket is empty, and an oversized one refused
/// without `Retry-After` and without taking anything.
#[tokio::test]
async fn without_headers_the_decisions_are_the_same() {
    let clock = ManualClock::new();
    let layer = RateLimitLayer::new(two_layers(&clock))
        .headers(HeaderStyle::NONE)
        .cost(|r: &Inbound| {
            r.header("x-cost")
                .and_then(|v| v.to_str().ok()?.parse().ok())
                .unwrap_or(1)
        });
    let address = serve(app(layer.clone()), true).await;
    let client = http_client::client();
    let quota_headers = |reply: &Reply| {
        [
            "ratelimit",
            "ratelimit-policy",
            "x-ratelimit-limit",
            "x-ratelimit-remaining",
        ]
        .iter()
        .any(|name| reply.headers.contains_key(*name))
    };

    let oversized = get_with(&client, address, "/", &[("x-cost", "6")]).await;
    assert_eq!(oversized.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(oversized.header("retry-after"), None);
    assert!(!quota_headers(&oversized));
    for i in 0..5 {
        let reply = get_with(&client, address, "/", &[]).await;
        assert_eq!(reply.status, StatusCode::OK, "request {i}");
        assert!(!quota_headers(&reply), "request {i}");
    }
    let refused = get_with(&client, address, "/", &[]).await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    // One cell every 2 s, none left: the next conforms in 2 s.
    assert_eq!(refused.header("retry-after"), Some("2"));
    assert!(!quota_headers(&refused));
    let free = get_with(&client, address, "/", &[("x-cost", "0")]).await;
    assert_eq!(free.status, StatusCode::OK);

    // One refusal counted, against the per-client policy.
    let refused: Vec<_> = layer
        .policies()
        .stats()
        .into_iter()
        .map(|stats| (stats.name, stats.refused))
        .collect();
    assert_eq!(
        refused,
        [("per-client".to_string(), 1), ("global".to_string(), 0)]
    );
    clock.advance(Duration::from_secs(2));
    assert_eq!(
        get_with(&client, address, "/", &[]).await.status,
        StatusCode::OK
    );
}

/// Per client 5 per 10 s (one cell every 2 s), and 100 per second for everyone.
fn two_layers(clock: &ManualClock) -> Policies<Inbound, ManualClock> {
    Policies::<Inbound>::builder()
        .clock(clock.clone())
        .policy(Policy::keyed_with("per-client", by_client_ip).quota("5/10s".parse().unwrap()))
        .policy(Policy::global("global").quota("100/s".parse().unwrap()))
        .build()
        .unwrap()
}

/// The burst passes with headers that count down, the next request is a 429 whose every header
/// follows from the quotas, and a client that waits `Retry-After` seconds is admitted.
#[tokio::test]
async fn the_burst_passes_then_429_with_exact_headers() {
    let clock = ManualClock::new();
    let layer = RateLimitLayer::new(two_layers(&clock)).headers(HeaderStyle::BOTH);
    let address = serve(app(layer), true).await;
    let client = http_client::client();

    for taken in 1..=5u64 {
        let reply = get_with(&client, address, "/", &[]).await;
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.body, "ok");
        assert_eq!(
            reply.header("ratelimit-policy"),
            Some(r#""per-client";q=5;w=10, "global";q=100;w=1"#)
        );
        // `t` is when more quota comes (draft-10): per-client, one cell every 2 s, so the next
        // one in 2 s whatever the debt; global, in 10 ms, rounded up to 1 s. The legacy
        // X-RateLimit-Reset below keeps "until full": 2 s of debt per request.
        let expected = format!(
            r#""per-client";r={};t=2, "global";r={};t=1"#,
            5 - taken,
            100 - taken
        );
        assert_eq!(reply.header("ratelimit"), Some(expected.as_str()));
        assert_eq!(reply.header("x-ratelimit-limit"), Some("5"));
        assert_eq!(
            reply.header("x-ratelimit-remaining"),
            Some((5 - taken).to_string().as_str())
        );
        assert_eq!(
            reply.header("x-ratelimit-reset"),
            Some((2 * taken).to_string().as_str())
        );
        assert_eq!(reply.header("retry-after"), None);
    }

    // Half a second later the bucket is still 9.5 s from full; the next cell is due in 1.5 s,
    // which both `t` and Retry-After say (rounded up); X-RateLimit-Reset says when it is full.
    clock.advance(Duration::from_millis(500));
    let refused = get_with(&client, address, "/", &[]).await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.header("retry-after"), Some("2")); // 1.5 s, rounded up
    assert_eq!(
        refused.header("ratelimit"),
        Some(r#""per-client";r=0;t=2, "global";r=100;t=0"#)
    );
    assert_eq!(refused.header("x-ratelimit-reset"), Some("10"));
    assert_eq!(refused.header("x-ratelimit-remaining"), Some("0"));
    assert_eq!(
        refused.header("content-type"),
        Some("application/problem+json")
    );
    assert_eq!(
        refused.body,
        r#"{"type":"about:blank","title":"Too Many Requests","status":429,"detail":"rate limited by policy 'per-client': retry after 2 s","policy":"per-client","retry_after":2}"#
    );

    // A client that honours Retry-After is admitted.
    clock.advance(Duration::from_secs(2));
    let again = get_with(&client, address, "/", &[]).await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(
        again.header("ratelimit"),
        Some(r#""per-client";r=0;t=2, "global";r=99;t=1"#)
    );
}

/// A request that costs more than a burst can never succeed: 429 without Retry-After; a cost
/// within the burst takes that many cells.
#[tokio::test]
async fn an_oversized_request_gets_no_retry_after() {
    let clock = ManualClock::new();
    let layer = RateLimitLayer::new(two_layers(&clock)).cost(|r: &Inbound| {
        r.header("x-cost")
            .and_then(|v| v.to_str().ok()?.parse().ok())
            .unwrap_or(1)
    });
    let address = serve(app(layer), true).await;
    let client = http_client::client();

    let oversized = get_with(&client, address, "/", &[("x-cost", "6")]).await;
    assert_eq!(oversized.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(oversized.header("retry-after"), None);
    assert!(
        oversized.body.contains("can never be admitted"),
        "{}",
        oversized.body
    );
    // Nothing was taken by it.
    assert_eq!(
        oversized.header("ratelimit"),
        Some(r#""per-client";r=5;t=0, "global";r=100;t=0"#)
    );

    let heavy = get_with(&client, address, "/", &[("x-cost", "4")]).await;
    assert_eq!(heavy.status, StatusCode::OK);
    assert_eq!(
        heavy.header("ratelimit"),
        Some(r#""per-client";r=1;t=2, "global";r=96;t=1"#)
    );
    let refused = get_with(&client, address, "/", &[("x-cost", "2")]).await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.header("retry-after"), Some("2"));
}

/// One cell per minute per client, the client told by `client_ip`.
fn per_client_minute(
    clock: &ManualClock,
    client_ip: ClientIp,
) -> RateLimitLayer<Policies<Inbound, ManualClock>> {
    let policies = Policies::<Inbound>::builder()
        .clock(clock.clone())
        .policy(Policy::keyed_with("per-client", by_client_ip).quota("1/min".parse().unwrap()))
        .build()
        .unwrap();
    RateLimitLayer::new(policies).client_ip(client_ip)
}

/// Without trusted proxies a forged X-Forwarded-For changes nothing; with the loopback
/// trusted, it names the client.
#[tokio::test]
async fn forwarded_for_is_ignored_unless_the_proxy_is_trusted() {
    let clock = ManualClock::new();
    let client = http_client::client();

    let untrusting = serve(app(per_client_minute(&clock, ClientIp::peer())), true).await;
    let first = get_with(&client, untrusting, "/", &[("x-forwarded-for", "1.1.1.1")]).await;
    assert_eq!(first.status, StatusCode::OK);
    let forged = get_with(&client, untrusting, "/", &[("x-forwarded-for", "2.2.2.2")]).await;
    assert_eq!(forged.status, StatusCode::TOO_MANY_REQUESTS);

    let trust = ClientIp::peer()
        .trust(["127.0.0.0/8".parse().unwrap()])
        .header(ForwardedHeader::XForwardedFor);
    let trusting = serve(app(per_client_minute(&clock, trust)), true).await;
    for client_address in ["1.1.1.1", "2.2.2.2", "2001:db8::1"] {
        let reply = get_with(
            &client,
            trusting,
            "/",
            &[("x-forwarded-for", client_address)],
        )
        .await;
        assert_eq!(reply.status, StatusCode::OK, "{client_address}");
    }
    // The same client again, and the same /64.
    let again = get_with(&client, trusting, "/", &[("x-forwarded-for", "1.1.1.1")]).await;
    assert_eq!(again.status, StatusCode::TOO_MANY_REQUESTS);
    let same_64 = get_with(
        &client,
        trusting,
        "/",
        &[("x-forwarded-for", "2001:db8::ffff:1")],
    )
    .await;
    assert_eq!(same_64.status, StatusCode::TOO_MANY_REQUESTS);
    // A client that prepends a forged entry is still keyed by what the proxy appended.
    let prepended = get_with(
        &client,
        trusting,
        "/",
        &[("x-forwarded-for", "9.9.9.9, 2.2.2.2")],
    )
    .await;
    assert_eq!(prepended.status, StatusCode::TOO_MANY_REQUESTS);
}

/// Many clients at once never get more than the quota in total.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_clients_never_exceed_the_quota() {
    let clock = ManualClock::new();
    let policies = Policies::<Inbound>::builder()
        .clock(clock.clone())
        .policy(Policy::global("global").quota("50/min".parse().unwrap()))
        .build()
        .unwrap();
    let address = serve(app(RateLimitLayer::new(policies)), true).await;
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            tokio::spawn(async move {
                let client = http_client::client();
                let mut admitted = 0;
                for _ in 0..20 {
                    let reply = get_with(&client, address, "/", &[]).await;
                    match reply.status {
                        StatusCode::OK => admitted += 1,
                        StatusCode::TOO_MANY_REQUESTS => {}
                        other => panic!("unexpected {other}"),
                    }
                }
                admitted
            })
        })
        .collect();
    let mut admitted = 0;
    for task in tasks {
        admitted += task.await.unwrap();
    }
    // The clock stands still: exactly the burst, no more, no less.
    assert_eq!(admitted, 50);
}

/// With no peer address (axum served without `ConnectInfo`) the rule decides: by default a
/// loud 500 naming the cause, counted; sharing one bucket only when asked; or another status.
/// Every such request is refused before any policy runs.
#[tokio::test]
async fn requests_without_a_client_address_follow_the_rule() {
    let clock = ManualClock::new();
    let client = http_client::client();

    let default = per_client_minute(&clock, ClientIp::peer());
    let loud = serve(app(default.clone()), false).await;
    for _ in 0..2 {
        let reply = get_with(&client, loud, "/", &[]).await;
        assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(reply.body.contains("peer address"), "{}", reply.body);
    }
    assert_eq!(default.unkeyed(), 2);
    assert_eq!(default.policies().stats()[0].keys, 0);

    let sharing = per_client_minute(&clock, ClientIp::peer().when_missing(Unkeyed::Shared));
    let shared = serve(app(sharing.clone()), false).await;
    assert_eq!(
        get_with(&client, shared, "/", &[]).await.status,
        StatusCode::OK
    );
    assert_eq!(
        get_with(&client, shared, "/", &[]).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(sharing.unkeyed(), 2, "counted, though not refused");

    let refusing = per_client_minute(
        &clock,
        ClientIp::peer().when_missing(Unkeyed::Refuse(StatusCode::FORBIDDEN)),
    );
    let kept = refusing.clone();
    let refused = serve(app(refusing), false).await;
    let reply = get_with(&client, refused, "/", &[]).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    assert_eq!(reply.header("retry-after"), None);
    assert!(reply.body.contains("could not be determined"));
    // No policy was consulted: the table holds no key.
    assert_eq!(kept.policies().stats()[0].keys, 0);
}

/// Keys from the matched route: `/users/1` and `/users/2` share the `/users/{id}` bucket, and
/// a custom answer (status and body) replaces the 429 and its problem document.
#[tokio::test]
async fn routes_key_their_bucket_and_the_body_is_configurable() {
    let clock = ManualClock::new();
    let policies = Policies::<Inbound>::builder()
        .clock(clock.clone())
        .policy(
            Policy::keyed("per-route", |r: &Inbound| r.route_or_path())
                .quota("2/min".parse().unwrap()),
        )
        .build()
        .unwrap();
    let layer = RateLimitLayer::new(policies).refusal_response(|refusal: &Refusal| {
        let text = format!("slow down ({})", refusal.policy().unwrap_or("-"));
        http::Response::builder()
            .status(StatusCode::SERVICE_UNAVAILABLE)
            .header("content-type", "text/plain")
            .body(text.into())
            .unwrap()
    });
    let address = serve(app(layer), true).await;
    let client = http_client::client();
    for path in ["/users/1", "/users/2"] {
        assert_eq!(
            get_with(&client, address, path, &[]).await.status,
            StatusCode::OK
        );
    }
    let refused = get_with(&client, address, "/users/3", &[]).await;
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.body, "slow down (per-route)");
    assert_eq!(refused.header("content-type"), Some("text/plain"));
    assert_eq!(refused.header("retry-after"), Some("30"));
    // Another route has its own bucket.
    assert_eq!(
        get_with(&client, address, "/", &[]).await.status,
        StatusCode::OK
    );
}

/// Plain hyper, no axum: the connection's service inserts the peer address, the layer is
/// applied with tower, and the responses use `Full<Bytes>` bodies.
#[tokio::test]
async fn plain_hyper_with_the_peer_address_in_the_extensions() {
    use hyper::server::conn::http1;
    use hyper_util::rt::TokioIo;
    use hyper_util::service::TowerToHyperService;
    use tower::ServiceBuilder;

    let clock = ManualClock::new();
    let layer = per_client_minute(&clock, ClientIp::peer());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, peer)) = listener.accept().await else {
                return;
            };
            let service = ServiceBuilder::new()
                .map_request(move |mut request: Request<hyper::body::Incoming>| {
                    request.extensions_mut().insert(peer);
                    request
                })
                .layer(layer.clone())
                .service_fn(|_request: Request<hyper::body::Incoming>| async {
                    Ok::<_, std::convert::Infallible>(http::Response::new(Full::new(
                        Bytes::from_static(b"hello"),
                    )))
                });
            tokio::spawn(async move {
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), TowerToHyperService::new(service))
                    .await;
            });
        }
    });
    let client = http_client::client();
    let first = get_with(&client, address, "/", &[]).await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(first.body, "hello");
    assert_eq!(first.header("ratelimit"), Some(r#""per-client";r=0;t=60"#));
    let second = get_with(&client, address, "/", &[]).await;
    assert_eq!(second.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(second.header("retry-after"), Some("60"));
}

/// A delayed refusal is held on tokio's timer (paused here) and then sent; admissions are not
/// delayed.
#[tokio::test(start_paused = true)]
async fn refusals_can_be_delayed_without_holding_a_thread() {
    use tower::{Layer, ServiceExt};

    let clock = ManualClock::new();
    let layer = per_client_minute(&clock, ClientIp::peer()).delay_refusals(Duration::from_secs(3));
    let service = layer.layer(tower::service_fn(|_request: Request<()>| async {
        Ok::<_, std::convert::Infallible>(http::Response::new(Full::<Bytes>::default()))
    }));
    let request = || {
        let mut request = Request::new(());
        request
            .extensions_mut()
            .insert("192.0.2.1:1234".parse::<SocketAddr>().unwrap());
        request
    };
    let start = tokio::time::Instant::now();
    let admitted = service.clone().oneshot(request()).await.unwrap();
    assert_eq!(admitted.status(), StatusCode::OK);
    assert_eq!(start.elapsed(), Duration::ZERO);

    let refused = tokio::spawn(service.oneshot(request()));
    tokio::time::sleep(Duration::from_millis(2_999)).await;
    assert!(!refused.is_finished());
    tokio::time::sleep(Duration::from_millis(2)).await;
    let refused = refused.await.unwrap().unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(start.elapsed(), Duration::from_millis(3_001));
}

/// A keyed policy whose table is full refuses a new client with a 429 that says so, without
/// quota headers (the tables do not hold the client, so they would describe a fresh bucket).
#[tokio::test]
async fn a_full_table_refuses_new_clients_without_quota_headers() {
    let clock = ManualClock::new();
    let policies = Policies::<Inbound>::builder()
        .clock(clock.clone())
        .policy(
            Policy::keyed_with("per-key", |r: &Inbound, key| {
                key.add(&r.header("x-api-key"));
            })
            .quota("1/min".parse().unwrap())
            .max_keys(1),
        )
        .build()
        .unwrap();
    let address = serve(app(RateLimitLayer::new(policies)), true).await;
    let client = http_client::client();
    let first = get_with(&client, address, "/", &[("x-api-key", "a")]).await;
    assert_eq!(first.status, StatusCode::OK);
    let mut refused = None;
    for n in 0..64 {
        let key = format!("k{n}");
        let reply = get_with(&client, address, "/", &[("x-api-key", key.as_str())]).await;
        if reply.status == StatusCode::TOO_MANY_REQUESTS {
            refused = Some(reply);
            break;
        }
    }
    let refused = refused.expect("a table of one key refuses some new key");
    assert_eq!(refused.header("ratelimit"), None);
    assert_eq!(refused.header("ratelimit-policy"), None);
    assert!(refused.body.contains("no room"), "{}", refused.body);
}

/// Every 429 reports the refusing quota as the decision found it, on a real clock under load:
/// eight clients send 400 requests each, costing 1 or 3 cells, to a per-client policy of 50/s
/// (burst 5) behind a global one. In every refusal the refusing policy's `RateLimit` item says
/// `r=0`, and `Retry-After` is at least that item's `t`. (Read from the bucket after the
/// decision, at a later clock reading, the item said `r=1` or `r=2`: cells had come since, or a
/// costly request had found too few.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refusal_under_load_reports_the_refusing_quota_as_the_decision_saw_it() {
    let policies = Policies::<Inbound>::builder()
        .policy(Policy::keyed_with("per-ip", by_client_ip).quota("50/s burst 5".parse().unwrap()))
        .policy(Policy::global("global").quota("2000/s".parse().unwrap()))
        .build()
        .unwrap();
    let costly = |r: &Inbound| {
        if r.headers().contains_key("x-costly") {
            3
        } else {
            1
        }
    };
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .route_layer(RateLimitLayer::new(policies).cost(costly));
    let address = serve(app, true).await;
    let client = http_client::client();
    let mut tasks = Vec::new();
    for task in 0..8 {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let mut refusals = Vec::new();
            for i in 0..400 {
                let headers: &[(&str, &str)] = if (task + i) % 2 == 0 {
                    &[("x-costly", "1")]
                } else {
                    &[]
                };
                let (status, headers, body) =
                    http_client::get(&client, address, "/", headers).await;
                if status == StatusCode::TOO_MANY_REQUESTS {
                    refusals.push((headers, body));
                }
            }
            refusals
        }));
    }
    let mut refusals = 0;
    for task in tasks {
        for (headers, body) in task.await.unwrap() {
            refusals += 1;
            let body = String::from_utf8(body.to_vec()).unwrap();
            let policy = body
                .split(r#""policy":""#)
                .nth(1)
                .and_then(|rest| rest.split('"').next())
                .unwrap_or_else(|| panic!("no policy named in {body}"));
            let header = |name: &str| headers.get(name).unwrap().to_str().unwrap().to_owned();
            let ratelimit = header("ratelimit");
            let item = ratelimit
                .split(", ")
                .find(|item| item.starts_with(&format!(r#""{policy}";"#)))
                .unwrap_or_else(|| panic!("no item of {policy} in {ratelimit}"));
            let field = |name: &str| -> u64 {
                let value = item.split(';').find_map(|f| f.strip_prefix(name)).unwrap();
                value.parse().unwrap()
            };
            assert_eq!(field("r="), 0, "{ratelimit}, refused by {policy}");
            let retry_after: u64 = header("retry-after").parse().unwrap();
            assert!(
                retry_after >= field("t="),
                "Retry-After {retry_after}, {ratelimit}"
            );
        }
    }
    // At most 5 + 50 cells a second of the 3 200 requests' are admitted.
    assert!(refusals >= 1_000, "only {refusals} refusals");
}

/// In process, the layer asks nothing of the inner service that only a backend with pending
/// decisions needs: a service that is not `Clone` (nor `Send`) is wrapped and called, and its
/// response future is the layer's own type over the inner future (this test does not compile
/// if the service demands `Clone` again).
#[tokio::test]
async fn in_process_the_inner_service_need_not_be_clone() {
    use std::rc::Rc;
    use tower::{Layer as _, Service, ServiceExt as _};

    /// Counts its calls; `Rc` makes it neither `Clone` (not derived) nor `Send`.
    struct Counting(Rc<core::cell::Cell<u32>>);

    impl Service<Request<()>> for Counting {
        type Response = http::Response<Bytes>;
        type Error = core::convert::Infallible;
        type Future = core::future::Ready<Result<http::Response<Bytes>, Self::Error>>;

        fn poll_ready(
            &mut self,
            _: &mut core::task::Context<'_>,
        ) -> core::task::Poll<Result<(), Self::Error>> {
            core::task::Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: Request<()>) -> Self::Future {
            self.0.set(self.0.get() + 1);
            core::future::ready(Ok(http::Response::new(Bytes::from_static(b"ok"))))
        }
    }

    let policies = Policies::<Inbound>::builder()
        .clock(ManualClock::new())
        .policy(Policy::global("everyone").quota("1/min".parse().unwrap()))
        .build()
        .unwrap();
    let calls = Rc::new(core::cell::Cell::new(0));
    let layer =
        RateLimitLayer::new(policies).client_ip(ClientIp::peer().when_missing(Unkeyed::Shared));
    let mut service = layer.layer(Counting(Rc::clone(&calls)));
    let first: flowgate::http::ResponseFuture<_, Bytes, _> =
        service.ready().await.unwrap().call(Request::new(()));
    assert_eq!(first.await.unwrap().status(), StatusCode::OK);
    let second = service.ready().await.unwrap().call(Request::new(())).await;
    assert_eq!(second.unwrap().status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        calls.get(),
        1,
        "the refused request never reached the service"
    );
}

/// A handler finds the decision in the request's extensions only when the layer attaches it:
/// each quota's cells left (counting down) and the dry-run policy that would have refused;
/// refusals are still answered by the layer (not permissive), with their headers.
#[tokio::test]
async fn handlers_read_the_decision_only_when_attached() {
    let clock = ManualClock::new();
    let policies = || {
        Policies::<Inbound>::builder()
            .clock(clock.clone())
            .policy(
                Policy::global("trial")
                    .dry_run(true)
                    .quota("1/min".parse().unwrap()),
            )
            .policy(Policy::keyed_with("per-client", by_client_ip).quota("2/min".parse().unwrap()))
            .build()
            .unwrap()
    };
    let app = |layer: RateLimitLayer<Policies<Inbound, ManualClock>>| {
        let handler = |r: Option<axum::Extension<Ruling>>| async move {
            ruling::describe(r.as_ref().map(|r| &r.0))
        };
        Router::new().route("/", get(handler)).route_layer(layer)
    };
    // Without quota headers: the decision is still reported in full.
    let layer = RateLimitLayer::new(policies()).headers(HeaderStyle::NONE);
    let attached = serve(app(layer.attach_decisions(true)), true).await;
    let plain = serve(app(RateLimitLayer::new(policies())), true).await;
    let client = http_client::client();

    let seen = |dry_run, left| {
        format!("admitted quotas=per-client:{left} tightest=per-client dry_run={dry_run}")
    };
    assert_eq!(
        get_with(&client, attached, "/", &[]).await.body,
        seen("-", 1)
    );
    assert_eq!(
        get_with(&client, attached, "/", &[]).await.body,
        seen("trial", 0)
    );
    let refused = get_with(&client, attached, "/", &[]).await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.header("retry-after"), Some("30"));

    let reply = get_with(&client, plain, "/", &[]).await;
    assert_eq!(
        (reply.status, reply.body.as_str()),
        (StatusCode::OK, "no ruling")
    );
}

/// Nested layers each add their ruling: the handler sees the outer layer's quotas first, then
/// the inner one's, and the outer permissive layer's refusal even when the inner admits.
#[tokio::test]
async fn nested_layers_add_up_their_rulings() {
    let clock = ManualClock::new();
    let set = |name: &'static str, quota: &str| {
        Policies::<Inbound>::builder()
            .clock(clock.clone())
            .policy(Policy::keyed_with(name, by_client_ip).quota(quota.parse().unwrap()))
            .build()
            .unwrap()
    };
    let handler = |r: Option<axum::Extension<Ruling>>| async move {
        ruling::describe(r.as_ref().map(|r| &r.0))
    };
    let inner = RateLimitLayer::new(set("inner", "5/min")).attach_decisions(true);
    let outer = RateLimitLayer::new(set("outer", "1/min")).permissive(true);
    let app = Router::new()
        .route("/", get(handler).layer(inner))
        .layer(outer);
    let address = serve(app, true).await;
    let client = http_client::client();
    let first = get_with(&client, address, "/", &[]).await.body;
    assert_eq!(
        first,
        "admitted quotas=outer:0,inner:4 tightest=outer dry_run=-"
    );
    let second = get_with(&client, address, "/", &[]).await.body;
    assert_eq!(
        second,
        "refused by outer quotas=outer:0,inner:3 tightest=outer dry_run=-"
    );
}
