//! What a policy set's outcome adds: which quota of which policy it describes
//! ([`QuotaState`]), what a dry-run policy would have done ([`DryRun`]), and the interned
//! policy names that let both be owned, `'static` values.

use core::time::Duration;
use std::collections::BTreeSet;
use std::sync::Mutex;

use super::Gauge;
use crate::quota::Quota;

/// Policy names as `&'static str`: each distinct name is allocated once per process and kept,
/// so that an outcome naming its policy owns that name without a reference count (an `Arc`
/// would put one shared counter on every refusal's path). A process keeps as many names as
/// it ever gave distinct policies, however often it rebuilds its sets.
///
/// The lock is std's, not `primitive`'s: it guards bookkeeping done while a set is built, which
/// no decision reads, so there is nothing for loom to model in it.
pub(crate) fn intern(name: &str) -> &'static str {
    static NAMES: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());
    // The set is only ever inserted into; a panic elsewhere while it was held leaves it whole.
    let mut names = NAMES
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(&known) = names.get(name) {
        return known;
    }
    let kept: &'static str = Box::leak(name.into());
    names.insert(kept);
    kept
}

/// Which quota of which policy an outcome describes: the policy's (interned) name and place in
/// its set, the quota's place in the policy, and the quota in force for the decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Source {
    pub(crate) policy: &'static str,
    pub(crate) policy_index: u16,
    pub(crate) quota_index: u16,
    pub(crate) quota: Quota,
}

/// One quota of one policy as a decision left it: what rate-limit headers report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaState {
    source: Source,
    gauge: Gauge,
}

impl QuotaState {
    pub(crate) fn new(source: Source, gauge: Gauge) -> Self {
        Self { source, gauge }
    }

    /// Which quota of which policy this is.
    pub(crate) fn source(&self) -> Source {
        self.source
    }

    /// The policy's name (kept for the life of the process: see the
    /// [`outcome` module docs](crate::outcome)).
    pub fn policy(&self) -> &'static str {
        self.source.policy
    }

    /// The policy's place in the set (0 is the first evaluated).
    pub fn policy_index(&self) -> usize {
        usize::from(self.source.policy_index)
    }

    /// The quota's place in its policy's list.
    pub fn quota_index(&self) -> usize {
        usize::from(self.source.quota_index)
    }

    /// The quota, as in force for this decision.
    pub fn quota(&self) -> Quota {
        self.source.quota
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
pub struct DryRun {
    pub(crate) state: QuotaState,
    pub(crate) wait: u64,
}

impl DryRun {
    /// The quota that would have refused, and its bucket (untouched: a dry-run policy takes
    /// nothing from a quota that would refuse).
    pub fn state(&self) -> QuotaState {
        self.state
    }

    /// The policy's name.
    pub fn policy(&self) -> &'static str {
        self.state.policy()
    }

    /// When the request would have conformed to that quota (`u64::MAX` ns: never, the request
    /// is above its burst).
    pub fn retry_after(&self) -> Duration {
        Duration::from_nanos(self.wait)
    }
}

#[cfg(all(test, not(flowgate_loom)))]
mod tests {
    use super::intern;

    #[test]
    fn a_name_is_kept_once() {
        let a = intern("per-user");
        let b = intern(&String::from("per-user"));
        assert!(core::ptr::eq(a, b));
        assert_eq!(intern("other"), "other");
    }
}
