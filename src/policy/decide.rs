//! How a policy set decides one request: quota by quota through the crate's one
//! compare-and-swap loop, an undo log of what it took, the exact undo when a later quota
//! refuses, and the refusal's details. See the [`policy` module docs](super) for what is
//! decided; this module is how.
//!
//! # The path of a decision
//! The set's rules are read once (its thread's copy of the quotas' algorithms: see
//! `policy::rules`). For each policy that applies (one hash of its key), for each of its
//! quotas: look its bucket up, and decide with the quota's algorithm as its own type, as a
//! single limiter of that algorithm does, noting the words before and after the write. The clock is read once, just after the first lookup, so that the read
//! overlaps that lookup's cache miss. A refusal undoes what was taken, newest first, and then
//! looks at the quotas after the refusing one, so that the retry-after covers them all
//! ([`reject`](Policies::reject), in `refuse`).

use arrayvec::ArrayVec;

use super::layer::{Bucket, Buckets, Layer, Place};
use super::report::{Report, Summary, Undo, UndoLog};
use super::Policies;
use super::Refused;
use crate::algorithm::{each, next_cell, Algorithm, AnyAlgorithm};
use crate::cell::taking;
use crate::clock::Clock;
use crate::keyed::Tag;
use crate::observe;
use crate::outcome::{DryRun, Gauge, InsufficientCapacity};

/// A decision's answer: too many cells (never), or admitted (reported as `A`) or refused (now).
pub(crate) type Answer<A> = Result<Result<A, Refused>, InsufficientCapacity>;

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

/// One decision under way: what it has taken (to undo on a refusal) and the first dry-run
/// policy that would have refused. What it reports is kept apart, by the inlined hot path only,
/// so that a caller who ignores the report (`is_ok()`) does not pay for it: the cold paths,
/// which are not inlined, never see it.
pub(super) struct Decision<'p, R: ?Sized, C: Clock, F> {
    pub(super) set: &'p Policies<R, C>,
    pub(super) n: u32,
    reading: Reading<F>,
    pub(super) undo: UndoLog<'p>,
    pub(super) dry_run: Option<DryRun>,
    /// The longest delay an admitting quota asked for (a shaping one).
    delay: u64,
    /// The undo entries whose quota was left near its limit (the `metrics` feature).
    near: u32,
    /// How a decision that ends before its last quota ends (a refusal, too many cells).
    pub(super) end: Option<Result<Refused, InsufficientCapacity>>,
}

/// What a decision does after one quota (small, so that it stays in a register).
pub(super) enum Next {
    /// Go on with the policy's next quota.
    Go,
    /// Go on with the next policy (a dry-run policy's refusal).
    Stop,
    /// The decision ends, as it noted in [`Decision::end`].
    Done,
}

/// What a quota's cold path left: an admission (the bucket's gauge after it and the quota in
/// force, for the report), or what the decision does next.
pub(super) enum Cold {
    /// The gauge, the quota in force, and the time until the bucket holds one more cell.
    Taken(Gauge, crate::Quota, u64),
    Then(Next),
}

impl<R: ?Sized, C: Clock> Policies<R, C> {
    /// Decides `n ≥ 1` cells at the reading `now()` (taken once the first bucket has been
    /// looked up): takes quota by quota, undoing on a refusal; an admission is reported by
    /// `report`.
    #[inline(always)]
    pub(crate) fn decide<'p, P: Report<'p>>(
        &'p self,
        request: &R,
        n: u32,
        now: impl FnOnce() -> u64,
        report: P,
    ) -> Answer<P::Output> {
        let deciding = Deciding {
            set: self,
            request,
            n,
            now,
            report,
        };
        deciding.read(&self.rules.read())
    }
}

/// A decision before it has read the set's algorithms.
struct Deciding<'p, 'r, R: ?Sized, C: Clock, F, P> {
    set: &'p Policies<R, C>,
    request: &'r R,
    n: u32,
    now: F,
    report: P,
}

