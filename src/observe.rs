//! Metrics through the [`metrics`](https://docs.rs/metrics) facade (feature `metrics`), or
//! nothing: the one place that knows which.
//!
//! Handles are registered once, when a limiter is built, and kept beside what they count, so a
//! decision pays one increment of a handle per counter it moves and no lookup. Without the
//! feature every handle is an empty type whose methods do nothing, so the decision paths are
//! the same code and compile to what they were. A recorder (an exporter) must be installed
//! before the limiters are built: handles registered before it count into nothing.
//!
//! The metrics, their kinds and labels are listed in the crate docs ("Metrics").

use alloc::borrow::ToOwned;
use alloc::string::String;

/// Whether metrics are compiled in: a constant, for code that should vanish entirely without.
pub(crate) const ENABLED: bool = cfg!(feature = "metrics");

#[cfg(all(feature = "metrics", feature = "redis"))]
pub(crate) use metrics::Histogram;
#[cfg(feature = "metrics")]
pub(crate) use metrics::{Counter, Gauge};

/// Without the feature: counts nothing. Mirrors the facade's handle where flowgate uses it.
#[cfg(not(feature = "metrics"))]
#[derive(Debug, Clone, Default)]
pub(crate) struct Counter;

#[cfg(not(feature = "metrics"))]
impl Counter {
    pub(crate) fn noop() -> Self {
        Self
    }

    #[inline(always)]
    pub(crate) fn increment(&self, _cells: u64) {}
}

/// Without the feature: measures nothing.
#[cfg(not(feature = "metrics"))]
#[derive(Debug, Clone, Default)]
pub(crate) struct Gauge;

#[cfg(not(feature = "metrics"))]
impl Gauge {
    pub(crate) fn noop() -> Self {
        Self
    }

    #[inline(always)]
    pub(crate) fn increment(&self, _by: f64) {}

    #[inline(always)]
    pub(crate) fn decrement(&self, _by: f64) {}

    #[cfg(feature = "redis")]
    #[inline(always)]
    pub(crate) fn set(&self, _value: f64) {}
}

/// Without the feature: records nothing.
#[cfg(all(not(feature = "metrics"), feature = "redis"))]
#[derive(Debug, Clone, Default)]
pub(crate) struct Histogram;

#[cfg(all(not(feature = "metrics"), feature = "redis"))]
impl Histogram {
    pub(crate) fn noop() -> Self {
        Self
    }

    #[inline(always)]
    pub(crate) fn record(&self, _value: f64) {}
}

/// Every metric flowgate reports: name, kind, and what it counts (the exporter's HELP line).
#[cfg(feature = "metrics")]
const DESCRIBED: [(&str, char, &str); 12] = [
    (
        "flowgate_admitted_cells_total",
        'c',
        "Cells a policy's quota admitted.",
    ),
    (
        "flowgate_refused_cells_total",
        'c',
        "Cells refused, counted against the quota that refused.",
    ),
    (
        "flowgate_dry_run_refused_cells_total",
        'c',
        "Cells a dry-run policy's quota would have refused.",
    ),
    (
        "flowgate_near_limit_total",
        'c',
        "Admissions that left the quota's bucket at least 80 % used.",
    ),
    ("flowgate_keys", 'g', "Keys a keyed table holds."),
    (
        "flowgate_keys_evicted_total",
        'c',
        "Idle keys a keyed table forgot.",
    ),
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
    (
        "flowgate_http_unkeyed_total",
        'c',
        "HTTP requests whose client address could not be told.",
    ),
];

/// Describes every metric to the recorder (HELP lines), as each set of handles is registered:
/// a recorder installed after some were registered still learns them.
#[cfg(feature = "metrics")]
fn describe() {
    for (name, kind, help) in DESCRIBED {
        match kind {
            'c' => metrics::describe_counter!(name, help),
            'g' => metrics::describe_gauge!(name, help),
            _ => metrics::describe_histogram!(name, metrics::Unit::Seconds, help),
        }
    }
}

#[cfg(not(feature = "metrics"))]
fn describe() {}

/// `labels` as the facade takes them.
#[cfg(feature = "metrics")]
fn labels(labels: &[(&'static str, String)]) -> Vec<metrics::Label> {
    labels
        .iter()
        .map(|(k, v)| metrics::Label::new(*k, v.clone()))
        .collect()
}

/// A counter named `name` with `labels`.
#[cfg(feature = "metrics")]
fn counter(name: &'static str, labels: &[(&'static str, String)]) -> Counter {
    metrics::counter!(name, self::labels(labels))
}

#[cfg(not(feature = "metrics"))]
fn counter(_name: &'static str, _labels: &[(&'static str, String)]) -> Counter {
    Counter::noop()
}

