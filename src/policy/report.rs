//! What an admission of a policy set reports, chosen by its caller: [`Tightest`] (the
//! [`Allowed`] that [`Policies::check`](super::Policies::check) returns), [`Silent`] (a
//! yes and nothing more), or [`Visit`] (every enforcing quota's state, for headers that list
//! them all).
//! A decision tells its report of each enforcing quota as the quota admits the request, so that
//! no report keeps more than it needs.

use arrayvec::ArrayVec;

use super::layer::Place;
use super::Allowed;
use super::MAX_QUOTAS;
use crate::backend::States;
use crate::keyed::Tag;
use crate::outcome::{DryRun, Gauge, PolicyQuota, QuotaState};
use crate::quota::Quota;

/// One write to undo if a later quota refuses (or a wait gives its reservation back).
#[derive(Clone, Copy)]
pub(crate) struct Undo<'p> {
    /// The quota (which knows its policy and place).
    pub(crate) place: &'p Place,
    pub(crate) tag: Tag,
    pub(crate) before: u64,
    pub(crate) after: u64,
}

/// The undo log of a decision: one entry per quota that admitted it.
pub(crate) type UndoLog<'p> = ArrayVec<Undo<'p>, MAX_QUOTAS>;

/// What an admission of a policy set reports.
pub(crate) trait Report<'p> {
    /// The report of an admission.
    type Output;

    /// The enforcing quota `place` admitted the request; `state` gives its bucket's gauge after
    /// it and the quota in force, `next` the time until the bucket holds one more cell (each
    /// worked out only if the report uses it).
    fn taken(
        &mut self,
        place: &'p Place,
        state: impl Fn() -> (Gauge, Quota),
        next: impl Fn() -> u64,
    );

    /// The admission, once every quota has taken its cells.
    fn finish(self, summary: Summary<'_, 'p>) -> Self::Output;
}

/// What a whole admission adds to the quotas' reports.
pub(crate) struct Summary<'a, 'p> {
    /// The longest delay any quota asked for (a shaping one).
    pub(crate) delay: u64,
    /// The first dry-run policy that would have refused.
    pub(crate) dry_run: Option<DryRun>,
    /// The writes the admission made, for a wait that may have to give them back.
    pub(crate) undo: &'a [Undo<'p>],
}

/// The tightest enforcing quota (fewest cells left, then the longest reset, then the first):
/// an [`Allowed`] that describes it. Kept without a branch, even on "none yet" (it starts as
/// the loosest possible), so that a caller who ignores the report leaves only dead arithmetic:
/// a choice that skips work behind a branch (the kept quota's cells worked out only once a
/// second quota comes, the others compared with them by a multiplication) stays alive in every
/// `is_ok()`, as measured (`scripts/instructions.sh 100000 flowgate_policy_three_quotas`).
pub(crate) struct Tightest {
    by: Option<&'static PolicyQuota>,
    gauge: Gauge,
    /// The kept quota's [`Gauge::tightness`] (`u128::MAX` before any).
    key: u128,
}

impl Default for Tightest {
    fn default() -> Self {
        Self {
            by: None,
            gauge: Gauge::UNLIMITED,
            key: u128::MAX,
        }
    }
}

impl Tightest {
    /// The quota `by`, left as `gauge`: kept if it is the tightest so far.
    #[inline(always)]
    pub(crate) fn offer(&mut self, by: &'static PolicyQuota, gauge: Gauge) {
        let key = gauge.tightness();
        if key < self.key {
            *self = Self {
                by: Some(by),
                gauge,
                key,
            };
        }
    }

    /// The admission describing the tightest quota offered (none: nothing applied), to go
    /// ahead after `delay`, with the first dry-run policy that would have refused.
    #[inline(always)]
    pub(crate) fn allowed(self, delay: u64, dry_run: Option<DryRun>) -> Allowed {
        Allowed::new(crate::Allowed::delayed(self.gauge, delay), self.by, dry_run)
    }
}

impl<'p> Report<'p> for Tightest {
    type Output = Allowed;

    #[inline(always)]
    fn taken(&mut self, place: &'p Place, state: impl Fn() -> (Gauge, Quota), _: impl Fn() -> u64) {
        self.offer(place.by, state().0);
    }

    #[inline(always)]
    fn finish(self, summary: Summary<'_, 'p>) -> Allowed {
        self.allowed(summary.delay, summary.dry_run)
    }
}

/// A yes and nothing more (the HTTP middleware without quota headers).
pub(crate) struct Silent;

impl<'p> Report<'p> for Silent {
    type Output = ();

    #[inline(always)]
    fn taken(&mut self, _: &'p Place, _: impl Fn() -> (Gauge, Quota), _: impl Fn() -> u64) {}

    #[inline(always)]
    fn finish(self, _: Summary<'_, 'p>) {}
}

/// Every enforcing quota's state, in evaluation order, and the first dry-run policy that would
/// have refused, to a [`States`] sink (headers that list them, a handler's view of the
/// decision). A refused decision has visited the quotas before the refusing one: the caller
/// discards them.
pub(crate) struct Visit<'s, S>(pub(crate) &'s mut S);

impl<'p, S: States> Report<'p> for Visit<'_, S> {
    type Output = ();

    #[inline]
    fn taken(
        &mut self,
        place: &'p Place,
        state: impl Fn() -> (Gauge, Quota),
        next: impl Fn() -> u64,
    ) {
        let (gauge, quota) = state();
        self.0
            .push(QuotaState::new(place.by, quota, gauge).next_after(next()));
    }

    #[inline(always)]
    fn finish(self, summary: Summary<'_, 'p>) {
        if let Some(dry_run) = summary.dry_run {
            self.0.dry_run(dry_run);
        }
    }
}