impl<'p, R: ?Sized, C: Clock, F: FnOnce() -> u64, P: Report<'p>> Deciding<'p, '_, R, C, F, P> {
    /// The decision with the set's algorithms `rules`: inlined whole, so that what a caller
    /// ignores of the answer (`is_ok()`) is never built.
    #[inline(always)]
    fn read(self, rules: &[AnyAlgorithm]) -> Answer<P::Output> {
        let Deciding {
            set,
            request,
            n,
            now,
            mut report,
        } = self;
        let mut decision = Decision {
            set,
            n,
            reading: Reading {
                read: Some(now),
                now: 0,
            },
            undo: ArrayVec::new(),
            dry_run: None,
            delay: 0,
            near: 0,
            end: None,
        };
        for (index, layer) in set.layers.iter().enumerate() {
            let tag = match layer.tag(request) {
                Ok(Some(tag)) => tag,
                Ok(None) => continue,
                Err(why) => match decision.rejected(layer, why) {
                    Some(refused) => return Ok(Err(refused)),
                    None => continue,
                },
            };
            let at = (index, layer, tag);
            if let Some(end) = decision.policy(at, rules, request, &mut report) {
                return match end {
                    Ok(refused) => Ok(Err(refused)),
                    Err(capacity) => Err(capacity),
                };
            }
        }
        let admitted = decision.admitted(report);
        // Admitted: nothing to give back when the decision is dropped.
        decision.undo.clear();
        Ok(Ok(admitted))
    }
}

/// A decision that ends by a panic (a key extractor's, a key's `Hash`, a metrics recorder's)
/// gives back what it took, as a refusal does: every other end empties the undo log first.
impl<R: ?Sized, C: Clock, F> Drop for Decision<'_, R, C, F> {
    fn drop(&mut self) {
        if !self.undo.is_empty() {
            self.set.undo(&mut self.undo, 0);
        }
    }
}

impl<R: ?Sized, C: Clock> Policies<R, C> {
    /// Undoes the writes logged after `mark`, newest first.
    pub(crate) fn undo(&self, undo: &mut UndoLog<'_>, mark: usize) {
        while undo.len() > mark {
            let Some(u) = undo.pop() else { break };
            // An untracked admission (a new key with no room) wrote nothing.
            if u.before == u.after {
                continue;
            }
            let (index, q) = u.place.at();
            // A bucket written since is left as it is: see the policy module docs.
            self.layers[index].restore((q, u.tag), u.before, u.after);
        }
    }
}

impl<'p, R: ?Sized, C: Clock, F: FnOnce() -> u64> Decision<'p, R, C, F> {
    /// Takes the request's cells from every quota of policy `index` (its bucket `tag`). `Some`
    /// ends the decision: a refusal (with everything undone) or too many cells.
    #[inline(always)]
    fn policy<P: Report<'p>>(
        &mut self,
        (index, layer, tag): (usize, &'p Layer<R, C>, Tag),
        rules: &[AnyAlgorithm],
        request: &R,
        report: &mut P,
    ) -> Option<Result<Refused, InsufficientCapacity>> {
        let at = (index, layer, tag);
        // From its first quota's on: zipped with its quotas, which end first.
        let rules = rules.get(layer.first..).unwrap_or_default();
        // Where the buckets live is asked once per policy, not once per quota.
        match &layer.buckets {
            Buckets::Global(cells) => {
                let buckets = cells.iter().map(|cell| Bucket::Cell(cell));
                self.quotas(at, rules, (request, report), buckets)
            }
            Buckets::Keyed { stores, .. } => {
                // The first quota's lookup loads its line at once; the others' lines are
                // fetched meanwhile, so their misses overlap it instead of following it.
                for q in 1..stores.len() {
                    stores[q].prefetch(tag);
                }
                let buckets = stores.iter().map(Bucket::Keyed);
                self.quotas(at, rules, (request, report), buckets)
            }
        }
    }

    /// [`policy`](Self::policy) once its `buckets` are found, its quotas' algorithms
    /// being `rules`: each quota decides with its algorithm as its own type.
    #[inline(always)]
    fn quotas<P: Report<'p>>(
        &mut self,
        (index, layer, tag): (usize, &'p Layer<R, C>, Tag),
        rules: &[AnyAlgorithm],
        (request, report): (&R, &mut P),
        buckets: impl Iterator<Item = Bucket<'p, C>>,
    ) -> Option<Result<Refused, InsufficientCapacity>> {
        let mark = self.undo.len();
        let quotas = layer.places.iter().zip(rules).zip(buckets);
        for (q, ((place, any), bucket)) in quotas.enumerate() {
            let at = (index, q, tag);
            let quota = (place, bucket);
            let next = each!(any, a => self.quota((a, any), quota, at, (mark, request), report));
            match next {
                Next::Go => {}
                // A dry-run policy's refusal: its other quotas are not asked.
                Next::Stop => break,
                Next::Done => return self.end.take(),
            }
        }
        None
    }

