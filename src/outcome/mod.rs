//! What a decision reports, for every limiter kind: [`Allowed`], [`Refused`] ("not yet"),
//! [`InsufficientCapacity`] ("never"), and [`Error`], the one owned error that holds either.
//!
//! A [`RateLimiter`](crate::RateLimiter) and a [`KeyedRateLimiter`](crate::KeyedRateLimiter)
//! answer in these types. A [`Policies`](crate::Policies) set answers in its own
//! ([`policy::Allowed`], [`policy::Refused`],
//! [`policy::Error`]): the outcome of one quota, which they dereference
//! to, and what the set cites besides it (which quota of which policy, what a dry-run policy
//! would have done, the jitter of a refusal). A single or keyed limiter's
//! `Result<Allowed, Refused>` stays seven words.
//!
//! Outcomes are small `Copy` values that own everything in them (a policy's quota is named by
//! an interned [`PolicyQuota`]), so they outlive the limiter, cross threads, and return with `?`
//! into `Box<dyn Error + Send + Sync>`. They carry the bucket's state as a
//! [`Gauge`] relative to the moment of the decision and derive `remaining` from it only when
//! asked: the division it needs is not paid by callers that only want yes or no.
//!
//! ```
//! use flowgate::policy::{Policies, Policy};
//! use flowgate::{clock::ManualClock, Quota, RateLimiter};
//!
//! fn handle(limiter: &RateLimiter<ManualClock>, policies: &Policies<str, ManualClock>)
//!     -> Result<(), Box<dyn std::error::Error + Send + Sync>>
//! {
//!     limiter.check()?;
//!     policies.check("alice")?; // a refusal names its policy and quota
//!     Ok(())
//! }
//!
//! let limiter = RateLimiter::with_clock(Quota::per_second(10)?, ManualClock::new());
//! let policies = Policies::<str>::builder()
//!     .clock(ManualClock::new())
//!     .policy(Policy::keyed("per-user", |user: &str| user).quota(Quota::per_hour(1)?))
//!     .build()?;
//! assert!(handle(&limiter, &policies).is_ok());
//! let refused = handle(&limiter, &policies).unwrap_err();
//! assert_eq!(refused.to_string(), "rate limited by policy 'per-user', quota #0: retry after 3600s");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use core::time::Duration;

mod attempt;
mod decision;
mod display;
mod error;
pub(crate) mod policy;
mod why;

pub(crate) use attempt::{as_is, judge, Admission};
pub use attempt::{Attempt, GiveBack};
pub use decision::{Allowed, Refused};
pub use error::{Error, InsufficientCapacity};
pub use policy::{DryRun, PolicyQuota, QuotaState, Rejection};

/// How full a bucket is at the moment of a decision, in the algorithm's own unit: `used` units
/// of `unit` each, out of `limit` cells, and how long until it is fully available again.
///
/// GCRA measures in nanoseconds (`used` is the schedule's lead over `now`, `unit` the emission
/// interval); counting algorithms measure in cells (`unit` = 1). Either way the whole cells
/// remaining are `limit − ⌈used / unit⌉`, computed only when asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gauge {
    used: u64,
    unit: u64,
    /// A `u32` held in a whole word: no padding, so a decision stores the gauge as four plain
    /// words.
    limit: u64,
    reset: u64,
}

impl Gauge {
    /// A gauge of `used` units of `unit` (≥ 1) out of `limit` cells, full again in
    /// `reset_after_nanos`.
    #[inline(always)]
    pub const fn new(used: u64, unit: u64, limit: u32, reset_after_nanos: u64) -> Self {
        Self {
            used,
            unit,
            limit: limit as u64,
            reset: reset_after_nanos,
        }
    }

    /// The gauge of an admission no quota describes (a policy set none of whose enforcing
    /// policies applied): nothing used of `u32::MAX` cells.
    pub const UNLIMITED: Gauge = Gauge::new(0, 1, u32::MAX, 0);

