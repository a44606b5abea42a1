//! What a policy set's outcome adds: which quota of which policy it describes
//! ([`PolicyQuota`], interned so that outcomes naming it stay small, owned and `'static`),
//! what a dry-run policy would have done ([`DryRun`]), the two with a refusal's jitter as what
//! an outcome cites ([`Cited`], one kind of [`Citation`]), and the state of one quota as a
//! decision left it ([`QuotaState`], for headers).

use core::fmt;
use core::time::Duration;
#[cfg(feature = "std")]
use std::collections::BTreeMap;
// Not crate::primitive's (loom's, in the model build): the intern table is written when a
// policy set is built, never while one decides, and a loom Mutex cannot live in a static.
#[cfg(feature = "std")]
use std::sync::Mutex;

use super::Gauge;
use crate::quota::Quota;

/// Quota `quota_index` of the policy named `policy`, at `policy_index` in its set.
///
/// Every distinct (name, place, quota) a process builds is kept once, for the life of the
/// process, so that an outcome names its quota with one pointer and owns it without a reference
/// count (an `Arc` would put one shared counter on every refusal's path). A process keeps as
/// many as the distinct policies it ever built, however often it rebuilds its sets.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PolicyQuota {
    policy: &'static str,
    policy_index: u16,
    quota_index: u16,
}

impl PolicyQuota {
    /// The interned record of quota `quota_index` of the policy `policy` at `policy_index`.
    /// A set holds at most 32 quotas, so the places fit in 16 bits.
    /// A backend names its quotas with these, as a set built in process does.
    #[cfg(feature = "std")]
    pub fn intern(policy: &str, policy_index: usize, quota_index: usize) -> &'static PolicyQuota {
        // The lock is std's, not `primitive`'s: it guards bookkeeping done while a set is
        // built, which no decision reads, so there is nothing for loom to model in it.
        static KEPT: Mutex<BTreeMap<(String, u16, u16), &'static PolicyQuota>> =
            Mutex::new(BTreeMap::new());
        // The map is only ever inserted into; a panic elsewhere while it was held leaves it
        // whole.
        let mut kept = KEPT.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let (policy_index, quota_index) = (policy_index as u16, quota_index as u16);
        let kept: &mut &'static PolicyQuota = kept
            .entry((policy.to_owned(), policy_index, quota_index))
            .or_insert_with(|| {
                Box::leak(Box::new(PolicyQuota {
                    policy: Box::leak(policy.into()),
                    policy_index,
                    quota_index,
                }))
            });
        kept
    }

    /// The policy's name.
    pub fn policy(&self) -> &'static str {
        self.policy
    }

    /// The policy's place in the set (0 is the first evaluated).
    pub fn policy_index(&self) -> usize {
        usize::from(self.policy_index)
    }

    /// The quota's place in its policy's list.
    pub fn quota_index(&self) -> usize {
        usize::from(self.quota_index)
    }
}

impl fmt::Display for PolicyQuota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "policy '{}', quota #{}", self.policy, self.quota_index)
    }
}

/// One quota of one policy as it stands: what rate-limit headers report, from
/// [`Policies::inspect`](crate::Policies::inspect).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaState {
    by: &'static PolicyQuota,
    quota: Quota,
    gauge: Gauge,
    next: u64,
}

impl QuotaState {
    /// The state of the quota `by` (in force: `quota`), its bucket at `gauge`; one more cell
    /// in `gauge`'s own time until it is full again, until told otherwise
    /// ([`next_after`](Self::next_after)).
    pub fn new(by: &'static PolicyQuota, quota: Quota, gauge: Gauge) -> Self {
        Self {
            by,
            quota,
            gauge,
            next: 0,
        }
    }

    /// The same state, whose bucket holds one more cell in `next` ns.
    pub fn next_after(self, next: u64) -> Self {
        Self { next, ..self }
    }

    /// The state as a refusal by this quota reports it: nothing left for the request (fewer
    /// cells than it asked for), more in [`next_cell_after`](Self::next_cell_after). What a
    /// [`Backend`](crate::backend::Backend) reports of the quota that refused.
    pub fn none_left(self) -> Self {
        let gauge = &self.gauge;
        let used = gauge.unit.max(1).saturating_mul(gauge.limit);
        Self {
            gauge: Gauge { used, ..*gauge },
            ..self
        }
    }

    /// Time until the bucket holds one more cell than now, if nothing is taken meanwhile (zero
    /// when it is full): the IETF draft's `t`.
    pub fn next_cell_after(&self) -> Duration {
        Duration::from_nanos(self.next)
    }

    /// [`next_cell_after`](Self::next_cell_after) in nanoseconds.
    pub fn next_cell_after_nanos(&self) -> u64 {
        self.next
    }

