//! Decisions through a lease: cells taken from Redis in a batch and spent from a local atomic
//! word until they run out or the lease expires, and given back when the lease is returned.

use super::connection::Connection;
use super::failure::Failure;
use super::lease::{self, Leases};
use super::script::{self, Bucket, Reply};
use super::stats::add;
use super::{Decided, Plan, RedisLimiter, Source, Verdict};
use flowgate::clock::Clock;
use flowgate::outcome::{Allowed, Cited};
use tokio::time::timeout_at;

/// # Leases
impl<R: ?Sized, C: Clock> RedisLimiter<R, C> {
    /// Gives every lease's unused cells back to Redis (at shutdown, or to hand capacity to
    /// other processes at once) and forgets the leases. Returns the cells given back.
    ///
    /// Cells whose call fails are counted in [`RedisStats::dropped_cells`](super::RedisStats::dropped_cells). After a call that
    /// timed out or lost its connection, the remaining leases are dropped without a call, so
    /// that returning them with Redis down takes one timeout, not one per lease.
    pub async fn return_leases(&self) -> u64 {
        self.give_back(|_| true).await
    }

    /// Gives back the unused cells of every lease that expired, and forgets those leases (a
    /// lease is otherwise returned by the next decision on its buckets). Returns the cells
    /// given back.
    pub async fn sweep_leases(&self) -> u64 {
        let now = self.now_millis();
        self.give_back(|entry| Leases::expired(entry, now)).await
    }

    async fn give_back(&self, pick: impl FnMut(&lease::Entry) -> bool) -> u64 {
        let counters = &self.shared.counters;
        let mut returned = 0;
        let mut unreachable = false;
        for entry in self.shared.leases.drain(pick) {
            // Free: no decision holds a drained entry, so none is renewing it.
            let Ok(wrote) = entry.lease.renewing.try_lock() else {
                continue;
            };
            let rest = entry.lease.cells.take_rest();
            if rest == 0 {
                continue;
            }
            if unreachable {
                add(&counters.dropped_cells, u64::from(rest));
                continue;
            }
            // Each call its own timeout: a lease given back is no decision anyone waits on.
            match self.give_rest(&entry, &wrote, rest, self.deadline()).await {
                Ok(true) => returned += u64::from(rest),
                Ok(false) => {}
                Err(failure) => {
                    unreachable = matches!(
                        failure,
                        Failure::Timeout | Failure::Connection | Failure::BreakerOpen
                    );
                }
            }
        }
        returned
    }

    /// Gives back `rest` unused cells of the lease of `entry`, which wrote the TATs `wrote`, by
    /// `deadline`: each bucket's TAT moves back over them only if it is still the one the lease
    /// wrote (`undo.lua`); if another decision was taken on top of the lease since, its cells
    /// stay booked, since that decision was admitted against them. Whether every bucket took
    /// them back; counted as returned if so, as dropped otherwise.
    async fn give_rest(
        &self,
        entry: &lease::Entry,
        wrote: &[u64],
        rest: u32,
        deadline: tokio::time::Instant,
    ) -> Result<bool, Failure> {
        let counters = &self.shared.counters;
        let mut command = Vec::with_capacity(entry.keys.len());
        for ((key, &tat), quota) in entry.keys.iter().zip(wrote).zip(&entry.quotas) {
            // A lease is only taken from schedules (`leasable`).
            if let Bucket::Schedule { interval, .. } = *quota {
                let back = tat.saturating_sub(u64::from(rest).saturating_mul(interval));
                command.push((key, tat.to_string(), format!("1{back}")));
            }
        }
        let undo = |verb: &str, script: &str| {
            let mut cmd = ::redis::Cmd::new();
            cmd.arg(verb).arg(script).arg(command.len());
            for (key, _, _) in &command {
                cmd.arg(key);
            }
            for (_, tat, back) in &command {
                cmd.arg(tat).arg(back);
            }
            cmd
        };
        let sent = async {
            match &self.shared.connection {
                Connection::One(manager) => {
                    script::undo()
                        .eval(&mut manager.clone(), undo, counters)
                        .await
                }
                #[cfg(feature = "cluster")]
                Connection::Cluster(cluster) => {
                    script::undo()
                        .eval(&mut cluster.clone(), undo, counters)
                        .await
                }
            }
        };
        let all = match self.guarded(deadline, Box::pin(sent)).await {
            Ok(::redis::Value::Int(given)) => given == command.len() as i64 && !command.is_empty(),
            Ok(_) => false,
            Err(failure) => {
                add(&counters.dropped_cells, u64::from(rest));
                return Err(failure);
            }
        };
        let counter = if all {
            &counters.returned_cells
        } else {
            &counters.dropped_cells
        };
        add(counter, u64::from(rest));
        Ok(all)
    }

