//! The HTTP middleware over a set decided in Redis, against the same set decided in process:
//! two axum servers on loopback ports, one private `redis-server`, a real hyper client, and
//! every response compared header by header. Quotas run on a manual clock (the Redis set
//! decides at its readings), so nothing depends on how fast the machine is.

#[path = "support/http_client.rs"]
mod http_client;

#[path = "support/axum_server.rs"]
mod axum_server;

#[path = "support/redis_server.rs"]
mod redis_server;

use std::net::SocketAddr;
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use flowgate::clock::ManualClock;
use flowgate::http::{by_client_ip, HeaderStyle, Inbound, RateLimitLayer};
use flowgate::policy::{PoliciesBuilder, Policy};
use flowgate::redis::{OnFailure, RedisBackend};
use http::{HeaderMap, StatusCode};
use http_client::HttpClient;
use redis_server::RedisServer;

/// What a response says: status, the rate-limit headers, and the body.
#[derive(Debug, PartialEq, Eq)]
struct Reply {
    status: StatusCode,
    headers: Vec<(String, String)>,
    body: String,
}

const HEADERS: [&str; 6] = [
    "ratelimit",
    "ratelimit-policy",
    "x-ratelimit-limit",
    "x-ratelimit-remaining",
    "x-ratelimit-reset",
    "retry-after",
];

fn reply(status: StatusCode, headers: &HeaderMap, body: &[u8]) -> Reply {
    let headers = HEADERS
        .iter()
        .filter_map(|name| {
            let value = headers.get(*name)?.to_str().unwrap();
            Some((name.to_string(), value.to_owned()))
        })
        .collect();
    Reply {
        status,
        headers,
        body: String::from_utf8(body.to_vec()).unwrap(),
    }
}

async fn serve(layer: RateLimitLayer<ManualClock>) -> SocketAddr {
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .route_layer(layer);
    axum_server::serve(app, true).await
}

async fn fetch(client: &HttpClient, address: SocketAddr, cost: u32) -> Reply {
    let cost = [("x-cost", cost.to_string())];
    let (status, headers, body) = http_client::get(client, address, "/", &cost).await;
    reply(status, &headers, &body)
}

/// Per client 5 per 10 s, a dry-run trial of 2 per 10 s, and 100 per second for everyone.
fn policies() -> PoliciesBuilder<Inbound> {
    flowgate::policy::Policies::<Inbound>::builder()
        .policy(Policy::keyed_with("per-client", by_client_ip).quota("5/10s".parse().unwrap()))
        .policy(
            Policy::keyed_with("trial", by_client_ip)
                .quota("2/10s".parse().unwrap())
                .dry_run(true),
        )
        .policy(Policy::global("global").quota("100/s".parse().unwrap()))
}

fn layer(
    set: impl Into<flowgate::backend::AnyPolicies<Inbound, ManualClock>>,
) -> RateLimitLayer<ManualClock> {
    RateLimitLayer::new(set)
        .headers(HeaderStyle::BOTH)
        .cost(|r: &Inbound| {
            r.header("x-cost")
                .and_then(|v| v.to_str().ok()?.parse().ok())
                .unwrap_or(1)
        })
}

/// The same requests through both servers, at the same readings of the clock: the same
/// statuses, headers and bodies, admitted or refused, with costs from 0 to above the burst.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_answers_over_http_exactly_as_in_process() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(1_000_000_000_000);
    let local = policies().clock(clock.clone()).build().unwrap();
    let backend = RedisBackend::new(server.client())
        .prefix("http")
        .client_time(true);
    let remote = policies()
        .clock(clock.clone())
        .build_redis(backend)
        .unwrap();
    let local = serve(layer(local)).await;
    let remote_layer = layer(remote);
    assert_eq!(remote_layer.policies().backend_name(), "redis");
    let remote = serve(remote_layer.clone()).await;
    let client = http_client::client();

    let steps: [(u64, u32); 12] = [
        (0, 1),
        (0, 2),
        (0, 0), // a look: takes nothing
        (0, 6), // above the burst: never, without Retry-After
        (100, 1),
        (100, 1), // the burst spent: refused, and not charged
        (500, 1),
        (1_500, 1),
        (2_000, 3),
        (0, 1),
        (9_000, 5),
        (0, 1),
    ];
    let (mut admitted, mut refused) = (0, 0);
    for (i, &(advance, cost)) in steps.iter().enumerate() {
        clock.advance(Duration::from_millis(advance));
        let a = fetch(&client, local, cost).await;
        let b = fetch(&client, remote, cost).await;
        assert_eq!(a, b, "step {i}: in process, then Redis");
        match a.status {
            StatusCode::OK => admitted += 1,
            _ => refused += 1,
        }
    }
    assert!(
        admitted >= 5 && refused >= 3,
        "{admitted} admitted, {refused} refused"
    );
    let stats = remote_layer.policies().redis().unwrap().stats();
    // Every request went to Redis in one round trip (the oversized one only to look, for its
    // headers: counted neither admitted nor refused).
    assert_eq!(stats.decisions, 12);
    assert_eq!(stats.round_trips, stats.decisions + stats.reloads);
    assert_eq!((stats.admitted, stats.refused), (admitted, refused - 1));
}

/// With Redis gone, the layer answers by the set's failure policy: closed here, a 503 with the
/// configured Retry-After that says the limiter is unavailable (no quota headers, no policy
/// named: no quota was asked); and the decision is bounded by the timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_redis_the_failure_policy_answers() {
    let backend = RedisBackend::new(redis_server::nobody())
        .timeout(Duration::from_millis(100))
        .on_failure(OnFailure::Closed {
            retry_after: Duration::from_secs(7),
        });
    let set = policies()
        .clock(ManualClock::new())
        .build_redis(backend)
        .unwrap();
    let address = serve(layer(set)).await;
    let client = http_client::client();
    let started = std::time::Instant::now();
    let reply = fetch(&client, address, 1).await;
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(reply.headers, [("retry-after".into(), "7".into())]);
    assert_eq!(
        reply.body,
        r#"{"type":"about:blank","title":"Service Unavailable","status":503,"detail":"the rate limiter is unavailable: retry after 7 s","retry_after":7}"#
    );
}
