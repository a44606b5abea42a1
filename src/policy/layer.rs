//! [`Layer`]: one policy of a set, and where its buckets live: one cell per quota for a global
//! policy, one keyed [`Store`] per quota for a keyed one. Every quota decides through the
//! crate's one compare-and-swap loop (a cell's, or a store's slot's) with its
//! [`AnyAlgorithm`] (from the set's [`Rules`](super::rules::Rules)), like any limiter; and how
//! a checked [`Policy`] becomes one, its buckets created.

use crossbeam_utils::CachePadded;

use super::error::BuildError;
use super::key::{Extract, Key};
use super::named::Policy;
use crate::algorithm::{each, Algorithm, AnyAlgorithm, Step};
use crate::cell::{recording, Cell, Wrote};
use crate::clock::Clock;
use crate::keyed::{self, One, Options, Store, Tag};
use crate::observe::{QuotaMetrics, TableMetrics};
use crate::outcome::{Allowed, PolicyQuota, Refused, Rejection};
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

/// What stays of a quota when its algorithm is replaced: which quota of which policy it is
/// (so that a decision can name it from a reference alone), and its counters.
#[derive(Debug)]
pub(crate) struct Place {
    /// Which quota of which policy this is (interned: outcomes that name it own it).
    pub(crate) by: &'static PolicyQuota,
    /// Whether the policy is in dry-run mode.
    pub(crate) dry_run: bool,
    /// Its cells admitted, refused and dry-run-refused (nothing without the `metrics` feature).
    pub(crate) metrics: QuotaMetrics,
}

impl Place {
    /// The policy's place in its set, and this quota's in the policy.
    #[inline(always)]
    pub(crate) fn at(&self) -> (usize, usize) {
        (self.by.policy_index(), self.by.quota_index())
    }
}

/// One policy of a set.
pub(crate) struct Layer<R: ?Sized, C: Clock> {
    pub(crate) name: Box<str>,
    pub(crate) dry_run: bool,
    /// Jitter added to a refusal's retry-after: uniform in `[min, max]` ns.
    pub(crate) jitter: (u64, u64),
    /// Where its quotas' algorithms start in the set's rules.
    pub(crate) first: usize,
    /// Its quotas, in order.
    pub(crate) places: Box<[Place]>,
    pub(crate) buckets: Buckets<R, C>,
    /// Refusals (of an enforcing policy) or would-be refusals (of a dry-run one); on a line of
    /// their own, away from the quotas every decision reads.
    pub(crate) refused: CachePadded<AtomicU64>,
}

impl<R: ?Sized, C: Clock> Layer<R, C> {
    /// The request's tag in this policy: `Some(0)` for a global policy, the key's tag for a
    /// keyed one, `None` if the extractor skipped the request; the rejection if it rejected it.
    #[inline(always)]
    pub(crate) fn tag(&self, request: &R) -> Result<Option<Tag>, &'static Rejection> {
        match &self.buckets {
            Buckets::Global(_) => Ok(Some(0)),
            Buckets::Keyed {
                extract, hasher, ..
            } => {
                let mut key = Key::new(hasher);
                extract(request, &mut key);
                key.finish().map(|hash| hash.map(Store::<C>::tag))
            }
        }
    }

    /// The request's tag in this policy, `None` if the extractor skipped or rejected it: for
    /// what looks at or forgets buckets, which a rejected request has none of.
    pub(crate) fn tag_of(&self, request: &R) -> Option<Tag> {
        self.tag(request).ok().flatten()
    }

    /// Its quotas' algorithms in `rules` (the set's, as a decision read them).
    #[inline(always)]
    pub(crate) fn algorithms<'r>(&self, rules: &'r [AnyAlgorithm]) -> &'r [AnyAlgorithm] {
        let rules = rules.get(self.first..).unwrap_or_default();
        rules.get(..self.places.len()).unwrap_or(rules)
    }

    /// A quota's whole decision, on the path [`Bucket::try_update`] leaves cold: a refusal
    /// (decided again for its details; it may admit, if cells came back since), or a keyed
    /// bucket the lock-free probe missed (looked for again under the shard's lock, and created
    /// if absent), with the quota's `algorithm` as its own type (so that an insert judging
    /// other keys idle does not dispatch on the kind of algorithm for each of them). A bucket
    /// booked further ahead than `now` explains is clamped by `clamp` (under the quota in
    /// force then, which may not be `algorithm`).
    #[cold]
    #[inline(never)]
    pub(crate) fn decide(
        &self,
        (q, tag): (usize, Tag),
        algorithm: &AnyAlgorithm,
        (n, now): (u32, u64),
        clamp: impl Fn(),
        wrote: &mut Wrote,
    ) -> Result<Allowed, Refused> {
        each!(algorithm, a => match &self.buckets {
            Buckets::Global(cells) => {
                let answer = cells[q].update(recording(a, now, n, wrote));
                if matches!(&answer, Err(refused) if refused.clock_behind()) {
                    clamp();
                }
                answer
            }
            // Every key of the store runs this quota, so the one reading of it also judges
            // whether the keys an insert meets are idle.
            Buckets::Keyed { stores, .. } => {
                stores[q].decide(tag, (a, &One(a)), (n, &clamp), || now, wrote)
            }
        })
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

    /// The quotas' stores, in order (none for a global policy).
    pub(crate) fn stores(&self) -> core::slice::Iter<'_, Store<C>> {
        match &self.buckets {
            Buckets::Global(_) => [].iter(),
            Buckets::Keyed { stores, .. } => stores.iter(),
        }
    }
}

