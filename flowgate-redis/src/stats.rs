//! What a Redis limiter counts: every round trip, reload, repair, failure, fallback and lease,
//! once, in [`RedisStats`] and (feature `metrics`) through the [`metrics`](https://docs.rs/metrics)
//! facade, with its calls' time and the breaker's state. Its cells are counted under flowgate's
//! own names ([`QuotaMetrics`](flowgate::policy::QuotaMetrics)).

// Statistics counters, each updated by one fetch_add and read one by one, that order nothing;
// no model needs their interleavings.
use core::sync::atomic::{AtomicU64, Ordering};

use flowgate::backend::Failure;

/// What a [`RedisLimiter`](crate::RedisLimiter) has done since it was built, from
/// [`RedisLimiter::stats`](crate::RedisLimiter::stats).
///
/// Every counter only grows. Each is exact, but they are read one by one, so a snapshot taken
/// while decisions run may be a few decisions apart between counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedisStats {
    /// Decisions made (each `check`), however they were made.
    pub decisions: u64,
    /// Decisions that admitted.
    pub admitted: u64,
    /// Decisions that refused.
    pub refused: u64,
    /// Decisions made on a reply of Redis (not a lease's, not the failure policy's).
    pub answered: u64,
    /// Commands sent to Redis (`EVALSHA`, and `EVAL` after a `NOSCRIPT`): round trips.
    pub round_trips: u64,
    /// `NOSCRIPT` answers, each followed by one `EVAL` with the script's source.
    pub reloads: u64,
    /// Buckets whose value was not a schedule (overwritten by something else, or a key of
    /// another type): each was taken as fully booked and rewritten.
    pub repaired: u64,
    /// Calls without a reply within the timeout.
    pub timeouts: u64,
    /// Calls that failed on the connection.
    pub connection_failures: u64,
    /// Calls answered with an error or a malformed reply.
    pub reply_failures: u64,
    /// Calls not sent because the circuit breaker was open (each decided by the failure
    /// policy at once).
    pub breaker_refused: u64,
    /// Decisions admitted by [`OnFailure::Open`](crate::OnFailure::Open).
    pub failed_open: u64,
    /// Decisions refused by [`OnFailure::Closed`](crate::OnFailure::Closed).
    pub failed_closed: u64,
    /// Decisions made by the local limiter of [`OnFailure::Local`](crate::OnFailure::Local).
    pub local: u64,
    /// Leases granted (each one round trip).
    pub leases: u64,
    /// Cells granted in leases, including the cells of the decision that asked for the lease.
    pub leased_cells: u64,
    /// Decisions admitted from a lease without a round trip.
    pub lease_admitted: u64,
    /// Decisions refused by the hot-key shield without a round trip.
    pub shielded: u64,
    /// Unused leased cells given back to Redis.
    pub returned_cells: u64,
    /// Unused leased cells never given back (a lease dropped to make room for another, given
    /// back in a call that failed, or to buckets another decision had been taken on since).
    /// They stay booked in Redis until the bucket refills: fewer admissions, never more.
    pub dropped_cells: u64,
    /// Buckets put back after a decision across Redis Cluster slots was refused or failed in a
    /// later slot (each restored only if no other decision had changed it since).
    pub undone: u64,
}

#[cfg(feature = "metrics")]
pub(crate) use metrics::{Counter, Gauge, Histogram};

#[cfg(not(feature = "metrics"))]
pub(crate) use off::{Off as Counter, Off as Gauge, Off as Histogram};

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

/// One counter of [`RedisStats`] and the metric that counts the same events, if any.
#[derive(Debug)]
pub(crate) struct Count(AtomicU64, Counter);

impl Count {
    /// Adds `n`.
    #[inline]
    pub(crate) fn add(&self, n: u64) {
        // Relaxed: each counter is a statistic read on its own; nothing is ordered by it.
        self.0.fetch_add(n, Ordering::Relaxed);
        self.1.increment(n);
    }

    pub(crate) fn get(&self) -> u64 {
        // Relaxed: see `add`.
        self.0.load(Ordering::Relaxed)
    }
}

/// The metrics (name, label, value) of `flowgate_redis_*`.
const FAILURES: &str = "flowgate_redis_failures_total";
const FALLBACKS: &str = "flowgate_redis_fallbacks_total";
const DECISIONS: &str = "flowgate_redis_decisions_total";

/// Every metric this crate reports: name, kind, and what it counts (the exporter's HELP line).
#[cfg(feature = "metrics")]
const DESCRIBED: [(&str, char, &str); 5] = [
    (
        FAILURES,
        'c',
        "Redis calls that timed out, lost their connection or had a malformed reply, or were not sent because the circuit breaker was open.",
    ),
    (
        "flowgate_redis_breaker_state",
        'g',
        "A Redis server's circuit breaker (label server: host:port): 0 closed, 1 half open (probing), 2 open.",
    ),
    (
        FALLBACKS,
        'c',
        "Decisions made by the failure policy while Redis did not answer.",
    ),
    (
        "flowgate_redis_call_seconds",
        'h',
        "Time of one script call to Redis, answered or not.",
    ),
    (
        DECISIONS,
        'c',
        "Decisions of a set decided in Redis, by where they came from.",
    ),
];

