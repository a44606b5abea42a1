//! [`RedisConfigError`]: why a policy set cannot be built, or cannot decide, in Redis; and the
//! check that a prefix or a name can be part of a key.

use core::fmt;

use flowgate::policy::BuildError;
use flowgate::quota::QuotaError;

/// Why a policy set could not be built in Redis.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum RedisConfigError {
    /// The set is invalid on any backend (no policy, a policy without quotas, two policies
    /// with one name, …).
    Policy(BuildError),
    /// The prefix or a policy name is empty or holds `:`, `{` or `}` (which would make keys
    /// ambiguous or break the hash tag).
    BadName {
        /// What was named: "prefix" or "policy".
        what: &'static str,
        /// The name.
        name: String,
    },
    /// A quota's lead (window and slack) exceeds [`MAX_WINDOW_MICROS`](crate::MAX_WINDOW_MICROS),
    /// or a sliding window lasts 2^53 ns (104 days) or more.
    WindowTooLong {
        /// The policy.
        policy: String,
        /// The quota's index in the policy.
        quota: usize,
    },
    /// A quota starts its buckets less than full
    /// ([`Quota::with_initial`](flowgate::Quota::with_initial)): in Redis a missing key is a
    /// full bucket.
    InitialNotFull {
        /// The policy.
        policy: String,
        /// The quota's index in the policy.
        quota: usize,
    },
    /// [`OnFailure::Local`](crate::OnFailure::Local)'s share is not in `(0, 1]`.
    Share(f64),
    /// A quota scaled to [`OnFailure::Local`](crate::OnFailure::Local)'s share is no valid quota (a share so small that
    /// its interval overflows, for one).
    ShareTooSmall {
        /// The policy.
        policy: String,
        /// The quota as written (`"5/min"`).
        quota: String,
        /// The share.
        share: f64,
        /// What is wrong with the scaled quota.
        error: QuotaError,
    },
    /// The lease is empty, larger than [`MAX_LEASE_CELLS`](crate::MAX_LEASE_CELLS), or its
    /// lifetime is zero.
    Lease,
    /// A sliding log's quota cannot run in Redis (see
    /// [`RedisSlidingLog`](crate::RedisSlidingLog)).
    Quota(QuotaError),
    /// A sliding log keeps no local share: [`OnFailure::Local`](crate::OnFailure::Local) is not offered for one.
    LocalLog,
    /// The timeout is zero.
    Timeout,
    /// A circuit breaker that opens after no failure or stays open for no time (use
    /// [`Breaker::off`](crate::Breaker::off) for none).
    Breaker,
    /// The set was built outside a tokio runtime (the connection manager needs one).
    NoRuntime,
    /// The `redis` crate refused the client's configuration.
    Client(String),
    /// Redis did not answer a readiness check
    /// ([`RedisLimiter::ready`](crate::RedisLimiter::ready)).
    Unreachable {
        /// The server (`host:port`; a cluster's node, or its seeds).
        server: String,
        /// What went wrong.
        reason: String,
    },
}

impl fmt::Display for RedisConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Policy(error) => error.fmt(f),
            Self::BadName { what, name } => {
                write!(f, "{what} {name:?} is empty or holds ':', '{{' or '}}'")
            }
            Self::WindowTooLong { policy, quota } => write!(
                f,
                "quota {quota} of policy {policy:?}: the window exceeds 2^51 µs"
            ),
            Self::InitialNotFull { policy, quota } => write!(
                f,
                "quota {quota} of policy {policy:?}: buckets in Redis start full"
            ),
            // `{:?}`: a short float (`1e-300`), where `{}` writes every digit.
            Self::Share(share) => write!(f, "local share {share:?} is not in (0, 1]"),
            Self::ShareTooSmall {
                policy,
                quota,
                share,
                error,
            } => write!(
                f,
                "quota {quota} of policy {policy:?} on a local share of {share:?}: {error}"
            ),
            Self::Lease => f.write_str("a lease needs 1 to 2^24 - 1 cells and a lifetime"),
            Self::Quota(error) => write!(f, "a sliding log in Redis: {error}"),
            Self::LocalLog => f.write_str(
                "a sliding log keeps no local share: fail open or closed when Redis is away",
            ),
            Self::Timeout => f.write_str("the timeout is zero"),
            Self::Breaker => f.write_str(
                "a circuit breaker needs at least one failure and a cool-down (or Breaker::off())",
            ),
            Self::NoRuntime => f.write_str("build a Redis limiter inside a tokio runtime"),
            Self::Client(error) => write!(f, "redis client: {error}"),
            Self::Unreachable { server, reason } => {
                write!(f, "Redis at {server} cannot be reached: {reason}")
            }
        }
    }
}

impl core::error::Error for RedisConfigError {}

impl From<BuildError> for RedisConfigError {
    fn from(error: BuildError) -> Self {
        Self::Policy(error)
    }
}

/// Checks that `part` (a prefix or a name) can be part of a key unambiguously.
pub(crate) fn check_part(part: &str, what: &'static str) -> Result<(), RedisConfigError> {
    if part.is_empty() || part.contains([':', '{', '}']) {
        let name = part.to_owned();
        return Err(RedisConfigError::BadName { what, name });
    }
    Ok(())
}
