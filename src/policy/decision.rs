//! What a policy decision reports: [`Admitted`], [`Rejected`] ("not yet"), [`Oversized`]
//! ("never"), and the [`QuotaState`] of one quota they carry for response headers.
//!
//! They borrow the policy set (for policy names) and are otherwise small `Copy` values.

use core::fmt;
use core::time::Duration;

use super::live::LiveQuota;
use crate::decision::{Cause, Gauge, InsufficientCapacity};
use crate::quota::Quota;

/// One quota of one policy as a decision left it: what rate-limit headers report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaState<'p> {
    pub(crate) policy: &'p str,
    pub(crate) index: usize,
    pub(crate) quota_index: usize,
    pub(crate) quota: Quota,
    pub(crate) gauge: Gauge,
}

impl<'p> QuotaState<'p> {
    /// The policy's name.
    pub fn policy(&self) -> &'p str {
        self.policy
    }

    /// The policy's place in the set (0 is the first evaluated).
    pub fn policy_index(&self) -> usize {
        self.index
    }

    /// The quota's place in its policy's list.
    pub fn quota_index(&self) -> usize {
        self.quota_index
    }

    /// The quota, as in force for this decision.
    pub fn quota(&self) -> Quota {
        self.quota
    }

    /// Whole cells available at once after the decision.
    pub fn remaining(&self) -> u32 {
        self.gauge.remaining()
    }

    /// The quota's burst: the `limit` of rate-limit headers.
    pub fn limit(&self) -> u32 {
        self.gauge.limit()
    }

    /// Time until the quota's bucket is full again if nothing else is taken.
    pub fn reset_after(&self) -> Duration {
        Duration::from_nanos(self.gauge.reset_after_nanos())
    }

    /// [`reset_after`](Self::reset_after) in nanoseconds.
    pub fn reset_after_nanos(&self) -> u64 {
        self.gauge.reset_after_nanos()
    }

    /// The quota's bucket after the decision.
    pub fn gauge(&self) -> Gauge {
        self.gauge
    }
}

/// What a dry-run policy would have done: refuse, for `retry_after`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DryRun<'p> {
    pub(crate) state: QuotaState<'p>,
    pub(crate) wait: u64,
}

impl<'p> DryRun<'p> {
    /// The quota that would have refused, and its bucket (untouched: a dry-run policy takes
    /// nothing from a quota that would refuse).
    pub fn state(&self) -> QuotaState<'p> {
        self.state
    }

    /// The policy's name.
    pub fn policy(&self) -> &'p str {
        self.state.policy
    }

    /// When the request would have conformed to that quota (`u64::MAX` ns: never, the request
    /// is above its burst).
    pub fn retry_after(&self) -> Duration {
        Duration::from_nanos(self.wait)
    }
}

/// Enforcing quotas an admission keeps as they are, for [`Admitted::tightest`] to compare when
/// asked; the tightest of any further ones is chosen when the decision ends.
pub(crate) const BOOKED: usize = 4;

/// A quota an admission took cells from, and how far ahead of the decision's `now` it left the
/// bucket. Its [`QuotaState`] is built when asked for, so that a caller who only wants a yes or
/// no pays nothing for it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Booked<'p> {
    pub(crate) live: &'p LiveQuota,
    pub(crate) debt: u64,
}

impl<'p> Booked<'p> {
    fn state(&self) -> QuotaState<'p> {
        let (rule, quota, _) = self.live.full();
        let (index, quota_index) = self.live.at();
        QuotaState {
            policy: self.live.policy(),
            index,
            quota_index,
            quota,
            gauge: rule.gauge(self.debt),
        }
    }
}

impl PartialEq for Booked<'_> {
    fn eq(&self, other: &Self) -> bool {
        core::ptr::eq(self.live, other.live) && self.debt == other.debt
    }
}

impl Eq for Booked<'_> {}

/// Whether a quota with `(remaining, reset_after_nanos)` is tighter than `than`: fewer cells
/// left, then the longer reset. What `tightest` and the legacy rate-limit headers report.
pub(crate) fn is_tighter(quota: (u32, u64), than: (u32, u64)) -> bool {
    (quota.0, core::cmp::Reverse(quota.1)) < (than.0, core::cmp::Reverse(than.1))
}

/// An admitted request: every enforcing policy that applies took its cells from every quota.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admitted<'p> {
    /// The first enforcing quotas, in evaluation order.
    pub(crate) booked: [Option<Booked<'p>>; BOOKED],
    /// The tightest of the enforcing quotas after them, if any.
    pub(crate) more: Option<Booked<'p>>,
    pub(crate) dry_run: Option<DryRun<'p>>,
}