/// A gauge named `name` with `labels`.
#[cfg(feature = "metrics")]
fn gauge(name: &'static str, labels: &[(&'static str, String)]) -> Gauge {
    metrics::gauge!(name, self::labels(labels))
}

#[cfg(not(feature = "metrics"))]
fn gauge(_name: &'static str, _labels: &[(&'static str, String)]) -> Gauge {
    Gauge::noop()
}

/// A histogram named `name` with `labels`.
#[cfg(all(feature = "metrics", feature = "redis"))]
fn histogram(name: &'static str, labels: &[(&'static str, String)]) -> Histogram {
    metrics::histogram!(name, self::labels(labels))
}

#[cfg(all(not(feature = "metrics"), feature = "redis"))]
fn histogram(_name: &'static str, _labels: &[(&'static str, String)]) -> Histogram {
    Histogram::noop()
}

/// The HTTP middleware's count of requests whose client address could not be told.
#[cfg(feature = "tower")]
pub(crate) fn unkeyed_counter() -> Counter {
    describe();
    counter("flowgate_http_unkeyed_total", &[])
}

/// The counters of one quota of a policy.
#[cfg(feature = "std")]
#[derive(Debug, Clone)]
pub(crate) struct QuotaMetrics {
    pub(crate) admitted: Counter,
    pub(crate) refused: Counter,
    pub(crate) dry_run_refused: Counter,
    pub(crate) near_limit: Counter,
}

#[cfg(feature = "std")]
impl QuotaMetrics {
    /// The quota written `quota` (`"200/10s"`, `"20000/d fixed"`) of the policy `policy`.
    pub(crate) fn new(policy: &str, quota: &str) -> Self {
        describe();
        let labels = [("policy", policy.to_owned()), ("quota", quota.to_owned())];
        Self {
            admitted: counter("flowgate_admitted_cells_total", &labels),
            refused: counter("flowgate_refused_cells_total", &labels),
            dry_run_refused: counter("flowgate_dry_run_refused_cells_total", &labels),
            near_limit: counter("flowgate_near_limit_total", &labels),
        }
    }
}

/// The key count and evictions of one keyed table.
#[derive(Debug, Clone)]
pub(crate) struct TableMetrics {
    pub(crate) keys: Gauge,
    pub(crate) evicted: Counter,
}

impl TableMetrics {
    /// Reports nothing (a keyed limiter without a metrics label).
    pub(crate) fn none() -> Self {
        Self {
            keys: Gauge::noop(),
            evicted: Counter::noop(),
        }
    }

    /// The table of the quota written `quota` of the policy `policy`.
    pub(crate) fn of_policy(policy: &str, quota: &str) -> Self {
        Self::labelled(&[("policy", policy.to_owned()), ("quota", quota.to_owned())])
    }

    /// The table of the keyed limiter named `limiter`.
    pub(crate) fn of_limiter(limiter: &str) -> Self {
        Self::labelled(&[("limiter", limiter.to_owned())])
    }

    fn labelled(labels: &[(&'static str, String)]) -> Self {
        describe();
        Self {
            keys: gauge("flowgate_keys", labels),
            evicted: counter("flowgate_keys_evicted_total", labels),
        }
    }
}

/// The failure counters of one Redis limiter, its calls' time, and its decisions by source.
#[cfg(feature = "redis")]
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

#[cfg(feature = "redis")]
impl RedisMetrics {
    /// The limiter whose keys start with `prefix`.
    pub(crate) fn new(prefix: &str) -> Self {
        let failure = |kind: &str| {
            counter(
                "flowgate_redis_failures_total",
                &[("prefix", prefix.to_owned()), ("kind", kind.to_owned())],
            )
        };
        let fallback = |policy: &str| {
            counter(
                "flowgate_redis_fallbacks_total",
                &[("prefix", prefix.to_owned()), ("policy", policy.to_owned())],
            )
        };
        describe();
        let prefix_label = [("prefix", prefix.to_owned())];
        let source = |source: &str| {
            counter(
                "flowgate_redis_decisions_total",
                &[("prefix", prefix.to_owned()), ("source", source.to_owned())],
            )
        };
        Self {
            calls: histogram("flowgate_redis_call_seconds", &prefix_label),
            from_redis: source("redis"),
            from_lease: source("lease"),
            timeouts: failure("timeout"),
            connection_failures: failure("connection"),
            reply_failures: failure("reply"),
            breaker_refused: failure("breaker"),
            breaker_state: gauge("flowgate_redis_breaker_state", &prefix_label),
            failed_open: fallback("open"),
            failed_closed: fallback("closed"),
            local: fallback("local"),
        }
    }
}
