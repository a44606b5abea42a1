//! A policy set's outcomes ([`Allowed`], [`Refused`], [`Error`]): a bucket's outcome and what
//! the set adds to it, which quota of which policy it describes ([`PolicyQuota`], interned so
//! that outcomes naming it stay small, owned and `'static`) and what a dry-run policy would
//! have done ([`DryRun`]); and the state of one quota as a decision left it ([`QuotaState`],
//! for headers).

use core::fmt;
use core::time::Duration;
#[cfg(feature = "std")]
use std::collections::BTreeMap;
// Not crate::primitive's (loom's, in the model build): the intern table is written when a
// policy set is built, never while one decides, and a loom Mutex cannot live in a static.
#[cfg(feature = "std")]
use std::sync::Mutex;

use super::{Gauge, InsufficientCapacity};
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

    /// [`next_cell_after`](Self::next_cell_after) in nanoseconds (the HTTP headers').
    #[cfg(feature = "tower")]
    pub(crate) fn next_cell_after_nanos(&self) -> u64 {
        self.next
    }

    /// Which quota of which policy this is: its policy's name and place, and the quota's place.
    pub fn by(&self) -> &'static PolicyQuota {
        self.by
    }

    /// The quota in force.
    pub fn quota(&self) -> Quota {
        self.quota
    }

    /// The quota's bucket.
    pub fn gauge(&self) -> Gauge {
        self.gauge
    }
}

/// A policy set's admission: the admission of its tightest enforcing quota (the one with the
/// fewest cells left; ties: the one that takes longest to refill, then the first), which it
/// dereferences to for the bucket's figures ([`remaining`](super::Allowed::remaining),
/// [`delay`](super::Allowed::delay), …), and what the set adds: which quota that is
/// ([`by`](Self::by)) and what a dry-run policy would have done ([`dry_run`](Self::dry_run)).
///
/// When no enforcing policy applied to the request, [`by`](Self::by) is `None` and the gauge
/// is [`Gauge::UNLIMITED`]. A shaping quota's delay (the longest of them) is the admission's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allowed {
    pub(crate) bucket: super::Allowed,
    pub(crate) by: Option<&'static PolicyQuota>,
    pub(crate) dry_run: Option<DryRun>,
}

impl Allowed {
    /// The admission `bucket` of the quota `by` (`None`: no enforcing policy applied), and the
    /// first dry-run policy that would have refused: what a
    /// [`Backend`](crate::backend::Backend) answers.
    #[inline(always)]
    pub fn new(
        bucket: super::Allowed,
        by: Option<&'static PolicyQuota>,
        dry_run: Option<DryRun>,
    ) -> Self {
        Self {
            bucket,
            by,
            dry_run,
        }
    }

    /// The tightest enforcing quota, which the admission's gauge describes (`None` if no
    /// enforcing policy applied).
    pub fn by(&self) -> Option<&'static PolicyQuota> {
        self.by
    }

    /// The first dry-run policy that would have refused this request.
    pub fn dry_run(&self) -> Option<DryRun> {
        self.dry_run
    }
}

impl core::ops::Deref for Allowed {
    type Target = super::Allowed;

    /// The admission of the quota [`by`](Self::by) names: the bucket's figures.
    fn deref(&self) -> &super::Allowed {
        &self.bucket
    }
}

/// A policy set's refusal: the refusal of the quota that conforms last among those that would
/// refuse, which it dereferences to for the bucket's figures
/// ([`conforms_after`](super::Refused::conforms_after), [`cause`](super::Refused::cause), …),
/// and what the set adds: which quota refused ([`by`](Self::by)), the jitter its policy adds
/// to the wait ([`retry_after`](Self::retry_after) includes it), and what a dry-run policy
/// would have done. (But see the [`policy` module docs](crate::policy) on a rare undo that
/// must give way.)
///
/// [`by`](Self::by) names the quota whenever one refused. It is `None` when none was asked (a
/// backend that did not answer: [`Cause::Unavailable`](super::Cause::Unavailable)), for a
/// wait's refusal of a booking past its bound (the booking's delay is the longest of its
/// quotas'), and from a limiter without policies that answers in these types (flowgate-redis's
/// sliding log).
#[must_use = "a refused request must not go ahead"]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    pub(crate) bucket: super::Refused,
    pub(crate) by: Option<&'static PolicyQuota>,
    pub(crate) dry_run: Option<DryRun>,
    pub(crate) jitter: u64,
    pub(crate) rejection: Option<&'static Rejection>,
}

