//! An [`AnyAlgorithm`] as the words a policy's live quota stores (`policy::live`), and what a
//! decision reads off them without building the algorithm first: GCRA's [`Rule`] for the fast
//! path, or the algorithm as its own type for a task ([`Apply`]).

use super::rule::Rule;
use super::schedule::Schedule;
use super::stepped::Stepped;
use super::{
    Algorithm, AnyAlgorithm, Credit, FixedWindow, Gcra, IntervalRefill, LeakyBucket, SlidingWindow,
};
use crate::quota::Quota;

/// Words of an algorithm as a live quota stores it: a kind, two words of settings, and the
/// quota's four.
pub(crate) const WORDS: usize = 7;

/// Something to do with an algorithm whatever its type, so that it runs monomorphized for the
/// algorithm [`AnyAlgorithm::apply_words`] decodes: one dispatch on the kind, outside any loop,
/// and then the algorithm's own code inlined as in a limiter of that algorithm.
pub(crate) trait Apply {
    /// What it gives.
    type Output;

    /// Does it with `algorithm`.
    fn apply<A: Algorithm>(self, algorithm: &A) -> Self::Output;
}

impl AnyAlgorithm {
    /// The algorithm as words, for a quota replaced while decisions read it (a policy's live
    /// quota): its kind, its settings and its quota.
    pub(crate) fn to_words(self) -> [u64; WORDS] {
        let (kind, [a, b]) = match self {
            Self::Gcra(g) => (0, g.schedule.to_words()),
            Self::LeakyBucket(l) => (1, l.schedule.to_words()),
            Self::Credit(c) => (2, c.schedule.to_words()),
            Self::IntervalRefill(i) => (3, i.stepped.to_words()),
            Self::FixedWindow(f) => (4, f.stepped.to_words()),
            Self::SlidingWindow(s) => (5, s.to_words()),
        };
        let [q0, q1, q2, q3] = self.quota().to_words();
        [kind, a, b, q0, q1, q2, q3]
    }

    /// The algorithm [`to_words`](Self::to_words) wrote. Only ever given words it wrote.
    #[inline(always)]
    pub(crate) fn from_words(words: [u64; WORDS]) -> Self {
        let [kind, a, b, q0, q1, q2, q3] = words;
        let quota = Quota::from_words([q0, q1, q2, q3]);
        let schedule = || Schedule::from_words(&quota, [a, b]);
        let stepped = || Stepped::from_words(&quota, [a, b]);
        match kind {
            0 => Self::Gcra(Gcra {
                schedule: schedule(),
            }),
            1 => Self::LeakyBucket(LeakyBucket {
                schedule: schedule(),
            }),
            2 => Self::Credit(Credit {
                schedule: schedule(),
            }),
            3 => Self::IntervalRefill(IntervalRefill { stepped: stepped() }),
            4 => Self::FixedWindow(FixedWindow { stepped: stepped() }),
            _ => Self::SlidingWindow(SlidingWindow::from_words(&quota, [a, b])),
        }
    }

    /// The quota of the algorithm [`to_words`](Self::to_words) wrote.
    #[inline]
    pub(crate) fn quota_of(words: &[u64; WORDS]) -> Quota {
        let [_, _, _, q0, q1, q2, q3] = *words;
        Quota::from_words([q0, q1, q2, q3])
    }

    /// If the algorithm [`to_words`](Self::to_words) wrote decides exactly as GCRA ([`Gcra`],
    /// or a leaky-bucket meter), GCRA's numbers, read off the words without building it: the
    /// policies' fast path.
    ///
    /// Built with `--cfg flowgate_general_path`, there is no fast path (every quota takes the
    /// general one): how BENCHMARKS.md measures what the fast path saves.
    #[inline(always)]
    pub(crate) fn rule(words: &[u64; WORDS]) -> Option<Rule> {
        let [kind, slack, _, counts, _, interval, _] = *words;
        // Kinds 0 (GCRA) and 1 (the leaky bucket) with no slack beyond the burst (a meter).
        let fast = kind <= 1 && slack == 0 && !cfg!(flowgate_general_path);
        fast.then(|| Rule::new(interval, counts as u32))
    }

    /// Runs `task` with the algorithm [`to_words`](Self::to_words) wrote, as its own type,
    /// without building an `AnyAlgorithm` first (the policies' hot path). Only ever given words
    /// it wrote.
    #[inline(always)]
    pub(crate) fn apply_words<T: Apply>(words: [u64; WORDS], task: T) -> T::Output {
        // Decoded here rather than by matching on `from_words`: LLVM does not merge the two
        // matches, and the general path then runs about 30 more instructions per quota.
        let [kind, a, b, q0, q1, q2, q3] = words;
        let quota = Quota::from_words([q0, q1, q2, q3]);
        let schedule = || Schedule::from_words(&quota, [a, b]);
        let stepped = || Stepped::from_words(&quota, [a, b]);
        match kind {
            0 => task.apply(&Gcra {
                schedule: schedule(),
            }),
            1 => task.apply(&LeakyBucket {
                schedule: schedule(),
            }),
            2 => task.apply(&Credit {
                schedule: schedule(),
            }),
            3 => task.apply(&IntervalRefill { stepped: stepped() }),
            4 => task.apply(&FixedWindow { stepped: stepped() }),
            _ => task.apply(&SlidingWindow::from_words(&quota, [a, b])),
        }
    }
}