    /// Whole cells available: `limit − ⌈used / unit⌉`, at least 0.
    #[inline]
    pub fn remaining(&self) -> u32 {
        // One division gives the quotient and the remainder: ⌈used / unit⌉ without overflow.
        let unit = self.unit.max(1);
        let used = self.used / unit + u64::from(self.used % unit != 0);
        if used >= self.limit {
            0
        } else {
            (self.limit - used) as u32
        }
    }

    /// The bucket's capacity: the `limit` of rate-limit headers.
    pub fn limit(&self) -> u32 {
        // Made from a u32 (`new`).
        self.limit as u32
    }

    /// Time until the bucket is fully available again if nothing else is taken.
    pub fn reset_after(&self) -> Duration {
        Duration::from_nanos(self.reset)
    }

    /// [`reset_after`](Self::reset_after) in nanoseconds (the HTTP headers').
    #[cfg(feature = "tower")]
    pub(crate) fn reset_after_nanos(&self) -> u64 {
        self.reset
    }

    /// Whether this bucket is tighter than `other`: fewer whole cells
    /// [`remaining`](Self::remaining), or as many and a longer [`reset`](Self::reset_after).
    /// An admission of several quotas describes the tightest of them (the first of equals).
    ///
    /// ```
    /// use flowgate::outcome::Gauge;
    /// // 2 of 10 cells used (8 left) against 8 of 100 used (92 left).
    /// let (small, large) = (Gauge::new(2, 1, 10, 0), Gauge::new(8, 1, 100, 0));
    /// assert!(small.is_tighter_than(&large));
    /// assert!(!large.is_tighter_than(&small));
    /// // As many left: the longer reset is the tighter.
    /// let later = Gauge::new(2, 1, 10, 5);
    /// assert!(later.is_tighter_than(&small) && !small.is_tighter_than(&later));
    /// assert!(!small.is_tighter_than(&small));
    /// ```
    #[inline]
    pub fn is_tighter_than(&self, other: &Gauge) -> bool {
        self.tightness() < other.tightness()
    }

    /// [`is_tighter_than`](Self::is_tighter_than) as one number, the smaller the tighter: what
    /// a policy set's decision compares, without a branch (see `policy::report`).
    #[inline(always)]
    pub(crate) fn tightness(&self) -> u128 {
        tightness(self.remaining(), self.reset)
    }

    /// Whether at least four fifths of the bucket are in use (Envoy's "near limit"), without a
    /// division.
    pub fn near_limit(&self) -> bool {
        u128::from(self.used) * 5 >= u128::from(self.unit) * u128::from(self.limit) * 4
    }
}

/// [`Gauge::tightness`] of a bucket with `remaining` cells, full again in `reset` ns (what the
/// HTTP headers keep of the tightest quota).
#[inline(always)]
pub(crate) fn tightness(remaining: u32, reset: u64) -> u128 {
    u128::from(remaining) << 64 | u128::from(u64::MAX - reset)
}

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Cause {
    /// The bucket does not hold the cells yet: [`Refused::retry_after`] is exact.
    Quota,
    /// The key is new and the keyed table is full, with nothing idle to make room for it (see
    /// [`KeyedRateLimiter`](crate::KeyedRateLimiter)). [`Refused::retry_after`] is only a hint
    /// (one emission interval of the key's quota): room appears when another key goes idle.
    TableFull,
    /// The key is new and the quota on new keys refused to create it; the refusal's gauge and
    /// [`Refused::retry_after`] are that quota's.
    NewKeys,
    /// No quota was asked: the limiter's backend did not answer (Redis down, slow, or behind
    /// an open circuit breaker) and its failure policy refuses. [`Refused::retry_after`] is
    /// the policy's configured wait; the refusal names no quota and its gauge describes none.
    Unavailable,
    /// A policy's key extractor rejected the request ([`Key::reject`](crate::policy::Key::reject)):
    /// it never conforms ([`Refused::retry_after`] is `u64::MAX` ns), its gauge describes no
    /// bucket, and [`policy::Refused::rejection`](crate::policy::Refused::rejection) says why.
    Rejected,
}
