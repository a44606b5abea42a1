//! [`LeakyBucket`]: the leaky bucket as a meter (refuse when full) and as a shaper (queue, up
//! to a maximum delay).

use core::time::Duration;

use super::schedule::{Delay, Schedule};
use crate::quota::{Quota, QuotaError};

/// A leaky bucket of `burst` cells draining one cell per interval, as a **meter** or a
/// **shaper**.
///
/// * [`LeakyBucket::meter`]: a request that would overflow the bucket is refused. This is the
///   same decision as [`Gcra`](super::Gcra) (the ITU-T I.371 "continuous-state leaky bucket"
///   and "virtual scheduling" algorithms are equivalent), offered under the name many
///   descriptions of rate limiting use; the model tests check that the two never differ.
/// * [`LeakyBucket::shaper`]: a request that would overflow the bucket is admitted into a
///   queue: [`Allowed::delay`](crate::Allowed::delay) says how long the caller must wait until
///   it conforms, and requests leave at the drain rate. A request whose delay would exceed the
///   maximum queueing delay is refused, and nothing is reserved for it. With `burst 1` the
///   shaper spaces requests exactly one interval apart (a constant outflow).
///
/// | | meter | shaper |
/// |---|---|---|
/// | burst | up to `burst` cells at once | `burst` at once, then queued at the drain rate |
/// | boundary effect | none | none |
/// | precision | exact to the nanosecond | exact to the nanosecond |
/// | bytes per bucket | 8 | 8 |
/// | cost per decision | one load, one CAS | one load, one CAS |
///
/// # Word layout
/// The whole word is the time (ns since the Unix epoch) at which the bucket drains empty,
/// queued requests included; `0` means empty at every reading. The water level at `now` is
/// `⌈(word − now) / T⌉` cells.
///
/// # Limits
/// Every valid [`Quota`] is a valid meter; a shaper's maximum delay is at most
/// [`MAX_WINDOW_NANOS`](crate::Quota::MAX_WINDOW_NANOS) ([`QuotaError::DelayTooLong`]). A
/// request larger than the bucket (`n > burst`) can never pass.
///
/// ```
/// use std::time::Duration;
/// use flowgate::{algorithm::LeakyBucket, clock::ManualClock, RateLimiter};
///
/// // Drain 10 per second, no burst: one request every 100 ms, queueing at most 250 ms.
/// let shaper = LeakyBucket::shaper(&"10/s burst 1".parse()?, Duration::from_millis(250))?;
/// let limiter = RateLimiter::with_algorithm(shaper, ManualClock::new());
/// let delays: Vec<_> = (0..4).map(|_| limiter.check().map(|a| a.delay())).collect();
/// assert_eq!(delays[0], Ok(Duration::ZERO));
/// assert_eq!(delays[1], Ok(Duration::from_millis(100)));
/// assert_eq!(delays[2], Ok(Duration::from_millis(200)));
/// assert!(delays[3].is_err()); // would wait 300 ms: refused, nothing reserved
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeakyBucket {
    pub(super) schedule: Schedule,
}

impl LeakyBucket {
    /// A meter: refuses a request that does not fit in the bucket now.
    pub fn meter(quota: &Quota) -> Self {
        Self {
            schedule: Schedule::gcra(quota),
        }
    }

    /// A shaper: admits a request that does not fit now with the delay after which it fits, if
    /// that delay is at most `max_delay`.
    ///
    /// # Errors
    /// [`QuotaError::DelayTooLong`] if `max_delay` exceeds
    /// [`MAX_WINDOW_NANOS`](crate::Quota::MAX_WINDOW_NANOS).
    pub fn shaper(quota: &Quota, max_delay: Duration) -> Result<Self, QuotaError> {
        Ok(Self {
            schedule: Schedule::new(quota, delay_nanos(max_delay)?, Delay::Own)?,
        })
    }

    /// The longest a request may queue (zero for a meter).
    pub fn max_delay(&self) -> Duration {
        Duration::from_nanos(self.schedule.slack())
    }
}

/// A maximum delay in nanoseconds, or [`QuotaError::DelayTooLong`].
pub(crate) fn delay_nanos(delay: Duration) -> Result<u64, QuotaError> {
    u64::try_from(delay.as_nanos()).map_err(|_| QuotaError::DelayTooLong {
        max_nanos: crate::Quota::MAX_WINDOW_NANOS,
    })
}

super::delegate_algorithm!(LeakyBucket, schedule, take);
