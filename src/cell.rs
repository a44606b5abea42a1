//! [`Cell`]: one `AtomicU64` and the single compare-and-swap loop every algorithm goes through.
//!
//! An algorithm is a pure function from the current word to a [`Step`]: either "keep the word
//! as it is and answer this" or "write this word, then answer this". The cell owns the loop that
//! applies such a function atomically, so no algorithm contains an atomic operation of its own.
//!
//! # Orderings
//! All operations are `Relaxed`. The word *is* the whole state of a bucket and publishes no
//! other memory, so there is nothing for acquire/release to order; what a rate limiter needs is
//! that no update is lost, and that is given by the single total modification order of one
//! atomic location (C++ [intro.races] "coherence"), which every read-modify-write observes
//! whatever its ordering.

use crossbeam_utils::Backoff;

use crate::primitive::{compare_exchange_weak, AtomicU64, Ordering};

/// What an algorithm decided for one word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step<T> {
    /// Leave the word unchanged and return the answer (a refusal, a peek).
    Keep(T),
    /// Write the new word (if the word still holds what the function saw), then return the answer.
    Write(u64, T),
}

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
        // Relaxed: a single-word state machine; see the module docs.
        self.word.store(word, Ordering::Relaxed);
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

    /// One compare-and-swap attempt; `Err` carries the word found instead of `current`.
    #[inline(always)]
    fn swap(&self, current: u64, new: u64) -> Result<(), u64> {
        // Relaxed on success and failure: coherence of this one location is all the loop needs;
        // a failure hands back the fresh word for the next attempt.
        compare_exchange_weak(
            &self.word,
            current,
            new,
            Ordering::Relaxed,
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
fn contended(backoff: &Backoff) {
    backoff.spin();
}