impl Refused {
    /// The refusal `bucket` by the quota `by` (`None`: see [`Refused`]), with the first dry-run policy that would also have refused and the jitter, in ns, the
    /// refusing policy adds to the wait: what a [`Backend`](crate::backend::Backend) answers.
    #[inline(always)]
    pub fn new(
        bucket: super::Refused,
        by: Option<&'static PolicyQuota>,
        dry_run: Option<DryRun>,
        jitter: u64,
    ) -> Self {
        Self {
            bucket,
            by,
            dry_run,
            jitter,
            rejection: None,
        }
    }

    /// The refusal of a request whose key extractor in the policy `by` names (its first
    /// quota) rejected it with `rejection`
    /// ([`Cause::Rejected`](super::Cause::Rejected): it never conforms), after the first
    /// dry-run policy that would have refused: what a [`Backend`](crate::backend::Backend)
    /// answers for it.
    pub fn rejected(
        rejection: &'static Rejection,
        by: Option<&'static PolicyQuota>,
        dry_run: Option<DryRun>,
    ) -> Self {
        // No bucket: nothing of nothing left.
        let bucket = super::Refused::new(Gauge::new(0, 1, 0, 0), u64::MAX);
        Self {
            rejection: Some(rejection),
            ..Self::new(bucket.because(super::Cause::Rejected), by, dry_run, 0)
        }
    }

    /// Why the policy's key extractor rejected the request, for a refusal whose cause is
    /// [`Cause::Rejected`](super::Cause::Rejected).
    pub fn rejection(&self) -> Option<&'static Rejection> {
        self.rejection
    }

    /// When to retry: [`conforms_after`](super::Refused::conforms_after) plus the refusing
    /// policy's [`jitter`](Self::jitter). Saturates at `u64::MAX` ns.
    pub fn retry_after(&self) -> Duration {
        Duration::from_nanos(self.retry_after_nanos())
    }

    /// [`retry_after`](Self::retry_after) in nanoseconds.
    pub(crate) fn retry_after_nanos(&self) -> u64 {
        self.bucket.wait.saturating_add(self.jitter)
    }

    /// The random jitter the refusing policy added to [`retry_after`](Self::retry_after) (see
    /// [`Policy::jitter`](crate::Policy::jitter)).
    pub fn jitter(&self) -> Duration {
        Duration::from_nanos(self.jitter)
    }

    /// The refusing quota, which the refusal's gauge describes (`None` when no quota refused:
    /// see [`Refused`]).
    pub fn by(&self) -> Option<&'static PolicyQuota> {
        self.by
    }

    /// The first dry-run policy that would also have refused (evaluated before the refusal).
    pub fn dry_run(&self) -> Option<DryRun> {
        self.dry_run
    }
}

impl core::ops::Deref for Refused {
    type Target = super::Refused;

    /// The refusal of the quota [`by`](Self::by) names: the bucket's figures (its
    /// [`retry_after`](super::Refused::retry_after) leaves out the policy's jitter).
    fn deref(&self) -> &super::Refused {
        &self.bucket
    }
}

impl core::error::Error for Refused {}

/// Why a policy set's request got no cells, as one owned error: refused for now (naming the
/// quota), or never possible. What the waits of a [`Policies`](crate::Policies) set return.
#[must_use = "a request that got no cells must not go ahead"]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// Refused for now: the refusal says when to retry. From a wait: the wait would be longer
    /// than allowed, and nothing was taken.
    Refused(Refused),
    /// More cells than a quota holds: the request can never succeed.
    Capacity(InsufficientCapacity),
}

/// Why a key extractor rejected a request ([`Key::reject`](crate::policy::Key::reject)): a
/// status (the HTTP middleware answers with it: `401`, `400`, …) and a message (the answer's
/// detail). A `static` or a `const`, so that a refusal carries it as one pointer.
///
/// ```
/// use flowgate::outcome::Rejection;
///
/// static NO_API_KEY: Rejection = Rejection::new(401, "the request carries no API key");
/// assert_eq!((NO_API_KEY.status(), NO_API_KEY.message()), (401, "the request carries no API key"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rejection {
    status: u16,
    message: &'static str,
}

impl Rejection {
    /// A rejection with `status`, a client or server error (400 to 599: any other is taken as
    /// `400 Bad Request`), and `message`.
    pub const fn new(status: u16, message: &'static str) -> Self {
        let status = if 400 <= status && status <= 599 {
            status
        } else {
            400
        };
        Self { status, message }
    }

    /// The mark of a key its extractor skipped: a status no rejection has.
    pub(crate) const SKIP: Rejection = Rejection {
        status: 0,
        message: "",
    };

    /// Whether this is [`SKIP`](Self::SKIP).
    pub(crate) const fn is_skip(&self) -> bool {
        self.status == 0
    }

    /// The status the HTTP middleware answers with.
    pub const fn status(&self) -> u16 {
        self.status
    }

    /// Why the request was rejected.
    pub const fn message(&self) -> &'static str {
        self.message
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
