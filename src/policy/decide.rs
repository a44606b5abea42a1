//! How a policy set decides one request: the hot path that takes cells quota by quota, the
//! undo log that takes them back when a later quota refuses, and the cold paths (new keys,
//! refusals and their retry-after, quotas replaced mid-decision). See the
//! [`policy` module docs](super) for what is decided; this module is how.
//!
//! # The hot path
//! Per policy, the decision dispatches once on where its buckets live (one cell per quota, or
//! one keyed table per quota), so that each quota's step is straight-line code: look the bucket
//! up, read the quota's `Rule` (three words under a sequence lock), compare the debt the
//! request would leave with the rule's window, and compare-and-swap the new theoretical arrival
//! time in. The full algorithm ([`Gcra`]) runs only on the cold paths. The clock is read once,
//! just after the first lookup, so that the read overlaps that lookup's cache miss.

use crate::observe;
use arrayvec::ArrayVec;

use super::decision::{Admitted, Booked, DryRun, Oversized, QuotaState, Rejected, BOOKED};
use super::jitter;
use super::layer::{Bucket, Layer, Miss, Store};
use super::live::LiveQuota;
use super::{Policies, MAX_QUOTAS};
use crate::algorithm::{Algorithm, Gcra};
use crate::clock::Clock;
use crate::decision::{Cause, Gauge, InsufficientCapacity, Refused};
use crate::primitive::Ordering;
use crate::quota::Quota;

/// A decision's answer: `Oversized` (never), or admitted (reported as `A`) or refused (now).
pub(super) type Answer<'p, A = Admitted<'p>> = Result<Result<A, Rejected<'p>>, Oversized<'p>>;

/// One write to undo if a later quota refuses.
#[derive(Clone, Copy)]
struct Undo<'p> {
    /// The quota (which knows its policy and place).
    live: &'p LiveQuota,
    tag: u64,
    before: u64,
    after: u64,
}

/// One decision under way: what it has taken (to undo on a refusal, and to report on an
/// admission), and the first dry-run policy that would have refused.
struct Decision<'p, 'r, R: ?Sized, C: Clock, F> {
    set: &'p Policies<R, C>,
    request: &'r R,
    n: u32,
    /// The clock read, until it is called (once, after the first lookup).
    clock: Option<F>,
    now: u64,
    undo: ArrayVec<Undo<'p>, MAX_QUOTAS>,
    dry_run: Option<DryRun<'p>>,
}

