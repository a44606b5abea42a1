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
}

/// Every metric flowgate reports: name, kind, and what it counts (the exporter's HELP line).
#[cfg(feature = "metrics")]
const DESCRIBED: [(&str, char, &str); 7] = [
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
            _ => metrics::describe_gauge!(name, help),
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

/// The HTTP middleware's count of requests whose client address could not be told.
#[cfg(feature = "tower")]
pub(crate) fn unkeyed_counter() -> Counter {
    describe();
    counter("flowgate_http_unkeyed_total", &[])
}

/// The counters of one quota of a policy, under the names and labels the crate docs list
/// ("Metrics"): what a backend counts so that dashboards read the same whatever decides.
/// Without the `metrics` feature every count is a no-op.
#[cfg(feature = "std")]
#[derive(Debug, Clone)]
pub struct QuotaMetrics {
    pub(crate) admitted: Counter,
    pub(crate) refused: Counter,
    pub(crate) dry_run_refused: Counter,
    pub(crate) near_limit: Counter,
}

#[cfg(feature = "std")]
impl QuotaMetrics {
    /// The quota written `quota` (`"200/10s"`, `"20000/d fixed"`) of the policy `policy`,
    /// registered with the recorder installed now.
    pub fn new(policy: &str, quota: &str) -> Self {
        describe();
        let labels = [("policy", policy.to_owned()), ("quota", quota.to_owned())];
        Self {
            admitted: counter("flowgate_admitted_cells_total", &labels),
            refused: counter("flowgate_refused_cells_total", &labels),
            dry_run_refused: counter("flowgate_dry_run_refused_cells_total", &labels),
            near_limit: counter("flowgate_near_limit_total", &labels),
        }
    }

    /// Whether counts go anywhere (the `metrics` feature): code that only works out what to
    /// count can be skipped without it.
    pub const ENABLED: bool = ENABLED;

    /// `cells` admitted.
    #[inline]
    pub fn admitted(&self, cells: u64) {
        self.admitted.increment(cells);
    }

    /// `cells` refused by this quota.
    #[inline]
    pub fn refused(&self, cells: u64) {
        self.refused.increment(cells);
    }

    /// `cells` this dry-run quota would have refused.
    #[inline]
    pub fn dry_run_refused(&self, cells: u64) {
        self.dry_run_refused.increment(cells);
    }

    /// An admission that left the bucket at least 80 % used.
    #[inline]
    pub fn near_limit(&self) {
        self.near_limit.increment(1);
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
