//! What a decision answers and where the answer came from: [`Verdict`], [`Source`], and the
//! [`Failure`] behind an answer a backend's failure policy gave instead of its buckets.

use core::fmt;

use crate::outcome::policy::{Allowed, Refused};
use crate::outcome::Gauge;

/// Why a backend's server gave no decision; the backend's failure policy answers instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Failure {
    /// No reply within the configured timeout. The call may still run on the server, so it is
    /// never sent again (a replay could take its cells twice).
    Timeout,
    /// The connection failed or dropped (server down, restarting, network). The call is not
    /// replayed.
    Connection,
    /// The server answered with an error (out of memory, a script killed, a replica that
    /// refuses writes, busy) or with a reply that is not a decision.
    Reply,
    /// Not sent: a circuit breaker is open after consecutive failures.
    BreakerOpen,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Timeout => "the server did not answer in time",
            Self::Connection => "no connection to the server",
            Self::Reply => "the server answered with an error",
            Self::BreakerOpen => "the server not called: the circuit breaker is open",
        })
    }
}

impl core::error::Error for Failure {}

/// Where a [`Verdict`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Source {
    /// The buckets themselves: in this process, or on the server.
    Buckets,
    /// Cells this process leased from the server earlier.
    Lease,
    /// Refused in this process: the server refused the same bucket for as many cells or fewer
    /// a moment ago, and the bucket cannot conform before this refusal's wait ends unless cells
    /// come back to it (see the backend's docs).
    Shield,
    /// The server did not answer: admitted by a failure policy that fails open.
    FailedOpen(Failure),
    /// The server did not answer: refused by a failure policy that fails closed.
    FailedClosed(Failure),
    /// The server did not answer: decided by a local limiter holding a share of each quota.
    Local(Failure),
}

impl Source {
    /// The failure behind the decision, if the buckets did not decide it.
    pub fn failure(&self) -> Option<Failure> {
        match *self {
            Self::Buckets | Self::Lease | Self::Shield => None,
            Self::FailedOpen(failure) | Self::FailedClosed(failure) | Self::Local(failure) => {
                Some(failure)
            }
        }
    }
}

/// How the decision was made, as the end of a [`Verdict`]'s line: `decided by the buckets`,
/// `decided from a lease`, `failed open: no connection to the server`, `failed closed: ...`,
/// `decided locally: ...`.
impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Buckets => f.write_str("decided by the buckets"),
            Self::Lease => f.write_str("decided from a lease"),
            Self::Shield => f.write_str("refused by the shield of a bucket the server refused"),
            Self::FailedOpen(failure) => write!(f, "failed open: {failure}"),
            Self::FailedClosed(failure) => write!(f, "failed closed: {failure}"),
            Self::Local(failure) => write!(f, "decided locally: {failure}"),
        }
    }
}

/// The outcome of one decision, and where it came from.
#[must_use = "a verdict says whether the request may go ahead"]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    pub(crate) outcome: Result<Allowed, Refused>,
    pub(crate) source: Source,
}

impl Verdict {
    /// `outcome`, from `source`.
    pub fn new(outcome: Result<Allowed, Refused>, source: Source) -> Self {
        Self { outcome, source }
    }

    /// An admission no quota describes (no policy applied, or a failure policy admitted).
    pub fn unlimited(source: Source) -> Self {
        Self::new(
            Ok(Allowed::new(
                crate::Allowed::new(Gauge::UNLIMITED),
                None,
                None,
            )),
            source,
        )
    }

    /// Admitted (describing the tightest enforcing quota after taking the cells) or refused
    /// (the enforcing quota that waits longest, and when to retry, with its policy's jitter):
    /// the same types and values on every backend. [`Allowed::by`] and [`Refused::by`] name
    /// the quota; `None` when no policy applied or the buckets did not decide.
    pub fn outcome(&self) -> Result<Allowed, Refused> {
        self.outcome
    }

    /// Whether the request was admitted.
    pub fn is_allowed(&self) -> bool {
        self.outcome.is_ok()
    }

    /// Where the decision came from: the buckets, a lease, or a failure policy.
    pub fn source(&self) -> Source {
        self.source
    }
}

/// The outcome's line, then where it came from: `allowed: 2 of 3 left in policy 'per-user',
/// quota #0 (decided by the buckets)`, `rate limited: retry after 1s (failed closed: the
/// server did not answer in time)`.
impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.outcome {
            Ok(allowed) => allowed.fmt(f)?,
            Err(refused) => refused.fmt(f)?,
        }
        write!(f, " ({})", self.source)
    }
}

#[cfg(all(test, not(flowgate_loom)))]
mod tests {
    use super::Verdict;
    use super::{Failure, Source};
    use crate::outcome::policy;
    use crate::outcome::{Allowed, Cause, Gauge, PolicyQuota, Refused};

    /// A verdict prints its outcome, then its source in parentheses.
    #[test]
    fn a_verdict_reads_as_its_outcome_and_its_source() {
        let by = PolicyQuota::intern("per-user", 0, 0);
        let allowed =
            policy::Allowed::new(Allowed::new(Gauge::new(1, 1, 3, 1_000)), Some(by), None);
        let verdict = Verdict {
            outcome: Ok(allowed),
            source: Source::Buckets,
        };
        assert_eq!(
            verdict.to_string(),
            "allowed: 2 of 3 left in policy 'per-user', quota #0 (decided by the buckets)"
        );
        let lease = Verdict {
            source: Source::Lease,
            ..verdict
        };
        assert!(lease.to_string().ends_with(" (decided from a lease)"));
        let open = Verdict {
            outcome: Ok(policy::Allowed::new(
                Allowed::new(Gauge::UNLIMITED),
                None,
                None,
            )),
            source: Source::FailedOpen(Failure::Connection),
        };
        assert_eq!(
            open.to_string(),
            "allowed: no quota applies (failed open: no connection to the server)"
        );
        let refused = Refused::new(Gauge::new(1, 1, 1, 0), 1_000_000_000);
        let closed = Verdict {
            outcome: Err(policy::Refused::new(
                refused.because(Cause::Unavailable),
                None,
                None,
                0,
            )),
            source: Source::FailedClosed(Failure::Timeout),
        };
        assert_eq!(
            closed.to_string(),
            "refused: the rate limiter is unavailable; retry after 1s (failed closed: the server \
             did not answer in time)"
        );
        let local = Verdict {
            outcome: Err(policy::Refused::new(refused, None, None, 0)),
            source: Source::Local(Failure::BreakerOpen),
        };
        assert_eq!(
            local.to_string(),
            "rate limited: retry after 1s (decided locally: the server not called: the \
             circuit breaker is open)"
        );
    }
}
