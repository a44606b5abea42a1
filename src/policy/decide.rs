//! How a policy set decides one request: quota by quota through the crate's one
//! compare-and-swap loop, an undo log of what it took, the exact undo when a later quota
//! refuses, and the refusal's details. See the [`policy` module docs](super) for what is
//! decided; this module is how.
//!
//! # The path of a decision
//! For each policy that applies (one hash of its key), for each of its quotas: read the
//! quota's algorithm (an [`AnyAlgorithm`], a few words under a sequence lock), look its bucket
//! up, and decide with the algorithm as a single limiter does, noting the words before and
//! after the write. The clock is read once, just after the first lookup, so that the read
//! overlaps that lookup's cache miss. A refusal undoes what was taken, newest first, and then
//! looks at the quotas after the refusing one, so that the retry-after covers them all
//! ([`reject`](Policies::reject), in `refuse`).

use arrayvec::ArrayVec;

use super::layer::Layer;
use super::live::LiveQuota;
use super::report::{Report, Summary};
use super::{Policies, MAX_QUOTAS};
use crate::algorithm::{Algorithm, AnyAlgorithm};
use crate::clock::Clock;
use crate::keyed::Tag;
use crate::observe;
use crate::outcome::{DryRun, InsufficientCapacity, Refused};

/// A decision's answer: too many cells (never), or admitted (reported as `A`) or refused (now).
pub(crate) type Answer<A> = Result<Result<A, Refused>, InsufficientCapacity>;

/// One write to undo if a later quota refuses (or a wait gives its reservation back).
#[derive(Clone, Copy)]
pub(crate) struct Undo<'p> {
    /// The quota (which knows its policy and place).
    pub(crate) live: &'p LiveQuota,
    pub(crate) tag: Tag,
    pub(crate) before: u64,
    pub(crate) after: u64,
}

/// The undo log of a decision: one entry per quota that admitted it.
pub(crate) type UndoLog<'p> = ArrayVec<Undo<'p>, MAX_QUOTAS>;

/// The clock, read once for the whole decision when first needed (after the first lookup).
struct Reading<F> {
    read: Option<F>,
    now: u64,
}

impl<F: FnOnce() -> u64> Reading<F> {
    #[inline(always)]
    fn get(&mut self) -> u64 {
        if let Some(read) = self.read.take() {
            self.now = read();
        }
        self.now
    }
}

/// One decision under way: what it has taken (to undo on a refusal), what it reports, and the
/// first dry-run policy that would have refused.
pub(super) struct Decision<'p, R: ?Sized, C: Clock, F, P> {
    pub(super) set: &'p Policies<R, C>,
    pub(super) n: u32,
    reading: Reading<F>,
    pub(super) undo: UndoLog<'p>,
    pub(super) dry_run: Option<DryRun>,
    /// The longest delay an admitting quota asked for (a shaping one).
    delay: u64,
    /// The undo entries whose quota was left near its limit (the `metrics` feature).
    near: u32,
    report: P,
}

impl<R: ?Sized, C: Clock> Policies<R, C> {
    /// Decides `n ≥ 1` cells at the reading `now()` (taken once the first bucket has been
    /// looked up): takes quota by quota, undoing on a refusal; an admission is reported by
    /// `report`.
    #[inline]
    pub(crate) fn decide<'p, P: Report<'p>>(
        &'p self,
        request: &R,
        n: u32,
        now: impl FnOnce() -> u64,
        report: P,
    ) -> Answer<P::Output> {
        let mut decision = Decision {
            set: self,
            n,
            reading: Reading {
                read: Some(now),
                now: 0,
            },
            undo: ArrayVec::new(),
            dry_run: None,
            delay: 0,
            near: 0,
            report,
        };
        for (index, layer) in self.layers.iter().enumerate() {
            let Some(tag) = layer.tag(request) else {
                continue;
            };
            if let Some(answer) = decision.policy(index, layer, tag, request) {
                return answer;
            }
        }
        Ok(Ok(decision.admitted()))
    }

