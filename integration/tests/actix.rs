//! The actix-web middleware over real sockets: an actix server and an axum server on 127.0.0.1,
//! each behind a layer built the same way on its own manual clock, and a hyper client sending
//! both the same requests. Every answer (status, rate-limit headers, body) must be the same:
//! the actix middleware runs the tower service's code, so any copy that drifted would show.

#[path = "support/http_client.rs"]
mod http_client;

#[path = "support/axum_server.rs"]
mod axum_server;

#[path = "support/redis_server.rs"]
mod redis_server;

#[path = "support/ruling.rs"]
mod ruling;

use std::net::SocketAddr;
use std::time::Duration;

use actix_web::{web, App, HttpServer};
use axum::routing::get;
use axum::Router;
use flowgate::backend::Backend;
use flowgate::clock::ManualClock;
use flowgate::http::{ActixRateLimit, ClientIp, HeaderStyle, Inbound, RateLimitLayer, Ruling};
use flowgate::policy::{Policies, Policy};
use flowgate_redis::BuildRedis as _;
use http::StatusCode;

/// Per client per route 3 per minute (one cell every 20 s), per route 5 per minute.
fn policies(clock: &ManualClock) -> flowgate::policy::PoliciesBuilder<Inbound, ManualClock> {
    Policies::<Inbound>::builder()
        .clock(clock.clone())
        .policy(
            Policy::keyed_with("per-client-per-route", |r: &Inbound, key| {
                key.add(&r.client_ip()).add(r.route_or_path());
            })
            .quota("3/min".parse().unwrap()),
        )
        .policy(
            Policy::keyed("per-route", |r: &Inbound| r.route_or_path())
                .quota("5/min".parse().unwrap()),
        )
}

/// The layer over `set`, with the client from `X-Forwarded-For` behind the loopback proxy and
/// a cost from `x-cost`.
fn layer<B: Backend<Inbound>>(set: B) -> RateLimitLayer<B> {
    RateLimitLayer::new(set)
        .client_ip(ClientIp::peer().trust(["127.0.0.0/8".parse().unwrap()]))
        .headers(HeaderStyle::BOTH)
        .cost(|r: &Inbound| {
            r.header("x-cost")
                .and_then(|v| v.to_str().ok()?.parse().ok())
                .unwrap_or(1)
        })
}

/// Serves `limit` around two routes in an actix server of one worker, on its own thread.
fn serve_actix<B: Backend<Inbound>>(limit: ActixRateLimit<B>) -> SocketAddr {
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        actix_web::rt::System::new().block_on(async move {
            let server = HttpServer::new(move || {
                App::new()
                    .wrap(limit.clone())
                    .route("/", web::get().to(|| async { "ok" }))
                    .route("/users/{id}", web::get().to(|| async { "user" }))
                    .route(
                        "/ruling",
                        web::get().to(|r: Option<web::ReqData<Ruling>>| async move {
                            ruling::describe(r.as_deref())
                        }),
                    )
            })
            .workers(1)
            .disable_signals()
            .bind(("127.0.0.1", 0))
            .unwrap();
            sender.send(server.addrs()[0]).unwrap();
            server.run().await.unwrap();
        });
    });
    receiver.recv().unwrap()
}

async fn serve_axum<B>(layer: RateLimitLayer<B>) -> SocketAddr
where
    B: Backend<Inbound>,
    B::Pending: flowgate::http::Defer<axum::routing::Route, axum::body::Body, axum::body::Body>,
{
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .route("/users/{id}", get(|| async { "user" }))
        .route(
            "/ruling",
            get(|r: Option<axum::Extension<Ruling>>| async move {
                ruling::describe(r.as_ref().map(|r| &r.0))
            }),
        )
        .route_layer(layer);
    axum_server::serve(app, true).await
}

/// What a client sees of an answer, the rate-limit part of it.
type Seen = (StatusCode, Vec<(String, String)>, String);

