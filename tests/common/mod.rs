//! What the model tests share: the reference models and their answers (`models`), the property
//! tests' configuration, and the driver of the window algorithms' scenarios.
#![allow(dead_code)]

pub mod models;

use std::time::Duration;

use flowgate::{Allowed, InsufficientCapacity, Receipt, Refused};
#[allow(unused_imports)] // Each test binary uses some of them.
pub use models::{answer_of, answer_of_reserved, Answer, Lagging, Receipts, WindowModel};

/// The property tests' configuration: 10 000 cases, failures saved beside the test file (in
/// `<test>.proptest-regressions`, committed) and replayed first.
pub fn config() -> proptest::test_runner::Config {
    proptest::test_runner::Config {
        cases: 10_000,
        failure_persistence: Some(Box::new(
            proptest::test_runner::FileFailurePersistence::SourceParallel("proptest-regressions"),
        )),
        ..proptest::test_runner::Config::default()
    }
}

/// `d` in whole nanoseconds: what the models compute in (every duration flowgate reports is
/// at most `u64::MAX` ns).
pub fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).expect("a flowgate duration fits in u64 ns")
}

/// A step of a window algorithm's scenario: move the clock, or act at its reading.
#[derive(Debug, Clone)]
pub enum Op {
    Advance(u64),
    Rewind(u64),
    Check(u32),
    /// `reserve(n)` reading `now − behind` while the clock reads `now` ([`Lagging::stale`]).
    CheckAt(u32, u64),
    /// Gives back the `k`-th newest admission's receipt.
    GiveBack(u8),
}

/// What a limiter under test reserves cells with.
pub type Reserved = Result<Result<(Allowed, Receipt), Refused>, InsufficientCapacity>;

/// Runs `ops` on `clock`, asking the limiter (through `reserve` and `give_back`) and `model`
/// the same things; fails on the first answer that differs.
pub fn drive<M: WindowModel>(
    clock: &Lagging,
    ops: &[Op],
    reserve: impl Fn(u32) -> Reserved,
    give_back: impl Fn(Receipt) -> bool,
    model: &mut M,
) -> Result<(), proptest::test_runner::TestCaseError> {
    let mut receipts = Receipts::new();
    for (i, op) in ops.iter().enumerate() {
        match *op {
            Op::Advance(d) => clock.advance(Duration::from_nanos(d)),
            Op::Rewind(d) => clock.set(clock.get().saturating_sub(d)),
            _ => {}
        }
        let now = clock.get();
        let (got, want) = match *op {
            Op::Check(n) | Op::CheckAt(n, _) => {
                let at = match *op {
                    Op::CheckAt(_, behind) => now.saturating_sub(behind),
                    _ => now,
                };
                let before = model.clone();
                clock.stale(at);
                let reserved = reserve(n);
                let want = model.check(at.into(), now.into(), n.into());
                (receipts.note(reserved, before, model), want)
            }
            Op::GiveBack(k) => receipts.give_back(k, &give_back, model),
            Op::Advance(_) | Op::Rewind(_) => continue,
        };
        proptest::prop_assert_eq!(got, want, "op #{} {:?} at {}", i, op, now);
    }
    Ok(())
}
