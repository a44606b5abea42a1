//! [`Verdict`]: what one decision of a [`RedisLimiter`] answers, and how a script's reply or a
//! failure policy becomes one: the same outcomes, naming the same quotas, as a policy set
//! decided in process.

use smallvec::SmallVec;

use super::failure::{Failure, OnFailure, Source};
use super::plan::Plan;
use super::script::{Dry, Reply};
use super::stats::add;
use super::RedisLimiter;
use flowgate::algorithm::Algorithm;
use flowgate::backend::Verdict;
use flowgate::clock::Clock;

use flowgate::outcome::{tightness, Allowed, Cause, Cited, DryRun, Gauge, QuotaState, Refused};
use flowgate::policy::Policies;

/// A decision Redis (or a lease) made, and the script's replies behind it, in the plan's
/// order, each with the plan's bucket its first state stands for: one for the whole plan on
/// one server or in one slot, one per slot across slots (none for a lease's decision, or when
/// no policy applied).
pub(crate) struct Decided {
    pub(crate) verdict: Verdict,
    pub(super) replies: SmallVec<[(usize, Reply); 1]>,
}

impl Decided {
    /// A decision made without a call (from a lease, or with no policy applying).
    pub(super) fn without_call(verdict: Verdict) -> Self {
        Self {
            verdict,
            replies: SmallVec::new(),
        }
    }

    /// A decision made by one call, whose `reply` holds every bucket of the plan.
    pub(super) fn called(verdict: Verdict, reply: Reply) -> Self {
        Self {
            verdict,
            replies: [(0, reply)].into(),
        }
    }
}

/// The decision of a failure policy that does not decide locally: refused for the configured
/// retry-after (closed), or admitted (open; and `Local` without its local set), counted.
pub(super) fn open_or_closed(
    on_failure: OnFailure,
    failure: Failure,
    counters: &super::stats::Counters,
    metrics: &crate::metrics::RedisMetrics,
) -> Verdict {
    if let OnFailure::Closed { retry_after } = on_failure {
        add(&counters.failed_closed, 1);
        metrics.failed_closed.increment(1);
        let wait = u64::try_from(retry_after.as_nanos())
            .unwrap_or(u64::MAX)
            .max(1);
        return Verdict::new(
            Err(Refused::new(Gauge::new(1, 1, 1, 0), wait)
                .cite(Cited::default())
                .because(Cause::Unavailable)),
            Source::FailedClosed(failure),
        );
    }
    add(&counters.failed_open, 1);
    metrics.failed_open.increment(1);
    Verdict::new(
        Ok(Allowed::new(Gauge::UNLIMITED).cite(Cited::default())),
        Source::FailedOpen(failure),
    )
}

impl<R: ?Sized, C: Clock> RedisLimiter<R, C> {
    /// Calls `visit` with the state of every enforcing quota of `plan` as `decided` left it,
    /// in evaluation order (for headers that list them): every one the script's replies hold,
    /// the one a lease describes otherwise.
    pub(crate) fn states(&self, plan: &Plan, decided: &Decided, mut visit: impl FnMut(QuotaState)) {
        let policies = &self.shared.policies;
        if decided.replies.is_empty() {
            if let Ok(allowed) = decided.verdict.outcome() {
                if let Some(by) = allowed.by() {
                    let micros = &policies[by.policy_index()].quotas[by.quota_index()];
                    // A lease's bucket is a schedule, whose reset is its debt, in ns.
                    let debt = allowed.reset_after_nanos() / 1_000;
                    let next = micros.next_cell(debt, None);
                    visit(QuotaState::new(by, micros.quota, allowed.gauge()).next_after(next));
                }
            }
            return;
        }
        for (first, reply) in &decided.replies {
            let (_, states, now) = reply.parts();
            let refs = plan.refs.get(*first..).unwrap_or_default();
            for (&(p, q), &state) in refs.iter().zip(states.iter()) {
                let policy = &policies[p];
                if policy.dry_run {
                    continue;
                }
                let micros = &policy.quotas[q];
                let gauge = micros.gauge(state, now);
                let next = micros.next_cell(state, now);
                visit(QuotaState::new(policy.by[q], micros.quota, gauge).next_after(next));
            }
        }
    }