    /// Quota `q` of policy `index` (`algorithm`, which is `any` as its own type) decides on its
    /// `bucket`, the request's `tag`, as a single limiter of that algorithm does; refusals and
    /// missed lookups go to the cold path.
    #[inline(always)]
    fn quota<A: Algorithm, P: Report<'p>>(
        &mut self,
        (algorithm, any): (&A, &AnyAlgorithm),
        (place, bucket): (&'p Place, Bucket<'p, C>),
        (index, q, tag): (usize, usize, Tag),
        (mark, request): (usize, &R),
        report: &mut P,
    ) -> Next {
        if self.n > algorithm.capacity() {
            return self.oversized(index, q, mark, algorithm.capacity());
        }
        let n = self.n;
        let mut wrote = None;
        let reading = &mut self.reading;
        let step = |word, now| taking(algorithm, now, n, &mut wrote)(word);
        match bucket.try_update(tag, || reading.get(), step) {
            Some(Some((delay, word))) => {
                // Read by `try_update`, which has found the bucket.
                let now = self.reading.now;
                let state = || (algorithm.state(word, now).gauge(), *algorithm.quota());
                let next = || next_cell(algorithm, word, now);
                self.taken(report, (place, tag), wrote, delay, (state, next));
                Next::Go
            }
            _ => self.after_cold(any, (index, q, tag), mark, request, report),
        }
    }

    /// The [`cold`](Self::cold) path of quota `q` of policy `index`, and its admission (if it
    /// admits) told to `report`.
    #[inline(always)]
    fn after_cold<P: Report<'p>>(
        &mut self,
        algorithm: &AnyAlgorithm,
        at: (usize, usize, Tag),
        mark: usize,
        request: &R,
        report: &mut P,
    ) -> Next {
        match self.cold(algorithm, at, mark, request) {
            Cold::Taken(gauge, quota, next) => {
                let place = &self.set.layers[at.0].places[at.1];
                if !place.dry_run {
                    report.taken(place, || (gauge, quota), || next);
                }
                Next::Go
            }
            Cold::Then(next) => next,
        }
    }

    /// `place` admitted the request for the bucket `tag`, writing `wrote` (the bucket's words
    /// before and after; nothing for an untracked new key), to go ahead after `delay`; `state`
    /// gives the bucket's gauge after it and the quota in force, and `next` the time until it
    /// holds one more cell, each worked out only if `report` asks.
    #[inline(always)]
    fn taken<P: Report<'p>>(
        &mut self,
        report: &mut P,
        (place, tag): (&'p Place, Tag),
        wrote: Option<(u64, u64)>,
        delay: u64,
        (state, next): (impl Fn() -> (Gauge, crate::Quota), impl Fn() -> u64),
    ) {
        let near = observe::ENABLED && state().0.near_limit();
        self.log((place, tag), wrote, delay, near);
        if !place.dry_run {
            report.taken(place, state, next);
        }
    }

    /// Logs the write `place` made for the bucket `tag`, which left it `near` its limit or not
    /// (see [`taken`](Self::taken)).
    #[inline(always)]
    pub(super) fn log(
        &mut self,
        (place, tag): (&'p Place, Tag),
        wrote: Option<(u64, u64)>,
        delay: u64,
        near: bool,
    ) {
        let (before, after) = wrote.unwrap_or((0, 0));
        if near {
            self.near |= 1 << self.undo.len();
        }
        // At most MAX_QUOTAS quotas in a set (checked at build): room.
        self.undo.push(Undo {
            place,
            tag,
            before,
            after,
        });
        self.delay = self.delay.max(delay);
    }

    /// The admission: every quota the request went through took its cells.
    #[inline(always)]
    fn admitted<P: Report<'p>>(&self, report: P) -> P::Output {
        // Behind the constant, so that without the feature not even the empty loop is left.
        if observe::ENABLED {
            for (i, entry) in self.undo.iter().enumerate() {
                let metrics = &entry.place.metrics;
                metrics.admitted.increment(u64::from(self.n));
                if self.near & 1 << i != 0 {
                    metrics.near_limit.increment(1);
                }
            }
        }
        report.finish(Summary {
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
