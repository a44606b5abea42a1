//! What the model tests compare: a limiter's answer in plain numbers.
#![allow(dead_code)]

use flowgate::{Allowed, InsufficientCapacity, Refused};

/// An operation's answer, as numbers a model can produce independently.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    /// (remaining, limit, reset_after, delay)
    Allowed(u128, u128, u128, u128),
    /// (remaining, limit, retry_after, reset_after)
    Refused(u128, u128, u128, u128),
    /// (requested, capacity): can never succeed.
    Never(u128, u128),
    /// Cells available.
    Available(u128),
    /// An operation without an answer (refund, reset).
    Done,
}

/// The answer of a `check_n` or `peek`.
pub fn answer_of(r: Result<Result<Allowed, Refused>, InsufficientCapacity>) -> Answer {
    match r {
        Ok(Ok(a)) => Answer::Allowed(
            a.remaining().into(),
            a.limit().into(),
            a.reset_after_nanos().into(),
            a.delay_nanos().into(),
        ),
        Ok(Err(r)) => Answer::Refused(
            r.remaining().into(),
            r.limit().into(),
            r.retry_after_nanos().into(),
            r.reset_after_nanos().into(),
        ),
        Err(e) => Answer::Never(e.requested.into(), e.burst.into()),
    }
}

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

/// A window algorithm's reference model.
pub trait WindowModel {
    /// Decides `n` at the reading `at`, the clock's fresh reading being `fresh`.
    fn check(&mut self, at: u128, fresh: u128, n: u128) -> Answer;
    /// Gives back `n` at `now`.
    fn refund(&mut self, now: u128, n: u128) -> Answer;
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