    /// The verdict of the script's reply to a decision of `n` cells, counted in the metrics
    /// as in process: cells admitted (and near-limit admissions) by every quota that took
    /// them, refused by the quota that refused, and would-be refusals of dry-run policies.
    /// Every number reported is the in-process algorithm's own, on the states the script
    /// left.
    pub(super) fn verdict(&self, plan: &Plan, n: u32, reply: &Reply) -> Verdict {
        self.shared.metrics.from_redis.increment(1);
        self.verdict_of(plan, n, reply)
    }

    /// [`verdict`](Self::verdict) without counting a decision from Redis (one of several
    /// replies to one decision across slots).
    #[inline(always)]
    pub(super) fn verdict_of(&self, plan: &Plan, n: u32, reply: &Reply) -> Verdict {
        let (dry, states, now) = reply.parts();
        let outcome = match reply {
            Reply::Admitted { granted, .. } => {
                Ok(self.admitted(plan, (n, *granted), (states, now), dry))
            }
            Reply::Refused { index, .. } => Err(self.refused(plan, n, (states, now), *index)),
        };
        let dry_run = self.dry_of(plan, n, reply);
        let outcome = match outcome {
            Ok(allowed) => Ok(allowed.with(allowed.delay_nanos(), dry_run)),
            Err(refused) => Err(refused.with_dry_run(dry_run)),
        };
        Verdict::new(outcome, Source::Buckets)
    }

    /// The refusal the script's reply reports: of every enforcing quota that refuses on the
    /// states the script left, the first, or a later one that conforms later (as in process),
    /// with its policy's jitter, counted. `index` is the script's own pick, which stands in if
    /// no quota refuses on the states (a reply the script never sends). Out of line: the
    /// admitting path's code stays compact.
    #[inline(never)]
    fn refused(
        &self,
        plan: &Plan,
        n: u32,
        (states, now): (&[u64], Option<u64>),
        index: usize,
    ) -> Refused<Cited> {
        let policies = &self.shared.policies;
        let mut worst: Option<(usize, Refused)> = None;
        for (bucket, &state) in states.iter().enumerate() {
            let (p, q) = plan.refs[bucket];
            if policies[p].dry_run {
                continue;
            }
            let Some(refused) = policies[p].quotas[q].refused(state, n, now) else {
                continue;
            };
            let later = worst
                .as_ref()
                .is_none_or(|(_, w)| refused.conforms_after_nanos() > w.conforms_after_nanos());
            if later {
                worst = Some((bucket, refused));
            }
        }
        let (bucket, refused) = worst.unwrap_or_else(|| {
            let (p, q) = plan.refs[index];
            let gauge = policies[p].quotas[q].gauge(states[index], now);
            (index, Refused::new(gauge, u64::MAX))
        });
        let (p, q) = plan.refs[bucket];
        policies[p].metrics[q].refused(u64::from(n));
        let wait = refused.conforms_after_nanos();
        let jitter = flowgate::policy::refusal_jitter(policies[p].jitter, wait);
        refused.cite(Cited::new(Some(self.by(plan, bucket)), None, jitter))
    }

