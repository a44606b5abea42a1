//! The HTTP middleware over a set decided in Redis, against the same set decided in process:
//! axum servers on loopback ports, one in process, one over a private `redis-server`, one over
//! a private Redis Cluster; a real hyper client, and every response compared header by header,
//! the quota headers item by item. Quotas run on a manual clock (the Redis sets decide at its
//! readings), so nothing depends on how fast the machine is: every quota's cell takes seconds
//! or more, because a Redis key expires in real time when its bucket would be full again (a key
//! of a 100/s quota would be gone 30 real milliseconds after a take, while the manual clock has
//! not moved).

#[path = "support/http_client.rs"]
mod http_client;

#[path = "support/axum_server.rs"]
mod axum_server;

#[path = "support/redis_cluster.rs"]
mod redis_cluster;

use std::net::SocketAddr;
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use flowgate::clock::ManualClock;
use flowgate::http::{by_client_ip, HeaderStyle, Inbound, RateLimitLayer};
use flowgate::policy::{PoliciesBuilder, Policy};
use flowgate_redis::AnyPolicies;
use flowgate_redis::BuildRedis as _;
use flowgate_redis::{OnFailure, RedisBackend};
use http::{HeaderMap, StatusCode};
use http_client::HttpClient;
use redis_cluster::redis_server::{self, RedisServer};
use redis_cluster::RedisCluster;

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

impl Reply {
    /// The items of the list header `name` (none if it is missing).
    fn items(&self, name: &str) -> Vec<&str> {
        let value = self.headers.iter().find(|(n, _)| n == name);
        value.map_or(Vec::new(), |(_, value)| value.split(", ").collect())
    }
}

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

