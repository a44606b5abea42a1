//! A [`RedisLimiter`] as a [`Backend`]: the middleware's decision planned at once (the
//! request's keys recorded, its cost checked) and settled in Redis by an owned future; the
//! reads and resets the seam asks for; and waits that retry (no decision in Redis books
//! ahead, so a dropped wait has nothing to give back).

use core::future::Future;

use super::lease::Entry;
use super::{verdict, RedisLimiter};
use crate::script::{self, Plan, Prepared};
use flowgate::backend::{
    Backend, Decision, Failure, PolicyInfo, Remote, Settled, States, Unbooked, Verdict,
};
use flowgate::clock::Clock;
use flowgate::outcome::{InsufficientCapacity, QuotaState};

impl<R, C> Backend<R> for RedisLimiter<R, C>
where
    R: ?Sized + 'static,
    C: Clock + Send + Sync + 'static,
{
    type Pending = Remote;
    type Booking<'a> = Unbooked;

    fn decide<S: States>(&self, request: &R, n: u32, states: Option<&mut S>) -> Decision<Remote> {
        let want = states.is_some();
        // A request above a burst is refused whatever the buckets hold; for its states, the
        // call only looks (n = 0).
        let (plan, n, oversized) = match self.plan(request, n) {
            Ok(plan) => (plan, n, None),
            // A later policy's rejection is not the answer: the request is too large first.
            Err(capacity) if want => match self.plan(request, 0) {
                Ok(plan) => (plan.unrejected(), 0, Some(capacity)),
                Err(capacity) => return Decision::Now(Err(capacity)),
            },
            Err(capacity) => return Decision::Now(Err(capacity)),
        };
        let limiter = self.clone();
        Decision::Pending(Remote::new(async move {
            settle(&limiter, &plan, n, oversized, want).await
        }))
    }

    // Each future holds the request's plan, never the request: the request need not be `Sync`.

    fn check_n(
        &self,
        request: &R,
        n: u32,
    ) -> impl Future<Output = Result<Verdict, InsufficientCapacity>> + Send {
        self.checked(self.plan(request, n), n)
    }

    fn check_up_to(&self, request: &R, n: u32) -> impl Future<Output = (u32, Verdict)> + Send {
        self.up_to_of(self.plan(request, n.min(1)), n)
    }

    fn look(&self, request: &R) -> impl Future<Output = Result<Vec<QuotaState>, Failure>> + Send {
        look(self, self.plan(request, 0))
    }

    fn reset(&self, request: &R) -> impl Future<Output = Result<(), Failure>> + Send {
        reset(self, self.plan(request, 0))
    }

    fn policies(&self) -> Vec<PolicyInfo> {
        let quotas = |p: &Prepared<R>| p.quotas.iter().map(|m| m.quota).collect();
        (self.shared.policies.iter())
            .map(|p| PolicyInfo::new(p.name.clone(), p.dry_run, quotas(p)))
            .collect()
    }

    fn now(&self) -> u64 {
        self.shared.clock.now()
    }
}

/// [`Backend::look`] once the request is planned (for 0 cells, which exceed no burst).
pub(crate) async fn look<R: ?Sized, C: Clock>(
    limiter: &RedisLimiter<R, C>,
    plan: Result<Plan, InsufficientCapacity>,
) -> Result<Vec<QuotaState>, Failure> {
    // A look passes a rejecting policy by, as in process: the others' buckets are asked.
    let plan = plan.map_err(|_| Failure::Reply)?.unrejected();
    let decided = limiter.decide(&plan, 0).await?;
    let mut states = Vec::new();
    let policies = &limiter.shared.policies;
    verdict::states(policies, &plan, &decided, |state| states.push(state));
    Ok(states)
}

/// [`Backend::reset`] once the request is planned: the bucket of every keyed policy's quota
/// deleted (a global policy's are every client's: left alone) by one call of the reset script
/// per key, by one deadline. What this process holds of those buckets goes first, whether or not
/// Redis answers: their buckets in the local fallback, and every lease taken from them (its
/// cells were booked on buckets that start over: counted as dropped, never spent on top of a
/// full bucket).
pub(crate) async fn reset<R: ?Sized, C: Clock>(
    limiter: &RedisLimiter<R, C>,
    plan: Result<Plan, InsufficientCapacity>,
) -> Result<(), Failure> {
    let plan = plan.map_err(|_| Failure::Reply)?;
    let shared = &*limiter.shared;
    let keyed: Vec<&[u8]> = (plan.keys.iter().zip(&plan.refs))
        .filter(|(_, &(p, _))| shared.policies[p].keyed)
        .map(|(key, _)| key.as_slice())
        .collect();
    if let Some(local) = &shared.fallback {
        local.reset(&plan);
    }
    if let Some(shield) = &shared.shield {
        shield.forget(&keyed);
    }
    if let Some(leases) = &shared.leases {
        let taken = |entry: &Entry| entry.keys.iter().any(|key| keyed.contains(&key.as_slice()));
        leases.forget(taken, &shared.link.counters.dropped_cells);
    }
    let deadline = shared.link.deadline();
    for key in keyed {
        let command = |verb: &str, script: &str| {
            let mut command = ::redis::cmd(verb);
            command.arg(script).arg(1).arg(key);
            command
        };
        shared
            .link
            .eval(script::delete(), (key, command), deadline)
            .await?;
    }
    Ok(())
}

/// Settles the middleware's decision of `plan` for `n` cells (`oversized`: the request asked
/// for more than a burst, and the call only looks): the answer, where it came from, and if
/// `want`, the state of every enforcing quota it went through, the refusing one with nothing
/// left. When Redis does not answer, the failure policy decides.
async fn settle<R: ?Sized, C: Clock>(
    limiter: &RedisLimiter<R, C>,
    plan: &Plan,
    n: u32,
    oversized: Option<InsufficientCapacity>,
    want: bool,
) -> Settled {
    let shared = &*limiter.shared;
    // The decision's own deadline, which a refusal's looks across slots share (read only for
    // a decision that may look).
    #[cfg(feature = "cluster")]
    let deadline =
        (want && plan.spans_policies() && plan.rejected.is_none()).then(|| shared.link.deadline());
    let decided = limiter.decide(plan, n).await;
    #[cfg(feature = "cluster")]
    let decided = match (decided, deadline) {
        (Ok(decided), Some(deadline)) => match limiter.slots(plan) {
            Some(slots) => Ok(slots.look(plan, decided, deadline).await),
            None => Ok(decided),
        },
        (other, _) => other,
    };
    let (verdict, decided) = match decided {
        Ok(decided) => (decided.verdict, Some(decided)),
        Err(failure) => (limiter.fail(plan, n, failure), None),
    };
    let mut states = Vec::new();
    if let (true, Some(decided)) = (want, &decided) {
        verdict::states(&shared.policies, plan, decided, |state| states.push(state));
    }
    let (answer, dry_run) = match oversized {
        Some(capacity) => (Err(capacity), None),
        None => {
            shared.link.counters.decided(verdict.is_allowed());
            let outcome = verdict.outcome();
            let dry_run = outcome.as_ref().ok().and_then(|allowed| allowed.dry_run());
            (Ok(outcome.map(drop)), dry_run)
        }
    };
    let mut settled = Settled::new(answer, verdict.source(), states);
    settled.dry_run = dry_run;
    settled
}
