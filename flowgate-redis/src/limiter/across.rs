//! Decisions over several Redis Cluster slots (feature `cluster`), all or nothing across them
//! (the crate docs, "Redis Cluster", say what a user sees): each slot's take runs the decision
//! script wrapped to also answer each bucket's value before and after (`take_before.lua`,
//! `take_after.lua`), and `undo.lua` puts back what a take replaced, only where the key still
//! holds what it wrote.

use core::future::Future;
use std::sync::Arc;

use ::redis::Value;
use smallvec::SmallVec;
use tokio::time::Instant;

use super::verdict::{self, Decided};
use crate::connection::{Cluster, Connection};
use crate::failure::Link;
use crate::nanos;
use crate::script::{self, Plan, Prepared, Reply, Undo};
use flowgate::backend::{Failure, Source, Verdict};
use flowgate::outcome::Gauge;
use flowgate::policy::Allowed;

/// A decision across the slots of a cluster: the link to it, the policies, and the reading the
/// calls decide at.
pub(crate) struct Slots<'a, R: ?Sized> {
    link: &'a Link,
    policies: &'a [Prepared<R>],
    cluster: &'a Cluster,
    reading: Option<u64>,
}

impl<'a, R: ?Sized> Slots<'a, R> {
    /// A decision over `policies` across the slots `link` leads to, if it leads to a cluster.
    pub(crate) fn of(
        link: &'a Link,
        policies: &'a [Prepared<R>],
        reading: Option<u64>,
    ) -> Option<Self> {
        match &link.connection {
            Connection::Cluster(cluster) => Some(Self {
                link,
                policies,
                cluster,
                reading,
            }),
            Connection::One(_) => None,
        }
    }

    /// Decides `plan` (whose policies live in different slots) for `n` cells slot by slot,
    /// undoing the earlier takes if a later slot refuses or fails (see the module docs).
    pub(crate) async fn decide(&self, plan: &Plan, n: u32) -> Result<Decided, Failure> {
        let decided = self.take_all(plan, n).await;
        // One decision Redis answered, however many slots it took.
        self.link.counters.answered.add(u64::from(decided.is_ok()));
        decided
    }

    /// [`decide`](Self::decide), not counted (one of several attempts of [`up_to`](Self::up_to)).
    async fn take_all(&self, plan: &Plan, n: u32) -> Result<Decided, Failure> {
        let (deadline, policies) = (self.link.deadline(), self.policies);
        let mut written = Vec::new();
        let mut admitted: SmallVec<[(usize, Plan, Reply); 4]> = SmallVec::new();
        for range in plan.parts() {
            let part = plan.part(range.clone(), policies[plan.refs[range.start].0].dry_run);
            let (reply, wrote) = match self.take(&part, n, deadline).await {
                Ok(taken) => taken,
                Err(failure) => {
                    self.undo_later(written);
                    return Err(failure);
                }
            };
            if let Reply::Refused { .. } = reply {
                // The refusing slot took nothing (what it wrote is a repair or a clamp, which
                // stays); the slots before it are put back.
                // Waited for: the next decision must find the earlier buckets as they were.
                let undo = self.undo(written);
                let _ = tokio::time::timeout_at(deadline, undo).await;
                let mut verdict = verdict::verdict(policies, &part, n, &reply);
                // The first dry-run policy that would have refused, among those before.
                let mut before = None;
                for (_, part, reply) in &admitted {
                    before = before.or(verdict::dry_of(policies, part, n, reply));
                }
                if let Err(refused) = verdict.outcome() {
                    let dry_run = before.or(refused.dry_run());
                    let refused = verdict::with_dry_run(refused, dry_run);
                    verdict = Verdict::new(Err(refused), verdict.source());
                }
                let replies = [(range.start, reply)].into();
                return Ok(Decided { verdict, replies });
            }
            if !wrote.is_empty() {
                written.push(wrote);
            }
            admitted.push((range.start, part, reply));
        }
        let verdict = self.merged(&admitted, n);
        let replies = admitted.into_iter().map(|(first, _, reply)| (first, reply));
        Ok(Decided {
            verdict,
            replies: replies.collect(),
        })
    }

    /// `decided` with the states of every enforcing quota of `plan`, for headers that list
    /// them: a refusal across slots answers for its refusing slot alone (the slots before it
    /// were put back, those after it never asked), so each other slot is looked at (a call of
    /// n = 0, which takes nothing), as one server's refusal reports every bucket as it stands.
    /// The looks share the decision's `deadline`, so that a refusal still costs at most one
    /// timeout; a slot that does not answer by then is left out. Any other decision is returned
    /// as it is.
    pub(crate) async fn look(
        &self,
        plan: &Plan,
        mut decided: Decided,
        deadline: Instant,
    ) -> Decided {
        let replies = &mut decided.replies;
        let covered: usize = replies.iter().map(|(_, reply)| reply.parts().1.len()).sum();
        if replies.is_empty() || covered >= plan.refs.len() {
            return decided;
        }
        for range in plan.parts() {
            let known = replies.iter().any(|&(first, _)| first == range.start);
            if known || self.policies[plan.refs[range.start].0].dry_run {
                continue;
            }
            let part = plan.part(range.clone(), false);
            if let Ok(reply) = self
                .link
                .call(script::decide(), &part.call((0, 0), self.reading), deadline)
                .await
            {
                replies.push((range.start, reply));
            }
        }
        replies.sort_unstable_by_key(|&(first, _)| first);
        decided
    }

