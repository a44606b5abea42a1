//! The circuit breaker's word: whether calls may go to a backend, counted consecutive failures,
//! and the single probe of a half-open breaker ([`BreakerWord`]). The Redis limiter
//! (`redis::breaker`) holds one.
//!
//! # The word
//! The top two bits are the phase, the other 62 its figure:
//! * closed (`00`): the consecutive failures so far; calls go through;
//! * open (`01`): the time (ns of the breaker's clock) until which no call goes through;
//! * half open (`10`): one probe is out; no call goes through until it reports.
//!
//! Every change is one compare-and-swap from the word it read, so failures racing each other
//! open the breaker once, and of the callers that find the cool-down over exactly one becomes
//! the probe; only the probe's report leaves the half-open phase
//! (`loom-tests/tests/breaker.rs`). A closed breaker with no failure is only read: the
//! decisions that go through write nothing.

use crate::primitive::{compare_exchange_weak, AtomicU64, Ordering};

const PHASE_SHIFT: u32 = 62;
const FIGURE: u64 = (1 << PHASE_SHIFT) - 1;
const CLOSED: u64 = 0;
const OPEN: u64 = 1 << PHASE_SHIFT;
const HALF_OPEN: u64 = 2 << PHASE_SHIFT;

/// What a caller may do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// The breaker is closed: call.
    Call,
    /// The cool-down is over and this caller is the one probe: probe, then report with
    /// [`BreakerWord::probed`].
    Probe,
    /// Open or half open: do not call.
    Refuse,
}

/// A breaker's phase, as reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Calls go through; the consecutive failures so far.
    Closed(u64),
    /// No call goes through until the time given (ns).
    Open(u64),
    /// One probe is out.
    HalfOpen,
}

/// The breaker's state in one atomic word (see the [module docs](self)).
#[derive(Debug)]
pub struct BreakerWord {
    word: AtomicU64,
}

impl Default for BreakerWord {
    fn default() -> Self {
        Self::new()
    }
}

// Relaxed everywhere: the word is a state machine on its own; no other memory is published or
// read through it, and the compare-and-swaps on this one location are totally ordered.
impl BreakerWord {
    /// A closed breaker with no failure.
    pub fn new() -> Self {
        Self {
            word: AtomicU64::new(CLOSED),
        }
    }

    /// The phase now.
    pub fn phase(&self) -> Phase {
        decode(self.word.load(Ordering::Relaxed))
    }

    /// Whether a caller may call now; `now` (ns) is read only when the breaker is open.
    pub fn gate(&self, now: impl FnOnce() -> u64) -> Gate {
        let mut word = self.word.load(Ordering::Relaxed);
        if word >> PHASE_SHIFT == 0 {
            return Gate::Call;
        }
        let now = now();
        loop {
            match decode(word) {
                Phase::Closed(_) => return Gate::Call,
                Phase::HalfOpen => return Gate::Refuse,
                Phase::Open(until) if now < until => return Gate::Refuse,
                Phase::Open(_) => {}
            }
            match compare_exchange_weak(
                &self.word,
                word,
                HALF_OPEN,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Gate::Probe,
                Err(actual) => word = actual,
            }
        }
    }

    /// A call answered: a closed breaker forgets its failures. An open or half-open breaker is
    /// left alone (the call was sent before it opened; only the probe closes it).
    pub fn succeeded(&self) {
        let mut word = self.word.load(Ordering::Relaxed);
        while let Phase::Closed(1..) = decode(word) {
            match compare_exchange_weak(
                &self.word,
                word,
                CLOSED,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(actual) => word = actual,
            }
        }
    }

    /// A call failed at `now` (ns): a closed breaker counts it and opens until `now +
    /// cool_down` at the `limit`-th consecutive failure. True if this failure opened it. An
    /// open or half-open breaker is left alone.
    pub fn failed(&self, now: u64, limit: u64, cool_down: u64) -> bool {
        let mut word = self.word.load(Ordering::Relaxed);
        loop {
            let Phase::Closed(failures) = decode(word) else {
                return false;
            };
            let failures = failures.saturating_add(1);
            let opens = failures >= limit;
            let next = if opens {
                open_until(now, cool_down)
            } else {
                CLOSED | failures.min(FIGURE)
            };
            match compare_exchange_weak(
                &self.word,
                word,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return opens,
                Err(actual) => word = actual,
            }
        }
    }

