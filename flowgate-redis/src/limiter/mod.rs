//! [`RedisLimiter`]: a policy set decided in Redis, its decisions (one call, a lease, or slot by
//! slot across a cluster; the failure policy when Redis does not answer), and how it is built
//! ([`BuildRedis`](crate::BuildRedis)).

#[cfg(feature = "cluster")]
mod across;
mod build;
mod lease;
mod seam;
mod shield;
mod verdict;

use core::fmt;
use core::future::Future;
use std::sync::Arc;

pub(crate) use self::build::build;
use self::lease::Leases;
pub use self::lease::MAX_LEASE_CELLS;
pub(crate) use self::seam::{look, reset};
use self::shield::Shield;
use self::verdict::Decided;
use crate::error::RedisConfigError;
use crate::failure::{BreakerState, Link};
use crate::script::{self, Plan, Prepared, Reply};
use crate::settings::OnFailure;
use crate::stats::RedisStats;
use flowgate::algorithm::AnyAlgorithm;
use flowgate::backend::{Failure, Source, Verdict};
use flowgate::clock::{Clock, QuantaClock};
use flowgate::outcome::InsufficientCapacity;
use flowgate::policy::{BuildError, Policies};
use flowgate::quota::Quota;

#[cfg(doc)]
use flowgate::policy::Policy;

struct Shared<R: ?Sized, C: Clock> {
    link: Link,
    prefix: String,
    policies: Vec<Prepared<R>>,
    /// The local fallback, keyed by the buckets a decision planned.
    fallback: Option<Policies<Plan, C>>,
    leases: Option<Leases>,
    shield: Option<Shield>,
    clock: C,
}

/// A policy set whose buckets live in Redis, shared by every process that uses the same
/// prefix and policies; built by
/// [`BuildRedis::build_redis`](crate::BuildRedis::build_redis). Cheap to clone (the clones
/// share one connection and one set of counters). See the [crate docs](crate).
pub struct RedisLimiter<R: ?Sized = str, C: Clock = QuantaClock> {
    shared: Arc<Shared<R, C>>,
}

impl<R: ?Sized, C: Clock> Clone for RedisLimiter<R, C> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<R: ?Sized, C: Clock> fmt::Debug for RedisLimiter<R, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisLimiter")
            .field("prefix", &self.shared.prefix)
            .field("policies", &self.names().collect::<Vec<_>>())
            .field("on_failure", &self.shared.link.on_failure)
            .finish_non_exhaustive()
    }
}

impl<R: ?Sized, C: Clock> RedisLimiter<R, C> {
    /// Takes one cell from every quota of every policy that applies, or nothing.
    ///
    /// # Errors
    /// As [`check_n`](Self::check_n).
    pub async fn check(&self, request: &R) -> Result<Verdict, InsufficientCapacity> {
        self.check_n(request, 1).await
    }

    /// Takes `n` cells from every quota of every policy that applies, or nothing. `n = 0`
    /// takes nothing and reports the buckets as they are.
    ///
    /// # Errors
    /// [`InsufficientCapacity`] when `n` exceeds the burst of a quota of an enforcing policy
    /// that applies: the request can never succeed. Checked before any round trip.
    ///
    /// # Performance
    /// One round trip (one `EVALSHA`), or none when a lease holds the cells.
    pub async fn check_n(&self, request: &R, n: u32) -> Result<Verdict, InsufficientCapacity> {
        self.checked(self.plan(request, n), n).await
    }

    /// Takes as many cells as the **tightest** enforcing quota that applies to `request` holds
    /// now, up to `n`, from every quota of every policy that applies (all or nothing), and
    /// says how many: `(k, verdict)` with `1 ≤ k ≤ n` when admitted, `(0, verdict)` when
    /// refused or when `n = 0` (which takes nothing and reports the buckets as they are).
    ///
    /// The semantics of [`Policies::check_up_to`]: `n` may exceed every burst; dry-run
    /// policies do not limit `k`, and one that would refuse `k` cells takes nothing and is
    /// reported. On one server the count and the take are one script call (with `n = 1` and
    /// `want` the limit: the script grants the most cells every enforcing bucket admits), so
    /// racing takers never take more than a bucket holds. Across cluster slots no call sees
    /// every bucket: each enforcing policy's slot is counted first (a call that takes nothing),
    /// then the count is taken all or nothing, counting again (4 counts at most, then one cell)
    /// if another decision took cells in between. No lease is used. When Redis does not
    /// answer, [`OnFailure::Local`] takes up to `n` from the local share, [`OnFailure::Open`]
    /// admits all `n`, [`OnFailure::Closed`] refuses.
    pub async fn check_up_to(&self, request: &R, n: u32) -> (u32, Verdict) {
        self.up_to_of(self.plan(request, n.min(1)), n).await
    }

