//! The example service (`examples/service`), two instances on loopback ports sharing one
//! private `redis-server`, driven by a real HTTP client from several tasks: together they admit
//! no more than each per-API-key quota allows, every 429 carries consistent headers, and each
//! instance's `/metrics` reports what the test saw of it.

#[path = "support/http_client.rs"]
mod http_client;

#[path = "support/redis_server.rs"]
mod redis_server;

#[path = "../examples/service/app.rs"]
mod app;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use http::{HeaderMap, StatusCode};
use http_client::HttpClient;

async fn serve(
    config: &app::Config,
) -> (SocketAddr, metrics_exporter_prometheus::PrometheusHandle) {
    let (router, metrics) = app::app(config).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let service = router.into_make_service_with_connect_info::<SocketAddr>();
        axum::serve(listener, service).await.unwrap();
    });
    (address, metrics)
}

async fn get(
    client: &HttpClient,
    address: SocketAddr,
    path: &str,
    headers: &[(&str, String)],
) -> (StatusCode, HeaderMap, String) {
    let (status, headers, body) = http_client::get(client, address, path, headers).await;
    (status, headers, String::from_utf8_lossy(&body).into_owned())
}

/// The value of the counter `name` for the per-API-key quota `quota` in a `/metrics` text.
fn counter(text: &str, name: &str, quota: &str) -> u64 {
    let series = format!("{name}{{policy=\"per-api-key\",quota=\"{quota}\"}}");
    text.lines()
        .find_map(|line| line.strip_prefix(series.as_str()))
        .map_or(0, |value| value.trim().parse::<f64>().unwrap() as u64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_share_the_api_limits_through_redis() {
    let server = redis_server::RedisServer::start();
    let config = app::config(&server.url()).unwrap();
    let instances = [serve(&config).await, serve(&config).await];
    let client = http_client::client();
    let started = Instant::now();
    // Eight tasks, alternating instances, four API keys, each client a distinct address behind
    // the trusted proxy: 40 requests per task, all at once.
    let mut tasks = Vec::new();
    for task in 0..8 {
        let client = client.clone();
        let addresses = [instances[0].0, instances[1].0];
        tasks.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            for i in 0..40 {
                let instance = (task + i) % 2;
                let key = format!("key-{}", task % 4);
                let headers = [
                    ("x-api-key", key.clone()),
                    ("x-forwarded-for", format!("198.51.{task}.{i}")),
                ];
                let (status, headers, body) =
                    get(&client, addresses[instance], "/api/items", &headers).await;
                seen.push((instance, key, status, headers, body));
            }
            seen
        }));
    }
    let mut seen = Vec::new();
    for task in tasks {
        seen.extend(task.await.unwrap());
    }
    let elapsed = started.elapsed();

    // Together, no key was admitted more than its burst plus what refilled meanwhile
    // (10/s burst 20: one cell every 100 ms).
    for k in 0..4 {
        let key = format!("key-{k}");
        let admitted = seen
            .iter()
            .filter(|(_, kk, status, _, _)| *kk == key && *status == StatusCode::OK)
            .count() as u64;
        let bound = 20 + elapsed.as_millis() as u64 / 100 + 1;
        assert!(
            admitted <= bound,
            "{key}: {admitted} admitted in {elapsed:?}"
        );
        assert!(admitted >= 20, "{key}: only {admitted} admitted");
    }
    // Every refusal is the per-API-key quota's, with headers that agree with each other.
    let refusals: Vec<_> = seen.iter().filter(|s| s.2 != StatusCode::OK).collect();
    assert!(refusals.len() >= 80, "{} refusals", refusals.len());
    for (_, key, status, headers, body) in &refusals {
        assert_eq!(*status, StatusCode::TOO_MANY_REQUESTS, "{key}: {body}");
        assert!(body.contains("\"policy\":\"per-api-key\""), "{body}");
        let retry: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
        assert!(retry >= 1);
        let ratelimit = headers["ratelimit"].to_str().unwrap();
        // The exhausted quota says so, and more comes no later than the client is told to
        // come back.
        let item = ratelimit
            .split(", ")
            .find(|item| item.starts_with("\"per-api-key.0\""))
            .unwrap_or_else(|| panic!("{ratelimit}"));
        assert!(item.contains(";r=0;"), "{ratelimit}");
        let t: u64 = item.rsplit("t=").next().unwrap().parse().unwrap();
        assert!(t <= retry, "t={t} after Retry-After {retry}: {ratelimit}");
        assert_eq!(headers["x-ratelimit-remaining"], "0");
        assert!(headers.contains_key("ratelimit-policy"));
    }
    // Each instance's /metrics reports the cells it saw admitted and refused per quota.
    for (index, (address, _)) in instances.iter().enumerate() {
        let (status, _, text) = get(&client, *address, "/metrics", &[]).await;
        assert_eq!(status, StatusCode::OK);
        let here = seen.iter().filter(|s| s.0 == index);
        let admitted = here.clone().filter(|s| s.2 == StatusCode::OK).count() as u64;
        let refused = here.filter(|s| s.2 != StatusCode::OK).count() as u64;
        for quota in ["10/s burst 20", "300/min", "5000/d fixed"] {
            let reported = counter(&text, "flowgate_admitted_cells_total", quota);
            assert_eq!(reported, admitted, "instance {index}, {quota}");
        }
        let refused_total = ["10/s burst 20", "300/min", "5000/d fixed"]
            .iter()
            .map(|quota| counter(&text, "flowgate_refused_cells_total", quota))
            .sum::<u64>();
        assert_eq!(refused_total, refused, "instance {index}");
        assert!(
            text.contains("# HELP flowgate_admitted_cells_total"),
            "{text}"
        );
    }
    assert!(elapsed < Duration::from_secs(30));
}
