//! [`BuildError`]: why a policy set could not be built, or a replacement was refused.

use core::fmt;

use super::MAX_QUOTAS;
use crate::keyed::KeyedError;
use crate::quota::QuotaError;

/// Why a policy set could not be built, or a replacement was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuildError {
    /// The set has no policy.
    NoPolicies,
    /// The policy at `index` has an empty name.
    NoName {
        /// Its place in the set.
        index: usize,
    },
    /// Two policies have this name.
    DuplicateName {
        /// The name.
        policy: String,
    },
    /// The policy has no quota.
    NoQuotas {
        /// The policy.
        policy: String,
    },
    /// More than 32 quotas over all policies.
    TooManyQuotas {
        /// How many there were.
        quotas: usize,
    },
    /// The policy's jitter has its minimum above its maximum, or lasts more than 292 years.
    Jitter {
        /// The policy.
        policy: String,
    },
    /// A keyed policy's table could not be built.
    Keyed {
        /// The policy.
        policy: String,
        /// Why.
        error: KeyedError,
    },
    /// No policy has this name.
    UnknownPolicy {
        /// The name asked for.
        policy: String,
    },
    /// A replacement's quota is invalid for its algorithm (a window counter given a separate
    /// burst, …).
    Quota {
        /// The policy.
        policy: String,
        /// The quota's place in the policy.
        quota: usize,
        /// What the algorithm rejects.
        error: QuotaError,
    },
    /// A replacement's algorithm would read the policy's buckets differently from the one it
    /// replaces (another family of algorithm, or a window counter with another window length;
    /// see [`AnyAlgorithm::reads_buckets_of`](crate::algorithm::AnyAlgorithm::reads_buckets_of)):
    /// such a change needs a new set.
    Incompatible {
        /// The policy.
        policy: String,
        /// The quota's place in the policy.
        quota: usize,
        /// The algorithm in force.
        from: String,
        /// The replacement refused.
        to: String,
    },
    /// A replacement must keep the policy's number of quotas.
    QuotaCount {
        /// The policy.
        policy: String,
        /// Its number of quotas.
        expected: usize,
        /// The number given.
        found: usize,
    },
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoPolicies => f.write_str("a policy set needs at least one policy"),
            Self::NoName { index } => write!(f, "policy #{index} has an empty name"),
            Self::DuplicateName { policy } => write!(f, "two policies are named '{policy}'"),
            Self::NoQuotas { policy } => write!(f, "policy '{policy}' has no quota"),
            Self::TooManyQuotas { quotas } => write!(
                f,
                "{quotas} quotas in all; a policy set holds at most {MAX_QUOTAS}"
            ),
            Self::Jitter { policy } => write!(
                f,
                "policy '{policy}': the jitter's minimum is above its maximum, or it is longer \
                 than 292 years"
            ),
            Self::Keyed { policy, error } => write!(f, "policy '{policy}': {error}"),
            Self::Quota {
                policy,
                quota,
                error,
            } => write!(f, "policy '{policy}', quota #{quota}: {error}"),
            Self::Incompatible {
                policy,
                quota,
                from,
                to,
            } => write!(
                f,
                "policy '{policy}', quota #{quota}: `{to}` cannot take over the buckets of \
                 `{from}` (another kind of algorithm, or another window length); build a new set \
                 for it"
            ),
            Self::UnknownPolicy { policy } => write!(f, "no policy is named '{policy}'"),
            Self::QuotaCount {
                policy,
                expected,
                found,
            } => write!(
                f,
                "policy '{policy}' has {expected} quotas; a replacement must give as many, not \
                 {found}"
            ),
        }
    }
}

impl core::error::Error for BuildError {}
