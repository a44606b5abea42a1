//! [`Cell`]: one bucket's `AtomicU64` and the one compare-and-swap loop that every bucket word
//! in the crate goes through: a single limiter's, a policy's global quota, and every key of a
//! keyed table.
//!
//! An algorithm is a pure function from the current word to a [`Step`]: either "keep the word
//! as it is and answer this" or "write this word, then answer this". The cell owns the loop that
//! applies such a function atomically, and the exact undo of a write ([`Cell::restore_as`]), so
//! no algorithm and no table contains a compare-and-swap of a bucket word of its own.
//!
//! # Giving cells back
//! The undo is the crate's only way to give cells back, and it is exact: it puts back the word
//! a decision replaced only if the bucket still holds the word the decision wrote. What a user
//! holds of a decision for that is a [`Receipt`]. There is no arithmetic refund ("add `n`
//! cells"): once the refunded cells' time has passed, such a refund frees cells that other
//! requests were admitted against.
//!
//! # Owners
//! A keyed table's slot passes from key to key under its shard's lock while checks run without
//! it (see `keyed::slot`). The loop is therefore generic over an [`Owner`]: what must still hold
//! for the word to be the caller's (checked before every step), the mask between the stored word
//! and the algorithm's, and the orderings that make the check sound. [`Sole`], the owner of a
//! word nobody else can take, makes every such check a constant, so a single limiter's loop
//! compiles to the plain load–step–CAS it always was.
//!
//! # Orderings
//! The word *is* the whole state of a bucket. That no update is lost follows from the single
//! total modification order of one atomic location ("coherence"), which every
//! read-modify-write observes whatever its ordering, so a [`Sole`] cell's loop loads `Relaxed`.
//! A tagged slot's owner asks for `Acquire` loads instead (see `keyed::slot`).
//!
//! One fact must travel with the word: the clock reading that produced it. A thread that
//! clamps a bucket after a clock step ([`Cell::clamp_as`]) must read the clock *after* it saw
//! the word and get a reading no earlier than the one the word was written with; otherwise a
//! merely late reading would look like a clock step and free cells that were booked. So every
//! write is `Release` and the clamp's load is `Acquire`: the writer's clock read happens-before
//! the clamping thread's clock read (for clocks that are memory, like `ManualClock` and
//! `CoarseClock`, which use release/acquire too). On x86-64 these orderings cost nothing; a
//! locked `cmpxchg` and plain loads and stores already have them.

use crossbeam_utils::Backoff;

use crate::algorithm::{Algorithm, Step};
use crate::clock::Clock;
use crate::outcome::{Allowed, Refused};
use crate::primitive::{compare_exchange_weak, AtomicU64, Ordering};

/// A bucket's word before and after a decision's write, if it wrote one: what the exact undo
/// ([`Cell::restore_as`]) needs.
pub(crate) type Wrote = Option<(u64, u64)>;

/// What an admission wrote to its bucket, to give its cells back exactly: from
/// [`RateLimiter::reserve`](crate::RateLimiter::reserve) and
/// [`KeyedRateLimiter::reserve_key`](crate::KeyedRateLimiter::reserve_key), given back with
/// their `give_back`.
///
/// Giving a receipt back puts back the word the admission replaced, and only if the bucket
/// still holds the word the admission wrote. If any other request changed the bucket since,
/// nothing is given back: its cells stay taken (fewer admissions, never more), because that
/// request was decided against them. This is why there is no "add `n` cells": with a quota of
/// 1/s, a cell taken at 0 s and "added back" at 1.5 s, after another request took the cell of
/// 1 s, would admit a third request at 1.5 s, two admissions half a second apart.
///
/// A receipt is given back once: it is not `Clone`, and giving it back (or joining it with
/// [`then`](Self::then)) consumes it. It names its bucket's word (and a keyed bucket's tag),
/// not its limiter: give it back to the limiter that issued it (a single limiter refuses a
/// keyed one's, and the reverse). After a `reset`, the bucket may come to hold the very word
/// the receipt names through other bookings, which giving it back would then undo: give back
/// before resetting. `Receipt::default()` stands for nothing taken (a start for `then`).
///
/// ```
/// use core::time::Duration;
/// use flowgate::{clock::ManualClock, Quota, RateLimiter};
///
/// let clock = ManualClock::new();
/// let limiter = RateLimiter::with_clock(Quota::per_second(1)?, clock.clone());
/// let (_, receipt) = limiter.reserve(1)?.expect("a fresh bucket");
/// assert!(limiter.give_back(receipt)); // nothing happened since: the cell is back
/// let (_, receipt) = limiter.reserve(1)?.expect("the cell given back");
///
/// clock.advance(Duration::from_secs(1));
/// assert!(limiter.check().is_ok()); // another request takes the next cell, after this one
/// assert!(!limiter.give_back(receipt)); // so this one stays taken
/// assert!(limiter.check().is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Default, PartialEq, Eq, Hash)]
pub struct Receipt {
    /// A keyed bucket's tag (0 for a single limiter's).
    tag: u64,
    before: u64,
    after: u64,
}

