//! The `metrics` feature: what a policy set, a keyed limiter and a Redis limiter report through
//! the `metrics` facade, read back from `metrics-util`'s debugging recorder. Each limiter is
//! built under a recorder of its own (`metrics::with_local_recorder`), which its handles keep.

use std::time::Duration;

use flowgate::clock::ManualClock;
use flowgate::policy::{Policies, Policy};
use flowgate::{Gcra, KeyedRateLimiter, Quota};
use flowgate_redis::BuildRedis as _;
use metrics::{SharedString, Unit};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::CompositeKey;

#[path = "support/redis_server.rs"]
mod redis_server;

/// Running totals of what a debugging recorder reported: its snapshots hand over each value
/// and reset it (`swap(0)`), and flowgate's gauges only move by increments, so summing the
/// snapshots gives every counter's and gauge's value.
#[derive(Default)]
struct Totals(Vec<(String, Labels, f64)>);

/// A metric's labels, as (key, value) pairs.
type Labels = Vec<(String, String)>;

impl Totals {
    /// The value of the metric `name` whose labels include every one of `labels`, if reported.
    fn value(
        &mut self,
        snapshotter: &Snapshotter,
        name: &str,
        labels: &[(&str, &str)],
    ) -> Option<f64> {
        for (key, _, _, value) in snapshotter.snapshot().into_vec() {
            let key = key.key();
            let delta = match value {
                DebugValue::Counter(n) => n as f64,
                DebugValue::Gauge(g) => g.into_inner(),
                DebugValue::Histogram(_) => f64::NAN,
            };
            let labels: Labels = key
                .labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect();
            match self
                .0
                .iter_mut()
                .find(|(n, l, _)| n == key.name() && *l == labels)
            {
                Some(entry) => entry.2 += delta,
                None => self.0.push((key.name().to_owned(), labels, delta)),
            }
        }
        self.0
            .iter()
            .find(|(n, l, _)| {
                n == name
                    && labels
                        .iter()
                        .all(|(k, v)| l.iter().any(|(lk, lv)| lk == k && lv == v))
            })
            .map(|e| e.2)
    }
}

#[test]
fn policies_count_cells_per_policy_and_quota() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let clock = ManualClock::starting_at(1_000_000_000);
    let policies = metrics::with_local_recorder(&recorder, || {
        Policies::<str, _>::builder()
            .clock(clock.clone())
            // Per user: burst 3, and 5 per minute.
            .policy(
                Policy::keyed_with("user", |r: &str, key| {
                    key.add(r);
                })
                .quotas([
                    Quota::per_second(1).unwrap().with_burst(3).unwrap(),
                    Quota::per_minute(5).unwrap(),
                ]),
            )
            // A stricter global limit on trial: burst 2.
            .policy(
                Policy::global("trial")
                    .quota(Quota::per_hour(2).unwrap())
                    .dry_run(true),
            )
            .build()
            .unwrap()
    });
    // alice: 2 cells, then 1 (the trial would refuse it), then 2 (over the burst of 3).
    assert!(policies.check_n("alice", 2).unwrap().is_ok());
    assert!(policies.check_n("alice", 1).unwrap().is_ok());
    assert!(policies.check_n("alice", 2).unwrap().is_err());
    let mut totals = Totals::default();
    let mut at = |name: &str, policy: &str, quota: &str| {
        totals.value(&snapshotter, name, &[("policy", policy), ("quota", quota)])
    };
    // Labelled by the quota as written, not its place.
    for quota in ["1/s burst 3", "5/min"] {
        assert_eq!(
            at("flowgate_admitted_cells_total", "user", quota),
            Some(3.0)
        );
    }
    // The refusal is counted against the quota that refused (burst 3), with its 2 cells.
    assert_eq!(
        at("flowgate_refused_cells_total", "user", "1/s burst 3"),
        Some(2.0)
    );
    assert_eq!(
        at("flowgate_refused_cells_total", "user", "5/min"),
        Some(0.0)
    );
    // Near the limit: the first admission left the burst-3 quota 2/3 used (below 80 %), the
    // second 3/3; the 5-per-minute quota 2/5 then 3/5; the trial's burst of 2 was full after
    // its first.
    assert_eq!(
        at("flowgate_near_limit_total", "user", "1/s burst 3"),
        Some(1.0)
    );
    assert_eq!(at("flowgate_near_limit_total", "user", "5/min"), Some(0.0));
    assert_eq!(at("flowgate_near_limit_total", "trial", "2/h"), Some(1.0));
    // The trial admitted the first 2 cells and would have refused the third.
    assert_eq!(
        at("flowgate_admitted_cells_total", "trial", "2/h"),
        Some(2.0)
    );
    assert_eq!(
        at("flowgate_dry_run_refused_cells_total", "trial", "2/h"),
        Some(1.0)
    );
    // One key in each of the user policy's tables, none evicted; an hour later sweeps take it.
    assert_eq!(at("flowgate_keys", "user", "1/s burst 3"), Some(1.0));
    clock.advance(Duration::from_secs(3_600));
    assert_eq!(policies.sweep(policies.slots()), 2);
    assert_eq!(at("flowgate_keys", "user", "5/min"), Some(0.0));
    assert_eq!(
        at("flowgate_keys_evicted_total", "user", "5/min"),
        Some(1.0)
    );
}

