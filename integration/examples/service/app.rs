//! The service of `examples/service`: its configuration (one TOML file) and its router. Shared
//! with `integration/tests/service.rs`, which runs two instances of it against one redis-server.

use std::sync::Arc;

use axum::routing::{get, post};
use axum::Router;
use flowgate::clock::QuantaClock;
use flowgate::http::{by_client_ip, ClientIp, HeaderStyle, Inbound, RateLimitLayer};
use flowgate::policy::KeyExtractors;
use flowgate_redis::AnyPolicies;
use flowgate_redis::Config as PoliciesConfig;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use serde::Deserialize;

/// The whole file: who the client is, and three policy sets.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Trusted proxies and the rest of the client-address settings.
    pub client_ip: ClientIp,
    /// Every route: per client address, in process.
    pub public: PoliciesConfig,
    /// `POST /login`: stricter, per client address, in process.
    pub login: PoliciesConfig,
    /// `/api/…`: per client address and per API key, shared by every instance in Redis.
    pub api: PoliciesConfig,
}

/// The service's configuration as shipped; `redis_url` is the server the `api` set shares.
pub fn config(redis_url: &str) -> Result<Config, toml::de::Error> {
    toml::from_str(&CONFIG.replace("REDIS_URL", redis_url))
}

/// The configuration file (`REDIS_URL` is filled in at startup).
pub const CONFIG: &str = r#"
[client_ip]
trust = ["127.0.0.0/8"]          # the load balancer in front of every instance
header = "x-forwarded-for"

[[public.policies]]
name = "per-ip"
key = "client-ip"
quotas = ["600/min burst 60"]

[[login.policies]]
name = "login"
key = "client-ip"
quotas = ["5/min", "20/h"]

[api]
backend = "redis"
[api.redis]
url = "REDIS_URL"
prefix = "service"
timeout = "200ms"
on_failure = "closed"
retry_after = "1s"

[[api.policies]]
name = "api-per-ip"
key = "client-ip"
quotas = ["600/min burst 100"]

[[api.policies]]
name = "per-api-key"
key = "api-key"
quotas = ["10/s burst 20", "300/min", "5000/day fixed"]
"#;

/// The key extractors the file names.
fn keys() -> KeyExtractors<Inbound> {
    KeyExtractors::new()
        .key("client-ip", by_client_ip)
        .key("api-key", |request: &Inbound, key| {
            match request.header("x-api-key").and_then(|v| v.to_str().ok()) {
                Some(api_key) => key.add(api_key),
                // Without a key only the per-IP limit applies.
                None => key.skip(),
            };
        })
}

/// One instance: its router, and the handle its `/metrics` renders. Build it inside a tokio
/// runtime (the Redis set connects lazily). Each instance keeps its own metrics recorder, so
/// that two instances in one process report apart, as two processes would.
/// A layer over a set on whichever backend its configuration names.
type Layer = RateLimitLayer<AnyPolicies<Inbound>>;

pub fn app(config: &Config) -> Result<(Router, PrometheusHandle), Box<dyn std::error::Error>> {
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let keys = keys();
    let layer = |set: &PoliciesConfig| -> Result<Layer, Box<dyn std::error::Error>> {
        // Handles are registered as the set is built: under this instance's recorder.
        let limits =
            metrics::with_local_recorder(&recorder, || set.build(&keys, QuantaClock::new()))?;
        Ok(RateLimitLayer::new(limits)
            .client_ip(config.client_ip.clone())
            .headers(HeaderStyle::BOTH))
    };
    let (public, login, api) = (
        layer(&config.public)?,
        layer(&config.login)?,
        layer(&config.api)?,
    );
    let metrics = Arc::new(handle.clone());
    let router = Router::new()
        .route("/", get(|| async { "hello\n" }).route_layer(public))
        .route("/login", post(|| async { "welcome\n" }).route_layer(login))
        .route("/api/items", get(|| async { "[]\n" }).route_layer(api))
        .route(
            "/metrics",
            get(move || {
                let metrics = Arc::clone(&metrics);
                async move { metrics.render() }
            }),
        );
    Ok((router, handle))
}
