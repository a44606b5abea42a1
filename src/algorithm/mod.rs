//! The decision math: the [`Algorithm`] trait and one module per algorithm.
//!
//! An algorithm is pure: it maps (the bucket's packed `u64` word, a clock reading, `n` cells)
//! to a decision and, if the bucket changes, the new word. It holds no atomics and reads no
//! clock; the lock-free cell runs it inside its compare-and-swap loop (retrying it on a fresh
//! word when another thread won), and the same function serves the single limiter, keyed
//! tables, policies, and the reference models in the tests.
//!
//! Every algorithm documents its word layout (named shifts and masks, and what 0 means) and
//! validates at construction every bound that keeps its arithmetic from overflowing.
//!
//! # Choosing one
//!
//! | algorithm | burst | boundary effect | precision | bytes per bucket | cost per decision |
//! |---|---|---|---|---|---|
//! | [`Gcra`] (default) | `burst`, then one per interval | none | exact (ns) | 8 | load + CAS |
//! | [`LeakyBucket::meter`] | as GCRA (same decisions) | none | exact (ns) | 8 | load + CAS |
//! | [`LeakyBucket::shaper`] | `burst`, then queued up to a max delay | none | exact (ns) | 8 | load + CAS |
//! | [`Credit`] | `burst`, then borrowed up to a max debt | none | exact (ns) | 8 | load + CAS |
//! | [`IntervalRefill`] | `burst`; `count` return at each boundary | a batch per boundary | exact per interval | 8 | load + CAS + division |
//! | [`FixedWindow`] | the limit, anywhere in a window | up to 2 × limit across an edge | exact per window | 8 | load + CAS + division |
//! | [`SlidingWindow`] | the limit | smoothed (approximation) | approximate | 8 | load + CAS + division |
//! | [`SlidingLog`](crate::SlidingLog) | the limit | none | exact in any window | 8 × limit + 32 | 2 loads + 2 CAS + store per cell |
//!
//! The shapers ([`LeakyBucket::shaper`], [`Credit`]) admit requests *to go ahead later*:
//! [`Allowed::delay`] is how long the caller must wait. [`SlidingLog`](crate::SlidingLog) keeps
//! one slot per request, so it is its own limiter type rather than an [`Algorithm`].
//!
//! [`AnyAlgorithm`] holds any of the one-word algorithms, chosen at run time: a policy's quotas
//! are `AnyAlgorithm` values, and a quota string that names an algorithm after the quota
//! (`"20000/day fixed"`) parses into one.
//!
//! # Cores
//! The algorithms share two cores: `schedule` (the theoretical-arrival-time arithmetic behind
//! GCRA, the leaky bucket and credit) and `stepped` (the bucket refilled at window boundaries
//! behind the interval refill and the fixed window). The sliding window counter has its own.

mod any;
mod credit;
mod fixed_window;
mod gcra;
mod interval_refill;
mod leaky_bucket;
mod schedule;
mod sliding_window;
mod stepped;
mod up_to;
pub(crate) mod window;

pub(crate) use any::each;
pub use any::AnyAlgorithm;
pub use credit::Credit;
pub use fixed_window::FixedWindow;
pub use gcra::Gcra;
pub use interval_refill::IntervalRefill;
pub use leaky_bucket::LeakyBucket;
pub use sliding_window::SlidingWindow;

pub use up_to::up_to;
pub use window::phase as window_phase;

use crate::outcome::{Allowed, Refused};
use crate::quota::Quota;

/// What an algorithm decided for one word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step<T> {
    /// Leave the word unchanged and return the answer (a refusal, a peek).
    Keep(T),
    /// Write this new word (if the word still holds what the algorithm saw), then return the
    /// answer.
    Write(u64, T),
}

impl<T> Step<T> {
    /// The answer, whether or not a write was asked for.
    #[inline(always)]
    pub fn answer(self) -> T {
        match self {
            Step::Keep(answer) | Step::Write(_, answer) => answer,
        }
    }
}

/// A rate-limiting algorithm over one packed 64-bit word per bucket.
///
/// All methods are pure functions of their arguments: they may run several times for one
/// request (the CAS loop retries them on a fresh word), and their results must not depend on
/// anything else. They must not panic: a keyed table calls [`is_idle`](Self::is_idle) while a
/// slot is closed under its shard's lock, and a panic there would leave the slot closed. Times
/// are nanoseconds since the Unix epoch (see [`crate::clock`]); a reading may be earlier than one seen before (see
/// [`crate::clock`]), which must never cause a panic.
pub trait Algorithm {
    /// The quota this algorithm enforces.
    fn quota(&self) -> &Quota;

