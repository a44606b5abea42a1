//! Decisions over several Redis Cluster slots (feature `cluster`), all or nothing
//! across them.
//!
//! In a cluster each policy's buckets carry a hash tag of their own (`{prefix:policy:key}`),
//! so a per-user policy spreads over the cluster while a global one stays in one slot. A
//! decision whose policies live in different slots takes its cells slot by slot, in the
//! policies' order, with `take.lua`: the decision script wrapped so that it also answers the
//! value each bucket held before and after. When a later slot refuses, `undo.lua` puts back, in
//! each slot that took, the value the take replaced, but only where the key still holds the
//! value the take wrote: a decision that came in between keeps what it took, and the cells of
//! the undone take stay booked (an under-admission, never an over-admission).
//!
//! A failure between the steps (a slot that times out or loses its connection after an earlier
//! one took) is decided by the failure policy, and the earlier takes are undone in the
//! background. The failed call may still run on its server: then its cells stay booked. So a
//! failure costs at most `n` cells per quota of the decision's policies, until those buckets
//! refill; it never admits more than the quotas allow.
//!
//! A refusal across slots names the first refusing policy in the set's order (in process, and
//! on one server, the refusal with the longest wait among all refusing policies is reported):
//! its wait can be shorter than a later policy's. A decision across slots takes no lease. Its
//! HTTP headers list every enforcing quota, as one server's do: an admission's from each slot's
//! reply, a refusal's from the refusing slot's and a look (taking nothing) at each other slot.

use core::future::Future;
use core::ops::Range;
use std::sync::{Arc, OnceLock};

use ::redis::{Cmd, Value};
use smallvec::SmallVec;
use tokio::time::Instant;

use super::cluster::Cluster;
use super::script::{self, Call, Reply, Script};
use super::stats::add;
use super::verdict::Decided;
use super::{Failure, Plan, RedisLimiter, Source, Verdict};
use flowgate::clock::Clock;
use flowgate::outcome::{tightness, Allowed, Cited, Gauge};

/// The decision script wrapped to also answer each bucket's value before and after:
/// `{answer, before, after}`, `false` for a missing key (or one of another type).
fn take_script() -> &'static Script {
    static TAKE: OnceLock<Script> = OnceLock::new();
    TAKE.get_or_init(|| {
        let source = format!(
            "{}\nlocal function decide()\n{}\nend\n{}",
            include_str!("take_before.lua"),
            script::SOURCE,
            include_str!("take_after.lua")
        );
        Script::of(Box::leak(source.into_boxed_str()))
    })
}

/// What one slot's take wrote: each key it changed, the value it wrote, and the value it
/// replaced (`None`: the key was missing).
#[derive(Debug, Default)]
struct Written {
    keys: Vec<Vec<u8>>,
    values: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

impl Written {
    /// The keys of `call` whose value `before` differs from `after`, from a take's reply.
    fn of(keys: &[Vec<u8>], before: &Value, after: &Value) -> Option<Self> {
        let (Value::Array(before), Value::Array(after)) = (before, after) else {
            return None;
        };
        if before.len() != keys.len() || after.len() != keys.len() {
            return None;
        }
        let bytes = |value: &Value| match value {
            Value::Nil => Some(None),
            Value::BulkString(bytes) => Some(Some(bytes.clone())),
            _ => None,
        };
        let mut written = Self::default();
        for ((key, before), after) in keys.iter().zip(before).zip(after) {
            let (before, after) = (bytes(before)?, bytes(after)?);
            if before != after {
                // A take writes every bucket it changes; it never deletes one.
                written.keys.push(key.clone());
                written.values.push((after?, before));
            }
        }
        Some(written)
    }

    /// The undo call: `KEYS` the keys, `ARGV` each value written and `0` or `1` followed by
    /// the value replaced.
    fn command(&self, verb: &str, script: &str) -> Cmd {
        let mut command = Cmd::new();
        command.arg(verb).arg(script).arg(self.keys.len());
        for key in &self.keys {
            command.arg(key);
        }
        for (after, before) in &self.values {
            command.arg(after);
            match before {
                None => command.arg("0"),
                Some(before) => command.arg([b"1".as_slice(), before].concat()),
            };
        }
        command
    }
}

impl Plan {
    /// The buckets of each policy, in order: one slot each in a cluster.
    pub(super) fn parts(&self) -> SmallVec<[Range<usize>; 4]> {
        let mut parts = SmallVec::new();
        let mut start = 0;
        for i in 1..=self.refs.len() {
            if i == self.refs.len() || self.refs[i].0 != self.refs[start].0 {
                parts.push(start..i);
                start = i;
            }
        }
        parts
    }

    /// Whether the plan's buckets belong to more than one policy.
    pub(crate) fn spans_policies(&self) -> bool {
        self.refs
            .first()
            .is_some_and(|first| self.refs.iter().any(|r| r.0 != first.0))
    }

