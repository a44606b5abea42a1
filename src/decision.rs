//! What a decision reports: [`Allowed`], [`Refused`] ("not yet"), and [`InsufficientCapacity`]
//! ("never").
//!
//! Decisions are small `Copy` values that own their numbers, so they outlive the limiter and
//! can be aggregated across limiters and algorithms. They carry the bucket's state as a
//! [`Gauge`] relative to the moment of the decision, and derive `remaining` from it only when
//! asked: the division `remaining` needs is not paid by callers that only want yes or no.

use core::fmt;
use core::time::Duration;

/// How full a bucket is at the moment of a decision, in the algorithm's own unit: `used` units
/// of `unit` each, out of `limit` cells, and how long until it is fully available again.
///
/// GCRA measures in nanoseconds (`used` is the schedule's lead over `now`, `unit` the emission
/// interval); counting algorithms measure in cells (`unit` = 1). Either way the whole cells
/// remaining are `limit − ⌈used / unit⌉`, computed only when asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gauge {
    used: u64,
    unit: u64,
    limit: u32,
    reset: u64,
}

impl Gauge {
    /// A gauge of `used` units of `unit` (≥ 1) out of `limit` cells, full again in
    /// `reset_after_nanos`.
    #[inline(always)]
    pub const fn new(used: u64, unit: u64, limit: u32, reset_after_nanos: u64) -> Self {
        Self {
            used,
            unit,
            limit,
            reset: reset_after_nanos,
        }
    }

    /// Whole cells available: `limit − ⌈used / unit⌉`, at least 0.
    pub fn remaining(&self) -> u32 {
        let used = self.used.div_ceil(self.unit.max(1));
        self.limit
            .saturating_sub(u32::try_from(used).unwrap_or(u32::MAX))
    }

    /// The bucket's capacity: the `limit` of rate-limit headers.
    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// Nanoseconds until the bucket is fully available again if nothing else is taken.
    pub fn reset_after_nanos(&self) -> u64 {
        self.reset
    }
}

/// An admitted request, and the bucket's state just after it.
///
/// Most algorithms admit a request to go ahead at once. The shaping ones
/// ([`LeakyBucket::shaper`](crate::algorithm::LeakyBucket::shaper) and
/// [`Credit`](crate::algorithm::Credit)) admit a request *to go ahead later*: the caller must
/// wait [`delay`](Self::delay) before acting on it. The cells are taken either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allowed {
    pub(crate) gauge: Gauge,
    pub(crate) delay: u64,
}

impl Allowed {
    /// An admission, to go ahead at once, leaving the bucket as `gauge` says (for
    /// [`Algorithm`](crate::Algorithm) implementations).
    #[inline(always)]
    pub const fn new(gauge: Gauge) -> Self {
        Self { gauge, delay: 0 }
    }

    /// An admission to go ahead after `delay_nanos`, leaving the bucket as `gauge` says (for
    /// shaping [`Algorithm`](crate::Algorithm) implementations).
    #[inline(always)]
    pub const fn delayed(gauge: Gauge, delay_nanos: u64) -> Self {
        Self {
            gauge,
            delay: delay_nanos,
        }
    }

    /// How long the caller must wait before going ahead: zero except for shaping algorithms
    /// (a leaky-bucket shaper, credit reservations), which admit requests into a queue.
    pub fn delay(&self) -> Duration {
        Duration::from_nanos(self.delay)
    }

    /// [`delay`](Self::delay) in nanoseconds.
    pub fn delay_nanos(&self) -> u64 {
        self.delay
    }

    /// Cells still available at once after this request.
    pub fn remaining(&self) -> u32 {
        self.gauge.remaining()
    }

    /// The bucket's capacity (its burst): the `limit` of rate-limit headers.
    pub fn limit(&self) -> u32 {
        self.gauge.limit
    }

    /// Time until the bucket is full again if nothing else is taken.
    pub fn reset_after(&self) -> Duration {
        Duration::from_nanos(self.gauge.reset)
    }

