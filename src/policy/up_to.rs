//! [`Policies::check_up_to`]: as many cells as every quota that applies holds, up to a limit.

use super::Policies;
use super::{Allowed, Refused};
use crate::algorithm::up_to;
use crate::clock::Clock;
use crate::outcome::Cause;

/// # Taking up to `n`
impl<R: ?Sized, C: Clock> Policies<R, C> {
    /// Takes as many cells as the **tightest** quota that applies to `request` holds now, up to
    /// `n`, from every quota of every policy that applies (all or nothing, as
    /// [`check_n`](Self::check_n)), and says how many: `Ok((k, allowed))` with `1 ≤ k ≤ n`, or
    /// the refusal of one cell (naming the quota, and when to retry) when some quota holds none.
    ///
    /// `k` is the least, over the enforcing quotas that apply, of the most cells each would
    /// admit (a shaping quota counts the cells it would queue); dry-run policies do not limit it.
    /// The count is made on the buckets as they are, then `k` is taken with
    /// [`check_n`](Self::check_n); if another request takes cells in between, so that a quota
    /// refuses `k`, the count is made again (each such retry means another request was
    /// admitted, or the quotas were replaced). `n = 0` takes nothing: `Ok((0, state))`.
    ///
    /// ```
    /// use flowgate::policy::{Policies, Policy};
    /// use flowgate::{clock::ManualClock, Quota};
    ///
    /// let policies = Policies::<str>::builder()
    ///     .clock(ManualClock::new())
    ///     .policy(Policy::keyed("per-user", |user: &str| user).quota(Quota::per_second(10)?))
    ///     .policy(Policy::global("all").quota(Quota::per_second(6)?))
    ///     .build()?;
    /// // The global quota is the tightest: 6 of the 8 asked for.
    /// assert_eq!(policies.check_up_to("alice", 8)?.0, 6);
    /// let refused = policies.check_up_to("bob", 8).unwrap_err();
    /// assert_eq!(refused.by().map(|by| by.policy()), Some("all"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`Refused`], as [`check`](Self::check) refuses one cell.
    pub fn check_up_to(&self, request: &R, n: u32) -> Result<(u32, Allowed), Refused> {
        self.check_up_to_at(request, n, self.clock.now())
    }

    /// [`check_up_to`](Self::check_up_to) at `now` (a reading of this set's clock).
    ///
    /// # Errors
    /// As [`check_up_to`](Self::check_up_to).
    pub(crate) fn check_up_to_at(
        &self,
        request: &R,
        n: u32,
        now: u64,
    ) -> Result<(u32, Allowed), Refused> {
        if n == 0 {
            return self.state(request, now).map(|allowed| (0, allowed));
        }
        loop {
            let counted = self.most_admitted(request, n, now);
            let k = counted.max(1);
            match self.check_n_at(request, k, now) {
                Ok(Ok(allowed)) => return Ok((k, allowed)),
                // Taken by another request since the count: count again.
                Ok(Err(refused)) if counted > 0 && refused.cause() == Cause::Quota => {}
                Ok(Err(refused)) => return Err(refused),
                // A quota replaced since the count with a smaller capacity: count again.
                Err(_) if counted > 0 => {}
                // One cell is within every capacity; were it reported anyway, a refusal that
                // never conforms is safe.
                Err(capacity) => return Err(capacity.never()),
            }
        }
    }

    /// The most cells, up to `n`, that every enforcing quota that applies to `request` admits
    /// at `now`, each counted on its bucket as it is (a key the tables do not hold, as new).
    fn most_admitted(&self, request: &R, n: u32, now: u64) -> u32 {
        self.rules.with(|rules| {
            let mut most = n;
            for layer in self.layers.iter().filter(|layer| !layer.dry_run) {
                let Some(tag) = layer.tag_of(request) else {
                    continue;
                };
                for (q, algorithm) in layer.algorithms(rules).iter().enumerate() {
                    let word = layer.word((q, tag), algorithm, now);
                    match up_to(algorithm, word, now, most).answer() {
                        Ok((k, _)) => most = k,
                        Err(_) => return 0,
                    }
                }
            }
            most
        })
    }
}
