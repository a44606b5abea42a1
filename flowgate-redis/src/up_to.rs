//! [`RedisLimiter::check_up_to`]: as many cells as every enforcing quota that applies holds in
//! Redis, up to a limit, counted and taken in one call of the decision script; and what the
//! failure policy answers for it.
//!
//! On one server (or one slot) the count is the script's: it is called with `n = 1` and
//! `want` the limit, and grants the most cells every bucket of every enforcing policy admits
//! (a schedule's room in one division, a window counter's by bisection), then judges each
//! dry-run policy at that count. Nothing runs between the count and the take. Across Redis
//! Cluster slots (feature `cluster`) no call sees every bucket: the count is made on each
//! slot's buckets as they are (a call that takes nothing), then taken all or nothing across the
//! slots, as [`Policies::check_up_to`] does in process (counting again if another decision took
//! cells in between).

use super::failure::{Failure, Source};
use super::plan::Plan;
use super::script::Reply;
use super::stats::add;
use super::verdict::{open_or_closed, Decided};
use super::{RedisLimiter, Verdict};
use flowgate::clock::Clock;
use flowgate::outcome::Gauge;
use flowgate::outcome::{Allowed, Cited, InsufficientCapacity};

#[cfg(doc)]
use super::failure::OnFailure;
#[cfg(doc)]
use flowgate::policy::Policies;

/// # Taking up to `n`
impl<R: ?Sized, C: Clock> RedisLimiter<R, C> {
    /// Takes as many cells as the **tightest** enforcing quota that applies to `request` holds
    /// now, up to `n`, from every quota of every policy that applies (all or nothing), and
    /// says how many: `(k, verdict)` with `1 ≤ k ≤ n` when admitted, `(0, verdict)` when
    /// refused (the refusal of one cell, naming the quota, and when to retry) or when `n = 0`
    /// (which takes nothing and reports the buckets as they are).
    ///
    /// The same semantics as [`Policies::check_up_to`] in process: `n` may exceed every
    /// burst; `k` is the least, over the enforcing quotas that apply, of the most cells each
    /// admits (a shaping quota counts the cells it would queue); dry-run policies do not limit
    /// it, and one that would refuse `k` cells takes nothing and is reported
    /// ([`Allowed::dry_run`]), as a dry run of `k` cells is. On one server the count and the
    /// take are one script call: no other decision runs between them; across Redis Cluster
    /// slots they are not (see the [module docs](crate#redis-cluster)). Leases are not used
    /// (the call goes to Redis, and cells a lease holds are not counted as available).
    ///
    /// When Redis does not answer, the failure policy decides: [`OnFailure::Local`] takes up to
    /// `n` from the local share (its own `check_up_to`), [`OnFailure::Open`] admits all `n`,
    /// [`OnFailure::Closed`] refuses.
    ///
    /// ```no_run
    /// use flowgate_redis::BuildRedis as _;
    /// use flowgate::policy::{Policies, Policy};
    /// use flowgate_redis::RedisBackend;
    /// use flowgate::Quota;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = redis::Client::open("redis://127.0.0.1:6379/")?;
    /// let limiter = Policies::<str>::builder()
    ///     .policy(Policy::keyed("tenant", |tenant: &str| tenant).quota(Quota::per_second(100)?))
    ///     .build_redis(RedisBackend::new(client).prefix("batches"))?;
    /// // A batch of 250 wants to go: send as many as the tenant's bucket holds now.
    /// let (taken, verdict) = limiter.check_up_to("acme", 250).await;
    /// match verdict.outcome() {
    ///     Ok(_) => println!("send {taken} now, the rest later"),
    ///     Err(refused) => println!("none now; retry after {:?}", refused.retry_after()),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn check_up_to(&self, request: &R, n: u32) -> (u32, Verdict) {
        self.up_to_of(self.plan(request, n.min(1)), n).await
    }

    /// [`check_up_to`](Self::check_up_to) once the request is planned (for `n.min(1)` cells).
    pub(crate) async fn up_to_of(
        &self,
        plan: Result<Plan, InsufficientCapacity>,
        n: u32,
    ) -> (u32, Verdict) {
        let plan = match plan {
            Ok(plan) => plan,
            // No capacity is below 0 cells, and one cell exceeds none (every capacity is at
            // least 1).
            Err(capacity) => {
                let verdict = Verdict::new(Err(capacity.never()), Source::Buckets);
                self.count(&verdict);
                return (0, verdict);
            }
        };
        if n == 0 {
            let mut verdict = self.check_plan(&plan, 0).await;
            // The buckets as they are, as in process: no delay and no dry run for no cells.
            if let Ok(allowed) = verdict.outcome() {
                verdict = Verdict::new(Ok(allowed.with(0, None)), verdict.source());
            }
            return (0, verdict);
        }
        let (taken, verdict) = match self.decide_up_to(&plan, n).await {
            Ok((taken, decided)) => (taken, decided.verdict),
            Err(failure) => self.fail_up_to(&plan, n, failure),
        };
        self.count(&verdict);
        (taken, verdict)
    }

    /// Decides `plan` (made for one cell) for up to `n ≥ 1` cells in Redis, without a lease:
    /// the cells taken and the decision, or the failure.
    pub(crate) async fn decide_up_to(
        &self,
        plan: &Plan,
        n: u32,
    ) -> Result<(u32, Decided), Failure> {
        add(&self.shared.counters.decisions, 1);
        if plan.keys.is_empty() {
            let verdict = Verdict::new(
                Ok(Allowed::new(Gauge::UNLIMITED).cite(Cited::default())),
                Source::Buckets,
            );
            return Ok((n, Decided::without_call(verdict)));
        }
        #[cfg(feature = "cluster")]
        if let super::Connection::Cluster(cluster) = &self.shared.connection {
            if plan.spans_policies() {
                return Box::pin(self.across_up_to(plan, n, cluster)).await;
            }
        }
        // No more than one request may take from any enforcing quota (a shaper's burst: the
        // script counts its queue, not its capacity).
        let policies = &self.shared.policies;
        let capacity = (plan.refs.iter())
            .filter(|&&(p, _)| !policies[p].dry_run)
            .map(|&(p, q)| policies[p].quotas[q].capacity)
            .min();
        let want = capacity.map_or(n, |capacity| n.min(capacity)).max(1);
        let reply = self.call(plan, (1, want), self.deadline()).await?;
        let taken = match reply {
            Reply::Admitted { granted, .. } => granted,
            Reply::Refused { .. } => 0,
        };
        // Counted as a decision of the cells taken, or a refusal of one.
        let verdict = self.verdict(plan, taken.max(1), &reply);
        Ok((taken, Decided::called(verdict, reply)))
    }

    /// The failure policy's answer to up to `n ≥ 1` cells: the local share's own
    /// `check_up_to`, all `n` (open), or a refusal (closed).
    fn fail_up_to(&self, plan: &Plan, n: u32, failure: Failure) -> (u32, Verdict) {
        let shared = &*self.shared;
        match self.local_share() {
            Some(local) => {
                let (taken, outcome) = match local.check_up_to(plan, n) {
                    Ok((taken, allowed)) => (taken, Ok(allowed)),
                    Err(refused) => (0, Err(refused)),
                };
                let source = Source::Local(failure);
                (taken, Verdict::new(outcome, source))
            }
            None => {
                let (counters, metrics) = (&shared.counters, &shared.metrics);
                let verdict = open_or_closed(shared.on_failure, failure, counters, metrics);
                (if verdict.is_allowed() { n } else { 0 }, verdict)
            }
        }
    }
}

