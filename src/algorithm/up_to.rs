//! Taking as many cells as a bucket holds, up to a limit: the step behind every limiter's
//! `check_up_to` (bucket4j's "consume as much as possible", redis_rate's `AllowAtMost`).
//!
//! The count is decided inside the compare-and-swap loop, on the word the swap then replaces,
//! so the take is atomic: no other request can take cells between the count and the take (as
//! it could between `available()` and `check_n`).

use super::{Algorithm, Step};
use crate::outcome::{Allowed, Refused};

/// Takes the most cells `k ≤ n` (`n ≥ 1`) that [`Algorithm::check`] admits from the bucket
/// `word` at `now`, answering `(k, allowed)`; if not even one is admitted, the refusal of one
/// cell (which says when one will be).
///
/// "Admits" includes a shaper's delayed admissions: with a shaping algorithm the cells past
/// the free ones are queued, and the answer's delay is the last one's. Admission is monotone in
/// the cells asked for (if `k` are admitted, so are fewer), so the count is found from the
/// bucket's free cells ([`Algorithm::state`]), which is the answer for every algorithm that
/// admits at once (one `check` of them, or of one cell when none is free), and otherwise (a
/// shaper, or an algorithm whose `state` and `check` disagree) by bisection: at most 33
/// evaluations of `check`, all of one word.
#[inline]
pub fn up_to<A: Algorithm + ?Sized>(
    algorithm: &A,
    word: u64,
    now: u64,
    n: u32,
) -> Step<Result<(u32, Allowed), Refused>> {
    let most = n.min(algorithm.capacity());
    let free = most.min(algorithm.state(word, now).remaining());
    if algorithm.max_delay_nanos() == 0 {
        // The free cells, or one: admitted, they are the count; one refused means none is
        // admitted (monotone), which answers an empty bucket with one `check`.
        let k = free.max(1);
        let step = algorithm.check(word, now, k);
        if step.is_admitted() == (free > 0) {
            return counted(step, k);
        }
    }
    // The most admitted, by bisection: `low` is admitted (or 0), `high + 1` is not (or past
    // `most`).
    let (mut low, mut high) = (0, most);
    while low < high {
        let mid = low + (high - low).div_ceil(2);
        if algorithm.peek(word, now, mid).is_ok() {
            low = mid;
        } else {
            high = mid - 1;
        }
    }
    // None admitted: the refusal of one cell.
    let k = low.max(1);
    counted(algorithm.check(word, now, k), k)
}

/// `step` with its admission labelled with the `k` cells it took.
#[inline(always)]
fn counted(step: Step<Result<Allowed, Refused>>, k: u32) -> Step<Result<(u32, Allowed), Refused>> {
    match step {
        Step::Keep(answer) => Step::Keep(answer.map(|allowed| (k, allowed))),
        Step::Write(word, answer) => Step::Write(word, answer.map(|allowed| (k, allowed))),
    }
}

impl<T, E> Step<Result<T, E>> {
    /// Whether the answer is an admission.
    #[inline(always)]
    fn is_admitted(&self) -> bool {
        matches!(self, Step::Keep(Ok(_)) | Step::Write(_, Ok(_)))
    }
}

#[cfg(test)]
mod tests {
    use super::up_to;
    use crate::algorithm::{Algorithm, Gcra, Step};
    use crate::outcome::{Allowed, Gauge, Refused};
    use crate::quota::Quota;

    /// GCRA whose `state` reports a fixed number of free cells, whatever the bucket holds: an
    /// algorithm of a user's whose `state` and `check` disagree.
    struct Claims(Gcra, u32);

    impl Algorithm for Claims {
        fn quota(&self) -> &Quota {
            self.0.quota()
        }
        fn capacity(&self) -> u32 {
            self.0.capacity()
        }
        fn initial_word(&self, now: u64) -> u64 {
            self.0.initial_word(now)
        }
        fn check(&self, word: u64, now: u64, n: u32) -> Step<Result<Allowed, Refused>> {
            self.0.check(word, now, n)
        }
        fn state(&self, _word: u64, _now: u64) -> Allowed {
            let limit = self.0.capacity();
            Allowed::new(Gauge::new(u64::from(limit - self.1), 1, limit, 0))
        }
    }

    fn taken(algorithm: &Claims, word: u64, n: u32) -> Option<u32> {
        up_to(algorithm, word, 0, n).answer().ok().map(|(k, _)| k)
    }

    /// Whatever `state` claims, the count is what `check` admits: 3 of a full bucket of 5 when
    /// it claims none free, 2 of a bucket holding 2 when it claims all 5 free.
    #[test]
    fn the_count_follows_check_when_state_disagrees() {
        let quota = Quota::per_second(5).unwrap();
        let full = Gcra::new(&quota).initial_word(0);
        assert_eq!(taken(&Claims(Gcra::new(&quota), 0), full, 3), Some(3));
        let Step::Write(two_left, _) = Gcra::new(&quota).check(full, 0, 3) else {
            panic!("a full bucket admits 3");
        };
        assert_eq!(taken(&Claims(Gcra::new(&quota), 5), two_left, 5), Some(2));
        assert_eq!(taken(&Claims(Gcra::new(&quota), 0), two_left, 5), Some(2));
    }
}
