//! [`LiveQuota`]: a quota that can be replaced while decisions read it, without a lock on the
//! read side: a sequence lock over the words of its [`Rule`] (the quota prepared for the hot
//! path) and of the quota itself.
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

use crate::decision::Gauge;
use crate::observe::QuotaMetrics;
use crate::primitive::{fence, spin_loop, AtomicU64, Ordering};
use crate::quota::Quota;

/// Words of a [`Rule`], then the quota's own words.
const RULE_WORDS: usize = 3;
const WORDS: usize = RULE_WORDS + 4;

/// A quota as a policy decision's hot path uses it: GCRA's numbers worked out once, when the
/// quota is stored, so that a decision reads three words instead of deriving them. The quota
/// itself (for reports, new buckets and refusals) is read apart, with [`LiveQuota::full`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rule {
    /// The emission interval `T`, in ns.
    interval: u64,
    /// `τ = burst·T`: the largest debt GCRA admits.
    window: u64,
    burst: u32,
}

impl Rule {
    pub(crate) fn new(quota: &Quota) -> Self {
        Self {
            interval: quota.interval_nanos(),
            window: quota.window_nanos(),
            burst: quota.burst(),
        }
    }

    fn to_words(self) -> [u64; RULE_WORDS] {
        [self.interval, self.window, u64::from(self.burst)]
    }

    #[inline(always)]
    fn from_words(words: [u64; RULE_WORDS]) -> Self {
        let [interval, window, burst] = words;
        Self {
            interval,
            window,
            burst: burst as u32,
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

    /// The gauge of a bucket booked `debt` ns ahead (full again in `debt` ns).
    #[inline(always)]
    pub(crate) fn gauge(&self, debt: u64) -> Gauge {
        Gauge::new(debt, self.interval, self.burst, debt)
    }
}

/// A quota readable without a lock while [`store`](Self::store) replaces it, and which quota of
/// which policy it is (so that a decision can name it from a reference alone).
#[derive(Debug)]
pub(crate) struct LiveQuota {
    seq: AtomicU64,
    /// The [`Rule`]'s words, then the quota's (`Quota::to_words`).
    words: [AtomicU64; WORDS],
    policy: Box<str>,
    /// The policy's place in its set, and the quota's in its policy.
    at: (usize, usize),
    /// Whether the policy is in dry-run mode.
    dry_run: bool,
    /// Its cells admitted, refused and dry-run-refused (nothing without the `metrics` feature).
    pub(crate) metrics: QuotaMetrics,
}

impl LiveQuota {
    /// A live quota holding `quota`, quota `q` of policy `index` (named `policy`, in dry-run
    /// mode if `dry_run`).
    pub(crate) fn new(
        quota: &Quota,
        policy: &str,
        (index, q): (usize, usize),
        dry_run: bool,
    ) -> Self {
        Self {
            seq: AtomicU64::new(0),
            words: Self::words_of(quota).map(AtomicU64::new),
            policy: policy.into(),
            at: (index, q),
            dry_run,
            metrics: QuotaMetrics::new(policy, q),
        }
    }

    /// Whether the policy is in dry-run mode.
    #[inline(always)]
    pub(crate) fn dry_run(&self) -> bool {
        self.dry_run
    }

    /// The policy's name.
    pub(crate) fn policy(&self) -> &str {
        &self.policy
    }

    /// The policy's place in its set, and this quota's in the policy.
    pub(crate) fn at(&self) -> (usize, usize) {
        self.at
    }

    fn words_of(quota: &Quota) -> [u64; WORDS] {
        let mut words = [0; WORDS];
        words[..RULE_WORDS].copy_from_slice(&Rule::new(quota).to_words());
        words[RULE_WORDS..].copy_from_slice(&quota.to_words());
        words
    }

    /// The quota now.
    pub(crate) fn load(&self) -> Quota {
        self.full().1
    }

    /// The rule now: the last one stored, never a mixture of two; and its version, which
    /// changes with every store.
    #[inline(always)]
    pub(crate) fn rule(&self) -> (Rule, u64) {
        let (words, version) = self.read();
        (Rule::from_words(words), version)
    }

    /// The rule and the quota now, from the same store, and its version.
    pub(crate) fn full(&self) -> (Rule, Quota, u64) {
        let (words, version): ([u64; WORDS], _) = self.read();
        let mut rule = [0; RULE_WORDS];
        rule.copy_from_slice(&words[..RULE_WORDS]);
        let mut quota = [0; 4];
        quota.copy_from_slice(&words[RULE_WORDS..]);
        (Rule::from_words(rule), Quota::from_words(quota), version)
    }

    /// The first `N` words as one store left them, and the sequence number they were read at.
    #[inline(always)]
    fn read<const N: usize>(&self) -> ([u64; N], u64) {
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
                return (words, before);
            }
            spin_loop();
        }
    }

    /// Replaces the quota. Writers must be serialized by the caller (the policy set holds a lock
    /// around every replacement).
    pub(crate) fn store(&self, quota: &Quota) {
        // Worked out before the sequence turns odd, so that readers wait only for the stores.
        let words = Self::words_of(quota);
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
        let live = LiveQuota::new(&quotas[0], "p", (0, 0), false);
        for quota in quotas {
            live.store(&quota);
            assert_eq!(live.load(), quota);
            let (rule, version) = live.rule();
            assert_eq!(rule, Rule::new(&quota));
            assert_eq!(live.full(), (rule, quota, version));
        }
    }
}