    /// The probe's report at `now` (ns): closed with no failure if it succeeded, open until
    /// `now + cool_down` if not. Only the caller that [`gate`](Self::gate) made the probe
    /// calls this, once.
    pub fn probed(&self, ok: bool, now: u64, cool_down: u64) {
        let next = if ok {
            CLOSED
        } else {
            open_until(now, cool_down)
        };
        // Nothing else leaves the half-open phase, so a CAS from it cannot lose a change; it
        // fails only if the caller was not the probe, and then changes nothing.
        let mut word = HALF_OPEN;
        while word == HALF_OPEN {
            match compare_exchange_weak(
                &self.word,
                HALF_OPEN,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(actual) => word = actual,
            }
        }
    }
}

/// The open word until `now + cool_down`, saturating at the latest time the word holds.
fn open_until(now: u64, cool_down: u64) -> u64 {
    OPEN | now.saturating_add(cool_down).min(FIGURE)
}

fn decode(word: u64) -> Phase {
    let figure = word & FIGURE;
    match word >> PHASE_SHIFT {
        0 => Phase::Closed(figure),
        1 => Phase::Open(figure),
        _ => Phase::HalfOpen,
    }
}

#[cfg(all(test, not(flowgate_loom)))]
mod tests {
    use super::*;

    const COOL: u64 = 100;

    #[test]
    fn opens_at_the_limit_and_a_success_resets_the_count() {
        let word = BreakerWord::new();
        assert!(!word.failed(10, 3, COOL));
        assert!(!word.failed(11, 3, COOL));
        assert_eq!(word.phase(), Phase::Closed(2));
        word.succeeded();
        assert_eq!(word.phase(), Phase::Closed(0));
        assert!(!word.failed(12, 3, COOL));
        assert!(!word.failed(13, 3, COOL));
        assert!(
            word.failed(14, 3, COOL),
            "the third consecutive failure opens it"
        );
        assert_eq!(word.phase(), Phase::Open(114));
        // Failures and successes of calls sent before it opened change nothing.
        assert!(!word.failed(15, 3, COOL));
        word.succeeded();
        assert_eq!(word.phase(), Phase::Open(114));
    }

    #[test]
    fn one_probe_after_the_cool_down_and_its_report_decides() {
        let word = BreakerWord::new();
        word.failed(0, 1, COOL);
        assert_eq!(word.gate(|| 99), Gate::Refuse, "still cooling down");
        assert_eq!(word.gate(|| 100), Gate::Probe);
        assert_eq!(word.gate(|| 500), Gate::Refuse, "one probe at a time");
        assert!(!word.failed(500, 1, COOL), "a straggler does not reopen it");
        assert_eq!(word.phase(), Phase::HalfOpen);
        word.probed(false, 500, COOL);
        assert_eq!(word.phase(), Phase::Open(600));
        assert_eq!(word.gate(|| 600), Gate::Probe);
        word.probed(true, 601, COOL);
        assert_eq!(word.phase(), Phase::Closed(0));
        assert_eq!(
            word.gate(|| unreachable!("a closed breaker reads no clock")),
            Gate::Call
        );
    }

    #[test]
    fn a_cool_down_past_the_word_saturates() {
        let word = BreakerWord::new();
        word.failed(u64::MAX - 1, 1, u64::MAX);
        assert_eq!(word.phase(), Phase::Open(FIGURE));
        assert_eq!(word.gate(|| FIGURE - 1), Gate::Refuse);
    }

    #[test]
    fn a_report_from_no_probe_changes_nothing() {
        let word = BreakerWord::new();
        word.probed(true, 0, COOL);
        assert_eq!(word.phase(), Phase::Closed(0));
        word.failed(0, 1, COOL);
        word.probed(true, 0, COOL);
        assert_eq!(word.phase(), Phase::Open(COOL));
    }
}
