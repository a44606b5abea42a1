//! What a Redis limiter reports through the [`metrics`](https://docs.rs/metrics) facade
//! (feature `metrics`), or nothing: its calls' time, failures, breaker state, fallbacks and
//! decisions by source (the crate docs list them). Its cells are counted under flowgate's own
//! names ([`QuotaMetrics`](flowgate::policy::QuotaMetrics)).

/// Whether metrics are compiled in.
pub(crate) const ENABLED: bool = cfg!(feature = "metrics");

#[cfg(feature = "metrics")]
pub(crate) use metrics::{Counter, Gauge, Histogram};

#[cfg(not(feature = "metrics"))]
mod off {
    /// A handle that counts, measures or records nothing.
    #[derive(Debug, Clone, Default)]
    pub(crate) struct Off;

    impl Off {
        #[inline(always)]
        pub(crate) fn increment(&self, _: u64) {}

        #[inline(always)]
        pub(crate) fn set(&self, _: f64) {}

        #[inline(always)]
        pub(crate) fn record(&self, _: f64) {}
    }
}

#[cfg(not(feature = "metrics"))]
use off::Off;
#[cfg(not(feature = "metrics"))]
pub(crate) use off::{Off as Counter, Off as Gauge, Off as Histogram};

/// The failure counters of one Redis limiter, its calls' time, and its decisions by source.
#[derive(Debug, Clone)]
pub(crate) struct RedisMetrics {
    pub(crate) calls: Histogram,
    pub(crate) from_redis: Counter,
    pub(crate) from_lease: Counter,
    pub(crate) timeouts: Counter,
    pub(crate) connection_failures: Counter,
    pub(crate) reply_failures: Counter,
    pub(crate) breaker_refused: Counter,
    pub(crate) breaker_state: Gauge,
    pub(crate) failed_open: Counter,
    pub(crate) failed_closed: Counter,
    pub(crate) local: Counter,
}

/// Every metric this crate reports: name, kind, and what it counts (the exporter's HELP line).
#[cfg(feature = "metrics")]
const DESCRIBED: [(&str, char, &str); 5] = [
    (
        "flowgate_redis_failures_total",
        'c',
        "Redis calls that timed out, lost their connection or had a malformed reply, or were not sent because the circuit breaker was open.",
    ),
    (
        "flowgate_redis_breaker_state",
        'g',
        "The Redis circuit breaker: 0 closed, 1 half open (probing), 2 open.",
    ),
    (
        "flowgate_redis_fallbacks_total",
        'c',
        "Decisions made by the failure policy while Redis did not answer.",
    ),
    (
        "flowgate_redis_call_seconds",
        'h',
        "Time of one script call to Redis, answered or not.",
    ),
    (
        "flowgate_redis_decisions_total",
        'c',
        "Decisions of a set decided in Redis, by where they came from.",
    ),
];

impl RedisMetrics {
    /// The limiter whose keys start with `prefix`.
    #[cfg(feature = "metrics")]
    pub(crate) fn new(prefix: &str) -> Self {
        for (name, kind, help) in DESCRIBED {
            match kind {
                'c' => metrics::describe_counter!(name, help),
                'g' => metrics::describe_gauge!(name, help),
                _ => metrics::describe_histogram!(name, metrics::Unit::Seconds, help),
            }
        }
        let prefix = prefix.to_owned();
        let counter = |name: &'static str, key: &'static str, value: &'static str| metrics::counter!(name, "prefix" => prefix.clone(), key => value);
        Self {
            calls: metrics::histogram!("flowgate_redis_call_seconds", "prefix" => prefix.clone()),
            from_redis: counter("flowgate_redis_decisions_total", "source", "redis"),
            from_lease: counter("flowgate_redis_decisions_total", "source", "lease"),
            timeouts: counter("flowgate_redis_failures_total", "kind", "timeout"),
            connection_failures: counter("flowgate_redis_failures_total", "kind", "connection"),
            reply_failures: counter("flowgate_redis_failures_total", "kind", "reply"),
            breaker_refused: counter("flowgate_redis_failures_total", "kind", "breaker"),
            breaker_state: metrics::gauge!("flowgate_redis_breaker_state", "prefix" => prefix.clone()),
            failed_open: counter("flowgate_redis_fallbacks_total", "policy", "open"),
            failed_closed: counter("flowgate_redis_fallbacks_total", "policy", "closed"),
            local: counter("flowgate_redis_fallbacks_total", "policy", "local"),
        }
    }

    /// Without the feature: handles that report nothing.
    #[cfg(not(feature = "metrics"))]
    pub(crate) fn new(_prefix: &str) -> Self {
        Self {
            calls: Off,
            from_redis: Off,
            from_lease: Off,
            timeouts: Off,
            connection_failures: Off,
            reply_failures: Off,
            breaker_refused: Off,
            breaker_state: Off,
            failed_open: Off,
            failed_closed: Off,
            local: Off,
        }
    }
}
