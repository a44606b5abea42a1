//! The cold paths of a policy decision: a quota that refuses or is too small for the request.
//! A dry-run policy's refusal is counted and its cells given back; an enforcing policy's undoes
//! everything, then looks at every enforcing quota after the refusing one so that the
//! retry-after covers the quota that conforms last, and adds that policy's jitter.

use super::decide::Answer;
use super::layer::Layer;
use super::report::Report;
use super::Policies;
use crate::algorithm::{Algorithm, AnyAlgorithm};
use crate::clock::Clock;
use crate::jitter;
use crate::keyed::Tag;
use crate::outcome::{DryRun, InsufficientCapacity, QuotaState, Refused, Rejection};
use crate::primitive::Ordering;

impl<'p, R: ?Sized, C: Clock, F: FnOnce() -> u64, P: Report<'p>>
    super::decide::Decision<'p, R, C, F, P>
{
    /// Quota `q` of policy `index` refused: a dry-run policy's refusal is counted and its cells
    /// given back (`None`: go on with the next policy); an enforcing one's ends the decision
    /// with everything given back.
    #[cold]
    #[inline(never)]
    pub(super) fn refused(
        &mut self,
        index: usize,
        at: (usize, Tag),
        mark: usize,
        algorithm: &AnyAlgorithm,
        refused: Refused,
        request: &R,
    ) -> Option<Answer<P::Output>> {
        let set = self.set;
        let layer = &set.layers[index];
        let state = QuotaState::new(layer.quotas[at.0].source(algorithm), refused.gauge());
        if layer.dry_run {
            set.undo(&mut self.undo, mark);
            self.would_refuse(layer, state, refused.conforms_after_nanos());
            return None;
        }
        set.undo(&mut self.undo, 0);
        let now = self.now();
        let first = (index, at.1, state, refused);
        Some(
            set.reject(request, (self.n, now), first, self.dry_run)
                .map(Err),
        )
    }

    /// `n` is above the capacity of quota `q` of policy `index`: an enforcing policy's ends the
    /// decision (everything given back); a dry-run one would refuse (`None`: go on).
    #[cold]
    #[inline(never)]
    pub(super) fn oversized(
        &mut self,
        index: usize,
        (q, tag): (usize, Tag),
        mark: usize,
        algorithm: &AnyAlgorithm,
    ) -> Option<Answer<P::Output>> {
        let set = self.set;
        let layer = &set.layers[index];
        if !layer.dry_run {
            set.undo(&mut self.undo, 0);
            return Some(Err(oversized(layer, q, self.n, algorithm)));
        }
        set.undo(&mut self.undo, mark);
        let now = self.now();
        let state = set.peek_state(layer, (q, tag), algorithm, now);
        self.would_refuse(layer, state, u64::MAX);
        None
    }

    /// Counts a dry-run policy's would-be refusal, and reports it if it is the first.
    fn would_refuse(&mut self, layer: &Layer<R, C>, state: QuotaState, wait: u64) {
        // Relaxed: a statistic; nothing is ordered by it.
        layer.refused.fetch_add(1, Ordering::Relaxed);
        if let Some(live) = layer.quotas.get(state.quota_index()) {
            live.metrics.dry_run_refused.increment(u64::from(self.n));
        }
        self.dry_run.get_or_insert(DryRun { state, wait });
    }
}

/// `n` cells asked of quota `q` of `layer` (an enforcing policy), whose capacity is smaller.
#[cold]
fn oversized<R: ?Sized, C: Clock>(
    layer: &Layer<R, C>,
    q: usize,
    n: u32,
    algorithm: &AnyAlgorithm,
) -> InsufficientCapacity {
    let live = &layer.quotas[q];
    // Never admitted: refused cells of the quota too small for them (`metrics`).
    live.metrics.refused.increment(u64::from(n));
    let mut capacity = match InsufficientCapacity::check(n, algorithm.capacity()) {
        Err(capacity) => capacity,
        // Called only when n is above the capacity; were it not, the same error stands.
        Ok(()) => InsufficientCapacity {
            requested: n,
            burst: algorithm.capacity(),
            by: None,
        },
    };
    capacity.by = Some(live.source(algorithm));
    capacity
}

impl<R: ?Sized, C: Clock> Policies<R, C> {
    /// Completes the refusal `first` (policy `index`'s quota in `state`, refused for its
    /// bucket `tag`; made by an enforcing quota, with everything undone): looks at every
    /// enforcing quota after it, so that the retry-after covers the one that conforms last,
    /// then adds that policy's jitter and counts the refusal against it. A later quota too
    /// small for the request makes it one that never succeeds.
    #[cold]
    #[inline(never)]
    pub(super) fn reject(
        &self,
        request: &R,
        (n, now): (u32, u64),
        (index, tag, state, refused): (usize, Tag, QuotaState, Refused),
        dry_run: Option<DryRun>,
    ) -> Result<Refused, InsufficientCapacity> {
        let mut worst = (state, refused);
        let first = (state.policy_index(), state.quota_index());
        for (i, layer) in self.layers.iter().enumerate().skip(first.0) {
            if layer.dry_run {
                continue;
            }
            let (tag, from) = if i == index {
                (tag, first.1 + 1)
            } else {
                match layer.tag(request) {
                    Some(tag) => (tag, 0),
                    None => continue,
                }
            };
            for (q, live) in layer.quotas.iter().enumerate().skip(from) {
                let algorithm = live.load();
                if n > algorithm.capacity() {
                    return Err(oversized(layer, q, n, &algorithm));
                }
                let Err(later) = self.peek(layer, (q, tag), &algorithm, n, now) else {
                    continue;
                };
                if later.conforms_after_nanos() > worst.1.conforms_after_nanos() {
                    worst = (
                        QuotaState::new(live.source(&algorithm), later.gauge()),
                        later,
                    );
                }
            }
        }
        let (state, mut refused) = worst;
        let layer = &self.layers[state.policy_index()];
        let (min, max) = layer.jitter;
        let jitter = if max > 0 && refused.wait != u64::MAX {
            jitter::draw(min, max)
        } else {
            0
        };
        // Relaxed: a statistic; nothing is ordered by it.
        layer.refused.fetch_add(1, Ordering::Relaxed);
        if let Some(live) = layer.quotas.get(state.quota_index()) {
            live.metrics.refused.increment(u64::from(n));
        }
        refused.policy = Some(Rejection {
            by: state.source(),
            jitter,
            dry_run,
        });
        Ok(refused)
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
    ) -> Result<(), Refused> {
        let word = layer.word(at, algorithm, now);
        let refused = algorithm.peek(word, now, n).err();
        if let Some(refused) = refused {
            if refused.clock_behind {
                layer.catch_up(at, algorithm, &self.clock);
            }
            return Err(refused);
        }
        Ok(())
    }

    /// Quota `q` of `layer` for the bucket `tag` at `now`, taking nothing.
    pub(super) fn peek_state(
        &self,
        layer: &Layer<R, C>,
        (q, tag): (usize, Tag),
        algorithm: &AnyAlgorithm,
        now: u64,
    ) -> QuotaState {
        let gauge = algorithm
            .state(layer.word((q, tag), algorithm, now), now)
            .gauge();
        QuotaState::new(layer.quotas[q].source(algorithm), gauge)
    }
}
