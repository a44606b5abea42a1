//! [`LiveQuota`]: a quota that can be replaced while decisions read it, without a lock on the
//! read side: a sequence lock over the quota's four words.
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

use crate::primitive::{fence, AtomicU64, Ordering};
use crate::quota::Quota;

/// A quota readable without a lock while [`store`](Self::store) replaces it.
#[derive(Debug)]
pub(crate) struct LiveQuota {
    seq: AtomicU64,
    words: [AtomicU64; 4],
}

impl LiveQuota {
    /// A live quota holding `quota`.
    pub(crate) fn new(quota: &Quota) -> Self {
        let words = quota.to_words();
        Self {
            seq: AtomicU64::new(0),
            words: words.map(AtomicU64::new),
        }
    }

    /// The quota now: the last one stored, never a mixture of two.
    #[inline(always)]
    pub(crate) fn load(&self) -> Quota {
        loop {
            // Acquire: pairs with the writer's closing Release store (module docs).
            let before = self.seq.load(Ordering::Acquire);
            // Relaxed: the fence below orders these loads before the second sequence load.
            let words = [
                self.words[0].load(Ordering::Relaxed),
                self.words[1].load(Ordering::Relaxed),
                self.words[2].load(Ordering::Relaxed),
                self.words[3].load(Ordering::Relaxed),
            ];
            // Acquire fence: a word load that saw a writer's store makes that writer's odd
            // sequence store visible to the load below (module docs).
            fence(Ordering::Acquire);
            // Relaxed: ordered after the word loads by the fence above.
            let after = self.seq.load(Ordering::Relaxed);
            if before == after && before & 1 == 0 {
                return Quota::from_words(words);
            }
            core::hint::spin_loop();
        }
    }

    /// Replaces the quota. Writers must be serialized by the caller (the policy set holds a lock
    /// around every replacement).
    pub(crate) fn store(&self, quota: &Quota) {
        // Relaxed: only this (serialized) writer changes the sequence.
        let seq = self.seq.load(Ordering::Relaxed);
        // Relaxed: the fence below orders it before the word stores.
        self.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        // Release fence: a reader whose word load sees a store below then sees the odd sequence.
        fence(Ordering::Release);
        for (word, value) in self.words.iter().zip(quota.to_words()) {
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
    use crate::quota::Initial;
    use core::time::Duration;

    #[test]
    fn every_quota_survives_the_round_trip() {
        let quotas = [
            "200/10s".parse::<Quota>().unwrap(),
            "5000/h burst 7 initial 3".parse().unwrap(),
            Quota::per_day(20_000)
                .unwrap()
                .with_initial(Initial::Empty)
                .unwrap(),
            Quota::from_nanos(u32::MAX, u64::from(u32::MAX)).unwrap(),
            Quota::with_period(Duration::from_secs(1 << 30)).unwrap(),
        ];
        let live = LiveQuota::new(&quotas[0]);
        for quota in quotas {
            live.store(&quota);
            assert_eq!(live.load(), quota);
        }
    }
}