impl Receipt {
    /// The receipt of a decision on the bucket `tag` that wrote `wrote`.
    #[inline(always)]
    pub(crate) fn new(tag: u64, wrote: Wrote) -> Self {
        let (before, after) = wrote.unwrap_or((0, 0));
        Self { tag, before, after }
    }

    /// The bucket's tag, and its words before and after the write; `None` if nothing was
    /// written.
    pub(crate) fn wrote(&self) -> Option<(u64, u64, u64)> {
        (self.before != self.after).then_some((self.tag, self.before, self.after))
    }

    /// Whether the admission wrote nothing, so that there is nothing to give back: a request of
    /// 0 cells, or a new key that a full table admitted without tracking it.
    pub fn is_empty(&self) -> bool {
        self.wrote().is_none()
    }

    /// One receipt for this admission and a `later` one from the same bucket: both, if `later`
    /// was written on top of this one (the bucket still held this one's word); otherwise
    /// `later` alone, since this one can no longer be given back once another request built on
    /// it. For cells taken in several steps.
    #[must_use]
    pub fn then(self, later: Receipt) -> Receipt {
        if later.is_empty() {
            self
        } else if !self.is_empty() && later.tag == self.tag && later.before == self.after {
            Receipt {
                before: self.before,
                ..later
            }
        } else {
            later
        }
    }
}

/// Who may decide on a cell's word, checked on every pass of the update loop.
pub(crate) trait Owner {
    /// The ordering of the loop's loads and of a failed compare-and-swap's read.
    const LOAD: Ordering;
    /// Whether an answer that writes nothing must first find the word unchanged on a second
    /// load (a word that may stop being the owner's between the step and the answer).
    const CONFIRM_KEEP: bool;

    /// Whether the word is still this owner's. Checked after each load, before the step runs.
    fn holds(&self) -> bool;

    /// The XOR mask between the stored word and the algorithm's word.
    fn mask(&self) -> u64;
}

/// The owner of a word nobody else can take: a single limiter's bucket, a policy's global
/// quota. Every check is a constant.
pub(crate) struct Sole;

impl Owner for Sole {
    // Relaxed: a single-word state machine; see the module docs.
    const LOAD: Ordering = Ordering::Relaxed;
    const CONFIRM_KEEP: bool = false;

    #[inline(always)]
    fn holds(&self) -> bool {
        true
    }

    #[inline(always)]
    fn mask(&self) -> u64 {
        0
    }
}

/// One bucket's state: a single atomic 64-bit word.
#[derive(Debug)]
pub(crate) struct Cell {
    word: AtomicU64,
}

impl Cell {
    /// A cell holding `word` (as stored: already masked, for an owner with a mask).
    pub(crate) fn new(word: u64) -> Self {
        Self {
            word: AtomicU64::new(word),
        }
    }

    /// The current word of a [`Sole`] cell.
    #[inline]
    pub(crate) fn load(&self) -> u64 {
        // Relaxed: a single-word state machine; see the module docs.
        self.word.load(Ordering::Relaxed)
    }

    /// The stored word as last written, for a caller that only filters on it (a keyed table's
    /// lock holder looking for idle keys, which confirms with [`Cell::flip`]).
    #[inline]
    pub(crate) fn load_relaxed(&self) -> u64 {
        // Relaxed: only a hint; the caller confirms what it found with a read-modify-write.
        self.word.load(Ordering::Relaxed)
    }