    /// Undoes the writes logged after `mark`, newest first.
    pub(crate) fn undo(&self, undo: &mut UndoLog<'_>, mark: usize) {
        while undo.len() > mark {
            let Some(u) = undo.pop() else { break };
            // An untracked admission (a new key with no room) wrote nothing.
            if u.before == u.after {
                continue;
            }
            let (index, q) = u.live.at();
            // A bucket written since is left as it is: see the policy module docs.
            self.layers[index].restore((q, u.tag), u.before, u.after);
        }
    }
}

impl<'p, R: ?Sized, C: Clock, F: FnOnce() -> u64, P: Report<'p>> Decision<'p, R, C, F, P> {
    /// Takes the request's cells from every quota of policy `index` (its bucket `tag`). `Some`
    /// ends the decision: a refusal (with everything undone) or too many cells.
    #[inline(always)]
    fn policy(
        &mut self,
        index: usize,
        layer: &'p Layer<R, C>,
        tag: Tag,
        request: &R,
    ) -> Option<Answer<P::Output>> {
        let mark = self.undo.len();
        for (q, live) in layer.quotas.iter().enumerate() {
            let algorithm = live.load();
            let capacity = algorithm.capacity();
            if self.n > capacity {
                match self.oversized(index, (q, tag), mark, &algorithm) {
                    Some(answer) => return Some(answer),
                    // A dry-run policy's: its other quotas are not asked.
                    None => break,
                }
            }
            let mut wrote = None;
            let reading = &mut self.reading;
            let clock = &self.set.clock;
            let answer = layer.decide(
                (q, tag),
                &algorithm,
                self.n,
                || reading.get(),
                clock,
                &mut wrote,
            );
            match answer {
                Ok(allowed) => self.taken(live, &algorithm, tag, wrote, allowed),
                Err(refused) => {
                    match self.refused(index, (q, tag), mark, &algorithm, refused, request) {
                        Some(answer) => return Some(answer),
                        // A dry-run policy's refusal: its other quotas are not asked.
                        None => break,
                    }
                }
            }
        }
        None
    }

    /// `live` admitted the request with `algorithm`, writing `wrote` (the bucket's words before
    /// and after; nothing for an untracked new key).
    #[inline(always)]
    fn taken(
        &mut self,
        live: &'p LiveQuota,
        algorithm: &AnyAlgorithm,
        tag: Tag,
        wrote: Option<(u64, u64)>,
        allowed: crate::Allowed,
    ) {
        let (before, after) = wrote.unwrap_or((0, 0));
        let gauge = allowed.gauge();
        if observe::ENABLED && gauge.near_limit() {
            self.near |= 1 << self.undo.len();
        }
        // At most MAX_QUOTAS quotas in a set (checked at build): room.
        self.undo.push(Undo {
            live,
            tag,
            before,
            after,
        });
        self.delay = self.delay.max(allowed.delay_nanos());
        if !live.dry_run() {
            self.report.taken(live, algorithm, gauge);
        }
    }

    /// The admission: every quota the request went through took its cells.
    #[inline(always)]
    fn admitted(self) -> P::Output {
        // Behind the constant, so that without the feature not even the empty loop is left.
        if observe::ENABLED {
            for (i, entry) in self.undo.iter().enumerate() {
                let metrics = &entry.live.metrics;
                metrics.admitted.increment(u64::from(self.n));
                if self.near & 1 << i != 0 {
                    metrics.near_limit.increment(1);
                }
            }
        }
        self.report.finish(Summary {
            delay: self.delay,
            dry_run: self.dry_run,
            undo: &self.undo,
        })
    }

    /// The decision's reading of the clock (taken now if no bucket was looked up yet).
    pub(super) fn now(&mut self) -> u64 {
        self.reading.get()
    }
}
