//! The cold paths of a policy decision: a quota whose bucket a lock-free probe did not find, that
//! refuses, or that is too small for the request.
//! A dry-run policy's refusal is counted and its cells given back; an enforcing policy's undoes
//! everything, then looks at every enforcing quota after the refusing one so that the
//! retry-after covers the quota that conforms last, and adds that policy's jitter.

use super::decide::{Cold, Decision, Next};
use super::layer::{Layer, Place};
use super::Policies;
use super::Refused;
use crate::algorithm::{next_cell, Algorithm, AnyAlgorithm};
use crate::clock::Clock;
use crate::jitter;
use crate::keyed::Tag;
use crate::observe;
use crate::outcome::{DryRun, InsufficientCapacity, QuotaState, Rejection};
use crate::primitive::Ordering;

impl<'p, R: ?Sized, C: Clock, F: FnOnce() -> u64> Decision<'p, R, C, F> {
    /// What a quota's hot path leaves: a refusal, or a keyed bucket a lock-free probe did not
    /// find. Decided here in full, with the quota's `algorithm` as the decision read it (under
    /// the shard's lock if need be): the refusal's details, or an admission if cells came back
    /// meanwhile.
    #[cold]
    #[inline(never)]
    pub(super) fn cold(
        &mut self,
        algorithm: &AnyAlgorithm,
        (index, q, tag): (usize, usize, Tag),
        mark: usize,
        request: &R,
    ) -> Cold {
        let set = self.set;
        let layer = &set.layers[index];
        let place = &layer.places[q];
        let now = self.now();
        let mut wrote = None;
        let clamp = || set.catch_up_now(index, (q, tag));
        match layer.decide((q, tag), algorithm, (self.n, now), clamp, &mut wrote) {
            Ok(allowed) => {
                let state = (allowed.gauge(), *algorithm.quota());
                let near = observe::ENABLED && state.0.near_limit();
                self.log((place, tag), wrote, allowed.delay_nanos(), near);
                // An untracked admission wrote nothing: a fresh bucket's, as it reports.
                let next = wrote.map_or(0, |(_, after)| next_cell(algorithm, after, now));
                Cold::Taken(state.0, state.1, next)
            }
            Err(refused) => Cold::Then(self.refused((index, q, tag), mark, refused, request)),
        }
    }

    /// Quota `q` of policy `index` refused: a dry-run policy's refusal is counted and its cells
    /// given back (go on with the next policy); an enforcing one's ends the decision with
    /// everything given back.
    #[cold]
    #[inline(never)]
    pub(super) fn refused(
        &mut self,
        (index, q, tag): (usize, usize, Tag),
        mark: usize,
        refused: crate::Refused,
        request: &R,
    ) -> Next {
        let set = self.set;
        let layer = &set.layers[index];
        if layer.dry_run {
            set.undo(&mut self.undo, mark);
            self.would_refuse(layer, &layer.places[q], refused.conforms_after_nanos());
            return Next::Stop;
        }
        set.undo(&mut self.undo, 0);
        let now = self.now();
        let refused = set.reject(request, (self.n, now), (index, q, tag), refused);
        let dry_run = self.dry_run;
        self.end = Some(refused.map(|mut refused| {
            refused.dry_run = dry_run;
            refused
        }));
        Next::Done
    }

    /// Policy `layer`'s extractor rejected the request: an enforcing policy's rejection ends
    /// the decision with everything given back; a dry-run one's is a skip (`None`: go on).
    #[cold]
    #[inline(never)]
    pub(super) fn rejected(
        &mut self,
        layer: &Layer<R, C>,
        why: &'static Rejection,
    ) -> Option<Refused> {
        if layer.dry_run {
            return None;
        }
        self.set.undo(&mut self.undo, 0);
        let mut refused = rejected(layer, why, self.n);
        refused.dry_run = self.dry_run;
        Some(refused)
    }

    /// `n` is above the capacity of quota `q` of policy `index`: an enforcing policy's ends the
    /// decision (everything given back); a dry-run one would refuse (`None`: go on).
    #[cold]
    #[inline(never)]
    pub(super) fn oversized(&mut self, index: usize, q: usize, mark: usize, capacity: u32) -> Next {
        let set = self.set;
        let layer = &set.layers[index];
        if !layer.dry_run {
            set.undo(&mut self.undo, 0);
            self.end = Some(Err(oversized(&layer.places[q], self.n, capacity)));
            return Next::Done;
        }
        set.undo(&mut self.undo, mark);
        self.would_refuse(layer, &layer.places[q], u64::MAX);
        Next::Stop
    }

    /// Counts a dry-run policy's would-be refusal by `place`, and reports it if it is the first.
    fn would_refuse(&mut self, layer: &Layer<R, C>, place: &Place, wait: u64) {
        // Relaxed: a statistic; nothing is ordered by it.
        layer.refused.fetch_add(1, Ordering::Relaxed);
        place.metrics.dry_run_refused.increment(u64::from(self.n));
        let by = place.by;
        self.dry_run.get_or_insert(DryRun { by, wait });
    }
}

impl<R: ?Sized, C: Clock> Policies<R, C> {
    /// The refusal of the first enforcing policy whose extractor rejects `request`, for a
    /// decision of no cells (which takes nothing, so has nothing to give back).
    #[cold]
    #[inline(never)]
    pub(super) fn rejection(&self, request: &R) -> Option<Refused> {
        let enforcing = self.layers.iter().filter(|layer| !layer.dry_run);
        enforcing
            .filter_map(|layer| Some(rejected(layer, layer.tag(request).err()?, 0)))
            .next()
    }
}

