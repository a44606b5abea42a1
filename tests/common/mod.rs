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
