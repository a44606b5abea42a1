//! An axum server on a loopback port with three layers: per user per endpoint,
//! per endpoint, and global. Refusals are `429 Too Many Requests` with `Retry-After`, the IETF
//! draft's `RateLimit-Policy` / `RateLimit` headers and the legacy `X-RateLimit-*`.
//!
//! ```text
//! # serves on 127.0.0.1:3000 (or a free port)
//! cargo run -p flowgate-integration --example http_server
//! # serves, sends itself a few requests, exits
//! cargo run -p flowgate-integration --example http_server -- --demo
//! ```

use std::net::SocketAddr;
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use flowgate::http::{HeaderStyle, Inbound, RateLimitLayer};
use flowgate::policy::{Policies, Policy};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::net::TcpListener;

/// The user: the API key if the request has one, else the client's address.
fn user(request: &Inbound, key: &mut flowgate::policy::Key) {
    match request.header("x-api-key") {
        Some(api_key) => key.add(api_key.as_bytes()),
        None => key.add(&request.client_ip()),
    };
}

fn policies() -> Result<Policies<Inbound>, Box<dyn std::error::Error>> {
    Ok(Policies::<Inbound>::builder()
        // Narrowest first: it refuses most often, and refuses before anything is taken.
        .policy(
            Policy::keyed_with("per-user-per-endpoint", |r: &Inbound, key| {
                user(r, key);
                key.add(r.route_or_path());
            })
            .quota("5/10s".parse()?)
            // Refused clients spread their retries over an extra 0–500 ms.
            .jitter(Duration::ZERO, Duration::from_millis(500)),
        )
        .policy(
            Policy::keyed("per-endpoint", |r: &Inbound| r.route_or_path()).quota("100/s".parse()?),
        )
        .policy(Policy::global("global").quota("1000/s".parse()?))
        .build()?)
}

fn app() -> Result<Router, Box<dyn std::error::Error>> {
    let layer = RateLimitLayer::new(policies()?).headers(HeaderStyle::BOTH);
    Ok(Router::new()
        .route("/search", get(|| async { "results\n" }))
        .route("/users/{id}", get(|| async { "a user\n" }))
        // After routing, so the policies see `/users/{id}`, not every user's path.
        .route_layer(layer)
        // Not limited: added after the layer.
        .route("/health", get(|| async { "ok\n" })))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let demo = std::env::args().any(|arg| arg == "--demo");
    let listener = match TcpListener::bind("127.0.0.1:3000").await {
        Ok(listener) if !demo => listener,
        _ => TcpListener::bind("127.0.0.1:0").await?,
    };
    let address = listener.local_addr()?;
    let service = app()?.into_make_service_with_connect_info::<SocketAddr>();
    let server = tokio::spawn(async move { axum::serve(listener, service).await });

    println!("flowgate http_server on http://{address}");
    println!("  per user per endpoint 5/10s, per endpoint 100/s, global 1000/s");
    println!("try:");
    println!("  curl -i http://{address}/search                  # run it six times");
    println!("  curl -i -H 'x-api-key: alice' http://{address}/users/1");
    println!("  curl -i http://{address}/health                  # never limited");

    if demo {
        let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
        let mut statuses = Vec::new();
        for i in 1..=6 {
            let uri = format!("http://{address}/search").parse()?;
            let response = client.get(uri).await?;
            let status = response.status();
            let header = |name| {
                response
                    .headers()
                    .get(name)
                    .map_or("-", |v| v.to_str().unwrap_or("?"))
                    .to_owned()
            };
            println!(
                "request {i}: {status}  RateLimit: {}  Retry-After: {}",
                header("ratelimit"),
                header("retry-after")
            );
            let body = response.into_body().collect().await?.to_bytes();
            if status == http::StatusCode::TOO_MANY_REQUESTS {
                println!("  body: {}", String::from_utf8_lossy(&body));
            }
            statuses.push(status.as_u16());
        }
        // The burst of five passes, the sixth is refused (the demo runs far inside 10 s).
        if statuses != [200, 200, 200, 200, 200, 429] {
            return Err(format!("unexpected statuses {statuses:?}").into());
        }
        server.abort();
        return Ok(());
    }
    server.await??;
    Ok(())
}
