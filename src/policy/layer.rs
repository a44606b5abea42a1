//! [`Layer`]: one policy of a set, and where its buckets live: one cell per quota for a global
//! policy, one keyed [`Store`] per quota for a keyed one. Every quota decides through the
//! crate's one compare-and-swap loop (a cell's, or a store's slot's) with its
//! [`AnyAlgorithm`], like any limiter.

use crossbeam_utils::CachePadded;

use super::key::{Extract, Key};
use super::live::LiveQuota;
use crate::algorithm::Step;
use crate::algorithm::{Algorithm, AnyAlgorithm, Apply};
use crate::cell::{recording, Cell, Wrote};
use crate::clock::Clock;
use crate::keyed::{One, Store, Tag};
use crate::outcome::{Allowed, Refused};
use crate::primitive::AtomicU64;

/// Where a policy's buckets live.
pub(crate) enum Buckets<R: ?Sized, C: Clock> {
    /// One bucket per quota, shared by every request.
    Global(Box<[CachePadded<Cell>]>),
    /// One bucket per key per quota: the key's tag is the same in every quota's store.
    Keyed {
        extract: Extract<R>,
        hasher: ahash::RandomState,
        stores: Box<[Store<C>]>,
    },
}

/// A quota's bucket as the hot path of a decision sees it; chosen once per policy, so that the
/// quotas' loop does not ask again where buckets live.
#[derive(Clone, Copy)]
pub(crate) enum Bucket<'a, C: Clock> {
    /// A global policy's cell.
    Cell(&'a Cell),
    /// A keyed policy's store, where the request's key is to be found.
    Keyed(&'a Store<C>),
}

impl<C: Clock> Bucket<'_, C> {
    /// Applies `step` (given the word and the reading) to the bucket `tag` through the cell's
    /// loop, reading the clock with `now` (after a keyed bucket's lookup); `None` if a lock-free
    /// probe does not find a keyed bucket (a new key, or one being moved: the caller decides in
    /// full with [`Layer::decide`]).
    #[inline(always)]
    pub(crate) fn try_update<T>(
        self,
        tag: Tag,
        now: impl FnOnce() -> u64,
        mut step: impl FnMut(u64, u64) -> Step<T>,
    ) -> Option<T> {
        match self {
            Bucket::Cell(cell) => {
                let now = now();
                Some(cell.update(|word| step(word, now)))
            }
            Bucket::Keyed(store) => {
                let found = store.find(tag);
                let now = now();
                found.and_then(|f| f.update(|word| step(word, now)))
            }
        }
    }
}

/// [`Layer::decide`] with the quota's algorithm as its own type.
struct Full<'a, R: ?Sized, C: Clock> {
    layer: &'a Layer<R, C>,
    /// The quota's place in the policy, and the request's tag.
    at: (usize, Tag),
    n: u32,
    now: u64,
    clock: &'a C,
    wrote: &'a mut Wrote,
}

impl<R: ?Sized, C: Clock> Apply for Full<'_, R, C> {
    type Output = Result<Allowed, Refused>;

    fn apply<A: Algorithm>(self, algorithm: &A) -> Self::Output {
        let Full {
            layer,
            at: (q, tag),
            n,
            now,
            clock,
            wrote,
        } = self;
        match &layer.buckets {
            Buckets::Global(cells) => {
                let cell = &cells[q];
                let answer = cell.update(recording(algorithm, now, n, wrote));
                if let Err(refused) = &answer {
                    if refused.clock_behind {
                        cell.catch_up(algorithm, clock);
                    }
                }
                answer
            }
            // A refusal flagged "clock behind" is clamped by the store. Every key of the store
            // runs this quota, so the one reading of it also judges whether the keys an insert
            // meets are idle.
            Buckets::Keyed { stores, .. } => {
                stores[q].decide(tag, (algorithm, &One(algorithm)), n, || now, wrote)
            }
        }
    }
}