    /// Overwrites the stored word unconditionally.
    #[inline]
    pub(crate) fn store(&self, word: u64) {
        // Release: publishes the clock reading this word was computed from (module docs), and,
        // for a keyed slot, orders the word before the tag that names its new key.
        self.word.store(word, Ordering::Release);
    }

    /// XORs `nonce` into the stored word and returns the word it replaced: a keyed slot's close
    /// (see `keyed::slot`), after which no compare-and-swap expecting an earlier word succeeds.
    #[inline]
    pub(crate) fn flip(&self, nonce: u64) -> u64 {
        // Release: a check that loads the flipped word (Acquire) then sees the closing tag.
        self.word.fetch_xor(nonce, Ordering::Release)
    }

    /// Applies `step` to the word atomically: reads the word, asks `step` what to do, and, if it
    /// asks for a write, swaps the new word in only if nobody changed the word in between;
    /// otherwise `step` runs again on the fresh word. Returns the answer of the run that took
    /// effect.
    ///
    /// `step` must be a pure function of its argument (it may run several times).
    #[inline(always)]
    pub(crate) fn update<T>(&self, step: impl FnMut(u64) -> Step<T>) -> T {
        match self.update_as(&Sole, step) {
            Some(answer) => answer,
            // A sole owner always holds its word.
            None => unreachable!("a sole owner lost its word"),
        }
    }

    /// [`update`](Self::update) on behalf of `owner`: `None` as soon as the word stops being
    /// the owner's (the caller looks for its bucket again). The step sees the word unmasked.
    #[inline(always)]
    pub(crate) fn update_as<T, O: Owner>(
        &self,
        owner: &O,
        mut step: impl FnMut(u64) -> Step<T>,
    ) -> Option<T> {
        let mask = owner.mask();
        // The owner's ordering: Relaxed for a sole word (module docs), Acquire for a keyed slot.
        let mut raw = self.word.load(O::LOAD);
        let backoff = Backoff::new();
        loop {
            if !owner.holds() {
                return None;
            }
            match step(raw ^ mask) {
                Step::Keep(answer) => {
                    if !O::CONFIRM_KEEP {
                        return Some(answer);
                    }
                    // The owner's ordering: an unchanged word was the owner's when checked.
                    let again = self.word.load(O::LOAD);
                    if again == raw {
                        return Some(answer);
                    }
                    raw = again;
                }
                Step::Write(new, answer) => match self.swap(raw, new ^ mask, O::LOAD) {
                    Ok(()) => return Some(answer),
                    Err(actual) => {
                        raw = actual;
                        contended(&backoff);
                    }
                },
            }
        }
    }

    /// Puts `before` back if the word still holds `after`, the word this thread wrote: the undo
    /// of a write that a multi-quota decision or an abandoned reservation must take back.
    /// `Some(true)` if it did; `Some(false)` if the word changed since (another request built on
    /// it: left alone); `None` if the word is no longer `owner`'s (a keyed bucket that moved:
    /// look for it again).
    pub(crate) fn restore_as<O: Owner>(&self, owner: &O, after: u64, before: u64) -> Option<bool> {
        let mask = owner.mask();
        let expected = after ^ mask;
        loop {
            match self.swap(expected, before ^ mask, O::LOAD) {
                Ok(()) => return Some(true),
                // A weak CAS may fail spuriously, reporting the very word it expected.
                Err(actual) if actual == expected => continue,
                Err(_) => return owner.holds().then_some(false),
            }
        }
    }

    /// [`restore_as`](Self::restore_as) for a [`Sole`] cell.
    pub(crate) fn restore(&self, after: u64, before: u64) -> bool {
        self.restore_as(&Sole, after, before) == Some(true)
    }