impl<R: ?Sized, C: Clock> Policies<R, C> {
    /// Decides `n ≥ 1` cells at the reading `now()` (taken once the first bucket has been
    /// looked up): commits quota by quota, undoing on a refusal.
    #[inline]
    pub(super) fn decide(&self, request: &R, n: u32, now: impl FnOnce() -> u64) -> Answer<'_> {
        self.decide_with(request, n, now, |decision| decision.admitted())
    }

    /// [`decide`](Self::decide) for a caller that wants only a yes or no: an admission reports
    /// nothing, so none is put together (the HTTP middleware without quota headers).
    #[cfg(feature = "tower")]
    #[inline]
    pub(crate) fn admits(&self, request: &R, n: u32) -> Answer<'_, ()> {
        if n == 0 {
            // Takes nothing, as `check_n(request, 0)`: admitted.
            return Ok(Ok(()));
        }
        self.decide_with(request, n, || self.clock.now(), |_| ())
    }

    /// [`decide`](Self::decide), with `admitted` reporting an admission.
    #[inline(always)]
    fn decide_with<'p, A, F: FnOnce() -> u64>(
        &'p self,
        request: &R,
        n: u32,
        now: F,
        admitted: impl FnOnce(&Decision<'p, '_, R, C, F>) -> A,
    ) -> Answer<'p, A> {
        let mut decision = Decision {
            set: self,
            request,
            n,
            clock: Some(now),
            now: 0,
            undo: ArrayVec::new(),
            dry_run: None,
        };
        for (index, layer) in self.layers.iter().enumerate() {
            let refused = match &layer.store {
                Store::Global(cells) => {
                    decision.policy(index, layer, 0, |q| Bucket::Cell(&cells[q]))
                }
                Store::Keyed { tables, .. } => {
                    let Some(tag) = layer.tag(request) else {
                        continue;
                    };
                    decision.policy(index, layer, tag, |q| match tables[q].probe_tag(tag) {
                        Some(slot) => Bucket::Slot(slot),
                        None => Bucket::Absent,
                    })
                }
            };
            if let Some(answer) = refused {
                return answer;
            }
        }
        // Every quota the request went through took its cells. Behind the constant, so that
        // without the feature not even the empty loop is left to change the hot path's code.
        if observe::ENABLED {
            for entry in &decision.undo {
                let metrics = &entry.live.metrics;
                metrics.admitted.increment(u64::from(n));
                // Near its limit: the bucket left at least 80 % booked (its TAT at least 4/5
                // of a window ahead), as Envoy's near-limit statistic.
                let window = entry.live.rule().0.window();
                if entry.after.wrapping_sub(decision.now) >= window - window / 5 {
                    metrics.near_limit.increment(1);
                }
            }
        }
        Ok(Ok(admitted(&decision)))
    }

    /// What [`Layer::take`] left to the full algorithm: a bucket a keyed table lacks (created
    /// here, under the shard's lock), a request that does not fit (the refusal's details, and
    /// the clamp of a bucket booked further ahead than `now` can explain), or too many cells.
    /// If quota `q` is no longer at the `version` the hot path decided with (replaced in
    /// between), the request is decided again under the new quota.
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn slow(
        &self,
        index: usize,
        q: usize,
        tag: u64,
        version: u64,
        n: u32,
        now: u64,
        miss: Miss,
    ) -> Outcome {
        let layer = &self.layers[index];
        let (_, quota, current) = layer.quotas[q].full();
        if n > quota.burst() {
            return Outcome::Oversized(quota);
        }
        let gcra = Gcra::new(&quota);
        let refused = match miss {
            Miss::Refused(word) if current == version => gcra.refusal(word, now, n),
            _ => {
                let mut wrote = None;
                return match layer.commit(q, tag, &gcra, n, now, &self.clock, &mut wrote) {
                    Ok(allowed) => Outcome::Taken {
                        wrote,
                        debt: allowed.gauge().reset_after_nanos(),
                    },
                    // A refused commit has clamped the bucket already.
                    Err(refused) => Outcome::Refused(refused, quota),
                };
            }
        };
        if refused.clock_behind {
            layer.catch_up(q, tag, &gcra, &self.clock);
        }
        Outcome::Refused(refused, quota)
    }

    /// Quota `q` of policy `index` for the bucket `tag` at `now`, taking nothing.
    #[cold]
    pub(super) fn peek_state(&self, index: usize, q: usize, tag: u64, now: u64) -> QuotaState<'_> {
        let layer = &self.layers[index];
        let quota = layer.quotas[q].load();
        let gcra = Gcra::new(&quota);
        let gauge = gcra.state(layer.word(q, tag, &gcra, now), now).gauge();
        state_of(layer, index, q, quota, gauge)
    }

    /// Undoes the writes logged after `mark`, newest first.
    fn undo(&self, undo: &mut ArrayVec<Undo<'_>, MAX_QUOTAS>, mark: usize) {
        while undo.len() > mark {
            let Some(u) = undo.pop() else { break };
            let (index, q) = u.live.at();
            // A bucket written since is left as it is: see the policy module docs.
            self.layers[index].restore(q, u.tag, u.before, u.after);
        }
    }

    /// Completes the refusal `first` (made by an enforcing quota, with everything undone): looks
    /// at every enforcing quota after it, so that the retry-after covers the one that conforms
    /// last, then adds that policy's jitter and counts the refusal against it.
    #[cold]
    #[inline(never)]
    fn reject<'p, A>(
        &'p self,
        request: &R,
        (n, now): (u32, u64),
        first: Rejected<'p>,
        first_tag: u64,
    ) -> Answer<'p, A> {
        let mut worst = first;
        for (index, layer) in self.layers.iter().enumerate().skip(first.by.index) {
            if layer.dry_run {
                continue;
            }
            let (tag, from) = if index == first.by.index {
                (first_tag, first.by.quota_index + 1)
            } else {
                match layer.tag(request) {
                    Some(tag) => (tag, 0),
                    None => continue,
                }
            };
            for (q, live) in layer.quotas.iter().enumerate().skip(from) {
                let quota = live.load();
                if n > quota.burst() {
                    return Err(oversized(layer, index, q, n, quota));
                }
                let gcra = Gcra::new(&quota);
                if let Err(refused) = gcra.peek(layer.word(q, tag, &gcra, now), now, n) {
                    if refused.clock_behind {
                        layer.catch_up(q, tag, &gcra, &self.clock);
                    }
                    if refused.retry_after_nanos() > worst.wait {
                        worst.by = state_of(layer, index, q, quota, refused.gauge());
                        worst.wait = refused.retry_after_nanos();
                        worst.cause = refused.cause();
                    }
                }
            }
        }
        let layer = &self.layers[worst.by.index];
        let (min, max) = layer.jitter;
        if max > 0 && worst.wait != u64::MAX {
            worst.jitter = jitter::draw(min, max);
        }
        // Relaxed: a statistic; nothing is ordered by it.
        layer.refused.fetch_add(1, Ordering::Relaxed);
        if let Some(live) = layer.quotas.get(worst.by.quota_index) {
            live.metrics.refused.increment(u64::from(n));
        }
        Ok(Err(worst))
    }
}

