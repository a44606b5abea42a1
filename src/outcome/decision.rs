//! [`Allowed`] and [`Refused`]: the two answers of every decision.
//!
//! Both are the bucket's [`Gauge`] and one or two words of their own, plus what the decision
//! cites besides the bucket ([`Citation`]): nothing for a single or keyed limiter, so that their
//! `Result<Allowed, Refused>` is seven whole words, and the quota, dry run and jitter of a
//! policy set ([`Cited`]).

use core::time::Duration;

use super::policy::{Citation, Cited, DryRun, PolicyQuota};
use super::why::Why;
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
///
/// `C` is what the admission cites besides its bucket: nothing (`()`, the default) for a single
/// or keyed limiter, [`Cited`] for a policy set.
///
/// Not `#[must_use]` on its own: the `Result` it comes in is, so a decision cannot be dropped
/// unread, and `limiter.check()?;` (go ahead when admitted) stays quiet. With a shaping
/// algorithm, read [`delay`](Self::delay) before going ahead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allowed<C = ()> {
    pub(crate) gauge: Gauge,
    pub(crate) delay: u64,
    /// For a policy set: the tightest enforcing quota (`None` if none applied) and the first
    /// dry-run policy that would have refused.
    pub(crate) cited: C,
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
            cited: (),
        }
    }

    /// The same admission, citing `cited` (a backend cites the quota it describes).
    #[inline(always)]
    pub fn cite<D>(self, cited: D) -> Allowed<D> {
        Allowed {
            gauge: self.gauge,
            delay: self.delay,
            cited,
        }
    }
}

impl<C: Citation> Allowed<C> {
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
        self.cited.by()
    }

    /// For a policy set: the name of the policy [`by`](Self::by) names.
    pub fn policy(&self) -> Option<&'static str> {
        Some(self.by()?.policy())
    }

    /// For a policy set: the first dry-run policy that would have refused this request.
    pub fn dry_run(&self) -> Option<DryRun> {
        self.cited.dry_run()
    }

    /// The same admission without what it cites: the bucket's figures only.
    pub fn uncited(&self) -> Allowed {
        Allowed::delayed(self.gauge, self.delay)
    }
}

/// A request refused for now: it conforms after [`retry_after`](Self::retry_after), if nothing
/// else is taken in between. Nothing was consumed.
///
/// A policy set's refusal names the refusing quota ([`by`](Self::by)): of every enforcing quota
/// that would refuse the request, the one that conforms last. (But see the
/// [`policy` module docs](crate::policy) on a rare undo that must give way.)
///
/// `C` is what the refusal cites besides its bucket: nothing (`()`, the default) for a single
/// or keyed limiter, [`Cited`] for a policy set.
#[must_use = "a refused request must not go ahead"]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused<C = ()> {
    pub(crate) gauge: Gauge,
    pub(crate) wait: u64,
    /// For a policy set: the refusing quota, the first dry-run policy that would also have
    /// refused, and the jitter the refusing policy added to the wait.
    pub(crate) cited: C,
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
            cited: (),
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

    /// The same refusal, citing `cited` (a backend cites the refusing quota).
    #[inline(always)]
    pub fn cite<D>(self, cited: D) -> Refused<D> {
        Refused {
            gauge: self.gauge,
            wait: self.wait,
            cited,
            why: self.why,
        }
    }
}

impl<C: Citation> Refused<C> {
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

    /// When to retry: [`conforms_after`](Self::conforms_after), plus the refusing policy's
    /// [`jitter`](Self::jitter) for a policy set. Saturates at `u64::MAX` ns.
    pub fn retry_after(&self) -> Duration {
        Duration::from_nanos(self.retry_after_nanos())
    }