#[test]
fn oversized_requests_count_as_refused_and_dropped_tables_leave_the_gauge() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let build = || {
        metrics::with_local_recorder(&recorder, || {
            Policies::<str>::builder()
                .policy(
                    Policy::keyed_with("user", |r: &str, key| {
                        key.add(r);
                    })
                    .quota(Quota::per_second(1).unwrap().with_burst(3).unwrap()),
                )
                .build()
                .unwrap()
        })
    };
    let mut totals = Totals::default();
    let labels = [("policy", "user"), ("quota", "1/s burst 3")];
    let first = build();
    // Five cells of a burst of three: never, and counted as refused.
    assert!(first.check_n("a", 5).is_err());
    assert_eq!(
        totals.value(&snapshotter, "flowgate_refused_cells_total", &labels),
        Some(5.0)
    );
    for key in ["a", "b", "c"] {
        assert!(first.check(key).is_ok());
    }
    assert_eq!(
        totals.value(&snapshotter, "flowgate_keys", &labels),
        Some(3.0)
    );
    // Rebuilt under the same names (a configuration reload): the old set's keys leave.
    drop(first);
    let second = build();
    assert!(second.check("d").is_ok());
    assert_eq!(
        totals.value(&snapshotter, "flowgate_keys", &labels),
        Some(1.0)
    );
}

#[test]
fn a_labelled_keyed_limiter_reports_its_keys() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let clock = ManualClock::starting_at(1_000_000_000);
    let quota = Quota::per_second(10).unwrap();
    let (labelled, silent) = metrics::with_local_recorder(&recorder, || {
        let build = |label: Option<&str>| {
            let builder = KeyedRateLimiter::<str, _, _>::builder(Gcra::new(&quota))
                .clock(clock.clone())
                .max_keys(64);
            match label {
                Some(label) => builder.metrics_label(label),
                None => builder,
            }
            .build()
            .unwrap()
        };
        (build(Some("api")), build(None))
    });
    for key in ["a", "b", "c"] {
        assert!(labelled.check_key(key).is_ok());
        assert!(silent.check_key(key).is_ok());
    }
    assert!(labelled.reset_key("a"));
    let mut totals = Totals::default();
    let label = [("limiter", "api")];
    assert_eq!(
        totals.value(&snapshotter, "flowgate_keys", &label),
        Some(2.0)
    );
    clock.advance(Duration::from_secs(1));
    assert_eq!(labelled.sweep(labelled.stats().slots), 2);
    assert_eq!(
        totals.value(&snapshotter, "flowgate_keys", &label),
        Some(0.0)
    );
    let evicted = totals.value(&snapshotter, "flowgate_keys_evicted_total", &label);
    assert_eq!(evicted, Some(2.0), "a reset is not an eviction");
    // The unlabelled limiter reported nothing: only the labelled one's two metrics exist.
    assert_eq!(totals.0.len(), 2);
}

