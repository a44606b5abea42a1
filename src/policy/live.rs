//! [`LiveQuota`]: a policy's quota, an [`AnyAlgorithm`], that can be replaced while decisions
//! read it, without a lock on the read side: a sequence lock over the algorithm's words.
//!
//! # Protocol
//! A writer (serialized by the policy set's replacement lock) makes the sequence odd, writes the
//! words, and makes it even again. A reader loads the sequence, the words, and the sequence
//! again; it keeps the words only if both loads saw the same even number, and otherwise reads
//! again. A replacement is rare (a configuration reload), so a reader retries at most a few
//! times in practice, and a writer never waits for readers.
//!
//! # Orderings
//! * The reader's first load is `Acquire`, pairing with the writer's closing `Release` store: a
//!   reader that sees the even number a writer left sees that writer's words.
//! * The words are `Relaxed` on both sides; an `Acquire` fence after the reader's word loads and
//!   a `Release` fence after the writer's odd store order them: if a reader's word load saw a
//!   writer's store, the fences synchronize, so the reader's second sequence load sees the odd
//!   number (or later) and the reader retries.
//!
//! On x86-64 the fences and the `Acquire`/`Release` accesses compile to plain loads and stores.

use crate::algorithm::{AnyAlgorithm, WORDS};
use crate::observe::QuotaMetrics;
use crate::outcome::PolicyQuota;
use crate::primitive::{fence, spin_loop, AtomicU64, Ordering};

/// A policy's quota, readable without a lock while [`store`](Self::store) replaces it, and which
/// quota of which policy it is (so that a decision can name it from a reference alone).
#[derive(Debug)]
pub(crate) struct LiveQuota {
    seq: AtomicU64,
    /// The algorithm's words (`AnyAlgorithm::to_words`).
    words: [AtomicU64; WORDS],
    /// Which quota of which policy this is (interned: outcomes that name it own it).
    by: &'static PolicyQuota,
    /// Whether the policy is in dry-run mode.
    dry_run: bool,
    /// Its cells admitted, refused and dry-run-refused (nothing without the `metrics` feature).
    pub(crate) metrics: QuotaMetrics,
}

impl LiveQuota {
    /// A live quota holding `algorithm`, quota `q` of policy `index` (named `policy`, in dry-run
    /// mode if `dry_run`).
    pub(crate) fn new(
        algorithm: &AnyAlgorithm,
        policy: &str,
        (index, q): (usize, usize),
        dry_run: bool,
    ) -> Self {
        Self {
            seq: AtomicU64::new(0),
            words: algorithm.to_words().map(AtomicU64::new),
            by: PolicyQuota::intern(policy, index, q),
            dry_run,
            metrics: QuotaMetrics::new(policy, &algorithm.to_string()),
        }
    }

    /// Whether the policy is in dry-run mode.
    #[inline(always)]
    pub(crate) fn dry_run(&self) -> bool {
        self.dry_run
    }

    /// The policy's place in its set, and this quota's in the policy.
    #[inline(always)]
    pub(crate) fn at(&self) -> (usize, usize) {
        (self.by.policy_index(), self.by.quota_index())
    }

    /// Which quota of which policy this is, as outcomes name it.
    #[inline(always)]
    pub(crate) fn by(&self) -> &'static PolicyQuota {
        self.by
    }

    /// The algorithm now: the last one stored, never a mixture of two.
    #[inline(always)]
    pub(crate) fn load(&self) -> AnyAlgorithm {
        AnyAlgorithm::from_words(self.read())
    }

    /// The words as one store left them (`AnyAlgorithm::to_words`).
    #[inline(always)]
    pub(crate) fn read(&self) -> [u64; WORDS] {
        loop {
            // Acquire: pairs with the writer's closing Release store (module docs).
            let before = self.seq.load(Ordering::Acquire);
            // Relaxed: the fence below orders these loads before the second sequence load.
            let words = core::array::from_fn(|i| self.words[i].load(Ordering::Relaxed));
            // Acquire fence: a word load that saw a writer's store makes that writer's odd
            // sequence store visible to the load below (module docs).
            fence(Ordering::Acquire);
            // Relaxed: ordered after the word loads by the fence above.
            let after = self.seq.load(Ordering::Relaxed);
            if before == after && before & 1 == 0 {
                return words;
            }
            spin_loop();
        }
    }

    /// Replaces the algorithm. Writers must be serialized by the caller (the policy set holds a
    /// lock around every replacement).
    pub(crate) fn store(&self, algorithm: &AnyAlgorithm) {
        // Worked out before the sequence turns odd, so that readers wait only for the stores.
        let words = algorithm.to_words();
        // Relaxed: only this (serialized) writer changes the sequence.
        let seq = self.seq.load(Ordering::Relaxed);
        // Relaxed: the fence below orders it before the word stores.
        self.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        // Release fence: a reader whose word load sees a store below then sees the odd sequence.
        fence(Ordering::Release);
        for (word, value) in self.words.iter().zip(words) {
            // Relaxed: ordered by the fence above and the Release store below.
            word.store(value, Ordering::Relaxed);
        }
        // Release: a reader that loads this even number (Acquire) sees the words above.
        self.seq.store(seq.wrapping_add(2), Ordering::Release);
    }
}

#[cfg(all(test, not(flowgate_loom)))]
mod tests {
    use super::*;

    #[test]
    fn every_algorithm_survives_the_round_trip() {
        let algorithms: Vec<AnyAlgorithm> = [
            "200/10s",
            "5000/h burst 7 initial 3",
            "20000/day fixed",
            "10/s burst 1 shaper 250ms",
            "100/min sliding",
        ]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
        let live = LiveQuota::new(&algorithms[0], "p", (0, 0), false);
        for algorithm in algorithms {
            live.store(&algorithm);
            assert_eq!(live.load(), algorithm);
        }
    }
}