/// One policy of a set.
pub(crate) struct Layer<R: ?Sized, C: Clock> {
    pub(crate) name: Box<str>,
    pub(crate) dry_run: bool,
    /// Jitter added to a refusal's retry-after: uniform in `[min, max]` ns.
    pub(crate) jitter: (u64, u64),
    pub(crate) quotas: Box<[LiveQuota]>,
    pub(crate) buckets: Buckets<R, C>,
    /// Refusals (of an enforcing policy) or would-be refusals (of a dry-run one); on a line of
    /// their own, away from the quotas every decision reads.
    pub(crate) refused: CachePadded<AtomicU64>,
}

impl<R: ?Sized, C: Clock> Layer<R, C> {
    /// The request's tag in this policy: `Some(0)` for a global policy, the key's tag for a
    /// keyed one, `None` if the extractor skipped the request.
    #[inline(always)]
    pub(crate) fn tag(&self, request: &R) -> Option<Tag> {
        match &self.buckets {
            Buckets::Global(_) => Some(0),
            Buckets::Keyed {
                extract, hasher, ..
            } => {
                let mut key = Key::new(hasher);
                extract(request, &mut key);
                key.finish().map(Store::<C>::tag)
            }
        }
    }

    /// A quota's whole decision, on the path [`Bucket::try_update`] leaves cold: a refusal
    /// (decided again for its details; it may admit, if cells came back since), or a keyed
    /// bucket the lock-free probe missed (looked for again under the shard's lock, and created
    /// if absent), with the quota's algorithm as it is now, as its own type (so that an insert
    /// judging other keys idle does not dispatch on the kind of algorithm for each of them).
    #[cold]
    #[inline(never)]
    pub(crate) fn decide(
        &self,
        (q, tag): (usize, Tag),
        n: u32,
        now: u64,
        clock: &C,
        wrote: &mut Wrote,
    ) -> Result<Allowed, Refused> {
        let task = Full {
            layer: self,
            at: (q, tag),
            n,
            now,
            clock,
            wrote,
        };
        AnyAlgorithm::apply_words(self.quotas[q].read(), task)
    }

    /// Undoes a write of [`decide`](Self::decide) on quota `q`'s bucket `tag`: `before` again if
    /// it still holds `after`. Whether it did.
    pub(crate) fn restore(&self, (q, tag): (usize, Tag), before: u64, after: u64) -> bool {
        match &self.buckets {
            Buckets::Global(cells) => cells[q].restore(after, before),
            Buckets::Keyed { stores, .. } => stores[q].restore(tag, before, after),
        }
    }

    /// Quota `q`'s bucket `tag` as it is (a keyed bucket the store does not hold is a new
    /// one, as `algorithm` creates it at `now`).
    pub(crate) fn word(&self, (q, tag): (usize, Tag), algorithm: &AnyAlgorithm, now: u64) -> u64 {
        match &self.buckets {
            Buckets::Global(cells) => cells[q].load(),
            Buckets::Keyed { stores, .. } => stores[q]
                .word(tag)
                .unwrap_or_else(|| algorithm.initial_word(now)),
        }
    }

    /// After a look ([`word`](Self::word)) found quota `q`'s bucket `tag` booked further ahead
    /// than its reading can explain, clamps it against a fresh reading of `clock`, as a refused
    /// decision does.
    #[cold]
    pub(crate) fn catch_up(&self, (q, tag): (usize, Tag), algorithm: &AnyAlgorithm, clock: &C) {
        match &self.buckets {
            Buckets::Global(cells) => cells[q].catch_up(algorithm, clock),
            Buckets::Keyed { stores, .. } => stores[q].catch_up(tag, &One(algorithm)),
        }
    }

    /// The quotas' stores (none for a global policy), each with its quota.
    pub(crate) fn stores(&self) -> impl Iterator<Item = (&Store<C>, &LiveQuota)> {
        let stores = match &self.buckets {
            Buckets::Global(_) => &[][..],
            Buckets::Keyed { stores, .. } => &stores[..],
        };
        stores.iter().zip(self.quotas.iter())
    }
}