impl<'p, R: ?Sized, C: Clock, F: FnOnce() -> u64> Decision<'p, '_, R, C, F> {
    /// Takes the request's cells from every quota of policy `index` (its bucket `tag`; `find`
    /// looks a quota's bucket up). `Some` ends the decision: a refusal (with everything undone)
    /// or `Oversized`.
    #[inline(always)]
    fn policy<A>(
        &mut self,
        index: usize,
        layer: &'p Layer<R, C>,
        tag: u64,
        find: impl Fn(usize) -> Bucket<'p>,
    ) -> Option<Answer<'p, A>> {
        let mark = self.undo.len();
        for (q, live) in layer.quotas.iter().enumerate() {
            let bucket = find(q);
            if let Some(read) = self.clock.take() {
                self.now = read();
            }
            let (rule, version) = live.rule();
            let miss = if self.n > rule.burst() {
                Miss::Oversized
            } else {
                // n ≤ burst and burst·T ≤ 2⁶³ − 1 (a valid quota): no overflow.
                let cost = u64::from(self.n) * rule.interval();
                match Layer::<R, C>::take(bucket, tag, cost, rule.window(), self.now) {
                    Ok((before, after)) => {
                        let wrote = Some((before, after));
                        self.taken(live, tag, wrote, after - self.now);
                        continue;
                    }
                    Err(miss) => miss,
                }
            };
            match self
                .set
                .slow(index, q, tag, version, self.n, self.now, miss)
            {
                Outcome::Taken { wrote, debt } => {
                    self.taken(live, tag, wrote, debt);
                }
                outcome => match self.refused(index, q, tag, mark, outcome) {
                    Some(answer) => return Some(answer),
                    // A dry-run policy's refusal: its other quotas are not asked.
                    None => break,
                },
            }
        }
        None
    }

    /// `live` admitted the request, writing `wrote` (the bucket's words before and after); if it
    /// wrote nothing (an untracked new key), it left the bucket `debt` ns ahead of `now`.
    #[inline(always)]
    fn taken(&mut self, live: &'p LiveQuota, tag: u64, wrote: Option<(u64, u64)>, debt: u64) {
        // An untracked admission (a new key with no room, admitted as a new bucket would be)
        // wrote nothing: its entry, with `before == after`, serves to report the quota; its
        // undo changes no word (at most a compare-and-swap of a word to itself, if the key has
        // appeared since holding exactly that word). Wrapping: `after − now` gives the debt
        // back.
        let booked = self.now.wrapping_add(debt);
        let (before, after) = wrote.unwrap_or((booked, booked));
        // At most MAX_QUOTAS quotas in a set (checked at build): room.
        self.undo.push(Undo {
            live,
            tag,
            before,
            after,
        });
    }

    /// The admission: the enforcing quotas it went through are read off the undo log, after
    /// the last compare-and-swap (so that the hot path stores one entry per quota, not two).
    #[inline(always)]
    fn admitted(&self) -> Admitted<'p> {
        let mut booking = Booking::default();
        for entry in &self.undo {
            if !entry.live.dry_run() {
                booking.push(entry.live, entry.after.wrapping_sub(self.now));
            }
        }
        booking.admitted(self.dry_run)
    }

    /// Quota `q` of policy `index` refused (or is too small): a dry-run policy's refusal is
    /// counted and its cells given back (`None`: go on with the next policy); an enforcing
    /// one's ends the decision with everything given back.
    #[cold]
    #[inline(never)]
    fn refused<A>(
        &mut self,
        index: usize,
        q: usize,
        tag: u64,
        mark: usize,
        outcome: Outcome,
    ) -> Option<Answer<'p, A>> {
        let set = self.set;
        let layer = &set.layers[index];
        let (state, wait, cause) = match outcome {
            Outcome::Taken { .. } => return None,
            Outcome::Refused(refused, quota) => (
                state_of(layer, index, q, quota, refused.gauge()),
                refused.retry_after_nanos(),
                refused.cause(),
            ),
            Outcome::Oversized(quota) => {
                if !layer.dry_run {
                    set.undo(&mut self.undo, 0);
                    return Some(Err(oversized(layer, index, q, self.n, quota)));
                }
                (
                    set.peek_state(index, q, tag, self.now),
                    u64::MAX,
                    Cause::Quota,
                )
            }
        };
        if layer.dry_run {
            set.undo(&mut self.undo, mark);
            would_refuse(layer, &mut self.dry_run, state, wait, self.n);
            return None;
        }
        set.undo(&mut self.undo, 0);
        let first = Rejected {
            by: state,
            wait,
            jitter: 0,
            cause,
            dry_run: self.dry_run,
        };
        Some(set.reject(self.request, (self.n, self.now), first, tag))
    }
}

