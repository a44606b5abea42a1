//! The circuit breaker's word: whether calls may go to a backend, counted consecutive failures,
//! and the single probe of a half-open breaker ([`BreakerWord`]). The Redis limiter
//! (`redis::breaker`) holds one.
//!
//! # The word
//! The top two bits are the phase, the other 62 its figure:
//! * closed (`00`): the consecutive failures so far; calls go through;
//! * open (`01`): the time (ns of the breaker's clock) until which no call goes through;
//! * half open (`10`): the time (ns) one probe went out; no call goes through until it
//!   reports, or until it is overdue (a probe whose task was dropped never reports), when the
//!   next caller becomes a new probe.
//!
//! Every change is one compare-and-swap from the word it read, so failures racing each other
//! open the breaker once, and of the callers that find the cool-down over exactly one becomes
//! the probe; only the current probe's report leaves the half-open phase (a late report of a
//! replaced probe changes nothing) (`loom-tests/tests/breaker.rs`). A closed breaker with no
//! failure is only read: the decisions that go through write nothing.

use std::sync::atomic::{AtomicU64, Ordering};

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
    /// The cool-down is over and this caller is the one probe, sent at the time given: probe,
    /// then report with [`BreakerWord::probed`] and that time.
    Probe(u64),
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
    /// One probe is out, since the time given (ns).
    HalfOpen(u64),
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
        // Relaxed: the word is the whole state; nothing else is read through it.
        decode(self.word.load(Ordering::Relaxed))
    }

    /// Whether a caller may call now; `now` (ns) is read only when the breaker is not closed.
    /// A probe out for `overdue` ns or more is taken for lost, and this caller probes anew.
    #[inline(always)]
    pub fn gate(&self, now: impl FnOnce() -> u64, overdue: u64) -> Gate {
        // Relaxed: the word is the whole state; nothing else is read through it.
        let word = self.word.load(Ordering::Relaxed);
        if word >> PHASE_SHIFT == 0 {
            return Gate::Call;
        }
        self.gate_open(word, now(), overdue)
    }

    /// [`gate`](Self::gate) of a breaker found open or half open (`word`) at `now`: out of
    /// line, so that a closed breaker's check stays a load and a branch in the caller.
    #[cold]
    #[inline(never)]
    fn gate_open(&self, mut word: u64, now: u64, overdue: u64) -> Gate {
        let now = now.min(FIGURE);
        loop {
            match decode(word) {
                Phase::Closed(_) => return Gate::Call,
                Phase::Open(until) if now < until => return Gate::Refuse,
                Phase::HalfOpen(since) if now < since.saturating_add(overdue) => {
                    return Gate::Refuse
                }
                Phase::Open(_) | Phase::HalfOpen(_) => {}
            }
            // Relaxed: CASes on this one word are totally ordered; it publishes nothing.
            match self.word.compare_exchange_weak(
                word,
                HALF_OPEN | now,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Gate::Probe(now),
                Err(actual) => word = actual,
            }
        }
    }

    /// A call answered: a closed breaker forgets its failures. An open or half-open breaker is
    /// left alone (the call was sent before it opened; only the probe closes it).
    #[inline(always)]
    pub fn succeeded(&self) {
        // Relaxed: the word is the whole state; nothing else is read through it.
        let word = self.word.load(Ordering::Relaxed);
        if word != CLOSED {
            self.forget_failures(word);
        }
    }

    /// [`succeeded`](Self::succeeded) when the word holds failures or is not closed.
    #[cold]
    #[inline(never)]
    fn forget_failures(&self, mut word: u64) {
        while let Phase::Closed(1..) = decode(word) {
            // Relaxed: CASes on this one word are totally ordered; it publishes nothing.
            match self.word.compare_exchange_weak(
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
        // Relaxed: the word is the whole state; nothing else is read through it.
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
            // Relaxed: CASes on this one word are totally ordered; it publishes nothing.
            match self
                .word
                .compare_exchange_weak(word, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return opens,
                Err(actual) => word = actual,
            }
        }
    }

    /// The report at `now` (ns) of the probe sent at `sent` ([`Gate::Probe`]): closed with no
    /// failure if it succeeded, open until `now + cool_down` if not. A report of a probe that
    /// is no longer the current one (it was overdue and replaced) changes nothing.
    pub fn probed(&self, sent: u64, ok: bool, now: u64, cool_down: u64) {
        let next = if ok {
            CLOSED
        } else {
            open_until(now, cool_down)
        };
        let probing = HALF_OPEN | sent;
        // Only the current probe leaves the half-open phase, so a CAS from its word cannot lose
        // a change; it fails (spuriously, or for a replaced probe) and then changes nothing.
        let mut word = probing;
        while word == probing {
            // Relaxed: CASes on this one word are totally ordered; it publishes nothing.
            match self.word.compare_exchange_weak(
                probing,
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
        _ => Phase::HalfOpen(figure),
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
        const OVERDUE: u64 = 1_000;
        let word = BreakerWord::new();
        word.failed(0, 1, COOL);
        assert_eq!(
            word.gate(|| 99, OVERDUE),
            Gate::Refuse,
            "still cooling down"
        );
        assert_eq!(word.gate(|| 100, OVERDUE), Gate::Probe(100));
        assert_eq!(
            word.gate(|| 500, OVERDUE),
            Gate::Refuse,
            "one probe at a time"
        );
        assert!(!word.failed(500, 1, COOL), "a straggler does not reopen it");
        assert_eq!(word.phase(), Phase::HalfOpen(100));
        word.probed(100, false, 500, COOL);
        assert_eq!(word.phase(), Phase::Open(600));
        assert_eq!(word.gate(|| 600, OVERDUE), Gate::Probe(600));
        word.probed(600, true, 601, COOL);
        assert_eq!(word.phase(), Phase::Closed(0));
        let never = || unreachable!("a closed breaker reads no clock");
        assert_eq!(word.gate(never, OVERDUE), Gate::Call);
    }

    /// A probe that never reports (its task dropped) is replaced once overdue, and its late
    /// report, if it comes, changes nothing.
    #[test]
    fn an_overdue_probe_is_replaced() {
        let word = BreakerWord::new();
        word.failed(0, 1, COOL);
        assert_eq!(word.gate(|| 100, 50), Gate::Probe(100));
        assert_eq!(word.gate(|| 149, 50), Gate::Refuse);
        assert_eq!(word.gate(|| 150, 50), Gate::Probe(150));
        word.probed(100, true, 160, COOL);
        assert_eq!(
            word.phase(),
            Phase::HalfOpen(150),
            "the lost probe's report"
        );
        word.probed(150, false, 170, COOL);
        assert_eq!(word.phase(), Phase::Open(170 + COOL));
    }

    #[test]
    fn a_cool_down_past_the_word_saturates() {
        let word = BreakerWord::new();
        word.failed(u64::MAX - 1, 1, u64::MAX);
        assert_eq!(word.phase(), Phase::Open(FIGURE));
        assert_eq!(word.gate(|| FIGURE - 1, 1), Gate::Refuse);
    }

    #[test]
    fn a_report_from_no_probe_changes_nothing() {
        let word = BreakerWord::new();
        word.probed(0, true, 0, COOL);
        assert_eq!(word.phase(), Phase::Closed(0));
        word.failed(0, 1, COOL);
        word.probed(0, true, 0, COOL);
        assert_eq!(word.phase(), Phase::Open(COOL));
    }
}
