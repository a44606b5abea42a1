//! What a Redis limiter does when Redis does not answer: the kinds of failure, the configured
//! policy ([`OnFailure`]), and where each decision came from ([`Source`]).

use core::fmt;
use core::time::Duration;

/// Why a call to Redis gave no decision. Every such call is counted
/// ([`RedisStats`](super::RedisStats)) and decided by the limiter's [`OnFailure`] policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Failure {
    /// No reply within the configured timeout. The call may still run on the server, so it is
    /// never sent again (a replay could take its cells twice).
    Timeout,
    /// The connection failed or dropped (server down, restarting, network). The connection
    /// manager reconnects in the background; the call is not replayed.
    Connection,
    /// The server answered with an error other than `NOSCRIPT` (out of memory, a script killed,
    /// a replica that refuses writes, `BUSY`) or with a reply the script cannot send.
    Reply,
    /// Not sent: the circuit breaker is open after consecutive failures (see
    /// [`Breaker`](super::Breaker)).
    BreakerOpen,
}

impl Failure {
    /// The failure behind a `redis` error.
    pub(crate) fn from_error(error: &::redis::RedisError) -> Self {
        if error.is_timeout() {
            Self::Timeout
        } else if error.is_io_error()
            || error.is_connection_dropped()
            || error.is_connection_refusal()
        {
            Self::Connection
        } else {
            Self::Reply
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Timeout => "Redis did not answer in time",
            Self::Connection => "no connection to Redis",
            Self::Reply => "Redis answered with an error",
            Self::BreakerOpen => "Redis not called: the circuit breaker is open",
        })
    }
}

impl core::error::Error for Failure {}

/// What a [`RedisLimiter`](super::RedisLimiter) decides when Redis does not answer in time or
/// at all.
///
/// There is no good answer, only a choice of what to lose. Failing open keeps the service up
/// and lets the limit go; failing closed keeps the limit and takes the service down with
/// Redis; a local limit keeps both, approximately: each process enforces `share` of every
/// quota on its own, so with `share = 1 / processes` the total stays near the limit as long as
/// the load is spread evenly.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[non_exhaustive]
pub enum OnFailure {
    #[default]
    /// Admit the request (the default, as most limiters do: a limiter should not turn a Redis
    /// outage into an outage of the service it protects).
    Open,
    /// Refuse the request, telling the client to retry after `retry_after`.
    Closed {
        /// The retry-after of such refusals.
        retry_after: Duration,
    },
    /// Decide with an in-process limiter holding the same levels, each quota scaled to `share`
    /// of its rate and burst (at least one cell). Its buckets are this process's alone and
    /// start full; they do not carry over into Redis when it answers again.
    Local {
        /// The fraction of each quota this process may use, in `(0, 1]`.
        share: f64,
    },
}

/// Where a [`Verdict`](super::Verdict) came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Source {
    /// The script, on the server.
    Redis,
    /// Cells this process leased from Redis earlier (see
    /// [`RedisBackend::lease`](super::RedisBackend::lease)).
    Lease,
    /// Redis did not answer: admitted by [`OnFailure::Open`].
    FailedOpen(Failure),
    /// Redis did not answer: refused by [`OnFailure::Closed`].
    FailedClosed(Failure),
    /// Redis did not answer: decided by the local limiter of [`OnFailure::Local`].
    Local(Failure),
}

impl Source {
    /// The failure behind the decision, if Redis did not decide it.
    pub fn failure(&self) -> Option<Failure> {
        match *self {
            Self::Redis | Self::Lease => None,
            Self::FailedOpen(failure) | Self::FailedClosed(failure) | Self::Local(failure) => {
                Some(failure)
            }
        }
    }
}

/// How the decision was made, as the end of a [`Verdict`](super::Verdict)'s line: `decided by
/// Redis`, `decided from a lease`, `failed open: no connection to Redis`, `failed closed: ...`,
/// `decided locally: ...`.
impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Redis => f.write_str("decided by Redis"),
            Self::Lease => f.write_str("decided from a lease"),
            Self::FailedOpen(failure) => write!(f, "failed open: {failure}"),
            Self::FailedClosed(failure) => write!(f, "failed closed: {failure}"),
            Self::Local(failure) => write!(f, "decided locally: {failure}"),
        }
    }
}

#[cfg(all(test, not(flowgate_loom)))]
mod tests {
    use super::{Failure, Source};
    use crate::outcome::{Allowed, Cause, Cited, Gauge, PolicyQuota, Refused};
    use crate::redis::verdict::Verdict;
    use crate::redis::UNLIMITED;

    /// A verdict prints its outcome, then its source in parentheses.
    #[test]
    fn a_verdict_reads_as_its_outcome_and_its_source() {
        let by = PolicyQuota::intern("per-user", 0, 0);
        let allowed = Allowed::new(Gauge::new(1, 1, 3, 1_000)).cite(Cited {
            by: Some(by),
            ..Cited::default()
        });
        let verdict = Verdict {
            outcome: Ok(allowed),
            source: Source::Redis,
        };
        assert_eq!(
            verdict.to_string(),
            "allowed: 2 of 3 left in policy 'per-user', quota #0 (decided by Redis)"
        );
        let lease = Verdict {
            source: Source::Lease,
            ..verdict
        };
        assert!(lease.to_string().ends_with(" (decided from a lease)"));
        let open = Verdict {
            outcome: Ok(Allowed::new(UNLIMITED).cite(Cited::default())),
            source: Source::FailedOpen(Failure::Connection),
        };
        assert_eq!(
            open.to_string(),
            "allowed: no quota applies (failed open: no connection to Redis)"
        );
        let refused = Refused::new(Gauge::new(1, 1, 1, 0), 1_000_000_000);
        let closed = Verdict {
            outcome: Err(refused.cite(Cited::default()).because(Cause::Unavailable)),
            source: Source::FailedClosed(Failure::Timeout),
        };
        assert_eq!(
            closed.to_string(),
            "refused: the rate limiter is unavailable; retry after 1s (failed closed: Redis did \
             not answer in time)"
        );
        let local = Verdict {
            outcome: Err(refused.cite(Cited::default())),
            source: Source::Local(Failure::BreakerOpen),
        };
        assert_eq!(
            local.to_string(),
            "rate limited: retry after 1s (decided locally: Redis not called: the circuit \
             breaker is open)"
        );
    }
}