/// The state of quota `q` of `layer` (policy `index`).
#[inline(always)]
fn state_of<'p, R: ?Sized, C: Clock>(
    layer: &'p Layer<R, C>,
    index: usize,
    q: usize,
    quota: Quota,
    gauge: Gauge,
) -> QuotaState<'p> {
    QuotaState {
        policy: &layer.name,
        index,
        quota_index: q,
        quota,
        gauge,
    }
}

/// The enforcing quotas an admission took cells from, for [`Admitted::tightest`]: the first
/// [`BOOKED`] as they are (two stores each), and the tightest of the rest (fewest cells left,
/// then the longest reset, then the first), chosen when the decision ends.
pub(super) struct Booking<'p> {
    booked: [Option<Booked<'p>>; BOOKED],
    len: usize,
    /// The tightest beyond the first `BOOKED`, and its cells left.
    more: Option<(Booked<'p>, u32)>,
}

impl Default for Booking<'_> {
    fn default() -> Self {
        Self {
            booked: [None; BOOKED],
            len: 0,
            more: None,
        }
    }
}

impl<'p> Booking<'p> {
    /// `live` admitted, leaving its bucket `debt ≤ τ` ns ahead.
    #[inline(always)]
    pub(super) fn push(&mut self, live: &'p LiveQuota, debt: u64) {
        let booked = Booked { live, debt };
        if let Some(slot) = self.booked.get_mut(self.len) {
            *slot = Some(booked);
            self.len += 1;
        } else {
            self.more_of(booked);
        }
    }

    #[cold]
    fn more_of(&mut self, booked: Booked<'p>) {
        let remaining = booked.live.rule().0.gauge(booked.debt).remaining();
        let tighter = self.more.map_or(true, |(best, left)| {
            remaining < left || (remaining == left && booked.debt > best.debt)
        });
        if tighter {
            self.more = Some((booked, remaining));
        }
    }

    /// The admission, with the first dry-run policy that would have refused.
    #[inline(always)]
    pub(super) fn admitted(self, dry_run: Option<DryRun<'p>>) -> Admitted<'p> {
        Admitted {
            booked: self.booked,
            more: self.more.map(|(booked, _)| booked),
            dry_run,
        }
    }
}

/// How one quota answered a decision.
enum Outcome {
    /// Admitted: the words written (if any; an untracked new key writes none) and the debt
    /// left.
    Taken {
        wrote: Option<(u64, u64)>,
        debt: u64,
    },
    /// Refused, under this quota.
    Refused(Refused, Quota),
    /// `n` above this quota's burst.
    Oversized(Quota),
}

/// Counts a dry-run policy's would-be refusal, and reports it if it is the first.
#[cold]
fn would_refuse<'p, R: ?Sized, C: Clock>(
    layer: &Layer<R, C>,
    dry_run: &mut Option<DryRun<'p>>,
    state: QuotaState<'p>,
    wait: u64,
    n: u32,
) {
    // Relaxed: a statistic; nothing is ordered by it.
    layer.refused.fetch_add(1, Ordering::Relaxed);
    if let Some(live) = layer.quotas.get(state.quota_index) {
        live.metrics.dry_run_refused.increment(u64::from(n));
    }
    dry_run.get_or_insert(DryRun { state, wait });
}

