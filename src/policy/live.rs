//! [`LiveQuota`]: a quota that can be replaced while decisions read it, without a lock on the
//! read side: a sequence lock over the words of its [`Rule`], the quota prepared for the hot path.
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

use crate::algorithm::Gcra;
use crate::decision::Gauge;
use crate::divisor::Divisor;
use crate::primitive::{fence, AtomicU64, Ordering};
use crate::quota::Quota;

/// Words of a [`Rule`].
const WORDS: usize = 8;

/// A quota as a policy decision uses it: GCRA's numbers worked out once, when the quota is
/// stored, so that a decision reads them instead of deriving them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rule {
    /// The emission interval `T`, in ns.
    interval: u64,
    /// `τ = burst·T`: the largest debt GCRA admits.
    window: u64,
    burst: u32,
    /// `T`, prepared for division (cells in a debt).
    per_cell: Divisor,
    /// The quota itself (`Quota::to_words`), for reports and the cold paths.
    quota: [u64; 4],
}

impl Rule {
    pub(crate) fn new(quota: &Quota) -> Self {
        Self {
            interval: quota.interval_nanos(),
            window: quota.window_nanos(),
            burst: quota.burst(),
            per_cell: Divisor::new(quota.interval_nanos()),
            quota: quota.to_words(),
        }
    }

    fn to_words(self) -> [u64; WORDS] {
        let (magic, shifts) = self.per_cell.to_parts();
        let [a, b, c, d] = self.quota;
        [
            self.interval,
            self.window,
            u64::from(self.burst) | u64::from(shifts) << 32,
            magic,
            a,
            b,
            c,
            d,
        ]
    }

    #[inline(always)]
    fn from_words(words: [u64; WORDS]) -> Self {
        let [interval, window, packed, magic, a, b, c, d] = words;
        Self {
            interval,
            window,
            burst: packed as u32,
            per_cell: Divisor::from_parts(magic, (packed >> 32) as u16),
            quota: [a, b, c, d],
        }
    }

    /// The emission interval `T`, in ns.
    #[inline(always)]
    pub(crate) fn interval(&self) -> u64 {
        self.interval
    }

    /// `τ = burst·T`: the largest debt admitted.
    #[inline(always)]
    pub(crate) fn window(&self) -> u64 {
        self.window
    }

    #[inline(always)]
    pub(crate) fn burst(&self) -> u32 {
        self.burst
    }

    pub(crate) fn quota(&self) -> Quota {
        Quota::from_words(self.quota)
    }

    /// The full algorithm, for the cold paths (new keys, refusals, peeks).
    pub(crate) fn gcra(&self) -> Gcra {
        Gcra::new(&self.quota())
    }

    /// Whole cells left in a bucket booked `debt ≤ τ` ns ahead: `burst − ⌈debt / T⌉`, without a
    /// divide instruction.
    #[inline(always)]
    pub(crate) fn remaining(&self, debt: u64) -> u32 {
        // debt ≤ τ ≤ 2⁶³ − 1 and T ≤ τ, so the sum does not overflow; the quotient is at most
        // the burst (debt ≤ τ), so it fits in u32 (saturating if ever called beyond τ).
        let used = self.per_cell.divide(debt.saturating_add(self.interval - 1));
        self.burst
            .saturating_sub(u32::try_from(used).unwrap_or(u32::MAX))
    }

    /// The gauge of a bucket booked `debt` ns ahead (full again in `debt` ns).
    #[inline(always)]
    pub(crate) fn gauge(&self, debt: u64) -> Gauge {
        Gauge::new(debt, self.interval, self.burst, debt)
    }
}

/// A quota readable without a lock while [`store`](Self::store) replaces it.
#[derive(Debug)]
pub(crate) struct LiveQuota {
    seq: AtomicU64,
    words: [AtomicU64; WORDS],
}

impl LiveQuota {
    /// A live quota holding `quota`.
    pub(crate) fn new(quota: &Quota) -> Self {
        let words = Rule::new(quota).to_words();
        Self {
            seq: AtomicU64::new(0),
            words: words.map(AtomicU64::new),
        }
    }

    /// The quota now.
    pub(crate) fn load(&self) -> Quota {
        self.rule().quota()
    }

    /// The rule now: the last one stored, never a mixture of two.
    #[inline(always)]
    pub(crate) fn rule(&self) -> Rule {
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
                return Rule::from_words(words);
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
        for (word, value) in self.words.iter().zip(Rule::new(quota).to_words()) {
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
            assert_eq!(live.rule(), Rule::new(&quota));
            let rule = live.rule();
            for debt in [0, 1, rule.interval() - 1, rule.interval(), rule.window()] {
                assert_eq!(
                    rule.remaining(debt),
                    rule.gauge(debt).remaining(),
                    "{quota} {debt}"
                );
            }
        }
    }
}