async fn serve(layer: Layer) -> SocketAddr {
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

/// Per client 20 per hour and 4 per minute, a dry-run trial of 2 per 10 minutes, and for
/// everyone 1000 per hour and 10 per hour: in a cluster, each policy's buckets in a slot of
/// their own.
fn policies() -> PoliciesBuilder<Inbound> {
    let quota = |text: &str| text.parse().unwrap();
    flowgate::policy::Policies::<Inbound>::builder()
        .policy(
            Policy::keyed_with("per-client", by_client_ip).quotas([quota("20/h"), quota("4/min")]),
        )
        .policy(
            Policy::keyed_with("trial", by_client_ip)
                .quota(quota("2/10min"))
                .dry_run(true),
        )
        .policy(Policy::global("global").quotas([quota("1000/h"), quota("10/h")]))
}

/// One layer type for every backend.
type Layer = RateLimitLayer<AnyPolicies<Inbound, ManualClock>>;

fn layer(set: impl Into<AnyPolicies<Inbound, ManualClock>>) -> Layer {
    RateLimitLayer::new(set.into())
        .headers(HeaderStyle::BOTH)
        .cost(|r: &Inbound| {
            r.header("x-cost")
                .and_then(|v| v.to_str().ok()?.parse().ok())
                .unwrap_or(1)
        })
}

/// `theirs` (step `step`, from `backend`) says what `ours` (in process) says: the quota
/// headers item by item, then everything.
fn assert_alike(ours: &Reply, theirs: &Reply, step: usize, backend: &str) {
    for name in ["ratelimit-policy", "ratelimit"] {
        assert_eq!(
            ours.items(name),
            theirs.items(name),
            "step {step}: {name}, in process then {backend} ({}, {})",
            ours.status,
            theirs.status
        );
    }
    assert_eq!(ours, theirs, "step {step}: in process, then {backend}");
}

/// The same requests through the three servers, at the same readings of the clock: the same
/// statuses, headers and bodies, admitted or refused (by the first policy or the last), with
/// costs from 0 to above a burst.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_backend_answers_over_http_as_in_process() {
    let server = RedisServer::start();
    let cluster = RedisCluster::start();
    let clock = ManualClock::starting_at(1_000_000_000_000);
    let local = policies().clock(clock.clone()).build().unwrap();
    let remote = |backend: RedisBackend| {
        let backend = backend.prefix("http").client_time(true);
        // Without the shield, whose refusals carry the refusing quota's state only: every
        // response is compared header by header.
        let backend = backend.timeout(Duration::from_secs(10)).shield(0);
        layer(
            policies()
                .clock(clock.clone())
                .build_redis(backend)
                .unwrap(),
        )
    };
    let one_layer = remote(server.backend());
    let many_layer = remote(RedisBackend::cluster(cluster.seed_urls()).unwrap());
    assert_eq!(one_layer.policies().backend_name(), "redis");
    let local = serve(layer(local)).await;
    let one = serve(one_layer.clone()).await;
    let many = serve(many_layer.clone()).await;
    let client = http_client::client();

    let mut steps: Vec<(u64, u32)> = vec![
        (0, 1),
        (0, 3),
        (0, 0), // a look: takes nothing
        (0, 5), // above the per-minute burst: never, without Retry-After
        (0, 1), // refused per client (the first slot)
        (24, 1),
        (0, 2), // refused per client
    ];
    // Two and a half a minute: the global 10 per hour runs out (the last slot refuses) while
    // the per-client quotas keep up.
    steps.extend([(24, 1); 8]);
    steps.extend([(0, 1), (360, 1), (0, 0), (0, 2), (3_600, 3), (0, 1)]);
    let (mut admitted, mut refused_by) = (0, Vec::new());
    for (i, &(advance, cost)) in steps.iter().enumerate() {
        clock.advance(Duration::from_secs(advance));
        let a = fetch(&client, local, cost).await;
        let b = fetch(&client, one, cost).await;
        let c = fetch(&client, many, cost).await;
        assert_alike(&a, &b, i, "one redis-server");
        assert_alike(&a, &c, i, "Redis Cluster");
        match a.status {
            StatusCode::OK => admitted += 1,
            _ => refused_by.push(a.body),
        }
    }
    let by = |policy: &str| {
        let named = format!(r#""policy":"{policy}""#);
        refused_by
            .iter()
            .filter(|body| body.contains(&named))
            .count()
    };
    assert!(
        admitted >= 10 && by("per-client") >= 3 && by("global") >= 3,
        "{admitted} admitted, refused: {refused_by:?}"
    );
    let redis = |any: &AnyPolicies<Inbound, ManualClock>| match any {
        AnyPolicies::Redis(set) => set.stats(),
        _ => panic!("a Redis set"),
    };
    let stats = redis(one_layer.policies());
    // Every request went to one server in one round trip (the oversized one only to look, for
    // its headers: counted neither admitted nor refused).
    let (decisions, refused) = (steps.len() as u64, refused_by.len() as u64);
    assert_eq!(stats.decisions, decisions);
    assert_eq!(stats.round_trips, stats.decisions + stats.reloads);
    assert_eq!((stats.admitted, stats.refused), (admitted, refused - 1));
    // In the cluster, refusals in the last slot put the earlier slots' takes back.
    let stats = redis(many_layer.policies());
    assert_eq!(stats.decisions, decisions);
    assert!(stats.undone > 0, "{stats:?}");
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

/// Where a remote decision came from reaches the handler (the request's `Source` extension)
/// and, opted in, the client (`X-RateLimit-Source`): Redis's buckets while it answers; the
/// failure policy, with why, when it does not (here it fails open: the admission says so).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_decision_says_where_it_came_from() {
    use flowgate::backend::Source;
    let server = RedisServer::start();
    // Refused at once; a long timeout, so that a starved runtime cannot say "timed out".
    let gone = RedisBackend::new(redis_server::nobody()).timeout(Duration::from_secs(10));
    let client = http_client::client();
    for (backend, expected) in [
        (server.backend().prefix("source"), "decided by the buckets"),
        (gone, "failed open: no connection to the server"),
    ] {
        let set = policies().clock(ManualClock::new()).build_redis(backend);
        let layer = layer(set.unwrap()).source_header(true);
        let app = Router::new()
            .route(
                "/",
                get(|source: axum::Extension<Source>| async move { source.0.to_string() }),
            )
            .route_layer(layer);
        let address = axum_server::serve(app, true).await;
        let (status, headers, body) =
            http_client::get(&client, address, "/", &[] as &[(&str, String)]).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(String::from_utf8_lossy(&body), expected);
        assert_eq!(headers["x-ratelimit-source"], expected);
    }
}