    /// Whether Redis answers: a `PING` to the server, or to every master of a cluster, within
    /// the timeout or 1 s, whichever is longer. For start-up and readiness probes: building
    /// connects lazily, so a set built with a wrong URL or while Redis is down decides by its
    /// failure policy until this would succeed.
    ///
    /// # Errors
    /// [`RedisConfigError::Unreachable`], naming the server (`host:port`) and why.
    pub async fn ready(&self) -> Result<(), RedisConfigError> {
        self.shared.link.ready().await
    }

    /// The counters since the limiter was built.
    pub fn stats(&self) -> RedisStats {
        let link = &self.shared.link;
        link.counters.snapshot_with(&link.background)
    }

    /// Where the circuit breaker stands ([`BreakerState::Off`] without one).
    pub fn breaker_state(&self) -> BreakerState {
        self.shared.link.breaker_state()
    }

    /// The policies' names, in evaluation order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.shared.policies.iter().map(|p| p.name.as_str())
    }

    /// The quotas of the policy `name` as Redis enforces them (intervals rounded up to whole
    /// µs).
    ///
    /// # Errors
    /// [`BuildError::UnknownPolicy`] if no policy has that name.
    pub fn quotas(&self, name: &str) -> Result<Vec<Quota>, BuildError> {
        Ok(self.policy(name)?.quotas.iter().map(|m| m.quota).collect())
    }

    /// The algorithms of the policy `name` as Redis runs them (intervals rounded up, and a
    /// shaper's delay or credit's debt rounded down, to whole µs): an in-process set of these
    /// decides exactly as Redis does.
    ///
    /// # Errors
    /// [`BuildError::UnknownPolicy`] if no policy has that name.
    pub fn algorithms(&self, name: &str) -> Result<Vec<AnyAlgorithm>, BuildError> {
        Ok(self
            .policy(name)?
            .quotas
            .iter()
            .map(|m| m.algorithm)
            .collect())
    }

    fn policy(&self, name: &str) -> Result<&Prepared<R>, BuildError> {
        let policy = self.shared.policies.iter().find(|p| p.name == name);
        policy.ok_or_else(|| BuildError::UnknownPolicy {
            policy: name.into(),
        })
    }

    /// Gives every lease's unused cells back to Redis (at shutdown, or to hand capacity to
    /// other processes at once) and forgets the leases; the cells given back.
    pub async fn return_leases(&self) -> u64 {
        let Some(leases) = &self.shared.leases else {
            return 0;
        };
        leases.give_back(&self.shared.link, |_| true).await
    }

    /// Gives back the unused cells of every lease that expired, and forgets those leases (a
    /// lease is otherwise returned by the next decision on its buckets); the cells given back.
    pub async fn sweep_leases(&self) -> u64 {
        let Some(leases) = &self.shared.leases else {
            return 0;
        };
        let now = leases.millis(self.shared.clock.now());
        let expired = |entry: &lease::Entry| entry.cells.is_spent(now);
        leases.give_back(&self.shared.link, expired).await
    }

    /// The buckets `request` goes to, or the error if `n` exceeds an enforcing quota's burst.
    pub(crate) fn plan(&self, request: &R, n: u32) -> Result<Plan, InsufficientCapacity> {
        Plan::new(&self.shared.policies, request, n)
    }

    /// [`check_n`](Self::check_n) once the request is planned (or found too large): a future
    /// that holds nothing of the request. Counted; the failure policy answers when Redis does
    /// not.
    pub(crate) async fn checked(
        &self,
        plan: Result<Plan, InsufficientCapacity>,
        n: u32,
    ) -> Result<Verdict, InsufficientCapacity> {
        let plan = plan?;
        let verdict = match self.decide(&plan, n).await {
            Ok(decided) => decided.verdict,
            Err(failure) => self.fail(&plan, n, failure),
        };
        self.shared.link.counters.decided(verdict.is_allowed());
        Ok(verdict)
    }

    /// The verdict on `plan` that needs no call: its rejection (counted against the rejecting
    /// policy's first quota), or an admission when no policy applies.
    fn uncalled(&self, plan: &Plan, n: u32) -> Option<Verdict> {
        if let Some(refused) = plan.rejected {
            let by = refused.by();
            let policy = by.and_then(|by| self.shared.policies.get(by.policy_index()));
            if let (Some(by), Some(policy)) = (by, policy) {
                policy.metrics[by.quota_index()].refused(u64::from(n));
            }
            return Some(Verdict::new(Err(refused), Source::Buckets));
        }
        plan.keys
            .is_empty()
            .then(|| Verdict::unlimited(Source::Buckets))
    }

    /// Decides `plan` for `n` cells in Redis (or from a lease, or by the shield); the failure
    /// if Redis did not answer, for the caller to decide by the failure policy
    /// ([`fail`](Self::fail)).
    pub(crate) async fn decide(&self, plan: &Plan, n: u32) -> Result<Decided, Failure> {
        let Shared { link, policies, .. } = &*self.shared;
        link.counters.decisions.add(1);
        if let Some(verdict) = self.uncalled(plan, n) {
            return Ok(Decided::without_call(verdict));
        }
        #[cfg(feature = "cluster")]
        if let Some(slots) = self.slots(plan) {
            return self
                .shielded(plan, n, Box::pin(slots.decide(plan, n)))
                .await;
        }
        // A lease's cells are this process's already: spent without asking the shield.
        if let Some(leases) = &self.shared.leases {
            if let Some(want) = leases.size(policies, plan, n) {
                let now = leases.millis(self.shared.clock.now());
                if let Some(entry) =
                    leases.entry(&plan.keys, &plan.quotas, now, &link.counters.dropped_cells)
                {
                    // Boxed: the lease's path (its lock, its timeout) would otherwise make every
                    // decision's future larger.
                    let on = (link, policies.as_slice());
                    let clock = (now, &self.shared.clock);
                    let leased = leases.decide(on, (plan, entry), (n, want), clock);
                    return Box::pin(leased).await;
                }
            }
        }
        let call = plan.call((n, n), self.reading());
        let decided = async {
            let reply = link.call(script::decide(), &call, link.deadline()).await?;
            Ok(verdict::decided(policies, plan, n, reply, &link.counters))
        };
        self.shielded(plan, n, decided).await
    }

    /// `call`, a decision of `n` cells of `plan` in Redis, unless the shield refuses it first
    /// (then it is never sent); a refusal of Redis's shields the bucket that refused.
    async fn shielded(
        &self,
        plan: &Plan,
        n: u32,
        call: impl Future<Output = Result<Decided, Failure>>,
    ) -> Result<Decided, Failure> {
        let Shared {
            shield,
            policies,
            link,
            ..
        } = &*self.shared;
        let Some(shield) = shield else {
            return call.await;
        };
        let sent = self.shared.clock.now();
        if let Some(verdict) = shield.refusal(policies, plan, n, sent) {
            link.counters.shielded.add(1);
            return Ok(Decided::without_call(verdict));
        }
        let decided = call.await?;
        shield.record(policies, plan, (n, sent), &decided.verdict);
        Ok(decided)
    }

    /// The slots of the cluster the limiter decides in, if it does and `plan` spans policies
    /// (each in a slot of its own).
    #[cfg(feature = "cluster")]
    fn slots(&self, plan: &Plan) -> Option<across::Slots<'_, R>> {
        if !plan.spans_policies() {
            return None;
        }
        let shared = &*self.shared;
        across::Slots::of(&shared.link, &shared.policies, self.reading())
    }

    /// The reading a call decides at (see [`Link::reading`]).
    fn reading(&self) -> Option<u64> {
        self.shared.link.reading(|| self.shared.clock.now())
    }

    /// The decision of the failure policy: the local share's, or open or closed.
    pub(crate) fn fail(&self, plan: &Plan, n: u32, failure: Failure) -> Verdict {
        let Some(local) = self.local_share(failure) else {
            return self.shared.link.fail(failure);
        };
        // The local policies name themselves `redis:{prefix}:{policy}`. An n that fits every
        // quota in Redis but not this process's share of one is never admitted, locally.
        let answer = local
            .check_n(plan, n)
            .unwrap_or_else(|capacity| Err(capacity.never()));
        Verdict::new(answer, Source::Local(failure))
    }

    /// The set's local share when its failure policy decides there (counted and logged as such
    /// a decision, made because of `failure`); `None` when the policy is open or closed.
    fn local_share(&self, failure: Failure) -> Option<&Policies<Plan, C>> {
        let shared = &*self.shared;
        match (shared.link.on_failure, &shared.fallback) {
            (OnFailure::Local { .. }, Some(local)) => {
                shared.link.counters.local.add(1);
                shared.link.noted(Source::Local(failure));
                Some(local)
            }
            _ => None,
        }
    }

    /// [`check_up_to`](Self::check_up_to) once the request is planned (for `n.min(1)` cells).
    pub(crate) async fn up_to_of(
        &self,
        plan: Result<Plan, InsufficientCapacity>,
        n: u32,
    ) -> (u32, Verdict) {
        let counters = &self.shared.link.counters;
        let (taken, verdict) = match plan {
            // No capacity is below 0 cells, and one cell exceeds none (every capacity is at
            // least 1).
            Err(capacity) => (0, Verdict::new(Err(capacity.never()), Source::Buckets)),
            Ok(plan) if n == 0 => {
                let verdict = self
                    .checked(Ok(plan), 0)
                    .await
                    .unwrap_or_else(|_| Verdict::unlimited(Source::Buckets));
                // The buckets as they are, as in process: no delay and no dry run for no cells.
                let outcome = verdict.outcome().map(|a| verdict::with_delay(a, 0, None));
                return (0, Verdict::new(outcome, verdict.source()));
            }
            Ok(plan) => match self.decide_up_to(&plan, n).await {
                Ok((taken, decided)) => (taken, decided.verdict),
                Err(failure) => self.fail_up_to(&plan, n, failure),
            },
        };
        counters.decided(verdict.is_allowed());
        (taken, verdict)
    }

    /// Decides `plan` (made for one cell) for up to `n ≥ 1` cells in Redis, without a lease:
    /// the cells taken and the decision, or the failure.
    async fn decide_up_to(&self, plan: &Plan, n: u32) -> Result<(u32, Decided), Failure> {
        let Shared { link, policies, .. } = &*self.shared;
        link.counters.decisions.add(1);
        // A rejection's cells are counted as one, as any refusal of up to n cells is.
        if let Some(verdict) = self.uncalled(plan, 1) {
            let taken = if verdict.is_allowed() { n } else { 0 };
            return Ok((taken, Decided::without_call(verdict)));
        }
        #[cfg(feature = "cluster")]
        if let Some(slots) = self.slots(plan) {
            return Box::pin(slots.up_to(plan, n)).await;
        }
        // No more than one request may take from any enforcing quota (a shaper's burst: the
        // script counts its queue, not its capacity).
        let capacity = (plan.refs.iter())
            .filter(|&&(p, _)| !policies[p].dry_run)
            .map(|&(p, q)| policies[p].quotas[q].capacity)
            .min();
        let want = capacity.map_or(n, |capacity| n.min(capacity)).max(1);
        let call = plan.call((1, want), self.reading());
        let reply = link.call(script::decide(), &call, link.deadline()).await?;
        let taken = match reply {
            Reply::Admitted { granted, .. } => granted,
            Reply::Refused { .. } => 0,
        };
        // Counted as a decision of the cells taken, or a refusal of one.
        let decided = verdict::decided(policies, plan, taken.max(1), reply, &link.counters);
        Ok((taken, decided))
    }

    /// The failure policy's answer to up to `n ≥ 1` cells: the local share's own
    /// `check_up_to`, all `n` (open), or a refusal (closed).
    fn fail_up_to(&self, plan: &Plan, n: u32, failure: Failure) -> (u32, Verdict) {
        let Some(local) = self.local_share(failure) else {
            let verdict = self.shared.link.fail(failure);
            return (if verdict.is_allowed() { n } else { 0 }, verdict);
        };
        let (taken, outcome) = match local.check_up_to(plan, n) {
            Ok((taken, allowed)) => (taken, Ok(allowed)),
            Err(refused) => (0, Err(refused)),
        };
        (taken, Verdict::new(outcome, Source::Local(failure)))
    }
}