async fn seen(
    client: &http_client::HttpClient,
    address: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> Seen {
    let (status, map, body) = http_client::get(client, address, path, headers).await;
    let names = [
        "content-type",
        "retry-after",
        "ratelimit-policy",
        "ratelimit",
        "x-ratelimit-limit",
        "x-ratelimit-remaining",
        "x-ratelimit-reset",
        "grpc-status",
        "grpc-message",
        "grpc-status-details-bin",
        "www-authenticate",
    ];
    let mut kept = Vec::new();
    for name in names {
        for value in map.get_all(name) {
            kept.push((name.to_string(), value.to_str().unwrap().to_string()));
        }
    }
    (status, kept, String::from_utf8(body.to_vec()).unwrap())
}

/// One script of requests, sent to both servers: routes with parameters (one bucket per route
/// pattern), several clients through the trusted proxy, costs (one above the burst), the
/// clock's advance, and a gRPC call. Both servers must answer every one identically, and the
/// script must have met admissions, refusals, an oversized request and a gRPC refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actix_answers_exactly_as_tower() {
    let (actix_clock, axum_clock) = (ManualClock::new(), ManualClock::new());
    let actix = serve_actix(layer(policies(&actix_clock).build().unwrap()).actix());
    let axum = serve_axum(layer(policies(&axum_clock).build().unwrap())).await;
    let answers = run_script(actix, axum, &[&actix_clock, &axum_clock]).await;

    let statuses: Vec<u16> = answers.iter().map(|a| a.0.as_u16()).collect();
    assert_eq!(
        statuses,
        // The 6th on the route is its 5th cell (a refusal takes nothing); a gRPC refusal is 200.
        [200, 200, 200, 429, 200, 200, 429, 200, 200, 200, 200, 429, 200]
    );
    let grpc_status = |answer: &Seen| {
        let found = answer.1.iter().find(|(name, _)| name == "grpc-status");
        found.map(|(_, value)| value.clone())
    };
    assert_eq!(grpc_status(&answers[9]), Some("8".into()));
    assert_eq!(
        answers[3].1[0],
        ("content-type".into(), "application/problem+json".into())
    );
    assert!(answers[3].2.contains("per-client-per-route"));
}

/// Sends the script to both servers (advancing `clocks` where it says so) and returns the
/// answers, which must be the same from both.
async fn run_script(actix: SocketAddr, axum: SocketAddr, clocks: &[&ManualClock]) -> Vec<Seen> {
    let client = http_client::client();
    let grpc = ("content-type", "application/grpc");
    let script: Vec<(&str, Vec<(&str, &str)>)> = vec![
        ("/users/1", vec![("x-forwarded-for", "192.0.2.1")]),
        ("/users/2", vec![("x-forwarded-for", "192.0.2.1")]),
        ("/users/3", vec![("x-forwarded-for", "192.0.2.1")]),
        ("/users/4", vec![("x-forwarded-for", "192.0.2.1")]), // client's 4th on the route
        ("/users/5", vec![("x-forwarded-for", "192.0.2.2")]),
        ("/users/6", vec![("x-forwarded-for", "192.0.2.3")]), // the route's 6th request
        ("/", vec![("x-forwarded-for", "192.0.2.1"), ("x-cost", "4")]), // above the burst
        ("/", vec![("x-forwarded-for", "192.0.2.1"), ("x-cost", "2")]),
        ("/", vec![("x-forwarded-for", "192.0.2.1"), grpc]),
        ("/", vec![("x-forwarded-for", "192.0.2.1"), grpc]),
        ("advance 20s", vec![]),
        ("/users/7", vec![("x-forwarded-for", "192.0.2.1")]),
        ("/users/8", vec![("x-forwarded-for", "192.0.2.1")]),
        ("/", vec![("x-forwarded-for", "192.0.2.9")]),
    ];
    let mut answers = Vec::new();
    for (path, headers) in &script {
        if let Some(by) = path.strip_prefix("advance ") {
            let secs: u64 = by.trim_end_matches('s').parse().unwrap();
            for clock in clocks {
                clock.advance(Duration::from_secs(secs));
            }
            continue;
        }
        let from_actix = seen(&client, actix, path, headers).await;
        let from_axum = seen(&client, axum, path, headers).await;
        assert_eq!(from_actix, from_axum, "{path} {headers:?}");
        answers.push(from_actix);
    }
    answers
}

/// The actix middleware over a set decided in Redis answers as the tower layer in process: the
/// same script, one clock (the Redis set decides at its readings).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actix_over_redis_answers_as_tower_in_process() {
    let server = redis_server::RedisServer::start();
    let clock = ManualClock::starting_at(1_000_000_000_000);
    let backend = server.backend().prefix("actix").client_time(true);
    let remote = policies(&clock).build_redis(backend).unwrap();
    let actix = serve_actix(layer(remote).actix());
    let axum = serve_axum(layer(policies(&clock).build().unwrap())).await;
    let answers = run_script(actix, axum, &[&clock]).await;
    assert_eq!(answers.iter().filter(|a| a.0 == 429).count(), 3);
}