    /// Which quota of which policy this is.
    pub fn by(&self) -> &'static PolicyQuota {
        self.by
    }

    /// The policy's name.
    pub fn policy(&self) -> &'static str {
        self.by.policy
    }

    /// The policy's place in the set (0 is the first evaluated).
    pub fn policy_index(&self) -> usize {
        self.by.policy_index()
    }

    /// The quota's place in its policy's list.
    pub fn quota_index(&self) -> usize {
        self.by.quota_index()
    }

    /// The quota in force.
    pub fn quota(&self) -> Quota {
        self.quota
    }

    /// Whole cells available at once.
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

    /// The quota's bucket.
    pub fn gauge(&self) -> Gauge {
        self.gauge
    }
}

/// What an outcome cites besides its bucket: nothing (`()`) for a single or keyed limiter,
/// whose outcomes stay a few words; [`Cited`] for a policy set. Sealed: these two are all.
pub trait Citation:
    sealed::Sealed + Copy + Default + fmt::Debug + Eq + Send + Sync + 'static
{
    /// The quota the outcome describes (`None` for `()`).
    fn by(&self) -> Option<&'static PolicyQuota>;
    /// The first dry-run policy that would have refused (`None` for `()`).
    fn dry_run(&self) -> Option<DryRun>;
    /// Nanoseconds of jitter a refusing policy added to the wait (0 for `()`).
    fn jitter(&self) -> u64;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for () {}
    impl Sealed for super::Cited {}
}

impl Citation for () {
    #[inline(always)]
    fn by(&self) -> Option<&'static PolicyQuota> {
        None
    }

    #[inline(always)]
    fn dry_run(&self) -> Option<DryRun> {
        None
    }

    #[inline(always)]
    fn jitter(&self) -> u64 {
        0
    }
}

/// What a policy set's outcome cites: the quota it describes (the refusing one, or an
/// admission's tightest), the first dry-run policy that would have refused, and the jitter a
/// refusing policy added to its wait. Read through the outcome's
/// [`by`](crate::Refused::by), [`dry_run`](crate::Refused::dry_run) and
/// [`jitter`](crate::Refused::jitter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Cited {
    pub(crate) by: Option<&'static PolicyQuota>,
    pub(crate) dry_run: Option<DryRun>,
    pub(crate) jitter: u64,
}

impl Cited {
    /// A citation of the quota `by` (the refusing one, or an admission's tightest), the first
    /// dry-run policy that would have refused, and the jitter, in ns, added to a refusal's
    /// wait: what a backend attaches to its outcomes.
    pub fn new(by: Option<&'static PolicyQuota>, dry_run: Option<DryRun>, jitter: u64) -> Self {
        Self {
            by,
            dry_run,
            jitter,
        }
    }
}

impl Citation for Cited {
    #[inline(always)]
    fn by(&self) -> Option<&'static PolicyQuota> {
        self.by
    }

    #[inline(always)]
    fn dry_run(&self) -> Option<DryRun> {
        self.dry_run
    }

    #[inline(always)]
    fn jitter(&self) -> u64 {
        self.jitter
    }
}

/// What a dry-run policy would have done: refuse, for `retry_after`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DryRun {
    pub(crate) by: &'static PolicyQuota,
    pub(crate) wait: u64,
}

impl DryRun {
    /// The dry-run quota `by`, which would have refused for `wait` ns.
    pub fn new(by: &'static PolicyQuota, wait: u64) -> Self {
        Self { by, wait }
    }

    /// The quota that would have refused (a dry-run policy takes nothing from a quota that
    /// would refuse).
    pub fn by(&self) -> &'static PolicyQuota {
        self.by
    }

    /// The policy's name.
    pub fn policy(&self) -> &'static str {
        self.by.policy
    }

    /// When the request would have conformed to that quota (`u64::MAX` ns: never, the request
    /// is above its capacity).
    pub fn retry_after(&self) -> Duration {
        Duration::from_nanos(self.wait)
    }
}

#[cfg(all(test, not(flowgate_loom)))]
mod tests {
    use super::PolicyQuota;

    #[test]
    fn a_quota_is_kept_once() {
        let a = PolicyQuota::intern("per-user", 0, 1);
        let b = PolicyQuota::intern(&String::from("per-user"), 0, 1);
        assert!(core::ptr::eq(a, b));
        let c = PolicyQuota::intern("per-user", 0, 2);
        assert!(!core::ptr::eq(a, c));
        assert_eq!(
            (c.policy(), c.policy_index(), c.quota_index()),
            ("per-user", 0, 2)
        );
        assert_eq!(PolicyQuota::intern("other", 0, 1).policy(), "other");
    }
}
