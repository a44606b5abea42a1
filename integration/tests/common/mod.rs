//! What the model tests share: the reference models and their answers (`models`), the property
//! tests' configuration, and the driver of the window algorithms' scenarios.
#![allow(dead_code)]

pub mod models;

use flowgate::{Allowed, InsufficientCapacity, Refused};
pub use models::{answer_of, Answer, WindowModel};

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

/// A step of a window algorithm's scenario: move the clock, or act at its reading.
#[derive(Debug, Clone)]
pub enum Op {
    Advance(u64),
    Rewind(u64),
    Check(u32),
    /// `check_n_at(n, now − behind)`: a stale reading while the clock reads `now`.
    CheckAt(u32, u64),
    Refund(u32),
}

/// Runs `ops` on `clock`, asking the limiter (through `check_n_at` and `refund_at`) and `model`
/// the same things; fails on the first answer that differs.
pub fn drive(
    clock: &flowgate::clock::ManualClock,
    ops: &[Op],
    check_n_at: impl Fn(u32, u64) -> Result<Result<Allowed, Refused>, InsufficientCapacity>,
    refund_at: impl Fn(u32, u64),
    model: &mut impl WindowModel,
) -> Result<(), proptest::test_runner::TestCaseError> {
    for (i, op) in ops.iter().enumerate() {
        match *op {
            Op::Advance(d) => clock.advance_nanos(d),
            Op::Rewind(d) => clock.set(clock.get().saturating_sub(d)),
            _ => {}
        }
        let now = clock.get();
        let (got, want) = match *op {
            Op::Check(n) => (
                answer_of(check_n_at(n, now)),
                model.check(now.into(), now.into(), n.into()),
            ),
            Op::CheckAt(n, behind) => {
                let at = now.saturating_sub(behind);
                (
                    answer_of(check_n_at(n, at)),
                    model.check(at.into(), now.into(), n.into()),
                )
            }
            Op::Refund(n) => {
                refund_at(n, now);
                (Answer::Done, model.refund(now.into(), n.into()))
            }
            Op::Advance(_) | Op::Rewind(_) => continue,
        };
        proptest::prop_assert_eq!(got, want, "op #{} {:?} at {}", i, op, now);
    }
    Ok(())
}