/// # Taking up to `n` across cluster slots
#[cfg(feature = "cluster")]
impl<R: ?Sized, C: Clock> RedisLimiter<R, C> {
    /// Decides `plan`, whose policies live in different slots, for up to `n ≥ 1` cells: counts
    /// on each enforcing policy's buckets as they are, then takes the count across the slots
    /// (all or nothing, `across`), counting again while another decision took cells in
    /// between. The last attempt takes one cell, whose refusal is the answer.
    async fn across_up_to(
        &self,
        plan: &Plan,
        n: u32,
        cluster: &super::cluster::Cluster,
    ) -> Result<(u32, Decided), Failure> {
        /// Attempts that count before the last, which takes one cell.
        const COUNTS: usize = 4;
        let mut attempt = 0;
        loop {
            let counted = if attempt < COUNTS {
                self.count_room(plan, n).await?
            } else {
                0
            };
            let k = counted.max(1);
            let decided = self.across(plan, k, cluster).await?;
            if decided.verdict.is_allowed() {
                return Ok((k, decided));
            }
            // Refused after a count that found room: another decision took cells in between.
            if counted == 0 {
                return Ok((0, decided));
            }
            attempt += 1;
        }
    }

    /// The most cells, up to `n`, that every enforcing quota of `plan` admits now, each
    /// counted on its bucket as one call per policy (taking nothing) finds it.
    async fn count_room(&self, plan: &Plan, n: u32) -> Result<u32, Failure> {
        let policies = &self.shared.policies;
        let deadline = self.deadline();
        let mut most = n;
        for range in plan.parts() {
            if policies[plan.refs[range.start].0].dry_run {
                continue;
            }
            let part = plan.part(range, false);
            let reply = self.call(&part, (0, 0), deadline).await?;
            let (_, states, now) = reply.parts();
            for (&(p, q), &state) in part.refs.iter().zip(states.iter()) {
                most = policies[p].quotas[q].most(state, now, most);
                if most == 0 {
                    return Ok(0);
                }
            }
        }
        Ok(most)
    }
}