/// The counters of one limiter, updated as decisions are made, with its calls' time.
#[derive(Debug)]
pub(crate) struct Counters {
    pub(crate) decisions: Count,
    pub(crate) admitted: Count,
    pub(crate) refused: Count,
    pub(crate) answered: Count,
    pub(crate) round_trips: Count,
    pub(crate) reloads: Count,
    pub(crate) repaired: Count,
    pub(crate) timeouts: Count,
    pub(crate) connection_failures: Count,
    pub(crate) reply_failures: Count,
    pub(crate) breaker_refused: Count,
    pub(crate) failed_open: Count,
    pub(crate) failed_closed: Count,
    pub(crate) local: Count,
    pub(crate) leases: Count,
    pub(crate) leased_cells: Count,
    pub(crate) lease_admitted: Count,
    pub(crate) shielded: Count,
    pub(crate) returned_cells: Count,
    pub(crate) dropped_cells: Count,
    pub(crate) undone: Count,
    pub(crate) calls: Histogram,
}

impl Counters {
    /// The counters of the limiter whose keys start with `prefix` (the metrics' label).
    pub(crate) fn new(prefix: &str) -> Self {
        #[cfg(feature = "metrics")]
        for (name, kind, help) in DESCRIBED {
            match kind {
                'c' => metrics::describe_counter!(name, help),
                'g' => metrics::describe_gauge!(name, help),
                _ => metrics::describe_histogram!(name, metrics::Unit::Seconds, help),
            }
        }
        let count = |metric: Option<(&'static str, &'static str, &'static str)>| {
            #[cfg(feature = "metrics")]
            let counter = match metric {
                Some((name, label, value)) => {
                    metrics::counter!(name, "prefix" => prefix.to_owned(), label => value)
                }
                None => Counter::noop(),
            };
            #[cfg(not(feature = "metrics"))]
            let (counter, _) = (Counter, (metric, prefix));
            Count(AtomicU64::new(0), counter)
        };
        #[cfg(feature = "metrics")]
        let calls =
            metrics::histogram!("flowgate_redis_call_seconds", "prefix" => prefix.to_owned());
        #[cfg(not(feature = "metrics"))]
        let calls = Histogram;
        Self {
            decisions: count(None),
            admitted: count(None),
            refused: count(None),
            answered: count(Some((DECISIONS, "source", "redis"))),
            round_trips: count(None),
            reloads: count(None),
            repaired: count(None),
            timeouts: count(Some((FAILURES, "kind", "timeout"))),
            connection_failures: count(Some((FAILURES, "kind", "connection"))),
            reply_failures: count(Some((FAILURES, "kind", "reply"))),
            breaker_refused: count(Some((FAILURES, "kind", "breaker"))),
            failed_open: count(Some((FALLBACKS, "policy", "open"))),
            failed_closed: count(Some((FALLBACKS, "policy", "closed"))),
            local: count(Some((FALLBACKS, "policy", "local"))),
            leases: count(None),
            leased_cells: count(None),
            lease_admitted: count(Some((DECISIONS, "source", "lease"))),
            shielded: count(Some((DECISIONS, "source", "shield"))),
            returned_cells: count(None),
            dropped_cells: count(None),
            undone: count(None),
            calls,
        }
    }

    /// Counts a call that gave no decision.
    pub(crate) fn failed(&self, failure: Failure) {
        match failure {
            Failure::Timeout => &self.timeouts,
            Failure::Connection => &self.connection_failures,
            Failure::BreakerOpen => &self.breaker_refused,
            // A kind this crate does not make (flowgate's list may grow): counted with replies.
            _ => &self.reply_failures,
        }
        .add(1);
    }

    /// Counts a decision's outcome.
    pub(crate) fn decided(&self, allowed: bool) {
        if allowed {
            &self.admitted
        } else {
            &self.refused
        }
        .add(1);
    }

    /// The counters now, with those of `background` (calls made by spawned tasks).
    pub(crate) fn snapshot_with(&self, background: &Self) -> RedisStats {
        RedisStats {
            decisions: self.decisions.get(),
            admitted: self.admitted.get(),
            refused: self.refused.get(),
            answered: self.answered.get(),
            round_trips: self.round_trips.get() + background.round_trips.get(),
            reloads: self.reloads.get() + background.reloads.get(),
            repaired: self.repaired.get(),
            timeouts: self.timeouts.get(),
            connection_failures: self.connection_failures.get(),
            reply_failures: self.reply_failures.get(),
            breaker_refused: self.breaker_refused.get(),
            failed_open: self.failed_open.get(),
            failed_closed: self.failed_closed.get(),
            local: self.local.get(),
            leases: self.leases.get(),
            leased_cells: self.leased_cells.get(),
            lease_admitted: self.lease_admitted.get(),
            shielded: self.shielded.get(),
            returned_cells: self.returned_cells.get(),
            dropped_cells: self.dropped_cells.get(),
            undone: self.undone.get() + background.undone.get(),
        }
    }
}

/// `flowgate_redis_breaker_state` of the limiter with keys under `prefix`, for `server`'s
/// breaker: 0 closed, 1 half open, 2 open.
pub(crate) fn breaker_gauge(prefix: &str, server: &str) -> Gauge {
    #[cfg(feature = "metrics")]
    return metrics::gauge!(
        "flowgate_redis_breaker_state",
        "prefix" => prefix.to_owned(),
        "server" => server.to_owned()
    );
    #[cfg(not(feature = "metrics"))]
    {
        let _ = (prefix, server);
        Gauge
    }
}