    /// One slot's take, by `deadline`: its reply and what it wrote.
    async fn take(&self, part: &Plan, n: u32, deadline: Instant) -> Result<(Reply, Undo), Failure> {
        let call = part.call((n, n), self.reading);
        let counters = &self.link.counters;
        let sent = async {
            let value = (self.link.connection)
                .eval(script::take(), |verb, s| call.command(verb, s), counters)
                .await?;
            let Value::Array(parts) = value else {
                return Err(Failure::Reply);
            };
            let [answer, before, after] = parts.as_slice() else {
                return Err(Failure::Reply);
            };
            let reply = Reply::parse(answer, &call).ok_or(Failure::Reply)?;
            let written = Undo::of(&part.keys, before, after).ok_or(Failure::Reply)?;
            Ok((reply, written))
        };
        let key = part.keys.first().map(Vec::as_slice);
        let result = self.link.guarded(deadline, key, Box::pin(sent)).await;
        if let Ok((reply, _)) = &result {
            counters.repaired.add(u64::from(reply.repaired()));
        }
        result
    }

    /// Undoes every take in `written`, one call per slot; the keys put back.
    ///
    /// Counted in the limiter's background counters, which outlive it in a spawned task.
    fn undo(&self, written: Vec<Undo>) -> impl Future<Output = ()> + Send + 'static {
        let (cluster, counters) = (self.cluster.clone(), Arc::clone(&self.link.background));
        async move {
            for wrote in written {
                let mut connection = cluster.clone();
                let value = script::undo()
                    .eval(&mut connection, |verb, s| wrote.command(verb, s), &counters)
                    .await;
                if let Ok(Value::Int(keys)) = value {
                    counters.undone.add(u64::try_from(keys).unwrap_or(0));
                }
            }
        }
    }

    /// Undoes every take in `written` in the background, within one timeout.
    fn undo_later(&self, written: Vec<Undo>) {
        if written.is_empty() {
            return;
        }
        let (undo, timeout) = (self.undo(written), self.link.timeout);
        tokio::spawn(async move {
            let _ = tokio::time::timeout(timeout, undo).await;
        });
    }

    /// The admission of every slot's take: the tightest enforcing quota's gauge, the longest
    /// delay, and the first dry-run policy that would have refused.
    fn merged(&self, admitted: &[(usize, Plan, Reply)], n: u32) -> Verdict {
        let mut best: Option<Allowed> = None;
        let mut delay = 0;
        let mut dry_run = None;
        for (_, part, reply) in admitted {
            let Ok(allowed) = verdict::verdict(self.policies, part, n, reply).outcome() else {
                continue;
            };
            delay = delay.max(nanos(allowed.delay()));
            dry_run = dry_run.or(allowed.dry_run());
            let tighter = allowed.by().is_some()
                && best
                    .as_ref()
                    .is_none_or(|b| allowed.gauge().is_tighter_than(&b.gauge()));
            if tighter || best.is_none() {
                best = Some(allowed);
            }
        }
        let unlimited = Allowed::new(flowgate::Allowed::new(Gauge::UNLIMITED), None, None);
        let allowed = best.unwrap_or(unlimited);
        Verdict::new(
            Ok(verdict::with_delay(allowed, delay, dry_run)),
            Source::Buckets,
        )
    }

    /// Decides `plan`, whose policies live in different slots, for up to `n ≥ 1` cells: counts
    /// on each enforcing policy's buckets as they are, then takes the count across the slots
    /// (all or nothing, [`decide`](Self::decide)), counting again while another decision took
    /// cells in between. The last attempt takes one cell, whose refusal is the answer.
    pub(crate) async fn up_to(&self, plan: &Plan, n: u32) -> Result<(u32, Decided), Failure> {
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
            let decided = self.take_all(plan, k).await?;
            if decided.verdict.is_allowed() || counted == 0 {
                self.link.counters.answered.add(1);
                return Ok((if decided.verdict.is_allowed() { k } else { 0 }, decided));
            }
            // Refused after a count that found room: another decision took cells in between.
            attempt += 1;
        }
    }

    /// The most cells, up to `n`, that every enforcing quota of `plan` admits now, each
    /// counted on its bucket as one call per policy (taking nothing) finds it.
    async fn count_room(&self, plan: &Plan, n: u32) -> Result<u32, Failure> {
        let (deadline, policies) = (self.link.deadline(), self.policies);
        let mut most = n;
        for range in plan.parts() {
            if policies[plan.refs[range.start].0].dry_run {
                continue;
            }
            let part = plan.part(range, false);
            let reply = self
                .link
                .call(script::decide(), &part.call((0, 0), self.reading), deadline)
                .await?;
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
