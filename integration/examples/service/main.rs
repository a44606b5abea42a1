//! A real service, limited the way a deployment behind a load balancer needs: an axum app with a
//! per-IP limit (client addresses from the trusted proxy's `X-Forwarded-For`), a stricter limit
//! on `POST /login`, per-API-key limits on `/api` with three quotas shared by every instance
//! through Redis, and Prometheus metrics on `/metrics`, all from one TOML file (`app.rs`).
//!
//! ```text
//! # serves until stopped
//! cargo run -p flowgate-integration --example service
//! # sends itself requests, then exits
//! cargo run -p flowgate-integration --example service -- --demo
//! ```
//!
//! Uses the Redis at `REDIS_URL` if set; otherwise starts a private `redis-server` on a free
//! loopback port (installed by `scripts/install-redis`) and stops it at the end.

#[path = "../../tests/support/redis_server.rs"]
mod redis_server;

mod app;

use std::net::SocketAddr;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let demo = match std::env::args().nth(1).as_deref() {
        None => false,
        Some("--demo") => true,
        Some("--help" | "-h") => {
            println!("usage: service [--demo]   (REDIS_URL selects the Redis server)");
            return Ok(());
        }
        Some(other) => return Err(format!("unknown argument {other} (try --help)").into()),
    };
    let (_server, url) = redis_server::RedisServer::from_env_or_start();
    let (router, _metrics) = app::app(&app::config(&url)?)?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    let service = router.into_make_service_with_connect_info::<SocketAddr>();
    let server = tokio::spawn(async move { axum::serve(listener, service).await });
    println!("serving on http://{address} (limits shared through {url})");
    if !demo {
        println!("try: curl -i -H 'x-api-key: k1' http://{address}/api/items");
        server.await??;
        return Ok(());
    }
    let client = reqwest_like::Client::new();
    let mut refused = 0;
    for i in 0..25 {
        let status = client.get(address, "/api/items", "k1").await?;
        println!("api request {i} with key k1: {status}");
        refused += usize::from(status.starts_with("429"));
    }
    let metrics = client.get(address, "/metrics", "").await?;
    println!("/metrics: {metrics}");
    // The key's burst of 20 passes and the last 5 are refused, unless a starved machine let a
    // cell or more refill (10/s) during the run: never more than 5, never none, and counted.
    // scripts/test runs this.
    let counted = format!(
        "flowgate_refused_cells_total{{policy=\"per-api-key\",quota=\"10/s burst 20\"}} {refused}"
    );
    if !(1..=5).contains(&refused) || !metrics.contains(&counted) {
        return Err(format!("expected 1 to 5 refusals, counted in /metrics; got {refused}").into());
    }
    Ok(())
}

/// A minimal HTTP/1.1 client over loopback (hyper's), enough for the demo.
mod reqwest_like {
    use std::net::SocketAddr;

    use bytes::Bytes;
    use http_body_util::{BodyExt, Empty};
    use hyper_util::client::legacy::connect::HttpConnector;
    use hyper_util::rt::TokioExecutor;

    pub struct Client(hyper_util::client::legacy::Client<HttpConnector, Empty<Bytes>>);

    impl Client {
        pub fn new() -> Self {
            Self(hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build_http())
        }

        /// `GET path` with the API key (if any); the status, or for `/metrics` its body.
        pub async fn get(
            &self,
            address: SocketAddr,
            path: &str,
            api_key: &str,
        ) -> Result<String, Box<dyn std::error::Error>> {
            let mut request = http::Request::get(format!("http://{address}{path}"));
            if !api_key.is_empty() {
                request = request.header("x-api-key", api_key);
            }
            let response = self.0.request(request.body(Empty::new())?).await?;
            let status = response.status();
            let body = response.into_body().collect().await?.to_bytes();
            Ok(if path == "/metrics" {
                let text = String::from_utf8_lossy(&body);
                let lines = text.lines().filter(|l| l.contains("per-api-key"));
                format!("\n{}", lines.collect::<Vec<_>>().join("\n"))
            } else {
                status.to_string()
            })
        }
    }
}
