//! What one decision of a [`RedisLimiter`](crate::RedisLimiter) answers: how a script's reply
//! or a lease's spend becomes a [`Verdict`], with the same outcomes, naming the same quotas, as
//! a policy set decided in process; pure functions of the policies, the plan and the reply.

use smallvec::SmallVec;

use crate::nanos;
use crate::script::{Dry, Plan, Prepared, Reply};
use crate::stats::Counters;
use flowgate::algorithm::Algorithm;
use flowgate::backend::{Source, Verdict};
use flowgate::outcome::{Cause, DryRun, Gauge, PolicyQuota, QuotaState};
use flowgate::policy::{Allowed, Refused};

/// A decision Redis (or a lease) made, and the script's replies behind it, in the plan's
/// order, each with the plan's bucket its first state stands for: one for the whole plan on
/// one server or in one slot, one per slot across slots (none for a lease's decision, or when
/// no policy applied).
pub(crate) struct Decided {
    pub(crate) verdict: Verdict,
    pub(crate) replies: SmallVec<[(usize, Reply); 1]>,
}

impl Decided {
    /// A decision made without a call (from a lease, or with no policy applying).
    pub(crate) fn without_call(verdict: Verdict) -> Self {
        Self {
            verdict,
            replies: SmallVec::new(),
        }
    }

    /// A decision made by one call, whose `reply` holds every bucket of the plan.
    pub(crate) fn called(verdict: Verdict, reply: Reply) -> Self {
        Self {
            verdict,
            replies: [(0, reply)].into(),
        }
    }
}

/// The decision of the script's `reply` to `n` cells, counted as one Redis answered.
pub(crate) fn decided<R: ?Sized>(
    policies: &[Prepared<R>],
    plan: &Plan,
    n: u32,
    reply: Reply,
    counters: &Counters,
) -> Decided {
    counters.answered.add(1);
    Decided::called(verdict(policies, plan, n, &reply), reply)
}

/// Calls `visit` with the state of every enforcing quota of `plan` as `decided` left it,
/// in evaluation order (for headers that list them): every one the script's replies hold,
/// the one a lease describes otherwise.
pub(crate) fn states<R: ?Sized>(
    policies: &[Prepared<R>],
    plan: &Plan,
    decided: &Decided,
    mut visit: impl FnMut(QuotaState),
) {
    if decided.replies.is_empty() {
        match decided.verdict.outcome() {
            Ok(allowed) => {
                if let Some(by) = allowed.by() {
                    let micros = &policies[by.policy_index()].quotas[by.quota_index()];
                    // A lease's bucket is a schedule, whose reset is its debt, in ns.
                    let debt = nanos(allowed.reset_after()) / 1_000;
                    let next = micros.next_cell(debt, None);
                    visit(QuotaState::new(by, micros.quota, allowed.gauge()).next_after(next));
                }
            }
            // A rejection describes no bucket.
            Err(refused) if refused.cause() == Cause::Rejected => {}
            // The shield's: the refusing quota, as Redis last reported it.
            Err(refused) => {
                if let Some(by) = refused.by() {
                    let micros = &policies[by.policy_index()].quotas[by.quota_index()];
                    visit(QuotaState::new(by, micros.quota, refused.gauge()));
                }
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
#[inline(always)]
pub(crate) fn verdict<R: ?Sized>(
    policies: &[Prepared<R>],
    plan: &Plan,
    n: u32,
    reply: &Reply,
) -> Verdict {
    let (dry, states, now) = reply.parts();
    let outcome = match reply {
        Reply::Admitted { granted, .. } => {
            Ok(admitted(policies, plan, (n, *granted), (states, now), dry))
        }
        Reply::Refused { index, .. } => Err(refused(policies, plan, n, (states, now), *index)),
    };
    let dry_run = dry_of(policies, plan, n, reply);
    let outcome = match outcome {
        Ok(allowed) => Ok(Allowed::new(*allowed, allowed.by(), dry_run)),
        Err(refused) => Err(with_dry_run(refused, dry_run)),
    };
    Verdict::new(outcome, Source::Buckets)
}

/// `allowed`, going ahead after `delay` ns, with `dry_run` the first dry-run policy that would
/// have refused.
pub(crate) fn with_delay(allowed: Allowed, delay: u64, dry_run: Option<DryRun>) -> Allowed {
    let bucket = flowgate::Allowed::delayed(allowed.gauge(), delay);
    Allowed::new(bucket, allowed.by(), dry_run)
}

/// `refused`, with `dry_run` the first dry-run policy that would also have refused.
pub(crate) fn with_dry_run(refused: Refused, dry_run: Option<DryRun>) -> Refused {
    let jitter = nanos(refused.jitter());
    Refused::new(*refused, refused.by(), dry_run, jitter)
}

/// The refusal the script's reply reports: of every enforcing quota that refuses on the
/// states the script left, the first, or a later one that conforms later (as in process),
/// with its policy's jitter, counted. `index` is the script's own pick, which stands in if
/// no quota refuses on the states (a reply the script never sends). Out of line: the
/// admitting path's code stays compact.
#[inline(never)]
fn refused<R: ?Sized>(
    policies: &[Prepared<R>],
    plan: &Plan,
    n: u32,
    (states, now): (&[u64], Option<u64>),
    index: usize,
) -> Refused {
    let mut worst: Option<(usize, flowgate::Refused)> = None;
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
            .is_none_or(|(_, w)| refused.conforms_after() > w.conforms_after());
        if later {
            worst = Some((bucket, refused));
        }
    }
    let (bucket, refused) = worst.unwrap_or_else(|| {
        let (p, q) = plan.refs[index];
        let gauge = policies[p].quotas[q].gauge(states[index], now);
        (index, flowgate::Refused::new(gauge, u64::MAX))
    });
    let (p, q) = plan.refs[bucket];
    policies[p].metrics[q].refused(u64::from(n));
    let wait = nanos(refused.conforms_after());
    let jitter = flowgate::policy::refusal_jitter(policies[p].jitter, wait);
    Refused::new(refused, Some(by(policies, plan, bucket)), None, jitter)
}

/// The admission the script's reply reports: every quota that took its cells, counted,
/// with the in-process algorithm's own admission on the script's numbers; the tightest
/// enforcing one described, the longest delay carried.
fn admitted<R: ?Sized>(
    policies: &[Prepared<R>],
    plan: &Plan,
    (n, granted): (u32, u32),
    (states, now): (&[u64], Option<u64>),
    dry: &Dry,
) -> Allowed {
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
            flowgate::Allowed::new(micros.gauge(state, now))
        };
        // The longest delay any quota asked for (a shaping one), as in process.
        delay = delay.max(nanos(taken.delay()));
        let g = taken.gauge();
        let metrics = &policies[p].metrics[q];
        metrics.admitted(cells);
        if flowgate::policy::QuotaMetrics::ENABLED && g.near_limit() {
            metrics.near_limit();
        }
        if policies[p].dry_run {
            continue;
        }
        let tighter = best.is_none_or(|(_, b)| g.is_tighter_than(&b));
        if tighter {
            best = Some((bucket, g));
        }
    }
    let allowed = flowgate::Allowed::delayed(best.map_or(Gauge::UNLIMITED, |(_, g)| g), delay);
    Allowed::new(
        allowed,
        best.map(|(bucket, _)| by(policies, plan, bucket)),
        None,
    )
}

/// The quota of the plan's bucket `bucket`, as outcomes name it.
pub(crate) fn by<R: ?Sized>(
    policies: &[Prepared<R>],
    plan: &Plan,
    bucket: usize,
) -> &'static PolicyQuota {
    let (p, q) = plan.refs[bucket];
    policies[p].by[q]
}