/// Opted in, the actix middleware over Redis says where each decision came from, as the tower
/// layer does (`X-RateLimit-Source`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actix_over_redis_says_where_a_decision_came_from() {
    let server = redis_server::RedisServer::start();
    let clock = ManualClock::starting_at(1_000_000_000_000);
    let backend = server.backend().prefix("actix-source").client_time(true);
    let remote = policies(&clock).build_redis(backend).unwrap();
    let actix = serve_actix(layer(remote).source_header(true).actix());
    let client = http_client::client();
    let forwarded = [("x-forwarded-for", "192.0.2.1")];
    let (status, headers, _) = http_client::get(&client, actix, "/", &forwarded).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["x-ratelimit-source"], "decided by the buckets");
}

/// In permissive mode every request reaches the handler with the decision, alike in axum and
/// actix, in process and over Redis. Five clients take the route's five cells (the dry-run
/// policy would refuse from the second request on); the sixth client's request is refused by
/// the route's quota and let through, and its own quota, which admitted it before the route's
/// refused, is given back (3 left, twice). No rate-limit header on what was let through; a
/// request without a client address is let through with its refusal too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permissive_handlers_read_the_same_rulings_everywhere() {
    let server = redis_server::RedisServer::start();
    let clock = ManualClock::starting_at(1_000_000_000_000);
    let set = || {
        let trial = Policy::global("trial").dry_run(true);
        policies(&clock).policy(trial.quota("1/min".parse().unwrap()))
    };
    let remote = |prefix: &str| {
        let backend = server.backend().prefix(prefix).client_time(true);
        layer(set().build_redis(backend).unwrap()).permissive(true)
    };
    let in_process = || layer(set().build().unwrap()).permissive(true);
    let axum = serve_axum(in_process()).await;
    let others = [
        serve_actix(in_process().actix()),
        serve_actix(remote("ruling-actix").actix()),
        serve_axum(remote("ruling-axum")).await,
    ];

    let client = http_client::client();
    let quotas = |a, b| format!("quotas=per-client-per-route:{a},per-route:{b}");
    let admitted = |a, b, tightest, dry_run| {
        format!(
            "admitted {} tightest={tightest} dry_run={dry_run}",
            quotas(a, b)
        )
    };
    let refused = format!(
        "refused by per-route {} tightest=per-route dry_run=-",
        quotas(3, 0)
    );
    let expected = [
        ("192.0.2.1", admitted(2, 4, "per-client-per-route", "-")),
        ("192.0.2.1", admitted(1, 3, "per-client-per-route", "trial")),
        ("192.0.2.2", admitted(2, 2, "per-route", "trial")),
        ("192.0.2.3", admitted(2, 1, "per-route", "trial")),
        ("192.0.2.4", admitted(2, 0, "per-route", "trial")),
        ("192.0.2.5", refused.clone()),
        ("192.0.2.5", refused),
    ];
    for (i, (client_ip, ruling)) in expected.iter().enumerate() {
        let forwarded = [("x-forwarded-for", *client_ip)];
        let answer = seen(&client, axum, "/ruling", &forwarded).await;
        assert_eq!(
            (answer.0, &answer.2),
            (StatusCode::OK, ruling),
            "request {i}"
        );
        // Admissions carry their quota headers; a refusal let through carries none.
        let headers = answer
            .1
            .iter()
            .filter(|(name, _)| name.contains("ratelimit"));
        assert_eq!(headers.count() == 0, i >= 5, "request {i}: {:?}", answer.1);
        for (k, other) in others.into_iter().enumerate() {
            let from_other = seen(&client, other, "/ruling", &forwarded).await;
            if k > 0 && i == 6 {
                // A key refused again is answered by the Redis set's local shield, which
                // knows only the refusing quota.
                let only = "refused by per-route quotas=per-route:0 tightest=per-route dry_run=-";
                assert_eq!(from_other.2, only, "request {i}, server {k}");
            } else {
                assert_eq!(from_other, answer, "request {i}, server {k}");
            }
        }
    }
    // The proxy is trusted but a client it does not name cannot be told: let through too.
    let unknown = [("x-forwarded-for", "not an address")];
    for server in [axum, others[0]] {
        let answer = seen(&client, server, "/ruling", &unknown).await;
        let ruling = "refused 500 quotas= tightest=- dry_run=-";
        assert_eq!((answer.0, answer.2.as_str()), (StatusCode::OK, ruling));
    }
}

