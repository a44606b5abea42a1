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
/// admits at once, and otherwise (a shaper, or an algorithm whose `state` and `check`
/// disagree) by bisection: at most 33 evaluations of `check`, all of one word.
#[inline]
pub(crate) fn up_to<A: Algorithm + ?Sized>(
    algorithm: &A,
    word: u64,
    now: u64,
    n: u32,
) -> Step<Result<(u32, Allowed), Refused>> {
    let most = n.min(algorithm.capacity());
    let free = most.min(algorithm.state(word, now).remaining());
    if free > 0 && algorithm.max_delay_nanos() == 0 {
        let step = algorithm.check(word, now, free);
        if step.is_admitted() {
            return counted(step, free);
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
