//! A [`RedisLimiter`] as a [`Backend`]: the middleware's decision planned at once (the
//! request's keys recorded, its cost checked) and settled in Redis by an owned future; the
//! reads and resets the seam asks for; and waits that retry (no decision in Redis books
//! ahead, so a dropped wait has nothing to give back).

use core::future::Future;

use super::plan::Plan;
use super::script::Script;
use super::{Failure, RedisLimiter};
use flowgate::backend::{
    Backend, Decision, PolicyInfo, Remote, Settled, States, Unbooked, Verdict,
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
            Err(capacity) if want => match self.plan(request, 0) {
                Ok(plan) => (plan, 0, Some(capacity)),
                Err(capacity) => return Decision::Now(Err(capacity)),
            },
            Err(capacity) => return Decision::Now(Err(capacity)),
        };
        let limiter = self.clone();
        Decision::Pending(Remote::new(async move {
            limiter.settle(&plan, n, oversized, want).await
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
        self.look_plan(self.plan(request, 0))
    }

    fn reset(&self, request: &R) -> impl Future<Output = Result<(), Failure>> + Send {
        self.reset_plan(self.plan(request, 0))
    }

    fn policies(&self) -> Vec<PolicyInfo> {
        let quotas = |p: &super::plan::Prepared<R>| p.quotas.iter().map(|m| m.quota).collect();
        (self.shared.policies.iter())
            .map(|p| PolicyInfo::new(p.name.clone(), p.dry_run, quotas(p)))
            .collect()
    }

    fn now(&self) -> u64 {
        self.shared.clock.now()
    }
}

impl<R: ?Sized, C: Clock> RedisLimiter<R, C> {
    /// [`check_n`](RedisLimiter::check_n) once the request is planned (or found too large): a future
    /// that holds nothing of the request.
    pub(crate) async fn checked(
        &self,
        plan: Result<Plan, InsufficientCapacity>,
        n: u32,
    ) -> Result<Verdict, InsufficientCapacity> {
        Ok(self.check_plan(&plan?, n).await)
    }

    /// [`Backend::look`] once the request is planned (for 0 cells, which exceed no burst).
    pub(crate) async fn look_plan(
        &self,
        plan: Result<Plan, InsufficientCapacity>,
    ) -> Result<Vec<QuotaState>, Failure> {
        let plan = plan.map_err(|_| Failure::Reply)?;
        let decided = self.decide(&plan, 0).await?;
        let mut states = Vec::new();
        self.states(&plan, &decided, |state| states.push(state));
        Ok(states)
    }

    /// [`Backend::reset`] once the request is planned: the bucket of every keyed policy's
    /// quota deleted (a global policy's are every client's: left alone) by one script call per
    /// key, by one deadline. A script call, as every other the limiter makes,
    /// names its key where a cluster routes by it (a `DEL` would not be routed to its slot).
    pub(crate) async fn reset_plan(
        &self,
        plan: Result<Plan, InsufficientCapacity>,
    ) -> Result<(), Failure> {
        let plan = plan.map_err(|_| Failure::Reply)?;
        let shared = &*self.shared;
        let keyed = |&(_, &(p, _)): &(&Vec<u8>, &(usize, usize))| shared.policies[p].keyed;
        let deleted = async {
            for (key, _) in plan.keys.iter().zip(&plan.refs).filter(keyed) {
                let command = |verb: &str, script: &str| {
                    let mut command = ::redis::cmd(verb);
                    command.arg(script).arg(1).arg(&key[..]);
                    command
                };
                shared
                    .connection
                    .eval(delete(), command, &shared.counters)
                    .await?;
            }
            Ok(())
        };
        if plan.keys.is_empty() {
            return Ok(());
        }
        self.guarded(self.deadline(), Box::pin(deleted)).await
    }

    /// Settles the middleware's decision of `plan` for `n` cells (`oversized`: the request
    /// asked for more than a burst, and the call only looks): the answer, where it came from,
    /// and if `want`, the state of every enforcing quota it went through, the refusing one
    /// with nothing left. When Redis does not answer, the failure policy decides.
    async fn settle(
        &self,
        plan: &Plan,
        n: u32,
        oversized: Option<InsufficientCapacity>,
        want: bool,
    ) -> Settled {
        // The decision's own deadline, which a refusal's looks across slots share.
        #[cfg(feature = "cluster")]
        let deadline = self.deadline();
        let decided = self.decide(plan, n).await;
        #[cfg(feature = "cluster")]
        let decided = match decided {
            Ok(decided) if want => Ok(self.look_across(plan, decided, deadline).await),
            other => other,
        };
        let (verdict, decided) = match decided {
            Ok(decided) => (decided.verdict, Some(decided)),
            Err(failure) => (self.fail(plan, n, failure), None),
        };
        let mut states = Vec::new();
        if let (true, Some(decided)) = (want, &decided) {
            self.states(plan, decided, |state| states.push(state));
        }
        let answer = match oversized {
            Some(capacity) => Err(capacity),
            None => {
                self.count(&verdict);
                Ok(verdict.outcome().map(drop))
            }
        };
        if let Ok(Err(refused)) = &answer {
            if let Some(by) = refused.by() {
                for state in states.iter_mut().filter(|state| *state.by() == *by) {
                    *state = state.none_left();
                }
            }
        }
        Settled::new(answer, verdict.source(), states)
    }
}

/// The reset script: deletes its key.
fn delete() -> &'static Script {
    static DELETE: std::sync::OnceLock<Script> = std::sync::OnceLock::new();
    DELETE.get_or_init(|| Script::of("return redis.call('DEL', KEYS[1])"))
}