    /// The most cells one request may take; a larger `n` can never succeed.
    fn capacity(&self) -> u32;

    /// The word of a bucket created at `now`, filled as [`Quota::initial`] says.
    fn initial_word(&self, now: u64) -> u64;

    /// Takes `n` cells, `1 ≤ n ≤ capacity`, from the bucket `word` at `now`.
    fn check(&self, word: u64, now: u64, n: u32) -> Step<Result<Allowed, Refused>>;

    /// [`check`](Self::check) for a decision that takes several buckets all or nothing (a
    /// policy set's), on its hot path: `Some(delay)` if admitted (the bucket's gauge after it is
    /// then [`state`](Self::state) of the word written, at `now`), `None` if refused (the
    /// decision asks `check` for the details on its cold path). Small enough to stay in
    /// registers through a compare-and-swap loop. The default runs `check`, whose refusal and
    /// gauge the compiler drops when inlined; an algorithm overrides it only to answer with less
    /// work.
    #[inline(always)]
    fn take(&self, word: u64, now: u64, n: u32) -> Step<Option<u64>> {
        delay_of(self.check(word, now, n))
    }

    /// The decision [`check`](Self::check) would make, without taking anything.
    #[inline(always)]
    fn peek(&self, word: u64, now: u64, n: u32) -> Result<Allowed, Refused> {
        self.check(word, now, n).answer()
    }

    /// The bucket `word` as seen at `now`, taking nothing (what a request of 0 cells reports).
    fn state(&self, word: u64, now: u64) -> Allowed;

    /// Whether the bucket `word` is full at `now` and stays full at every later reading until
    /// something is taken: then it answers every request exactly as a bucket created full at
    /// `now` would, and a keyed table may forget it without changing any decision (see
    /// [`KeyedRateLimiter`](crate::KeyedRateLimiter)). Must be conservative: `false` is always
    /// safe (the bucket is then never evicted). The default says `false`.
    #[inline]
    fn is_idle(&self, word: u64, now: u64) -> bool {
        let _ = (word, now);
        false
    }

    /// The longest an admitted request may be told to wait ([`Allowed::delay`]), in ns: 0 for
    /// the algorithms that admit at once or refuse (the default), the queue bound for the
    /// shaping ones. The waits choose their discipline by it (see [`crate::wait`]): a shaping
    /// algorithm's quota refusal means its queue is full, and is not retried. An algorithm that
    /// wraps a shaping one should forward it.
    #[inline]
    fn max_delay_nanos(&self) -> u64 {
        0
    }

    /// After a refusal flagged as "clock behind" (the bucket looked booked further ahead than
    /// any reading could explain), the word to write given a `fresh` reading taken after the
    /// word was loaded, and the clock's declared `skew`; `None` to leave it. The default never
    /// writes.
    #[inline]
    fn catch_up(&self, word: u64, fresh: u64, skew: u64) -> Option<u64> {
        let _ = (word, fresh, skew);
        None
    }
}

/// Nanoseconds until the bucket `word` holds one more cell than at `now` (0 if it is full, or
/// if one more is admitted now): when the IETF draft's `RateLimit` says more quota comes.
pub fn next_cell<A: Algorithm + ?Sized>(algorithm: &A, word: u64, now: u64) -> u64 {
    let remaining = algorithm.state(word, now).remaining();
    if remaining >= algorithm.capacity() {
        return 0;
    }
    match algorithm.peek(word, now, remaining + 1) {
        Err(refused) => refused.conforms_after_nanos(),
        Ok(_) => 0,
    }
}

/// What [`Algorithm::take`] answers for a `check` that answered `step`: the delay of an
/// admission, nothing of a refusal (which writes nothing).
#[inline(always)]
pub(crate) fn delay_of(step: Step<Result<Allowed, Refused>>) -> Step<Option<u64>> {
    match step {
        Step::Write(new, Ok(allowed)) => Step::Write(new, Some(allowed.delay_nanos())),
        Step::Keep(Ok(allowed)) => Step::Keep(Some(allowed.delay_nanos())),
        Step::Write(_, Err(_)) | Step::Keep(Err(_)) => Step::Keep(None),
    }
}

