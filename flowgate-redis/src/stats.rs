//! The counters of a Redis limiter: every round trip, reload, repair, failure and lease.

// statistics counters, each updated by
// one fetch_add and read one by one, that order nothing; no model needs their interleavings.
use core::sync::atomic::{AtomicU64, Ordering};

use super::Failure;
use crate::metrics::RedisMetrics;

/// What a [`RedisLimiter`](super::RedisLimiter) has done since it was built, from
/// [`RedisLimiter::stats`](super::RedisLimiter::stats).
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
    /// Decisions admitted by [`OnFailure::Open`](super::OnFailure::Open).
    pub failed_open: u64,
    /// Decisions refused by [`OnFailure::Closed`](super::OnFailure::Closed).
    pub failed_closed: u64,
    /// Decisions made by the local limiter of [`OnFailure::Local`](super::OnFailure::Local).
    pub local: u64,
    /// Leases granted (each one round trip).
    pub leases: u64,
    /// Cells granted in leases, including the cells of the decision that asked for the lease.
    pub leased_cells: u64,
    /// Decisions admitted from a lease without a round trip.
    pub lease_admitted: u64,
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

/// The counters, updated as decisions are made.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) decisions: AtomicU64,
    pub(crate) admitted: AtomicU64,
    pub(crate) refused: AtomicU64,
    pub(crate) round_trips: AtomicU64,
    pub(crate) reloads: AtomicU64,
    pub(crate) repaired: AtomicU64,
    pub(crate) timeouts: AtomicU64,
    pub(crate) connection_failures: AtomicU64,
    pub(crate) reply_failures: AtomicU64,
    pub(crate) breaker_refused: AtomicU64,
    pub(crate) failed_open: AtomicU64,
    pub(crate) failed_closed: AtomicU64,
    pub(crate) local: AtomicU64,
    pub(crate) leases: AtomicU64,
    pub(crate) leased_cells: AtomicU64,
    pub(crate) lease_admitted: AtomicU64,
    pub(crate) returned_cells: AtomicU64,
    pub(crate) dropped_cells: AtomicU64,
    pub(crate) undone: AtomicU64,
}

/// Adds `n` to a counter.
#[inline]
pub(crate) fn add(counter: &AtomicU64, n: u64) {
    // Relaxed: each counter is a statistic read on its own; nothing is ordered by it.
    counter.fetch_add(n, Ordering::Relaxed);
}

impl Counters {
    /// The counters of `self` and of `background` (calls made by spawned tasks) together.
    pub(crate) fn snapshot_with(&self, background: &Self) -> RedisStats {
        let (mut stats, more) = (self.snapshot(), background.snapshot());
        stats.round_trips += more.round_trips;
        stats.reloads += more.reloads;
        stats.undone += more.undone;
        stats
    }

    /// Counts a call that gave no decision, here and in `metrics`.
    pub(crate) fn failed(&self, failure: Failure, metrics: &RedisMetrics) {
        let (counter, metric) = match failure {
            Failure::Timeout => (&self.timeouts, &metrics.timeouts),
            Failure::Connection => (&self.connection_failures, &metrics.connection_failures),
            Failure::Reply => (&self.reply_failures, &metrics.reply_failures),
            Failure::BreakerOpen => (&self.breaker_refused, &metrics.breaker_refused),
            // A kind this crate does not make (flowgate's list may grow): counted with replies.
            _ => (&self.reply_failures, &metrics.reply_failures),
        };
        add(counter, 1);
        metric.increment(1);
    }

    pub(crate) fn snapshot(&self) -> RedisStats {
        // Relaxed: see `add`.
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        RedisStats {
            decisions: get(&self.decisions),
            admitted: get(&self.admitted),
            refused: get(&self.refused),
            round_trips: get(&self.round_trips),
            reloads: get(&self.reloads),
            repaired: get(&self.repaired),
            timeouts: get(&self.timeouts),
            connection_failures: get(&self.connection_failures),
            reply_failures: get(&self.reply_failures),
            breaker_refused: get(&self.breaker_refused),
            failed_open: get(&self.failed_open),
            failed_closed: get(&self.failed_closed),
            local: get(&self.local),
            leases: get(&self.leases),
            leased_cells: get(&self.leased_cells),
            lease_admitted: get(&self.lease_admitted),
            returned_cells: get(&self.returned_cells),
            dropped_cells: get(&self.dropped_cells),
            undone: get(&self.undone),
        }
    }
}
