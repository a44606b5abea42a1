//! What a decision reports: [`Allowed`], [`Refused`] ("not yet"), and [`InsufficientCapacity`]
//! ("never").
//!
//! Decisions are small `Copy` values that own their numbers, so they outlive the limiter and
//! can be aggregated across limiters. They carry the bucket's state relative to the moment of
//! the decision (its *debt*: how far the bucket's schedule runs ahead of `now`), and derive
//! `remaining` and the durations from it only when asked: the division `remaining` needs is not
//! paid by callers that only want yes or no.

use core::fmt;
use core::time::Duration;

/// An admitted request, and the bucket's state just after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allowed {
    pub(crate) debt: u64,
    pub(crate) interval: u64,
    pub(crate) burst: u32,
}

impl Allowed {
    /// Cells still available at once after this request.
    pub fn remaining(&self) -> u32 {
        remaining(self.debt, self.interval, self.burst)
    }

    /// The bucket's capacity (its burst): the `limit` of rate-limit headers.
    pub fn limit(&self) -> u32 {
        self.burst
    }

    /// Time until the bucket is full again if nothing else is taken.
    pub fn reset_after(&self) -> Duration {
        Duration::from_nanos(self.debt)
    }

    /// [`reset_after`](Self::reset_after) in nanoseconds.
    pub fn reset_after_nanos(&self) -> u64 {
        self.debt
    }
}

/// A request refused for now: it conforms after [`retry_after`](Self::retry_after), if nothing
/// else is taken in between. Nothing was consumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    pub(crate) debt: u64,
    pub(crate) wait: u64,
    pub(crate) interval: u64,
    pub(crate) burst: u32,
    /// The bucket was booked more than a window ahead of the reading: the clock stepped back or
    /// the reading was stale. The limiter re-checks with a fresh reading.
    pub(crate) clock_behind: bool,
}

impl Refused {
    /// The earliest time, from the decision, at which the same request conforms: exact to the
    /// nanosecond, never zero. `u64::MAX` nanoseconds means it cannot conform before the clock's
    /// 584-year horizon.
    pub fn retry_after(&self) -> Duration {
        Duration::from_nanos(self.wait)
    }

    /// [`retry_after`](Self::retry_after) in nanoseconds.
    pub fn retry_after_nanos(&self) -> u64 {
        self.wait
    }

    /// Time until the bucket is full again.
    pub fn reset_after(&self) -> Duration {
        Duration::from_nanos(self.debt)
    }

    /// [`reset_after`](Self::reset_after) in nanoseconds.
    pub fn reset_after_nanos(&self) -> u64 {
        self.debt
    }

    /// Cells available at once now (fewer than the request needed; 0 when the request can
    /// never conform before the clock's horizon).
    pub fn remaining(&self) -> u32 {
        if self.wait == u64::MAX {
            return 0;
        }
        remaining(self.debt, self.interval, self.burst)
    }

    /// The bucket's capacity (its burst).
    pub fn limit(&self) -> u32 {
        self.burst
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rate limited: retry after {:?}", self.retry_after())
    }
}

impl std::error::Error for Refused {}

/// A request for more cells than the bucket can ever hold: it will never succeed, however long
/// the caller waits. Nothing was consumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InsufficientCapacity {
    /// Cells requested.
    pub requested: u32,
    /// The bucket's capacity (burst).
    pub burst: u32,
}

impl fmt::Display for InsufficientCapacity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} cells requested but the burst is {}: the request can never succeed",
            self.requested, self.burst
        )
    }
}

impl std::error::Error for InsufficientCapacity {}

/// Whole cells left in a bucket whose schedule is `debt` ns ahead: `burst − ⌈debt / interval⌉`.
fn remaining(debt: u64, interval: u64, burst: u32) -> u32 {
    // debt ≤ burst × interval, so the quotient is at most `burst` and the cast is lossless.
    let used = debt.div_ceil(interval);
    burst.saturating_sub(u32::try_from(used).unwrap_or(u32::MAX))
}