    /// [`reset_after`](Self::reset_after) in nanoseconds.
    pub fn reset_after_nanos(&self) -> u64 {
        self.gauge.reset
    }

    /// The bucket's state after this request.
    pub fn gauge(&self) -> Gauge {
        self.gauge
    }
}

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Cause {
    /// The bucket does not hold the cells yet: [`Refused::retry_after`] is exact.
    Quota,
    /// The key is new and the keyed table is full, with nothing idle to make room for it (see
    /// [`KeyedRateLimiter`](crate::KeyedRateLimiter)). [`Refused::retry_after`] is only a hint
    /// (one emission interval of the key's quota): room appears when another key goes idle.
    TableFull,
    /// The key is new and the quota on new keys refused to create it; the refusal's gauge and
    /// [`Refused::retry_after`] are that quota's.
    NewKeys,
}

/// A request refused for now: it conforms after [`retry_after`](Self::retry_after), if nothing
/// else is taken in between. Nothing was consumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    pub(crate) gauge: Gauge,
    pub(crate) wait: u64,
    /// The bucket was booked more than a window ahead of the reading: the clock stepped back or
    /// the reading was stale. The limiter re-checks with a fresh reading.
    pub(crate) clock_behind: bool,
    pub(crate) cause: Cause,
}

impl Refused {
    /// A refusal of a request that conforms in `retry_after_nanos` (≥ 1; `u64::MAX` for never),
    /// against a bucket as `gauge` says (for [`Algorithm`](crate::Algorithm) implementations).
    #[inline(always)]
    pub const fn new(gauge: Gauge, retry_after_nanos: u64) -> Self {
        Self {
            gauge,
            wait: retry_after_nanos,
            clock_behind: false,
            cause: Cause::Quota,
        }
    }

    /// The same refusal, for `cause`.
    pub(crate) const fn because(mut self, cause: Cause) -> Self {
        self.cause = cause;
        self
    }

    /// Why the request was refused: the quota (almost always), or a keyed table that could not
    /// take a new key.
    pub fn cause(&self) -> Cause {
        self.cause
    }

    /// Marks the refusal as made against a bucket booked further ahead than the reading can
    /// explain (a clock that stepped back, or a stale reading): the limiter then calls
    /// [`Algorithm::catch_up`](crate::Algorithm::catch_up) with a fresh reading.
    #[inline(always)]
    pub const fn behind_clock(mut self) -> Self {
        self.clock_behind = true;
        self
    }

    /// The earliest time, from the decision, at which the same request conforms: exact to the
    /// nanosecond for a clock that runs forwards, never zero. `u64::MAX` nanoseconds means it
    /// cannot conform before the clock's 584-year horizon.
    pub fn retry_after(&self) -> Duration {
        Duration::from_nanos(self.wait)
    }

    /// [`retry_after`](Self::retry_after) in nanoseconds.
    pub fn retry_after_nanos(&self) -> u64 {
        self.wait
    }

    /// Time until the bucket is full again.
    pub fn reset_after(&self) -> Duration {
        Duration::from_nanos(self.gauge.reset)
    }

    /// [`reset_after`](Self::reset_after) in nanoseconds.
    pub fn reset_after_nanos(&self) -> u64 {
        self.gauge.reset
    }

    /// Cells available at once now (fewer than the request needed; 0 when the request can
    /// never conform before the clock's horizon).
    pub fn remaining(&self) -> u32 {
        if self.wait == u64::MAX {
            return 0;
        }
        self.gauge.remaining()
    }

    /// The bucket's capacity (its burst).
    pub fn limit(&self) -> u32 {
        self.gauge.limit
    }

    /// The bucket's state at the refusal.
    pub fn gauge(&self) -> Gauge {
        self.gauge
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

impl InsufficientCapacity {
    /// `Ok` if `n` cells fit in a bucket of `burst`; otherwise the error.
    #[inline(always)]
    pub(crate) fn check(n: u32, burst: u32) -> Result<(), Self> {
        if n > burst {
            return Err(Self {
                requested: n,
                burst,
            });
        }
        Ok(())
    }
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