/// A key extractor's rejection and every other refusal pass through one `refusal_response`,
/// alike in axum and actix, in process and over Redis. The third policy rejects a request
/// without an API key (401) or with a malformed one (400): its body is the hook's, with no
/// `Retry-After` and no quota headers, and the cells the first two policies took are back (the
/// client's route quota still has 2 of 3 left after two rejections). The hook answers a quota's
/// refusal with 503, keeps the others' statuses (a 401 with `WWW-Authenticate`), and is the one
/// place for the body of a client that cannot be told too; a rejected gRPC call is
/// `UNAUTHENTICATED` (16).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejections_and_refusals_answer_alike_through_one_hook() {
    use flowgate::http::Refusal;
    use flowgate::outcome::Rejection;
    static NO_KEY: Rejection = Rejection::new(401, "the request carries no API key");
    static MALFORMED: Rejection = Rejection::new(400, "the API key is malformed");

    let server = redis_server::RedisServer::start();
    let clock = ManualClock::starting_at(1_000_000_000_000);
    let set = || {
        let per_key = Policy::keyed_with("per-api-key", |r: &Inbound, key| {
            match r.header("x-api-key").map(|k| k.as_bytes()) {
                None => key.reject(&NO_KEY),
                Some(k) if !k.iter().all(u8::is_ascii_alphanumeric) => key.reject(&MALFORMED),
                Some(k) => key.add(k),
            };
        });
        policies(&clock).policy(per_key.quota("100/min".parse().unwrap()))
    };
    fn hook<B: Backend<Inbound>>(layer: RateLimitLayer<B>) -> RateLimitLayer<B> {
        layer.refusal_response(|refusal: &Refusal| {
            let status = match refusal {
                Refusal::Limited(r) if r.cause() == flowgate::Cause::Quota => {
                    StatusCode::SERVICE_UNAVAILABLE
                }
                _ => refusal.status(),
            };
            let body = format!("{{\"error\":{:?}}}", refusal.detail());
            let mut response = http::Response::new(body.into());
            *response.status_mut() = status;
            let json = http::HeaderValue::from_static("application/json");
            response.headers_mut().insert("content-type", json);
            if status == StatusCode::UNAUTHORIZED {
                let bearer = http::HeaderValue::from_static("Bearer");
                response.headers_mut().insert("www-authenticate", bearer);
            }
            response
        })
    }
    let remote = |prefix: &str| {
        let backend = server.backend().prefix(prefix).client_time(true);
        hook(layer(set().build_redis(backend).unwrap()))
    };
    let in_process = || hook(layer(set().build().unwrap()));
    let axum = serve_axum(in_process()).await;
    let others = [
        serve_actix(in_process().actix()),
        serve_actix(remote("reject-actix").actix()),
        serve_axum(remote("reject-axum")).await,
    ];

    let client = http_client::client();
    let from = ("x-forwarded-for", "192.0.2.1");
    type Step<'a> = (&'a [(&'a str, &'a str)], u16, &'a str);
    let script: [Step; 8] = [
        (&[from, ("x-api-key", "k1")], 200, "ok"),
        (
            &[from],
            401,
            r#"{"error":"the request carries no API key"}"#,
        ),
        (
            &[from, ("x-api-key", "k 1")],
            400,
            r#"{"error":"the API key is malformed"}"#,
        ),
        (&[from, ("x-api-key", "k1")], 200, "ok"),
        (&[from, ("x-api-key", "k1")], 200, "ok"),
        (
            &[from, ("x-api-key", "k1")],
            503,
            r#"{"error":"rate limited by policy 'per-client-per-route': retry after 20 s"}"#,
        ),
        (&[from, ("content-type", "application/grpc")], 200, ""),
        (
            &[("x-forwarded-for", "not an address")],
            500,
            r#"{"error":"the client's address could not be determined: the server does not see the connection's peer address"}"#,
        ),
    ];
    for (i, (headers, status, body)) in script.iter().enumerate() {
        let answer = seen(&client, axum, "/", headers).await;
        assert_eq!(
            (answer.0.as_u16(), answer.2.as_str()),
            (*status, *body),
            "request {i}"
        );
        let kept: Vec<&str> = answer.1.iter().map(|(name, _)| name.as_str()).collect();
        match i {
            // The second admission: the client's route quota lost one cell, not three.
            3 => assert!(answer.1.contains(&(
                "ratelimit".into(),
                r#""per-client-per-route";r=1;t=20, "per-route";r=3;t=12, "per-api-key";r=98;t=1"#
                    .into()
            )), "{:?}", answer.1),
            1 => assert_eq!(kept, ["content-type", "www-authenticate"], "request {i}"),
            2 => assert_eq!(kept, ["content-type"], "request {i}"),
            5 => assert!(kept.contains(&"retry-after"), "request {i}"),
            6 => assert!(answer.1.contains(&("grpc-status".into(), "16".into()))),
            _ => {}
        }
        for (k, other) in others.into_iter().enumerate() {
            let from_other = seen(&client, other, "/", headers).await;
            assert_eq!(from_other, answer, "request {i}, server {k}");
        }
    }
}
