//! [`Allowed`] and [`Refused`]: the two answers of every decision.

use core::fmt;
use core::time::Duration;

use super::policy::{DryRun, PolicyQuota};
use super::{Cause, Gauge};

/// An admitted request, and the bucket's state just after it.
///
/// Most algorithms admit a request to go ahead at once. The shaping ones
/// ([`LeakyBucket::shaper`](crate::algorithm::LeakyBucket::shaper) and
/// [`Credit`](crate::algorithm::Credit)) admit a request *to go ahead later*: the caller must
/// wait [`delay`](Self::delay) before acting on it. The cells are taken either way.
///
/// A policy set's admission describes its tightest enforcing quota: the one with the fewest
/// cells left (ties: the one that takes longest to refill, then the first), what
/// `X-RateLimit-Remaining` reports; see [`by`](Self::by).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allowed {
    pub(crate) gauge: Gauge,
    pub(crate) delay: u64,
    /// For a policy set: the tightest enforcing quota (`None` if none applied).
    pub(crate) by: Option<&'static PolicyQuota>,
    /// For a policy set: the first dry-run policy that would have refused.
    pub(crate) dry_run: Option<DryRun>,
}

impl Allowed {
    /// An admission, to go ahead at once, leaving the bucket as `gauge` says (for
    /// [`Algorithm`](crate::Algorithm) implementations).
    #[inline(always)]
    pub const fn new(gauge: Gauge) -> Self {
        Self::delayed(gauge, 0)
    }

    /// An admission to go ahead after `delay_nanos`, leaving the bucket as `gauge` says (for
    /// shaping [`Algorithm`](crate::Algorithm) implementations).
    #[inline(always)]
    pub const fn delayed(gauge: Gauge, delay_nanos: u64) -> Self {
        Self {
            gauge,
            delay: delay_nanos,
            by: None,
            dry_run: None,
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

    /// Cells still available at once after this request (`u32::MAX` for a policy set none of
    /// whose enforcing policies applied).
    pub fn remaining(&self) -> u32 {
        self.gauge.remaining()
    }

    /// The bucket's capacity (its burst): the `limit` of rate-limit headers.
    pub fn limit(&self) -> u32 {
        self.gauge.limit()
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

    /// For a policy set: the tightest enforcing quota, which this admission's gauge describes
    /// (`None` if no enforcing policy applied, and for single and keyed limiters).
    pub fn by(&self) -> Option<&'static PolicyQuota> {
        self.by
    }

    /// For a policy set: the name of the policy [`by`](Self::by) names.
    pub fn policy(&self) -> Option<&'static str> {
        Some(self.by?.policy())
    }

    /// For a policy set: the first dry-run policy that would have refused this request.
    pub fn dry_run(&self) -> Option<DryRun> {
        self.dry_run
    }
}

/// A request refused for now: it conforms after [`retry_after`](Self::retry_after), if nothing
/// else is taken in between. Nothing was consumed.
///
/// A policy set's refusal names the refusing quota ([`by`](Self::by)): of every enforcing quota
/// that would refuse the request, the one that conforms last. (But see the
/// [`policy` module docs](crate::policy) on a rare undo that must give way.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    pub(crate) gauge: Gauge,
    pub(crate) wait: u64,
    /// For a policy set: the jitter its refusing policy added to the wait.
    pub(crate) jitter: u64,
    /// For a policy set: the refusing quota.
    pub(crate) by: Option<&'static PolicyQuota>,
    /// For a policy set: the first dry-run policy that would also have refused.
    pub(crate) dry_run: Option<DryRun>,
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
            jitter: 0,
            by: None,
            dry_run: None,
            clock_behind: false,
            cause: Cause::Quota,
        }
    }

    /// The same refusal, for `cause`.
    pub(crate) const fn because(mut self, cause: Cause) -> Self {
        self.cause = cause;
        self
    }

    /// Marks the refusal as made against a bucket booked further ahead than the reading can
    /// explain (a clock that stepped back, or a stale reading): the limiter then calls
    /// [`Algorithm::catch_up`](crate::Algorithm::catch_up) with a fresh reading.
    #[inline(always)]
    pub const fn behind_clock(mut self) -> Self {
        self.clock_behind = true;
        self
    }

    /// Why the request was refused: the quota (almost always), or a keyed table that could not
    /// take a new key.
    pub fn cause(&self) -> Cause {
        self.cause
    }

    /// When to retry: [`conforms_after`](Self::conforms_after), plus the refusing policy's
    /// [`jitter`](Self::jitter) for a policy set. Saturates at `u64::MAX` ns.
    pub fn retry_after(&self) -> Duration {
        Duration::from_nanos(self.retry_after_nanos())
    }

    /// [`retry_after`](Self::retry_after) in nanoseconds.
    pub fn retry_after_nanos(&self) -> u64 {
        self.wait.saturating_add(self.jitter)
    }

    /// The earliest time, from the decision, at which the same request conforms (every quota of
    /// every enforcing policy, for a policy set), if nothing else is taken in between: exact to
    /// the nanosecond for a clock that runs forwards, never zero. `u64::MAX` nanoseconds means
    /// it cannot conform before the clock's 584-year horizon. For a [`Cause::TableFull`] refusal
    /// only a hint.
    pub fn conforms_after(&self) -> Duration {
        Duration::from_nanos(self.wait)
    }

    /// [`conforms_after`](Self::conforms_after) in nanoseconds.
    pub fn conforms_after_nanos(&self) -> u64 {
        self.wait
    }

    /// The random jitter the refusing policy added to [`retry_after`](Self::retry_after) (see
    /// [`Policy::jitter`](crate::Policy::jitter)); zero otherwise.
    pub fn jitter(&self) -> Duration {
        Duration::from_nanos(self.jitter)
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
        self.gauge.limit()
    }

    /// The bucket's state at the refusal.
    pub fn gauge(&self) -> Gauge {
        self.gauge
    }

    /// For a policy set: the refusing quota, which this refusal's gauge describes (`None` for
    /// single and keyed limiters).
    pub fn by(&self) -> Option<&'static PolicyQuota> {
        self.by
    }

    /// For a policy set: the refusing policy's name.
    pub fn policy(&self) -> Option<&'static str> {
        Some(self.by?.policy())
    }

    /// For a policy set: the first dry-run policy that would also have refused (evaluated
    /// before the refusal).
    pub fn dry_run(&self) -> Option<DryRun> {
        self.dry_run
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.by, self.cause) {
            (Some(by), Cause::TableFull) => write!(
                f,
                "rate limited: policy '{}' has no room for another key now",
                by.policy()
            ),
            (None, Cause::TableFull) => f.write_str("rate limited: no room for another key now"),
            (Some(by), _) => write!(
                f,
                "rate limited by {by}: retry after {:?}",
                self.retry_after()
            ),
            (None, _) => write!(f, "rate limited: retry after {:?}", self.retry_after()),
        }
    }
}

impl std::error::Error for Refused {}
