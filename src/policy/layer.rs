//! [`Layer`]: one policy of a set as it runs: its name and mode, its live quotas, and where its
//! buckets live (one cell per quota for a global policy, one keyed table per quota for a keyed
//! one), with the three things a decision does to a bucket: commit, undo, and look.

use crossbeam_utils::CachePadded;

use super::key::{Extract, Key};
use super::live::LiveQuota;
use crate::algorithm::{advance, Algorithm, Gcra, Step};
use crate::cell::Cell;
use crate::clock::Clock;
use crate::decision::{Allowed, Refused};
use crate::keyed::slot::Slot;
use crate::keyed::{recording, tag_of, KeyedRateLimiter, Wrote};
use crate::primitive::AtomicU64;

/// A keyed policy's bucket table for one quota. The key type is `()`: policies hash keys
/// themselves and pass tags.
pub(crate) type Table<C> = KeyedRateLimiter<(), C, Gcra>;

/// Where a policy's buckets live.
pub(crate) enum Store<R: ?Sized, C: Clock> {
    /// One bucket per quota, shared by every request.
    Global(Box<[CachePadded<Cell>]>),
    /// One bucket per key per quota: the key's hash is the tag in every table.
    Keyed {
        extract: Extract<R>,
        hasher: ahash::RandomState,
        tables: Box<[Table<C>]>,
    },
}

/// Where a bucket is, as far as a lock-free probe can tell (see `policy::decide`: the decision
/// reads the clock just after its first lookup).
#[derive(Clone, Copy)]
pub(crate) enum Bucket<'a> {
    /// A global policy's bucket.
    Cell(&'a Cell),
    /// A keyed bucket's slot (which may stop holding the key before it is used).
    Slot(&'a Slot),
    /// Not found without the lock.
    Absent,
}

/// Why [`Layer::take`] did not book a request.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Miss {
    /// The bucket holds this word, on which the request does not fit.
    Refused(u64),
    /// A keyed table does not hold the key where a lock-free probe looks.
    Absent,
    /// More cells than the quota's burst.
    Oversized,
}

/// One policy of a set.
pub(crate) struct Layer<R: ?Sized, C: Clock> {
    pub(crate) name: Box<str>,
    pub(crate) dry_run: bool,
    /// Jitter added to a refusal's retry-after: uniform in `[min, max]` ns.
    pub(crate) jitter: (u64, u64),
    pub(crate) quotas: Box<[LiveQuota]>,
    pub(crate) store: Store<R, C>,
    /// Refusals (of an enforcing policy) or would-be refusals (of a dry-run one); on a line of
    /// their own, away from the quotas every decision reads.
    pub(crate) refused: CachePadded<AtomicU64>,
}

impl<R: ?Sized, C: Clock> Layer<R, C> {
    /// The request's tag in this policy: `Some(0)` for a global policy, the key's tag for a
    /// keyed one, `None` if the extractor skipped the request.
    #[inline(always)]
    pub(crate) fn tag(&self, request: &R) -> Option<u64> {
        match &self.store {
            Store::Global(_) => Some(0),
            Store::Keyed {
                extract, hasher, ..
            } => {
                let mut key = Key::new(hasher);
                extract(request, &mut key);
                key.finish().map(tag_of)
            }
        }
    }

    /// The hot path of a decision: books `cost` ns of cells on the bucket `tag` found at
    /// `bucket` at `now` if that leaves a debt of at most `window` (GCRA's admission, with the
    /// quota's numbers prepared in its [`Rule`](super::live::Rule)), returning the words before
    /// and after. Otherwise nothing is written and [`Miss`] says why; the cold paths then work
    /// out the details with the full algorithm.
    #[inline(always)]
    pub(crate) fn take(
        bucket: Bucket<'_>,
        tag: u64,
        cost: u64,
        window: u64,
        now: u64,
    ) -> Result<(u64, u64), Miss> {
        let step = |word: u64| match advance(word, now, cost) {
            // advance returns at least now.
            Some(after) if after - now <= window => Step::Write(after, Ok((word, after))),
            _ => Step::Keep(Err(word)),
        };
        match bucket {
            Bucket::Cell(cell) => cell.update(step).map_err(Miss::Refused),
            Bucket::Slot(slot) => match slot.update(tag, step) {
                Some(taken) => taken.map_err(Miss::Refused),
                None => Err(Miss::Absent),
            },
            Bucket::Absent => Err(Miss::Absent),
        }
    }

    /// Takes `n` cells (`1 ≤ n ≤ burst`) from quota `q`'s bucket `tag` with `gcra` at `now` (a
    /// reading of `clock`); `wrote` receives the word before and after, if the bucket was
    /// written. The slow path of [`take`](Self::take): it creates a bucket the table lacks.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn commit(
        &self,
        q: usize,
        tag: u64,
        gcra: &Gcra,
        n: u32,
        now: u64,
        clock: &C,
        wrote: &mut Wrote,
    ) -> Result<Allowed, Refused> {
        match &self.store {
            Store::Global(cells) => {
                let cell = &cells[q];
                let answer = cell.update(recording(gcra, now, n, wrote));
                if let Err(refused) = &answer {
                    if refused.clock_behind {
                        cell.catch_up(gcra, clock);
                    }
                }
                answer
            }
            Store::Keyed { tables, .. } => tables[q].commit_tag(tag, gcra, n, now, wrote),
        }
    }

    /// Undoes a commit of quota `q`'s bucket `tag`: `before` again if it still holds `after`.
    /// Whether it did.
    pub(crate) fn restore(&self, q: usize, tag: u64, before: u64, after: u64) -> bool {
        match &self.store {
            Store::Global(cells) => cells[q].restore(after, before),
            Store::Keyed { tables, .. } => tables[q].restore_tag(tag, before, after),
        }
    }

    /// After a look ([`word`](Self::word)) found quota `q`'s bucket `tag` booked further ahead
    /// than `now` can explain, clamps it against a fresh reading of `clock`, as a refused commit
    /// does.
    #[cold]
    pub(crate) fn catch_up(&self, q: usize, tag: u64, gcra: &Gcra, clock: &C) {
        match &self.store {
            Store::Global(cells) => cells[q].catch_up(gcra, clock),
            Store::Keyed { tables, .. } => tables[q].catch_up_tag(tag, gcra),
        }
    }

    /// Quota `q`'s bucket `tag` as it is (a keyed bucket the table does not hold is a new one).
    pub(crate) fn word(&self, q: usize, tag: u64, gcra: &Gcra, now: u64) -> u64 {
        match &self.store {
            Store::Global(cells) => cells[q].load(),
            Store::Keyed { tables, .. } => tables[q]
                .word_of(tag)
                .unwrap_or_else(|| gcra.initial_word(now)),
        }
    }
}
