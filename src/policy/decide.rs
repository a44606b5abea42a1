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

use super::layer::{Bucket, Buckets, Layer};
use super::live::LiveQuota;
use super::report::{Report, Summary};
use super::{Policies, MAX_QUOTAS};
use crate::algorithm::{Algorithm, AnyAlgorithm, Apply, Rule, Step, WORDS};
use crate::cell::taking;
use crate::clock::Clock;
use crate::keyed::Tag;
use crate::observe;
use crate::outcome::{DryRun, Gauge, InsufficientCapacity, Refused};

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
pub(super) struct Decision<'p, R: ?Sized, C: Clock, F, P: Report<'p>> {
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
    /// The answer of a decision that ends before its last quota (a refusal, too many cells).
    pub(super) end: Option<Answer<P::Output>>,
}

/// What a decision does after one quota (small, so that it stays in a register).
pub(super) enum Next {
    /// Go on with the policy's next quota.
    Go,
    /// Go on with the next policy (a dry-run policy's refusal).
    Stop,
    /// The decision ends, with the answer it parked in [`Decision::end`].
    Done,
}

/// One quota's part of a decision on the general path, run with the quota's algorithm as its
/// own type ([`AnyAlgorithm::apply_words`]).
struct General<'d, 'p, R: ?Sized, C: Clock, F, P: Report<'p>> {
    decision: &'d mut Decision<'p, R, C, F, P>,
    bucket: Bucket<'p, C>,
    /// The policy's place, the quota's, and the request's tag in the policy.
    at: (usize, usize, Tag),
    live: &'p LiveQuota,
    /// Where this policy's entries start in the undo log.
    mark: usize,
    request: &'d R,
}

impl<'p, R: ?Sized, C: Clock, F: FnOnce() -> u64, P: Report<'p>> Apply
    for General<'_, 'p, R, C, F, P>
{
    type Output = Next;

    #[inline(always)]
    fn apply<A: Algorithm>(self, algorithm: &A) -> Next {
        let General {
            decision,
            bucket,
            at: (index, q, tag),
            live,
            mark,
            request,
        } = self;
        if decision.n > algorithm.capacity() {
            return decision.oversized(index, q, mark, algorithm.capacity());
        }
        let n = decision.n;
        let mut wrote = None;
        let reading = &mut decision.reading;
        let step = |word, now| taking(algorithm, now, n, &mut wrote)(word);
        match bucket.try_update(tag, || reading.get(), step) {
            Some(Some((delay, word))) => {
                let now = decision.now();
                let state = || (algorithm.state(word, now).gauge(), *algorithm.quota());
                decision.taken(live, tag, wrote, delay, state);
                Next::Go
            }
            _ => decision.cold((index, q, tag), mark, request),
        }
    }
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
            end: None,
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
        // Where the buckets live is asked once per policy, not once per quota.
        match &layer.buckets {
            Buckets::Global(cells) => {
                self.quotas((index, layer, tag), request, |q| Bucket::Cell(&cells[q]))
            }
            Buckets::Keyed { stores, .. } => {
                self.quotas((index, layer, tag), request, |q| Bucket::Keyed(&stores[q]))
            }
        }
    }

    /// [`policy`](Self::policy) once its buckets are found by `bucket`: each quota decides as
    /// GCRA from its rule if it decides as GCRA does, or else with its algorithm as its own
    /// type.
    #[inline(always)]
    fn quotas(
        &mut self,
        (index, layer, tag): (usize, &'p Layer<R, C>, Tag),
        request: &R,
        bucket: impl Fn(usize) -> Bucket<'p, C>,
    ) -> Option<Answer<P::Output>> {
        let mark = self.undo.len();
        for (q, live) in layer.quotas.iter().enumerate() {
            let words = live.read();
            let at = (index, q, tag);
            let next = match AnyAlgorithm::rule(&words) {
                Some(rule) => self.gcra((rule, &words), bucket(q), at, live, mark, request),
                None => {
                    let general = General {
                        decision: self,
                        bucket: bucket(q),
                        at,
                        live,
                        mark,
                        request,
                    };
                    AnyAlgorithm::apply_words(words, general)
                }
            };
            match next {
                Next::Go => {}
                // A dry-run policy's refusal: its other quotas are not asked.
                Next::Stop => break,
                Next::Done => return self.end.take(),
            }
        }
        None
    }

    /// The fast path of a quota that decides as GCRA: `rule`'s numbers, read off the live
    /// quota's words, and nothing else of the algorithm.
    #[inline(always)]
    fn gcra(
        &mut self,
        (rule, words): (Rule, &[u64; WORDS]),
        bucket: Bucket<'p, C>,
        (index, q, tag): (usize, usize, Tag),
        live: &'p LiveQuota,
        mark: usize,
        request: &R,
    ) -> Next {
        if self.n > rule.capacity() {
            return self.oversized(index, q, mark, rule.capacity());
        }
        let n = self.n;
        let mut wrote = None;
        let reading = &mut self.reading;
        let step = |word, now| {
            let step = rule.take(word, now, n);
            wrote = match step {
                Step::Write(new, _) => Some((word, new)),
                Step::Keep(_) => None,
            };
            step
        };
        match bucket.try_update(tag, || reading.get(), step) {
            Some(Some(debt)) => {
                let state = || (rule.gauge(debt), AnyAlgorithm::quota_of(words));
                self.taken(live, tag, wrote, 0, state);
                Next::Go
            }
            _ => self.cold((index, q, tag), mark, request),
        }
    }

    /// What a quota's hot path leaves: a refusal, or a keyed bucket a lock-free probe did not
    /// find. Decided here in full, with the quota's algorithm as it is now (under the shard's
    /// lock if need be): the refusal's details, or an admission if cells came back meanwhile.
    #[cold]
    #[inline(never)]
    fn cold(&mut self, (index, q, tag): (usize, usize, Tag), mark: usize, request: &R) -> Next {
        let set = self.set;
        let layer = &set.layers[index];
        let live = &layer.quotas[q];
        let now = self.now();
        let mut wrote = None;
        match layer.decide((q, tag), self.n, now, &set.clock, &mut wrote) {
            Ok(allowed) => {
                let quota = *live.load().quota();
                self.taken(live, tag, wrote, allowed.delay_nanos(), || {
                    (allowed.gauge(), quota)
                });
                Next::Go
            }
            Err(refused) => self.refused((index, q, tag), mark, refused, request),
        }
    }

    /// `live` admitted the request, writing `wrote` (the bucket's words before and after;
    /// nothing for an untracked new key), to go ahead after `delay`; `state` gives the bucket's
    /// gauge after it and the quota in force, worked out only if a report asks.
    #[inline(always)]
    fn taken(
        &mut self,
        live: &'p LiveQuota,
        tag: Tag,
        wrote: Option<(u64, u64)>,
        delay: u64,
        state: impl Fn() -> (Gauge, crate::Quota),
    ) {
        let (before, after) = wrote.unwrap_or((0, 0));
        if observe::ENABLED && state().0.near_limit() {
            self.near |= 1 << self.undo.len();
        }
        // At most MAX_QUOTAS quotas in a set (checked at build): room.
        self.undo.push(Undo {
            live,
            tag,
            before,
            after,
        });
        self.delay = self.delay.max(delay);
        if !live.dry_run() {
            self.report.taken(live, state);
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
