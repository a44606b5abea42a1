//! [`Credit`]: reservations on credit, Guava's `RateLimiter` model.

use core::time::Duration;

use super::leaky_bucket::delay_nanos;
use super::schedule::{Delay, Schedule};
use crate::quota::{Quota, QuotaError};

/// Reservations on credit (Guava's model): a request is always admitted while the bucket's debt
/// stays within `max_debt`, and [`Allowed::delay`](crate::Allowed::delay) says how long the
/// caller must wait — for the debt left by the requests *before* it. Its own cost is paid by
/// the callers after it.
///
/// So an expensive request on an idle limiter goes at once, and the next caller waits for it;
/// a request is refused (nothing reserved) only when the debt after it would exceed
/// `max_debt`. Up to `burst` cells accumulate while idle and are spent without delay.
///
/// | | |
/// |---|---|
/// | burst | `burst` cells at once, then borrowed against the future up to `max_debt` |
/// | boundary effect | none |
/// | precision | exact to the nanosecond |
/// | bytes per bucket | 8 |
/// | cost per decision | one load, one CAS |
///
/// # Word layout
/// The whole word is the time (ns since the Unix epoch) at which all debt is repaid and the
/// bucket is full; `0` means full at every reading. The debt at `now` is
/// `word − now − burst·T` when positive: how long the next caller waits.
///
/// # Limits
/// `max_debt` is at most [`MAX_WINDOW_NANOS`](crate::Quota::MAX_WINDOW_NANOS)
/// ([`QuotaError::DelayTooLong`]). One request may take up to
/// `(burst·T + max_debt) / T` cells ([`Algorithm::capacity`](super::Algorithm::capacity)).
///
/// ```
/// use std::time::Duration;
/// use flowgate::{algorithm::Credit, clock::ManualClock, RateLimiter};
///
/// // 10 per second, burst 1, lending up to one second ahead.
/// let credit = Credit::new(&"10/s burst 1".parse()?, Duration::from_secs(1))?;
/// let limiter = RateLimiter::with_algorithm(credit, ManualClock::new());
/// // Five cells at once on an idle limiter: no wait...
/// assert_eq!(limiter.check_n(5)?.map(|a| a.delay()), Ok(Duration::ZERO));
/// // ...and the next caller waits for them: 400 ms (the first of the five was in the bucket).
/// assert_eq!(limiter.check().map(|a| a.delay()), Ok(Duration::from_millis(400)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Credit {
    pub(super) schedule: Schedule,
}

impl Credit {
    /// Credit on `quota`, lending up to `max_debt` ahead.
    ///
    /// # Errors
    /// [`QuotaError::DelayTooLong`] if `max_debt` exceeds
    /// [`MAX_WINDOW_NANOS`](crate::Quota::MAX_WINDOW_NANOS).
    pub fn new(quota: &Quota, max_debt: Duration) -> Result<Self, QuotaError> {
        Ok(Self {
            schedule: Schedule::new(quota, delay_nanos(max_debt)?, Delay::Queue)?,
        })
    }

    /// The most debt the bucket may carry.
    pub fn max_debt(&self) -> Duration {
        Duration::from_nanos(self.schedule.slack())
    }
}

super::delegate_algorithm!(Credit, schedule, take);