    /// The cells to lease for a decision of `n`, or `None` to decide without a lease (also
    /// when a dry-run policy applies: a lease spends for every bucket alike, and a dry-run
    /// policy's cells are taken only when it would admit; and when a quota shapes: its
    /// admissions carry delays).
    pub(super) fn lease_size(&self, plan: &Plan, n: u32) -> Option<u32> {
        let (cells, _) = self.shared.lease?;
        if !plan.dry.is_empty() {
            return None;
        }
        // Only schedules that never delay: a lease spends cells, not places in a queue, and
        // only from TATs.
        let policies = &self.shared.policies;
        if !plan
            .refs
            .iter()
            .all(|&(p, q)| policies[p].quotas[q].leasable())
        {
            return None;
        }
        let smallest = plan
            .refs
            .iter()
            .map(|&(p, q)| self.shared.policies[p].quotas[q].burst)
            .min()?;
        let want = cells.min(smallest);
        (n >= 1 && n <= want).then_some(want)
    }

    /// A decision through the lease of the plan's buckets.
    pub(super) async fn leased(
        &self,
        plan: &Plan,
        (n, want): (u32, u32),
    ) -> Result<Decided, Failure> {
        let shared = &*self.shared;
        let counters = &shared.counters;
        let now = self.now_millis();
        let Some(entry) =
            shared
                .leases
                .entry(&plan.keys, &plan.quotas, now, &counters.dropped_cells)
        else {
            return self.unleased(plan, n, self.deadline()).await;
        };
        if let Some(verdict) = self.spend(plan, &entry.lease, n, now) {
            return Ok(Decided::without_call(verdict));
        }
        // Read only here: a decision the lease answers reads no clock for a deadline.
        let deadline = self.deadline();
        // One task at a time asks Redis for this lease; the others wait, then spend from it.
        // The wait for the lock and the call share the decision's deadline: when Redis is
        // slow, waiters fail by the policy after one timeout, not one timeout per task ahead of
        // them, and the task that then calls has only what is left.
        let Ok(mut wrote) = timeout_at(deadline, entry.lease.renewing.lock()).await else {
            add(&counters.timeouts, 1);
            return Err(Failure::Timeout);
        };
        let now = self.now_millis();
        if let Some(verdict) = self.spend(plan, &entry.lease, n, now) {
            return Ok(Decided::without_call(verdict));
        }
        let rest = entry.lease.cells.take_rest();
        if rest > 0 {
            // The expired lease's unused cells first, exactly (one call more, only for a lease
            // that expired with cells left). Cells not given back stay booked (counted as
            // dropped); only a Redis that does not answer ends the decision here.
            let given = self.give_rest(&entry, &wrote, rest, deadline).await;
            if let Err(failure @ (Failure::Timeout | Failure::Connection | Failure::BreakerOpen)) =
                given
            {
                return Err(failure);
            }
        }
        wrote.clear();
        let reply = self.call(plan, (n, want), deadline).await?;
        let verdict = self.verdict(plan, n, &reply);
        if let Reply::Admitted {
            granted,
            states: ref debts,
            now: Some(at),
            ..
        } = reply
        {
            // A schedule's state is its TAT less the script's reading.
            wrote.extend(debts.iter().map(|debt| at.saturating_add(*debt)));
            add(&counters.leases, 1);
            add(&counters.leased_cells, u64::from(granted));
            let by = verdict.outcome().ok().and_then(|allowed| allowed.by());
            let bucket = (0..plan.refs.len())
                .position(|b| by.is_some_and(|by| core::ptr::eq(by, self.by(plan, b))))
                .unwrap_or(0);
            let lifetime = shared.lease.map_or(0, |(_, ms)| ms);
            // The script grants n ≤ granted ≤ want; a reply outside that is clamped.
            entry.lease.cells.fill(
                granted.min(want).saturating_sub(n),
                now.saturating_add(lifetime),
                debts.get(bucket).copied().unwrap_or(0),
                bucket,
            );
        }
        Ok(Decided::called(verdict, reply))
    }

    /// `n` cells from `lease`, if it holds them at `now_ms`.
    fn spend(&self, plan: &Plan, lease: &lease::Lease, n: u32, now_ms: u64) -> Option<Verdict> {
        let (debt, bucket, _) = lease.cells.spend(n, now_ms)?;
        add(&self.shared.counters.lease_admitted, 1);
        self.shared.metrics.from_lease.increment(1);
        // Admitted by every quota of the plan (a lease covers them all; no dry runs).
        for &(p, q) in &plan.refs {
            self.shared.policies[p].metrics[q].admitted(u64::from(n));
        }
        // The bucket index was recorded from this plan's buckets (`leased`), which are the
        // same for every decision on this lease; the first one stands in if it ever were not,
        // so that cells once spent are always reported as admitted.
        let bucket = if bucket < plan.refs.len() { bucket } else { 0 };
        let &(p, q) = plan.refs.get(bucket)?;
        // A leased bucket is a schedule: its state is its debt.
        let gauge = self.shared.policies[p].quotas[q].gauge(debt, None);
        let allowed = Allowed::new(gauge).cite(Cited::new(Some(self.by(plan, bucket)), None, 0));
        Some(Verdict::new(Ok(allowed), Source::Lease))
    }
}