/// The refusal of `n` cells by enforcing policy `layer`, whose extractor rejected the request
/// with `why`: counted against the policy and its first quota, which it names.
#[cold]
fn rejected<R: ?Sized, C: Clock>(layer: &Layer<R, C>, why: &'static Rejection, n: u32) -> Refused {
    // Relaxed: a statistic; nothing is ordered by it.
    layer.refused.fetch_add(1, Ordering::Relaxed);
    let by = layer.places.first().map(|place| {
        place.metrics.refused.increment(u64::from(n));
        place.by
    });
    Refused::rejected(why, by, None)
}

/// `n` cells asked of `place` (an enforcing policy's quota), whose `capacity` is smaller.
#[cold]
fn oversized(place: &Place, n: u32, capacity: u32) -> InsufficientCapacity {
    // Never admitted: refused cells of the quota too small for them (`metrics`).
    place.metrics.refused.increment(u64::from(n));
    InsufficientCapacity {
        requested: n,
        burst: capacity,
        by: Some(place.by),
    }
}

impl<R: ?Sized, C: Clock> Policies<R, C> {
    /// Completes the refusal of quota `q` of policy `index` (for its bucket `tag`; made by an
    /// enforcing quota, with everything undone): looks at every enforcing quota after it, so
    /// that the retry-after covers the one that conforms last, then adds that policy's jitter
    /// and counts the refusal against it. A later quota too small for the request makes it one
    /// that never succeeds, and a later policy's rejection makes it that rejection. The quotas after the refusing one are looked at as they are in
    /// force now.
    #[cold]
    #[inline(never)]
    pub(super) fn reject(
        &self,
        request: &R,
        (n, now): (u32, u64),
        (index, q, tag): (usize, usize, Tag),
        refused: crate::Refused,
    ) -> Result<Refused, InsufficientCapacity> {
        let worst = self.rules.with(|rules| {
            let mut worst = (&self.layers[index].places[q], refused);
            for (i, layer) in self.layers.iter().enumerate().skip(index) {
                if layer.dry_run {
                    continue;
                }
                let (tag, from) = if i == index {
                    (tag, q + 1)
                } else {
                    match layer.tag(request) {
                        Ok(Some(tag)) => (tag, 0),
                        Ok(None) => continue,
                        // Never admitted, whatever the buckets: the rejection is the answer.
                        Err(why) => return Err(Ok(rejected(layer, why, n))),
                    }
                };
                let quotas = layer.places.iter().zip(layer.algorithms(rules));
                for (q, (place, algorithm)) in quotas.enumerate().skip(from) {
                    if n > algorithm.capacity() {
                        return Err(Err(oversized(place, n, algorithm.capacity())));
                    }
                    let Err(later) = self.peek(layer, (q, tag), algorithm, n, now) else {
                        continue;
                    };
                    if later.conforms_after_nanos() > worst.1.conforms_after_nanos() {
                        worst = (place, later);
                    }
                }
            }
            Ok(worst)
        });
        let (place, refused) = match worst {
            Ok(worst) => worst,
            Err(end) => return end,
        };
        let layer = &self.layers[place.at().0];
        let jitter = jitter::refusal_jitter(layer.jitter, refused.wait);
        // Relaxed: a statistic; nothing is ordered by it.
        layer.refused.fetch_add(1, Ordering::Relaxed);
        place.metrics.refused.increment(u64::from(n));
        Ok(Refused::new(refused, Some(place.by), None, jitter))
    }

    /// The decision quota `q` of `layer` would make of `n ≤ capacity` cells for the bucket
    /// `tag` at `now`, taking nothing; clamps a bucket booked further ahead than `now`
    /// explains, as a decision does.
    fn peek(
        &self,
        layer: &Layer<R, C>,
        at: (usize, Tag),
        algorithm: &AnyAlgorithm,
        n: u32,
        now: u64,
    ) -> Result<(), crate::Refused> {
        let word = layer.word(at, algorithm, now);
        let refused = algorithm.peek(word, now, n).err();
        if let Some(refused) = refused {
            if refused.clock_behind() {
                layer.catch_up(at, algorithm, &self.clock);
            }
            return Err(refused);
        }
        Ok(())
    }

    /// After a decision's refusal flagged as "clock behind", clamps quota `q` of policy `index`
    /// (the bucket `tag`) against a fresh reading, under the quota in force now, not the
    /// decision's reading of it: a quota raised in between must not see cells booked under it
    /// freed by the old, shorter lead.
    #[cold]
    #[inline(never)]
    pub(super) fn catch_up_now(&self, index: usize, (q, tag): (usize, Tag)) {
        let layer = &self.layers[index];
        self.rules.with(|rules| {
            if let Some(algorithm) = layer.algorithms(rules).get(q) {
                layer.catch_up((q, tag), algorithm, &self.clock);
            }
        });
    }

    /// Quota `q` of `layer` for the bucket `tag` at `now`, taking nothing.
    pub(super) fn peek_state(
        &self,
        layer: &Layer<R, C>,
        (q, tag): (usize, Tag),
        algorithm: &AnyAlgorithm,
        now: u64,
    ) -> QuotaState {
        let word = layer.word((q, tag), algorithm, now);
        let gauge = algorithm.state(word, now).gauge();
        QuotaState::new(layer.places[q].by, *algorithm.quota(), gauge)
            .next_after(next_cell(algorithm, word, now))
    }
}