    /// The plan of the buckets `range` (one policy's, a dry run's if `dry_run`).
    pub(super) fn part(&self, range: Range<usize>, dry_run: bool) -> Self {
        let dry = if dry_run {
            format!("1-{}", range.len())
        } else {
            String::new()
        };
        Self {
            keys: self.keys[range.clone()].iter().cloned().collect(),
            quotas: self.quotas[range.clone()].iter().copied().collect(),
            refs: self.refs[range].iter().copied().collect(),
            dry,
        }
    }
}

/// # Decisions across slots
impl<R: ?Sized, C: Clock> RedisLimiter<R, C> {
    /// Decides `plan` (whose policies live in different slots) for `n` cells slot by slot,
    /// undoing the earlier takes if a later slot refuses or fails (see the module docs).
    pub(crate) async fn across(
        &self,
        plan: &Plan,
        n: u32,
        cluster: &Cluster,
    ) -> Result<Decided, Failure> {
        let deadline = self.deadline();
        let policies = &self.shared.policies;
        let mut written = Vec::new();
        let mut admitted: SmallVec<[(usize, Plan, Reply); 4]> = SmallVec::new();
        for range in plan.parts() {
            let part = plan.part(range.clone(), policies[plan.refs[range.start].0].dry_run);
            let (reply, wrote) = match self.take(&part, n, cluster, deadline).await {
                Ok(taken) => taken,
                Err(failure) => {
                    self.undo_later(cluster, written);
                    return Err(failure);
                }
            };
            if let Reply::Refused { .. } = reply {
                // The refusing slot took nothing (what it wrote is a repair or a clamp, which
                // stays); the slots before it are put back.
                // Waited for: the next decision must find the earlier buckets as they were.
                let undo = self.undo(cluster.clone(), written);
                let _ = tokio::time::timeout_at(deadline, undo).await;
                let mut verdict = self.verdict_of(&part, n, &reply);
                // The first dry-run policy that would have refused, among those before.
                let mut before = None;
                for (_, part, reply) in &admitted {
                    before = before.or(self.dry_of(part, n, reply));
                }
                if let Err(refused) = verdict.outcome() {
                    let dry_run = before.or(refused.dry_run());
                    verdict = Verdict::new(Err(refused.with_dry_run(dry_run)), verdict.source());
                }
                self.shared.metrics.from_redis.increment(1);
                let replies = [(range.start, reply)].into();
                return Ok(Decided { verdict, replies });
            }
            if !wrote.keys.is_empty() {
                written.push(wrote);
            }
            admitted.push((range.start, part, reply));
        }
        self.shared.metrics.from_redis.increment(1);
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
    pub(crate) async fn look_across(
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
            if known || self.shared.policies[plan.refs[range.start].0].dry_run {
                continue;
            }
            let part = plan.part(range.clone(), false);
            if let Ok(reply) = self.call(&part, (0, 0), deadline).await {
                replies.push((range.start, reply));
            }
        }
        replies.sort_unstable_by_key(|&(first, _)| first);
        decided
    }

    /// One slot's take, by `deadline`: its reply and what it wrote.
    async fn take(
        &self,
        part: &Plan,
        n: u32,
        cluster: &Cluster,
        deadline: Instant,
    ) -> Result<(Reply, Written), Failure> {
        let shared = &*self.shared;
        let call = Call {
            keys: &part.keys,
            quotas: &part.quotas,
            dry: &part.dry,
            now: self.reading(),
            n,
            want: n,
        };
        let mut connection = cluster.clone();
        let counters = &shared.counters;
        let sent = async {
            let value = (take_script())
                .eval(&mut connection, |verb, s| call.command(verb, s), counters)
                .await?;
            let Value::Array(parts) = value else {
                return Err(Failure::Reply);
            };
            let [answer, before, after] = parts.as_slice() else {
                return Err(Failure::Reply);
            };
            let reply = Reply::parse(answer, &call).ok_or(Failure::Reply)?;
            let written = Written::of(&part.keys, before, after).ok_or(Failure::Reply)?;
            Ok((reply, written))
        };
        let result = self.guarded(deadline, Box::pin(sent)).await;
        if let Ok((reply, _)) = &result {
            add(&counters.repaired, u64::from(reply.repaired()));
        }
        result
    }

    /// Undoes every take in `written`, one call per slot; the keys put back.
    ///
    /// Counted in the limiter's background counters, which outlive it in a spawned task.
    fn undo(
        &self,
        cluster: Cluster,
        written: Vec<Written>,
    ) -> impl Future<Output = ()> + Send + 'static {
        let counters = Arc::clone(&self.shared.background);
        async move {
            for wrote in written {
                let mut connection = cluster.clone();
                let value = script::undo()
                    .eval(&mut connection, |verb, s| wrote.command(verb, s), &counters)
                    .await;
                if let Ok(Value::Int(keys)) = value {
                    add(&counters.undone, u64::try_from(keys).unwrap_or(0));
                }
            }
        }
    }

    /// Undoes every take in `written` in the background, within one timeout.
    fn undo_later(&self, cluster: &Cluster, written: Vec<Written>) {
        if written.is_empty() {
            return;
        }
        let undo = self.undo(cluster.clone(), written);
        let timeout = self.shared.timeout;
        tokio::spawn(async move {
            let _ = tokio::time::timeout(timeout, undo).await;
        });
    }

    /// The admission of every slot's take: the tightest enforcing quota's gauge, the longest
    /// delay, and the first dry-run policy that would have refused.
    fn merged(&self, admitted: &[(usize, Plan, Reply)], n: u32) -> Verdict {
        let mut best: Option<Allowed<Cited>> = None;
        let mut delay = 0;
        let mut dry_run = None;
        for (_, part, reply) in admitted {
            let Ok(allowed) = self.verdict_of(part, n, reply).outcome() else {
                continue;
            };
            delay = delay.max(allowed.delay_nanos());
            dry_run = dry_run.or(allowed.dry_run());
            let tighter = allowed.by().is_some()
                && best.as_ref().is_none_or(|b| {
                    tightness(allowed.remaining(), allowed.reset_after_nanos())
                        < tightness(b.remaining(), b.reset_after_nanos())
                });
            if tighter || best.is_none() {
                best = Some(allowed);
            }
        }
        let allowed = best.unwrap_or(Allowed::new(Gauge::UNLIMITED).cite(Cited::default()));
        Verdict::new(Ok(allowed.with(delay, dry_run)), Source::Buckets)
    }
}