    /// [`retry_after`](Self::retry_after) in nanoseconds.
    pub fn retry_after_nanos(&self) -> u64 {
        self.wait.saturating_add(self.cited.jitter())
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
    pub fn conforms_after_nanos(&self) -> u64 {
        self.wait
    }

    /// The random jitter the refusing policy added to [`retry_after`](Self::retry_after) (see
    /// [`Policy::jitter`](crate::Policy::jitter)); zero otherwise.
    pub fn jitter(&self) -> Duration {
        Duration::from_nanos(self.cited.jitter())
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
        self.cited.by()
    }

    /// For a policy set: the refusing policy's name.
    pub fn policy(&self) -> Option<&'static str> {
        Some(self.by()?.policy())
    }

    /// For a policy set: the first dry-run policy that would also have refused (evaluated
    /// before the refusal).
    pub fn dry_run(&self) -> Option<DryRun> {
        self.cited.dry_run()
    }

    /// The same refusal without what it cites: the bucket's figures only (its
    /// [`retry_after`](Self::retry_after) then leaves out a policy's jitter).
    pub fn uncited(&self) -> Refused {
        Refused {
            gauge: self.gauge,
            wait: self.wait,
            cited: (),
            why: self.why,
        }
    }
}

// The message is the refusal's `Display`, in `display.rs` with the other outcomes'.
/// # What a backend adjusts
impl Allowed<Cited> {
    /// The same admission, going ahead after `delay_nanos` and citing `dry_run` as the first
    /// dry-run policy that would have refused.
    pub fn with(mut self, delay_nanos: u64, dry_run: Option<DryRun>) -> Self {
        self.delay = delay_nanos;
        self.cited.dry_run = dry_run;
        self
    }
}

/// # What a backend adjusts
impl Refused<Cited> {
    /// The same refusal, citing `dry_run` as the first dry-run policy that would have refused.
    pub fn with_dry_run(mut self, dry_run: Option<DryRun>) -> Self {
        self.cited.dry_run = dry_run;
        self
    }
}

impl<C: Citation> core::error::Error for Refused<C> {}

#[cfg(all(test, not(flowgate_loom)))]
mod tests {
    use super::{Allowed, Refused};
    use crate::outcome::{Cause, Cited, Gauge, InsufficientCapacity};
    use core::mem::size_of;

    /// What a single or keyed limiter answers stays seven words, all whole (see `Why`),
    /// and citing nothing costs nothing: a caller that keeps the whole result stores seven
    /// words, not ten (`benches/result_size.rs` measures what the size costs).
    #[test]
    fn an_uncited_outcome_is_a_few_words() {
        assert_eq!(size_of::<Allowed>(), size_of::<Gauge>() + 8);
        assert_eq!(size_of::<Refused>(), size_of::<Gauge>() + 16);
        assert!(size_of::<Result<Allowed, Refused>>() <= 7 * 8);
        let nested = size_of::<Result<Result<Allowed, Refused>, InsufficientCapacity>>();
        assert!(nested <= 7 * 8);
        assert!(size_of::<Refused<Cited>>() > size_of::<Refused>());
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
        ] {
            assert_eq!(fresh.because(cause).cause(), cause);
        }
        let debug = format!("{refused:?}");
        assert!(debug.contains("TableFull") && debug.contains("clock_behind: true"));
    }

    /// Citing nothing drops a policy's figures and keeps the bucket's; a refusal's retry-after
    /// then leaves out the jitter.
    #[test]
    fn uncited_keeps_the_bucket() {
        let gauge = Gauge::new(3, 2, 10, 7);
        let refused = Refused::new(gauge, 50).cite(Cited {
            jitter: 9,
            ..Cited::default()
        });
        assert_eq!(refused.retry_after_nanos(), 59);
        assert_eq!(refused.uncited().retry_after_nanos(), 50);
        assert_eq!(refused.uncited().gauge(), gauge);
        let allowed = Allowed::delayed(gauge, 4).cite(Cited::default());
        assert_eq!(allowed.uncited(), Allowed::delayed(gauge, 4));
    }
}