/// The first dry-run policy that would have refused in `reply`, if any, with every
/// would-be refusal counted.
#[inline(always)]
pub(crate) fn dry_of<R: ?Sized>(
    policies: &[Prepared<R>],
    plan: &Plan,
    n: u32,
    reply: &Reply,
) -> Option<DryRun> {
    let (dry, states, now) = reply.parts();
    if dry.all.is_empty() {
        return None;
    }
    for &bucket in &dry.all {
        let (p, q) = plan.refs[bucket];
        policies[p].metrics[q].dry_run_refused(u64::from(n));
    }
    dry_run(policies, plan, n, (states, now), dry)
}

/// The first dry-run policy that would have refused, as the script reported it: its first
/// refusing quota and when the request would conform to it (never for a request over its
/// capacity), worked out by the in-process algorithm on the state the script left.
#[inline(never)]
fn dry_run<R: ?Sized>(
    policies: &[Prepared<R>],
    plan: &Plan,
    n: u32,
    (states, now): (&[u64], Option<u64>),
    dry: &Dry,
) -> Option<DryRun> {
    let bucket = *dry.all.first()?;
    let (p, q) = plan.refs[bucket];
    let policy = &policies[p];
    if !policy.dry_run {
        return None;
    }
    let micros = &policy.quotas[q];
    let wait = match micros.refused(states[bucket], n, now) {
        Some(refused) if n <= micros.algorithm.capacity() => nanos(refused.conforms_after()),
        _ => u64::MAX,
    };
    Some(DryRun::new(policy.by[q], wait))
}

/// The admission of `n` cells a lease `spent` (the debt and bucket the grant recorded), if it
/// held them: by every quota of the plan (a lease covers them all; no dry runs), described by
/// the tightest as the grant left it.
pub(crate) fn spent<R: ?Sized>(
    policies: &[Prepared<R>],
    plan: &Plan,
    spent: Option<(u64, usize, u32)>,
    n: u32,
    counters: &Counters,
) -> Option<Verdict> {
    let (debt, bucket, _) = spent?;
    counters.lease_admitted.add(1);
    for &(p, q) in &plan.refs {
        policies[p].metrics[q].admitted(u64::from(n));
    }
    // The bucket index was recorded from this plan's buckets, which are the same for every
    // decision on this lease; the first one stands in if it ever were not, so that cells once
    // spent are always reported as admitted.
    let bucket = if bucket < plan.refs.len() { bucket } else { 0 };
    let &(p, q) = plan.refs.get(bucket)?;
    // A leased bucket is a schedule: its state is its debt.
    let gauge = policies[p].quotas[q].gauge(debt, None);
    let by = by(policies, plan, bucket);
    let allowed = Allowed::new(flowgate::Allowed::new(gauge), Some(by), None);
    Some(Verdict::new(Ok(allowed), Source::Lease))
}
