//! Loom models of the circuit breaker's word (the Redis limiter's breaker): failures racing
//! each other open it once, a success racing a failure loses neither, and of the callers that
//! find the cool-down over exactly one becomes the probe, whose report alone ends the half-open
//! phase.
//!
//! Run: `RUSTFLAGS="--cfg flowgate_loom" cargo test --release -p flowgate-loom-tests`
#![cfg(flowgate_loom)]

use flowgate::loom::{fail_next_cas, BreakerWord, Gate, Phase};
use flowgate_loom_tests::model;
use loom::sync::Arc;
use loom::thread;

const COOL: u64 = 100;

/// Two failures (one after a spurious CAS failure) on a breaker one failure short of its limit
/// of 3, against a third: exactly one of them opens it, and it ends open.
#[test]
fn racing_failures_open_the_breaker_once() {
    model(|| {
        let word = Arc::new(BreakerWord::new());
        assert!(!word.failed(0, 3, COOL));
        let failers: Vec<_> = [0, 1]
            .into_iter()
            .map(|spurious| {
                let word = word.clone();
                thread::spawn(move || {
                    fail_next_cas(spurious);
                    word.failed(5, 3, COOL)
                })
            })
            .collect();
        let third = word.failed(5, 3, COOL);
        let opened = failers
            .into_iter()
            .map(|f| f.join().unwrap())
            .chain([third]);
        assert_eq!(opened.filter(|&o| o).count(), 1, "opened once");
        assert_eq!(word.phase(), Phase::Open(5 + COOL));
    });
}

/// A success racing a failure on a breaker with one failure of its limit of 2: either the
/// success came first (the failure then counts one) or the failure opened it (the success
/// then leaves it open); never both lost.
#[test]
fn a_success_and_a_failure_lose_neither() {
    model(|| {
        let word = Arc::new(BreakerWord::new());
        word.failed(0, 2, COOL);
        let success = {
            let word = word.clone();
            thread::spawn(move || {
                fail_next_cas(1);
                word.succeeded();
            })
        };
        let opened = word.failed(1, 2, COOL);
        success.join().unwrap();
        match word.phase() {
            Phase::Closed(1) => assert!(!opened),
            Phase::Open(until) => assert!(opened && until == 1 + COOL),
            other => panic!("{other:?}"),
        }
    });
}

/// Two callers after the cool-down and a late failure: exactly one caller probes (the other is
/// refused, or calls once the probe has closed the breaker), and a late failure changes an
/// open or half-open breaker in nothing: only the probe's report ends the half-open phase.
#[test]
fn one_probe_and_only_its_report_ends_the_half_open_phase() {
    model(|| {
        let word = Arc::new(BreakerWord::new());
        word.failed(0, 1, COOL);
        let callers: Vec<_> = [0, 1]
            .into_iter()
            .map(|spurious| {
                let word = word.clone();
                thread::spawn(move || {
                    fail_next_cas(spurious);
                    let gate = word.gate(|| COOL, 10 * COOL);
                    if let Gate::Probe(sent) = gate {
                        word.probed(sent, true, COOL + 1, COOL);
                    }
                    gate
                })
            })
            .collect();
        let late = word.failed(COOL, 1, COOL);
        let gates: Vec<_> = callers.into_iter().map(|c| c.join().unwrap()).collect();
        assert_eq!(
            gates.iter().filter(|g| matches!(g, Gate::Probe(_))).count(),
            1,
            "{gates:?}"
        );
        // The late failure found it open or half open (it never opens an open breaker), or
        // closed after the probe, when it counts as the first failure of a limit of 1.
        match word.phase() {
            Phase::Closed(0) => assert!(!late),
            Phase::Open(until) => assert!(late && until == 2 * COOL),
            other => panic!("{other:?}"),
        }
    });
}

/// A probe lost (it never reports) and overdue: of two callers, exactly one becomes the new
/// probe; the lost probe's late report, racing them, never ends the new probe's half-open phase.
#[test]
fn an_overdue_probe_is_replaced_once_and_its_late_report_is_ignored() {
    model(|| {
        let word = Arc::new(BreakerWord::new());
        word.failed(0, 1, COOL);
        let Gate::Probe(lost) = word.gate(|| COOL, COOL) else {
            panic!("the first caller after the cool-down probes");
        };
        // The lost probe reports late: only if no caller replaced it yet does it count.
        let late = {
            let word = word.clone();
            thread::spawn(move || word.probed(lost, false, 2 * COOL, COOL))
        };
        let caller = {
            let word = word.clone();
            thread::spawn(move || {
                fail_next_cas(1);
                word.gate(|| 2 * COOL, COOL)
            })
        };
        let gates = [word.gate(|| 2 * COOL, COOL), caller.join().unwrap()];
        late.join().unwrap();
        let probes = gates.iter().filter(|g| matches!(g, Gate::Probe(_))).count();
        match word.phase() {
            // Replaced first: one new probe, the late report ignored.
            Phase::HalfOpen(since) => assert!(probes == 1 && since == 2 * COOL, "{gates:?}"),
            // Reported first (open again until 3 COOL): no caller probes before then.
            Phase::Open(until) => assert!(probes == 0 && until == 3 * COOL, "{gates:?}"),
            other => panic!("{other:?}"),
        }
    });
}
