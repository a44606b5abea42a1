//! [`Allowed`] and [`Refused`]: the two answers of every decision.
//!
//! Both are the bucket's [`Gauge`] and one or two words of their own, so that a
//! `Result<Allowed, Refused>` is seven whole words. A policy set's outcomes
//! ([`policy::Allowed`](crate::policy::Allowed), [`policy::Refused`](crate::policy::Refused))
//! are these and what the set cites besides the bucket.

use core::time::Duration;

use super::why::Why;
use super::{Cause, Gauge};

/// An admitted request, and the bucket's state just after it.
///
/// Most algorithms admit a request to go ahead at once. The shaping ones
/// ([`LeakyBucket::shaper`](crate::algorithm::LeakyBucket::shaper) and
/// [`Credit`](crate::algorithm::Credit)) admit a request *to go ahead later*: the caller must
/// wait [`delay`](Self::delay) before acting on it. The cells are taken either way.
///
/// A policy set's admission ([`policy::Allowed`](crate::policy::Allowed)) is this admission of
/// its tightest enforcing quota and the quota it names.
///
/// Not `#[must_use]` on its own: the `Result` it comes in is, so a decision cannot be dropped
/// unread, and `limiter.check()?;` (go ahead when admitted) stays quiet. With a shaping
/// algorithm, read [`delay`](Self::delay) before going ahead.
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
        Self::delayed(gauge, 0)
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
    pub(crate) fn delay_nanos(&self) -> u64 {
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

    /// The bucket's state after this request.
    pub fn gauge(&self) -> Gauge {
        self.gauge
    }
}

/// A request refused for now: it conforms after [`retry_after`](Self::retry_after), if nothing
/// else is taken in between. Nothing was consumed.
///
/// A policy set's refusal ([`policy::Refused`](crate::policy::Refused)) is this refusal of the
/// quota that conforms last and the quota it names.
#[must_use = "a refused request must not go ahead"]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    pub(crate) gauge: Gauge,
    pub(crate) wait: u64,
    why: Why,
}

impl Refused {
    /// A refusal of a request that conforms in `retry_after_nanos` (≥ 1; `u64::MAX` for never),
    /// against a bucket as `gauge` says (for [`Algorithm`](crate::Algorithm) implementations).
    #[inline(always)]
    pub const fn new(gauge: Gauge, retry_after_nanos: u64) -> Self {
        Self {
            gauge,
            wait: retry_after_nanos,
            why: Why::QUOTA,
        }
    }

    /// Marks the refusal as made against a bucket booked further ahead than the reading can
    /// explain (a clock that stepped back, or a stale reading): the limiter then calls
    /// [`Algorithm::catch_up`](crate::Algorithm::catch_up) with a fresh reading.
    #[inline(always)]
    pub const fn behind_clock(mut self) -> Self {
        self.why = self.why.behind();
        self
    }

    /// The same refusal, for `cause`.
    pub fn because(mut self, cause: Cause) -> Self {
        self.why = self.why.because(cause);
        self
    }

    /// Why the request was refused: the quota (almost always), or a keyed table that could not
    /// take a new key.
    pub fn cause(&self) -> Cause {
        self.why.cause()
    }

    /// Whether the bucket was booked more than a window ahead of the reading: the limiter
    /// re-checks with a fresh reading.
    #[inline(always)]
    pub(crate) fn clock_behind(&self) -> bool {
        self.why.is_behind()
    }

    /// When to retry: [`conforms_after`](Self::conforms_after) (a policy set's refusal adds
    /// its policy's jitter: [`policy::Refused::retry_after`](crate::policy::Refused::retry_after)).
    pub fn retry_after(&self) -> Duration {
        Duration::from_nanos(self.wait)
    }

    /// The earliest time, from the decision, at which the same request conforms (every quota of
    /// every enforcing policy, for a policy set), if nothing else is taken in between: exact to
    /// the nanosecond for a clock that runs forwards, never zero. `u64::MAX` nanoseconds means
    /// it cannot conform before the clock's horizon (the year 2554). For a [`Cause::TableFull`] refusal
    /// only a hint.
    pub fn conforms_after(&self) -> Duration {
        Duration::from_nanos(self.wait)
    }

    /// [`conforms_after`](Self::conforms_after) in nanoseconds.
    pub(crate) fn conforms_after_nanos(&self) -> u64 {
        self.wait
    }

    /// Time until the bucket is full again.
    pub fn reset_after(&self) -> Duration {
        Duration::from_nanos(self.gauge.reset)
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
}

// The message is the refusal's `Display`, in `display.rs` with the other outcomes'.
impl core::error::Error for Refused {}

#[cfg(all(test, not(flowgate_loom)))]
mod tests {
    use super::{Allowed, Refused};
    use crate::outcome::{Cause, Gauge, InsufficientCapacity};
    use core::mem::size_of;
    use core::time::Duration;

    /// What a single or keyed limiter answers stays seven words, all whole (see `Why`): a
    /// caller that keeps the whole result stores seven words, not ten
    /// (`benches/result_size.rs` measures what the size costs).
    #[test]
    fn an_uncited_outcome_is_a_few_words() {
        assert_eq!(size_of::<Allowed>(), size_of::<Gauge>() + 8);
        assert_eq!(size_of::<Refused>(), size_of::<Gauge>() + 16);
        assert!(size_of::<Result<Allowed, Refused>>() <= 7 * 8);
        let nested = size_of::<Result<Result<Allowed, Refused>, InsufficientCapacity>>();
        assert!(nested <= 7 * 8);
    }

    /// A refusal's cause and its late-clock mark share one word, and neither overwrites the
    /// other.
    #[test]
    fn a_cause_and_a_late_clock_share_a_word() {
        let refused = Refused::new(Gauge::new(1, 1, 1, 0), 5);
        assert_eq!(
            (refused.cause(), refused.clock_behind()),
            (Cause::Quota, false)
        );
        let refused = refused.behind_clock().because(Cause::NewKeys);
        assert_eq!(
            (refused.cause(), refused.clock_behind()),
            (Cause::NewKeys, true)
        );
        let refused = refused.because(Cause::TableFull);
        assert_eq!(
            (refused.cause(), refused.clock_behind()),
            (Cause::TableFull, true)
        );
        let fresh = Refused::new(Gauge::new(1, 1, 1, 0), 5).because(Cause::TableFull);
        assert_eq!(
            (fresh.cause(), fresh.clock_behind()),
            (Cause::TableFull, false)
        );
        for cause in [
            Cause::Quota,
            Cause::TableFull,
            Cause::NewKeys,
            Cause::Unavailable,
            Cause::Rejected,
        ] {
            assert_eq!(fresh.because(cause).cause(), cause);
        }
        let debug = format!("{refused:?}");
        assert!(debug.contains("TableFull") && debug.contains("clock_behind: true"));
    }

    /// A policy set's refusal reads as its bucket's, but for the jitter in its retry-after.
    #[test]
    fn a_policy_refusal_adds_its_jitter() {
        let gauge = Gauge::new(3, 2, 10, 7);
        let refused = super::super::policy::Refused::new(Refused::new(gauge, 50), None, None, 9);
        assert_eq!(refused.retry_after_nanos(), 59);
        assert_eq!(refused.conforms_after_nanos(), 50);
        assert_eq!(
            (refused.gauge(), (*refused).retry_after()),
            (gauge, Duration::from_nanos(50))
        );
        let allowed = super::super::policy::Allowed::new(Allowed::delayed(gauge, 4), None, None);
        assert_eq!(*allowed, Allowed::delayed(gauge, 4));
    }
}