/// Implements [`Algorithm`] for `$ty` by its field `$field`; with `take`, the field's own
/// [`Algorithm::take`] too (the TAT schedules'), and with `$take, $check` the field's `$take`
/// and `$check` as [`Algorithm::take`] and [`Algorithm::check`] (GCRA's schedule without
/// slack).
macro_rules! delegate_algorithm {
    ($ty:ty, $field:ident, take) => {
        $crate::algorithm::delegate_algorithm!($ty, $field, take, check);
    };
    ($ty:ty, $field:ident, $take:ident, $check:ident) => {
        $crate::algorithm::delegate_algorithm!($ty, $field, $check, {
            #[inline(always)]
            fn take(
                &self,
                word: u64,
                now: u64,
                n: u32,
            ) -> $crate::algorithm::Step<Option<u64>> {
                self.$field.$take(word, now, n)
            }
        });
    };
    ($ty:ty, $field:ident) => {
        $crate::algorithm::delegate_algorithm!($ty, $field, check, {});
    };
    ($ty:ty, $field:ident, $check:ident, { $($take:tt)* }) => {
        impl $crate::algorithm::Algorithm for $ty {
            $($take)*

            fn quota(&self) -> &$crate::Quota {
                self.$field.quota()
            }

            #[inline(always)]
            fn capacity(&self) -> u32 {
                self.$field.capacity()
            }

            fn initial_word(&self, now: u64) -> u64 {
                self.$field.initial_word(now)
            }

            #[inline(always)]
            fn check(
                &self,
                word: u64,
                now: u64,
                n: u32,
            ) -> $crate::algorithm::Step<Result<$crate::Allowed, $crate::Refused>> {
                self.$field.$check(word, now, n)
            }

            #[inline(always)]
            fn state(&self, word: u64, now: u64) -> $crate::Allowed {
                self.$field.state(word, now)
            }

            #[inline]
            fn catch_up(&self, word: u64, fresh: u64, skew: u64) -> Option<u64> {
                self.$field.catch_up(word, fresh, skew)
            }

            #[inline]
            fn is_idle(&self, word: u64, now: u64) -> bool {
                self.$field.is_idle(word, now)
            }

            #[inline]
            fn max_delay_nanos(&self) -> u64 {
                self.$field.max_delay_nanos()
            }
        }
    };
}
use delegate_algorithm;

#[cfg(all(test, not(flowgate_loom)))]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// `take`, which a policy set's decisions and keyed admissions run (GCRA's without slack,
    /// in registers), answers as `check` does, word for word, on every algorithm: through a
    /// burst to its last cell, the refusals after it, and the refill. A `take` that refused a
    /// burst's last cell would go unseen elsewhere (the cold path decides every refusal again
    /// with `check`, and admits), costing only time: with `<` for `<=` in `take_exact` this
    /// fails at the request that takes GCRA's last cells.
    #[test]
    fn take_answers_as_check_does() {
        for text in [
            "10/s burst 4",
            "10/s burst 4 leaky",
            "10/s burst 2 shaper 300ms",
            "10/s credit 500ms",
            "4/s burst 4 interval",
            "4/s fixed",
            "4/s sliding",
            "30/s burst 5 initial 2",
        ] {
            let algorithm: AnyAlgorithm = text.parse().unwrap();
            let mut word = algorithm.initial_word(0);
            let mut admitted = 0;
            for step in 0..400u64 {
                // Bursts of requests at the same instant, then time moving on.
                let now = step / 8 * 37 * MS;
                for n in [1, 2] {
                    let checked = delay_of(algorithm.check(word, now, n));
                    assert_eq!(
                        algorithm.take(word, now, n),
                        checked,
                        "{text} at {now}, n = {n}"
                    );
                }
                if let Step::Write(new, Ok(_)) = algorithm.check(word, now, 1) {
                    word = new;
                    admitted += 1;
                }
            }
            assert!((5..400).contains(&admitted), "{text}: {admitted} admitted");
        }
    }

    /// When a bucket holds one more cell: the next interval boundary of a schedule, the next
    /// window of a fixed window, never for a full bucket.
    #[test]
    fn the_next_cell_comes_when_the_algorithm_says() {
        let gcra = Gcra::new(&"10/s burst 3".parse().unwrap()); // one cell per 100 ms
        let mut word = gcra.initial_word(0);
        assert_eq!(next_cell(&gcra, word, 0), 0, "full");
        for _ in 0..3 {
            word = match gcra.check(word, 0, 1) {
                Step::Write(new, Ok(_)) => new,
                other => panic!("{other:?}"),
            };
        }
        // 300 ms booked at 0; 30 ms later the next cell is 70 ms away.
        assert_eq!(next_cell(&gcra, word, 30 * MS), 70 * MS);
        let fixed = FixedWindow::new(&"3/s".parse().unwrap()).unwrap();
        let mut word = fixed.initial_word(0);
        for _ in 0..2 {
            word = match fixed.check(word, 250 * MS, 1) {
                Step::Write(new, Ok(_)) => new,
                other => panic!("{other:?}"),
            };
        }
        // One cell left: the next comes with the next window, 750 ms away.
        assert_eq!(next_cell(&fixed, word, 250 * MS), 750 * MS);
    }
}