#[cfg(all(test, not(flowgate_loom)))]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::policy::{Policies, Policy};
    use crate::{Gcra, Quota};

    const HOUR: u64 = 3_600_000_000_000;

    fn cells_left(policies: &Policies<u64, ManualClock>) -> u32 {
        let mut left = 0;
        policies.inspect(&7, |state| left = state.gauge().remaining());
        left
    }

    /// A decision that read a quota just before it was raised finds a bucket booked under the
    /// raised quota further ahead than its reading explains (a clock step, as far as it can
    /// tell). The clamp that follows uses the quota in force when it clamps, so the cells booked
    /// under the raised quota stay booked. (Clamping with the decision's reading, as a store's
    /// own clamp does, frees one of them: this test fails then.)
    #[test]
    fn a_clamp_uses_the_quota_in_force_not_the_decisions_reading() {
        let clock = ManualClock::starting_at(10 * HOUR);
        let one = Quota::per_hour(1).unwrap();
        let three = one.with_burst(3).unwrap();
        let policies = Policies::builder()
            .clock(clock.clone())
            .policy(Policy::keyed("per-key", |k: &u64| k).quota(three))
            .build()
            .unwrap();
        assert!(policies.check(&7).is_ok());
        assert!(policies.check(&7).is_ok());
        assert_eq!(cells_left(&policies), 1);

        let layer = &policies.layers[0];
        let tag = layer.tag_of(&7).unwrap();
        let read_before_the_raise = AnyAlgorithm::Gcra(Gcra::new(&one));
        let mut wrote = None;
        let clamp = || policies.catch_up_now(0, (0, tag));
        let at = (1, clock.now());
        let refused =
            (layer.decide((0, tag), &read_before_the_raise, at, clamp, &mut wrote)).unwrap_err();
        assert!(
            refused.clock_behind(),
            "two cells ahead is beyond a 1-cell lead"
        );
        assert_eq!(wrote, None);
        assert_eq!(cells_left(&policies), 1, "no booked cell was freed");
    }
}

/// Policy `index` of a set (checked, with its jitter in ns; its quotas' algorithms from
/// `first` on in the set's rules), with its buckets created at `now` on `clock`.
pub(crate) fn layer<R: ?Sized, C: Clock + Clone>(
    policy: Policy<R>,
    (index, first, jitter): (usize, usize, (u64, u64)),
    now: u64,
    clock: &C,
    hash_seed: Option<u64>,
) -> Result<Layer<R, C>, BuildError> {
    let places = (policy.quotas.iter().enumerate())
        .map(|(q, quota)| Place {
            by: PolicyQuota::intern(&policy.name, index, q),
            dry_run: policy.dry_run,
            metrics: QuotaMetrics::new(&policy.name, &quota.to_string()),
        })
        .collect();
    let name = policy.name.as_str().into();
    let dry_run = policy.dry_run;
    let buckets = buckets(policy, now, clock, hash_seed)?;
    Ok(Layer {
        name,
        dry_run,
        jitter,
        first,
        places,
        buckets,
        refused: CachePadded::new(AtomicU64::new(0)),
    })
}

/// Where `policy`'s buckets will live, created at `now`: a cell per quota, or a store per quota
/// keyed by the policy's extractor (the stores of one policy share its key hash; their close
/// nonces come from it too, as unknown outside the process as the hash).
fn buckets<R: ?Sized, C: Clock + Clone>(
    policy: Policy<R>,
    now: u64,
    clock: &C,
    hash_seed: Option<u64>,
) -> Result<Buckets<R, C>, BuildError> {
    let Some(extract) = policy.extract else {
        let cells = policy.quotas.iter();
        let cells = cells.map(|q| CachePadded::new(Cell::new(q.initial_word(now))));
        return Ok(Buckets::Global(cells.collect()));
    };
    let hasher = keyed::hasher(hash_seed);
    let stores = (0..policy.quotas.len())
        .map(|q| {
            let options = Options {
                max_keys: policy.max_keys,
                shards: None,
                when_full: policy.when_full,
                new_keys: None,
                metrics: TableMetrics::of_policy(&policy.name, &policy.quotas[q].to_string()),
            };
            let seed = hasher.hash_one((0x6e6f_6e63_6573_u64, q));
            Store::new(options, seed, clock.clone())
        })
        .collect::<Result<_, _>>()
        .map_err(|error| BuildError::Keyed {
            policy: policy.name.clone(),
            error,
        })?;
    Ok(Buckets::Keyed {
        extract,
        hasher,
        stores,
    })
}