/// `n` cells asked of quota `q` of `layer` (an enforcing policy), whose burst is smaller.
#[cold]
fn oversized<'p, R: ?Sized, C: Clock>(
    layer: &'p Layer<R, C>,
    index: usize,
    q: usize,
    n: u32,
    quota: Quota,
) -> Oversized<'p> {
    // Never admitted: refused cells of the quota too small for them (`metrics`).
    if let Some(live) = layer.quotas.get(q) {
        live.metrics.refused.increment(u64::from(n));
    }
    Oversized {
        policy: &layer.name,
        index,
        quota_index: q,
        quota,
        capacity: InsufficientCapacity {
            requested: n,
            burst: quota.burst(),
        },
    }
}

/// One cell never exceeds a burst (every burst is at least 1); were it reported anyway, a
/// refusal that never conforms is the safe answer.
#[cold]
pub(super) fn unreachable_oversized(
    oversized: Oversized<'_>,
) -> Result<Admitted<'_>, Rejected<'_>> {
    debug_assert!(false, "one cell exceeded a burst");
    let limit = oversized.capacity.burst;
    Err(Rejected {
        by: QuotaState {
            policy: oversized.policy,
            index: oversized.index,
            quota_index: oversized.quota_index,
            quota: oversized.quota,
            gauge: Gauge::new(u64::from(limit), 1, limit, u64::MAX),
        },
        wait: u64::MAX,
        jitter: 0,
        cause: crate::Cause::Quota,
        dry_run: None,
    })
}

#[cfg(all(test, not(flowgate_loom)))]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::policy::Policy;

    /// A quota replaced between the hot path's read of its rule and the slow path: the request
    /// is decided again under the new quota, not refused with numbers of the old one.
    #[test]
    fn a_quota_replaced_mid_decision_is_decided_again_under_the_new_one() {
        let set = Policies::<()>::builder()
            .clock(ManualClock::new())
            .policy(Policy::global("g").quota(Quota::per_hour(1).unwrap()))
            .build()
            .unwrap();
        let now = 1_000;
        assert!(set.check_at(&(), now).is_ok());
        let live = &set.layers[0].quotas[0];
        let (_, old) = live.rule();
        let Store::Global(cells) = &set.layers[0].store else {
            unreachable!("a global policy")
        };
        let word = cells[0].load();
        // Under the version the hot path read, the spent bucket refuses.
        let Outcome::Refused(refused, quota) = set.slow(0, 0, 0, old, 1, now, Miss::Refused(word))
        else {
            panic!("the spent 1/h bucket must refuse");
        };
        assert_eq!(quota, Quota::per_hour(1).unwrap());
        assert!(refused.retry_after_nanos() > 0);
        // Replaced in between: the slow path sees a new version and admits under 20/h with a
        // burst of 40 (the bucket's hour of lead is half of the new two-hour window).
        let wider = Quota::per_hour(20).unwrap().with_burst(40).unwrap();
        set.replace_quotas("g", &[wider]).unwrap();
        match set.slow(0, 0, 0, old, 1, now, Miss::Refused(word)) {
            Outcome::Taken { wrote, debt } => {
                assert!(wrote.is_some());
                // The hour of lead plus the new cell's 180 s (20/h: one cell every 3 minutes).
                assert_eq!(debt, 3_600_000_000_000 + 180_000_000_000);
                assert_eq!(live.rule().0.gauge(debt).remaining(), 19);
            }
            _ => panic!("20/h has cells left"),
        }
    }
}

#[cfg(all(test, feature = "metrics"))]
mod metrics_tests {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    use crate::policy::{Policies, Policy};
    use crate::Quota;

    /// The HTTP middleware's path (`admits`, which builds no admission) counts as `check_n`
    /// does.
    #[test]
    fn both_paths_count_admitted_cells() {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let policies = metrics::with_local_recorder(&recorder, || {
            Policies::<str>::builder()
                .policy(Policy::global("all").quota(Quota::per_hour(10).unwrap()))
                .build()
                .unwrap()
        });
        assert!(policies.admits("a", 2).unwrap().is_ok());
        assert!(policies.check_n("a", 3).unwrap().is_ok());
        let admitted: Vec<u64> = snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .filter(|(key, ..)| key.key().name() == "flowgate_admitted_cells_total")
            .map(|(.., value)| match value {
                DebugValue::Counter(n) => n,
                _ => 0,
            })
            .collect();
        assert_eq!(admitted, [5]);
    }
}