impl<'p> Admitted<'p> {
    /// The enforcing quota with the fewest cells left (ties: the one that takes longest to
    /// refill, then the first): what `X-RateLimit-Remaining` reports. `None` if no enforcing
    /// policy applied.
    ///
    /// Worked out when called (a decision does not spend time on headers nobody asks for): each
    /// bucket is described as the decision left it, under the quota in force when this is
    /// called (the decision's own, unless [`replace_quotas`](super::Policies::replace_quotas)
    /// changed it since). Of a request's enforcing quotas, the first four are compared here;
    /// among any further ones, the decision kept only the one tightest under the quotas in
    /// force when it ended, so after a replacement a later quota may go unreported.
    pub fn tightest(&self) -> Option<QuotaState<'p>> {
        let mut tightest: Option<QuotaState<'p>> = None;
        for booked in self.booked.iter().chain([&self.more]).flatten() {
            let state = booked.state();
            let tighter = tightest.map_or(true, |t| {
                is_tighter(
                    (state.remaining(), state.reset_after_nanos()),
                    (t.remaining(), t.reset_after_nanos()),
                )
            });
            if tighter {
                tightest = Some(state);
            }
        }
        tightest
    }

    /// Calls `visit` with the state of each enforcing quota the admission kept, in evaluation
    /// order; `false` if there were more than it keeps (the first four, then only the tightest
    /// of the rest), so that a caller listing every quota must look them up.
    #[cfg(feature = "tower")]
    pub(crate) fn each_kept(&self, mut visit: impl FnMut(QuotaState<'p>)) -> bool {
        for booked in self.booked.iter().flatten() {
            visit(booked.state());
        }
        self.more.is_none()
    }

    /// Cells left in the tightest quota (`u32::MAX` if no enforcing policy applied).
    pub fn remaining(&self) -> u32 {
        self.tightest().map_or(u32::MAX, |state| state.remaining())
    }

    /// The first dry-run policy that would have refused this request, if any.
    pub fn dry_run(&self) -> Option<DryRun<'p>> {
        self.dry_run
    }
}

/// A refused request. Nothing stays taken from any quota of any policy (but see the
/// [`policy` module docs](crate::policy) on a rare undo that must give way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rejected<'p> {
    pub(crate) by: QuotaState<'p>,
    pub(crate) wait: u64,
    pub(crate) jitter: u64,
    pub(crate) cause: Cause,
    pub(crate) dry_run: Option<DryRun<'p>>,
}

impl<'p> Rejected<'p> {
    /// The quota that refused: of all the quotas that would refuse the request, the one that
    /// conforms last (the first in order among equals).
    pub fn by(&self) -> QuotaState<'p> {
        self.by
    }

    /// The refusing policy's name.
    pub fn policy(&self) -> &'p str {
        self.by.policy
    }

    /// When to retry: [`conforms_after`](Self::conforms_after) plus the refusing policy's
    /// jitter. Never earlier than the time at which every quota admits the request, if nothing
    /// else is taken in between. Saturates at `u64::MAX` ns.
    pub fn retry_after(&self) -> Duration {
        Duration::from_nanos(self.retry_after_nanos())
    }

    /// [`retry_after`](Self::retry_after) in nanoseconds.
    pub fn retry_after_nanos(&self) -> u64 {
        self.wait.saturating_add(self.jitter)
    }

    /// The exact time after which every quota of every enforcing policy admits the request, if
    /// nothing else is taken in between (the longest of their waits); `u64::MAX` ns if never
    /// before the clock's horizon. For a [`Cause::TableFull`] refusal only a hint.
    pub fn conforms_after(&self) -> Duration {
        Duration::from_nanos(self.wait)
    }

    /// The jitter added to [`conforms_after`](Self::conforms_after).
    pub fn jitter(&self) -> Duration {
        Duration::from_nanos(self.jitter)
    }

    /// Cells left in the refusing quota.
    pub fn remaining(&self) -> u32 {
        if self.wait == u64::MAX {
            return 0;
        }
        self.by.remaining()
    }

    /// The refusing quota's burst.
    pub fn limit(&self) -> u32 {
        self.by.limit()
    }

    /// Time until the refusing quota's bucket is full again.
    pub fn reset_after(&self) -> Duration {
        self.by.reset_after()
    }

    /// Why: the quota ([`Cause::Quota`]), or a keyed policy's table that had no room for a new
    /// key ([`Cause::TableFull`]).
    pub fn cause(&self) -> Cause {
        self.cause
    }

    /// The first dry-run policy that would also have refused, if any (evaluated before the
    /// refusal).
    pub fn dry_run(&self) -> Option<DryRun<'p>> {
        self.dry_run
    }
}

impl fmt::Display for Rejected<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "rate limited by policy '{}' ({}): retry after {:?}",
            self.by.policy,
            self.by.quota,
            self.retry_after()
        )
    }
}

impl std::error::Error for Rejected<'_> {}

/// A request for more cells than an enforcing policy's quota can ever hold: it never succeeds.
/// Nothing stays taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Oversized<'p> {
    pub(crate) policy: &'p str,
    pub(crate) index: usize,
    pub(crate) quota_index: usize,
    pub(crate) quota: Quota,
    pub(crate) capacity: InsufficientCapacity,
}

impl<'p> Oversized<'p> {
    /// The policy whose quota is too small.
    pub fn policy(&self) -> &'p str {
        self.policy
    }

    /// The quota's place in its policy's list.
    pub fn quota_index(&self) -> usize {
        self.quota_index
    }

    /// The quota whose burst is too small.
    pub fn quota(&self) -> Quota {
        self.quota
    }

    /// The cells requested and the quota's burst.
    pub fn capacity(&self) -> InsufficientCapacity {
        self.capacity
    }
}

impl fmt::Display for Oversized<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "policy '{}': {}", self.policy, self.capacity)
    }
}

impl std::error::Error for Oversized<'_> {}