    /// The admission the script's reply reports: every quota that took its cells, counted,
    /// with the in-process algorithm's own admission on the script's numbers; the tightest
    /// enforcing one described, the longest delay carried.
    fn admitted(
        &self,
        plan: &Plan,
        (n, granted): (u32, u32),
        (states, now): (&[u64], Option<u64>),
        dry: &Dry,
    ) -> Allowed<Cited> {
        let policies = &self.shared.policies;
        let cells = u64::from(n);
        let mut best: Option<(usize, Gauge)> = None;
        let mut delay = 0;
        for (bucket, &state) in states.iter().enumerate() {
            let (p, q) = plan.refs[bucket];
            let skipped = dry.all.iter().any(|&d| plan.refs[d].0 == p);
            if skipped {
                continue;
            }
            // The in-process algorithm's own admission on the script's numbers (a lease's
            // cells beyond n: the bucket as it now stands, no delay).
            let micros = &policies[p].quotas[q];
            let taken = if granted == n {
                micros.admitted(state, n, now)
            } else {
                Allowed::new(micros.gauge(state, now))
            };
            // The longest delay any quota asked for (a shaping one), as in process.
            delay = delay.max(taken.delay_nanos());
            let g = taken.gauge();
            let metrics = &policies[p].metrics[q];
            metrics.admitted(cells);
            if flowgate::policy::QuotaMetrics::ENABLED && g.near_limit() {
                metrics.near_limit();
            }
            if policies[p].dry_run {
                continue;
            }
            let tighter = best.is_none_or(|(_, b)| {
                tightness(g.remaining(), g.reset_after_nanos())
                    < tightness(b.remaining(), b.reset_after_nanos())
            });
            if tighter {
                best = Some((bucket, g));
            }
        }
        let allowed = Allowed::delayed(best.map_or(Gauge::UNLIMITED, |(_, g)| g), delay);
        allowed.cite(Cited::new(
            best.map(|(bucket, _)| self.by(plan, bucket)),
            None,
            0,
        ))
    }

    /// The quota of the plan's bucket `bucket`, as outcomes name it.
    pub(super) fn by(&self, plan: &Plan, bucket: usize) -> &'static flowgate::outcome::PolicyQuota {
        let (p, q) = plan.refs[bucket];
        self.shared.policies[p].by[q]
    }

    /// The first dry-run policy that would have refused in `reply`, if any, with every
    /// would-be refusal counted.
    #[inline(always)]
    pub(super) fn dry_of(&self, plan: &Plan, n: u32, reply: &Reply) -> Option<DryRun> {
        let (dry, states, now) = reply.parts();
        if dry.all.is_empty() {
            return None;
        }
        let policies = &self.shared.policies;
        for &bucket in &dry.all {
            let (p, q) = plan.refs[bucket];
            policies[p].metrics[q].dry_run_refused(u64::from(n));
        }
        self.dry_run(plan, n, (states, now), dry)
    }

    /// The first dry-run policy that would have refused, as the script reported it: its first
    /// refusing quota and when the request would conform to it (never for a request over its
    /// capacity), worked out by the in-process algorithm on the state the script left.
    #[inline(never)]
    fn dry_run(
        &self,
        plan: &Plan,
        n: u32,
        (states, now): (&[u64], Option<u64>),
        dry: &Dry,
    ) -> Option<DryRun> {
        let bucket = *dry.all.first()?;
        let (p, q) = plan.refs[bucket];
        let policy = &self.shared.policies[p];
        if !policy.dry_run {
            return None;
        }
        let micros = &policy.quotas[q];
        let wait = match micros.refused(states[bucket], n, now) {
            Some(refused) if n <= micros.algorithm.capacity() => refused.conforms_after_nanos(),
            _ => u64::MAX,
        };
        Some(DryRun::new(policy.by[q], wait))
    }

    /// The decision of the failure policy.
    pub(crate) fn fail(&self, plan: &Plan, n: u32, failure: Failure) -> Verdict {
        let shared = &*self.shared;
        match self.local_share() {
            // The local policies name themselves `redis:{prefix}:{policy}`.
            Some(local) => Verdict::new(
                match local.check_n(plan, n) {
                    Ok(answer) => answer,
                    // n fits every quota in Redis but not this process's share of one: never,
                    // locally.
                    Err(capacity) => Err(capacity.never()),
                },
                Source::Local(failure),
            ),
            None => open_or_closed(
                shared.on_failure,
                failure,
                &shared.counters,
                &shared.metrics,
            ),
        }
    }

    /// The set's local share when its failure policy decides there (counted as such a
    /// decision); `None` when the policy is open or closed.
    pub(super) fn local_share(&self) -> Option<&Policies<Plan, C>> {
        let shared = &*self.shared;
        match (shared.on_failure, &shared.fallback) {
            (OnFailure::Local { .. }, Some(local)) => {
                add(&shared.counters.local, 1);
                shared.metrics.local.increment(1);
                Some(local)
            }
            _ => None,
        }
    }
}