#[tokio::test]
async fn a_redis_limiter_counts_its_failures_fallbacks_and_breaker() {
    use flowgate::policy::{Policies, Policy};
    use flowgate_redis::{OnFailure, RedisBackend};
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let client = redis_server::nobody();
    let limiter = metrics::with_local_recorder(&recorder, || {
        let backend = RedisBackend::new(client)
            .prefix("metered")
            .on_failure(OnFailure::Open);
        Policies::<str>::builder()
            .policy(Policy::keyed("k", |k: &str| k).quota(Quota::per_second(1).unwrap()))
            .build_redis(backend)
            .unwrap()
    });
    // Three failed calls open the default breaker; the next two are not sent.
    for _ in 0..5 {
        assert!(limiter.check("k").await.unwrap().is_allowed());
    }
    let mut totals = Totals::default();
    let state = totals.value(
        &snapshotter,
        "flowgate_redis_breaker_state",
        &[("prefix", "metered")],
    );
    assert_eq!(state, Some(2.0), "open");
    let fallbacks = totals.value(
        &snapshotter,
        "flowgate_redis_fallbacks_total",
        &[("prefix", "metered"), ("policy", "open")],
    );
    assert_eq!(fallbacks, Some(5.0));
    let held_back = totals.value(
        &snapshotter,
        "flowgate_redis_failures_total",
        &[("prefix", "metered"), ("kind", "breaker")],
    );
    assert_eq!(held_back, Some(2.0));
    let failures: f64 = ["timeout", "connection"]
        .iter()
        .filter_map(|kind| {
            totals.value(
                &snapshotter,
                "flowgate_redis_failures_total",
                &[("prefix", "metered"), ("kind", kind)],
            )
        })
        .sum();
    assert_eq!(failures, 3.0);
}

/// A set decided in Redis counts its cells exactly as the same set in process does, under the
/// same names and labels (each recorder sees one set), times every script call, and describes
/// every metric it registers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_decisions_are_counted_as_in_process() {
    let server = redis_server::RedisServer::start();
    let clock = ManualClock::starting_at(1_000_000_000_000);
    let set = || {
        Policies::<str>::builder()
            .clock(clock.clone())
            .policy(Policy::keyed("user", |r: &str| r).quotas([
                Quota::per_second(1).unwrap().with_burst(3).unwrap(),
                Quota::per_minute(5).unwrap(),
            ]))
            .policy(
                Policy::global("trial")
                    .quota(Quota::per_hour(2).unwrap())
                    .dry_run(true),
            )
    };
    let (local_recorder, redis_recorder) = (DebuggingRecorder::new(), DebuggingRecorder::new());
    let local = metrics::with_local_recorder(&local_recorder, || set().build().unwrap());
    let backend = server.backend().prefix("metered").client_time(true);
    let remote =
        metrics::with_local_recorder(&redis_recorder, || set().build_redis(backend).unwrap());
    let steps = [
        ("alice", 2),
        ("alice", 1),
        ("alice", 2),
        ("bob", 1),
        ("alice", 5),
        ("bob", 3),
    ];
    for (user, n) in steps {
        let here = local.check_n(user, n).map(|answer| answer.is_ok());
        let there = remote.check_n(user, n).await.map(|v| v.is_allowed());
        assert_eq!(here.is_ok(), there.is_ok(), "{user} {n}");
    }
    // One snapshot each (a snapshot reports what changed since the last one).
    let local_all = local_recorder.snapshotter().snapshot().into_vec();
    let redis_all = redis_recorder.snapshotter().snapshot().into_vec();
    let value = |all: &[(CompositeKey, Option<Unit>, Option<SharedString>, DebugValue)],
                 name: &str,
                 labels: &[(&str, &str)]| {
        let found = all.iter().find(|(key, _, _, _)| {
            let key = key.key();
            key.name() == name
                && labels
                    .iter()
                    .all(|(k, v)| key.labels().any(|l| l.key() == *k && l.value() == *v))
        });
        found.map(|(_, _, _, value)| match value {
            DebugValue::Counter(n) => *n,
            _ => u64::MAX,
        })
    };
    let mut compared = 0;
    for name in [
        "flowgate_admitted_cells_total",
        "flowgate_refused_cells_total",
        "flowgate_dry_run_refused_cells_total",
        "flowgate_near_limit_total",
    ] {
        for (policy, quota) in [("user", "1/s burst 3"), ("user", "5/min"), ("trial", "2/h")] {
            let labels = [("policy", policy), ("quota", quota)];
            let here = value(&local_all, name, &labels);
            let there = value(&redis_all, name, &labels);
            assert_eq!(here, there, "{name} {policy} {quota}");
            compared += usize::from(here.is_some_and(|v| v > 0));
        }
    }
    assert!(compared >= 6, "only {compared} series counted anything");
    // Every script call timed; every metric registered described (HELP lines).
    let stats = remote.stats();
    let mut calls = 0;
    for (key, _, description, value) in &redis_all {
        let name = key.key().name();
        assert!(description.is_some(), "{name} has no description");
        if let DebugValue::Histogram(samples) = value {
            assert_eq!(name, "flowgate_redis_call_seconds");
            calls += samples.len() as u64;
        }
    }
    assert!(redis_all.len() > 10, "{} metrics", redis_all.len());
    assert_eq!(calls, stats.round_trips - stats.reloads);
}
