//! [`InsufficientCapacity`] ("never") and [`Error`], the one owned error of a decision.

use core::fmt;

use super::decision::Refused;
use super::policy::{self, PolicyQuota};
use super::Gauge;

/// A request for more cells than a bucket can ever hold: it will never succeed, however long
/// the caller waits. Nothing was consumed.
#[must_use = "a request above the capacity must not go ahead"]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InsufficientCapacity {
    /// Cells requested.
    pub requested: u32,
    /// The bucket's capacity (its burst, for most algorithms).
    pub burst: u32,
    /// For a policy set: the quota too small for the request.
    pub(crate) by: Option<&'static PolicyQuota>,
}

impl InsufficientCapacity {
    /// `requested` cells asked of the quota `by`, whose capacity is `burst`: what a backend
    /// answers a request that can never succeed.
    pub fn of(requested: u32, burst: u32, by: &'static PolicyQuota) -> Self {
        Self {
            requested,
            burst,
            by: Some(by),
        }
    }

    /// `Ok` if `n` cells fit in a bucket of `capacity`; otherwise the error.
    #[inline(always)]
    pub fn check(n: u32, capacity: u32) -> Result<(), Self> {
        if n > capacity {
            return Err(Self {
                requested: n,
                burst: capacity,
                by: None,
            });
        }
        Ok(())
    }

    /// The refusal that stands for this error where a policy set's answer to one cell must be a
    /// refusal (one cell exceeds no capacity, every capacity being at least 1): one that never
    /// conforms, naming the quota.
    #[cold]
    pub fn never(self) -> policy::Refused {
        let gauge = Gauge::new(u64::from(self.burst), 1, self.burst, u64::MAX);
        policy::Refused::new(Refused::new(gauge, u64::MAX), self.by, None, 0)
    }

    /// For a policy set: the quota too small for the request.
    pub fn by(&self) -> Option<&'static PolicyQuota> {
        self.by
    }
}

impl fmt::Display for InsufficientCapacity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(by) = self.by {
            write!(f, "{by}: ")?;
        }
        write!(
            f,
            "{} cells requested but the capacity is {}: the request can never succeed",
            self.requested, self.burst
        )
    }
}

impl core::error::Error for InsufficientCapacity {}

/// Why a request got no cells, as one owned error: refused for now, or never possible. What the
/// waits return, and what `?` makes of either half of
/// [`check_n`](crate::RateLimiter::check_n)'s answer in a function that returns
/// `Result<_, flowgate::Error>`. `'static`, `Send` and `Sync`, so it also goes into
/// `Box<dyn std::error::Error + Send + Sync>`.
///
/// ```
/// use flowgate::{Quota, RateLimiter};
///
/// fn take(limiter: &RateLimiter, n: u32) -> Result<u32, flowgate::Error> {
///     Ok(limiter.check_n(n)??.remaining())
/// }
///
/// let limiter = RateLimiter::new(Quota::per_hour(10)?);
/// assert_eq!(take(&limiter, 4)?, 6);
/// assert!(matches!(take(&limiter, 7), Err(flowgate::Error::Refused(_))));
/// assert!(matches!(take(&limiter, 11), Err(flowgate::Error::Capacity(_))));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// A policy set's waits return [`policy::Error`], whose refusal names its
/// quota.
#[must_use = "a request that got no cells must not go ahead"]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// Refused for now: the refusal says when to retry. From a wait: the wait would be longer
    /// than allowed (the bound given, a shaping algorithm's queue, or the clock's horizon), and
    /// nothing was taken.
    Refused(Refused),
    /// More cells than a bucket holds: the request can never succeed.
    Capacity(InsufficientCapacity),
}

/// What every decision's owned error does, for `$error` holding a `$refused` or an
/// [`InsufficientCapacity`]: [`Error`], and a policy set's `policy::Error` (defined in
/// `policy.rs`, with its outcomes).
macro_rules! owned_error {
    ($error:ty, $refused:ty) => {
        impl $error {
            /// The refusal, if the request was refused for now.
            pub fn refused(&self) -> Option<&$refused> {
                match self {
                    Self::Refused(refused) => Some(refused),
                    Self::Capacity(_) => None,
                }
            }
        }

        impl From<$refused> for $error {
            fn from(refused: $refused) -> Self {
                Self::Refused(refused)
            }
        }

        impl From<InsufficientCapacity> for $error {
            fn from(capacity: InsufficientCapacity) -> Self {
                Self::Capacity(capacity)
            }
        }

        impl core::fmt::Display for $error {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                match self {
                    Self::Refused(refused) => refused.fmt(f),
                    Self::Capacity(capacity) => capacity.fmt(f),
                }
            }
        }

        /// Transparent: the message is the inner error's, so an error chain does not repeat
        /// it.
        impl core::error::Error for $error {}
    };
}
owned_error!(Error, Refused);
owned_error!(policy::Error, policy::Refused);