    /// Replaces the word by `clamp(word)` while that returns `Some`, re-running `clamp` on the
    /// fresh word after a failed CAS; gives up if the word stops being `owner`'s. Each attempt
    /// loads the word with `Acquire` *before* calling `clamp`, so a clock reading taken inside
    /// `clamp` is no earlier than the reading the word was written with (module docs). Unlike
    /// [`Cell::update_as`], `clamp` is meant to read the clock.
    pub(crate) fn clamp_as<O: Owner>(&self, owner: &O, mut clamp: impl FnMut(u64) -> Option<u64>) {
        let mask = owner.mask();
        loop {
            // Acquire: pairs with the Release of the write that produced this word.
            let raw = self.word.load(Ordering::Acquire);
            if !owner.holds() {
                return;
            }
            let Some(new) = clamp(raw ^ mask) else { return };
            // Relaxed on failure: the loop loads again with Acquire.
            if self.swap(raw, new ^ mask, Ordering::Relaxed).is_ok() {
                return;
            }
        }
    }

    /// After a refusal flagged "clock behind", clamps `owner`'s word with `algorithm`'s
    /// [`catch_up`](crate::Algorithm::catch_up) against fresh readings of `clock`, each taken
    /// after the word's `Acquire` load (see [`Cell::clamp_as`]).
    #[cold]
    #[inline(never)]
    pub(crate) fn catch_up_as<O: Owner, A: Algorithm, C: Clock>(
        &self,
        owner: &O,
        algorithm: &A,
        clock: &C,
    ) {
        let skew = clock.skew_nanos();
        self.clamp_as(owner, |word| algorithm.catch_up(word, clock.now(), skew));
    }

    /// [`catch_up_as`](Self::catch_up_as) for a [`Sole`] cell.
    pub(crate) fn catch_up<A: Algorithm, C: Clock>(&self, algorithm: &A, clock: &C) {
        self.catch_up_as(&Sole, algorithm, clock);
    }

    /// One compare-and-swap attempt; `Err` carries the word found instead of `current`.
    #[inline(always)]
    fn swap(&self, current: u64, new: u64, failure: Ordering) -> Result<(), u64> {
        // Release on success: publishes the clock reading behind `new` to a clamp (module
        // docs). On failure the caller's ordering: Relaxed when the loop only needs the fresh
        // word (coherence gives it), Acquire when it may be a keyed slot's close.
        compare_exchange_weak(&self.word, current, new, Ordering::Release, failure).map(|_| ())
    }
}

/// `step`, noting in `wrote` the word it saw and the word it asked to write (the last run is
/// the one that took effect): a step for [`Cell::update_as`] whose write can be undone.
#[inline(always)]
pub(crate) fn noting<'a, T>(
    mut step: impl FnMut(u64) -> Step<T> + 'a,
    wrote: &'a mut Wrote,
) -> impl FnMut(u64) -> Step<T> + 'a {
    move |word| {
        let step = step(word);
        *wrote = match step {
            Step::Write(new, _) => Some((word, new)),
            Step::Keep(_) => None,
        };
        step
    }
}

/// `algorithm.check` of `n` cells at `now`, [`noting`] what it wrote.
#[inline(always)]
pub(crate) fn recording<'a, A: Algorithm>(
    algorithm: &'a A,
    now: u64,
    n: u32,
    wrote: &'a mut Wrote,
) -> impl FnMut(u64) -> Step<Result<Allowed, Refused>> + 'a {
    noting(move |word| algorithm.check(word, now, n), wrote)
}

/// `algorithm.take` of `n` cells at `now` (see [`Algorithm::take`]), noting in `wrote` the word
/// it saw and the word it asked to write, as [`recording`] does; an admission answers its delay
/// and the word the bucket holds after it.
#[inline(always)]
pub(crate) fn taking<'a, A: Algorithm>(
    algorithm: &'a A,
    now: u64,
    n: u32,
    wrote: &'a mut Wrote,
) -> impl FnMut(u64) -> Step<Option<(u64, u64)>> + 'a {
    move |word| match algorithm.take(word, now, n) {
        Step::Write(new, delay) => {
            *wrote = Some((word, new));
            Step::Write(new, delay.map(|delay| (delay, new)))
        }
        Step::Keep(delay) => {
            *wrote = None;
            Step::Keep(delay.map(|delay| (delay, word)))
        }
    }
}

/// Spins a little after a failed CAS, longer after each failure: letting the winner's cache line
/// settle instead of stealing it back at once (BENCHMARKS.md measures the contended case). Out
/// of line, so the uncontended path carries only a call it never takes.
#[cold]
#[inline(never)]
pub(crate) fn contended(backoff: &Backoff) {
    backoff.spin();
}
