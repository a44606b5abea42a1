//! [`Cell`]: one `AtomicU64` and the single compare-and-swap loop every algorithm goes through.
//!
//! An algorithm is a pure function from the current word to a [`Step`]: either "keep the word
//! as it is and answer this" or "write this word, then answer this". The cell owns the loop that
//! applies such a function atomically, so no algorithm contains an atomic operation of its own.
//!
//! # Orderings
//! The word *is* the whole state of a bucket. That no update is lost follows from the single
//! total modification order of one atomic location ("coherence"), which every
//! read-modify-write observes whatever its ordering, so the decision path loads `Relaxed`.
//!
//! One fact must travel with the word: the clock reading that produced it. A thread that
//! clamps a bucket after a clock step ([`Cell::clamp`]) must read the clock *after* it saw the
//! word and get a reading no earlier than the one the word was written with; otherwise a
//! merely late reading would look like a clock step and free cells that were booked. So every
//! write is `Release` and the clamp's load is `Acquire`: the writer's clock read happens-before
//! the clamping thread's clock read (for clocks that are memory, like `ManualClock` and
//! `CoarseClock`, which use release/acquire too). On x86-64 these orderings cost nothing; a
//! locked `cmpxchg` and plain loads and stores already have them.

use crossbeam_utils::Backoff;

use crate::algorithm::{Algorithm, Step};
use crate::clock::Clock;
use crate::primitive::{compare_exchange_weak, AtomicU64, Ordering};

/// One bucket's state: a single atomic 64-bit word.
#[derive(Debug)]
pub(crate) struct Cell {
    word: AtomicU64,
}

impl Cell {
    /// A cell holding `word`.
    pub(crate) fn new(word: u64) -> Self {
        Self {
            word: AtomicU64::new(word),
        }
    }

    /// The current word.
    #[inline]
    pub(crate) fn load(&self) -> u64 {
        // Relaxed: a single-word state machine; see the module docs.
        self.word.load(Ordering::Relaxed)
    }

    /// Overwrites the word unconditionally.
    #[inline]
    pub(crate) fn store(&self, word: u64) {
        // Release: publishes the clock reading this word was computed from (module docs).
        self.word.store(word, Ordering::Release);
    }

    /// Replaces the word by `clamp(word)` while that returns `Some`, re-running `clamp` on the
    /// fresh word after a failed CAS. Each attempt loads the word with `Acquire` *before* calling
    /// `clamp`, so a clock reading taken inside `clamp` is no earlier than the reading the word
    /// was written with (module docs). Unlike [`Cell::update`], `clamp` is meant to read the
    /// clock.
    pub(crate) fn clamp(&self, mut clamp: impl FnMut(u64) -> Option<u64>) {
        loop {
            // Acquire: pairs with the Release of the write that produced this word.
            let current = self.word.load(Ordering::Acquire);
            let Some(new) = clamp(current) else { return };
            if self.swap(current, new).is_ok() {
                return;
            }
        }
    }

    /// After a refusal flagged "clock behind", clamps the word with `algorithm`'s
    /// [`catch_up`](crate::Algorithm::catch_up) against fresh readings of `clock`, each taken
    /// after the word's `Acquire` load (see [`Cell::clamp`]).
    #[cold]
    #[inline(never)]
    pub(crate) fn catch_up<A: Algorithm, C: Clock>(&self, algorithm: &A, clock: &C) {
        let skew = clock.skew_nanos();
        self.clamp(|word| algorithm.catch_up(word, clock.now(), skew));
    }

    /// Applies `step` to the word atomically: reads the word, asks `step` what to do, and, if it
    /// asks for a write, swaps the new word in only if nobody changed the word in between;
    /// otherwise `step` runs again on the fresh word. Returns the answer of the run that took
    /// effect.
    ///
    /// `step` must be a pure function of its argument (it may run several times).
    #[inline(always)]
    pub(crate) fn update<T>(&self, mut step: impl FnMut(u64) -> Step<T>) -> T {
        // Relaxed: a single-word state machine; see the module docs.
        let mut current = self.word.load(Ordering::Relaxed);
        let backoff = Backoff::new();
        loop {
            match step(current) {
                Step::Keep(answer) => return answer,
                Step::Write(new, answer) => match self.swap(current, new) {
                    Ok(()) => return answer,
                    Err(actual) => {
                        current = actual;
                        contended(&backoff);
                    }
                },
            }
        }
    }

    /// Puts `before` back if the word still holds `after`, the word this thread wrote: the undo
    /// of a write that a multi-quota decision must take back (see `policy`). Whether it did; a
    /// word that changed since is left alone (another request built on it).
    pub(crate) fn restore(&self, after: u64, before: u64) -> bool {
        loop {
            match self.swap(after, before) {
                Ok(()) => return true,
                // A weak CAS may fail spuriously, reporting the very word it expected.
                Err(actual) if actual == after => continue,
                Err(_) => return false,
            }
        }
    }

    /// One compare-and-swap attempt; `Err` carries the word found instead of `current`.
    #[inline(always)]
    fn swap(&self, current: u64, new: u64) -> Result<(), u64> {
        // Release on success: publishes the clock reading behind `new` to `clamp` (module docs).
        // Relaxed on failure: the loop only needs the fresh word, and coherence gives it.
        compare_exchange_weak(
            &self.word,
            current,
            new,
            Ordering::Release,
            Ordering::Relaxed,
        )
        .map(|_| ())
    }
}

/// Spins a little after a failed CAS, longer after each failure: letting the winner's cache line
/// settle instead of stealing it back at once measured about 1.8× the 2-thread throughput of an
/// immediate retry (BENCHMARKS.md). Out of line, so the uncontended path carries only a call
/// it never takes.
#[cold]
#[inline(never)]
pub(crate) fn contended(backoff: &Backoff) {
    backoff.spin();
}
