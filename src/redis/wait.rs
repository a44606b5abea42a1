//! Waiting on a set decided in Redis: as an in-process set waits (see the
//! [`wait` module docs](crate::wait)), each refusal slept out for its retry-after (which
//! carries the refusing policy's jitter) and then asked again, one round trip per attempt. No
//! decision in Redis reserves cells, so there is nothing to give back when a wait is dropped.

use core::future::Future;
use core::time::Duration;

use super::RedisLimiter;
use crate::clock::Clock;
use crate::outcome::{Allowed, Cited, Error};
use crate::wait::{as_is, judge, until_remote, Attempt, Unreserved, WaitOptions};

/// # Waiting
impl<R: ?Sized, C: Clock> RedisLimiter<R, C> {
    /// Takes `n` cells from every quota that applies to `request`, sleeping through `sleep`
    /// between attempts until all admit at once, within `options`' bound. Cancellation-safe:
    /// between attempts it holds nothing.
    ///
    /// # Errors
    /// [`Error::Capacity`] if `n` exceeds an enforcing quota's burst; [`Error::Refused`] when
    /// the wait would exceed the bound, or a refusal never conforms (the failure policy's
    /// refusals included: `OnFailure::Closed` is waited out like any other).
    pub async fn until_ready_with<F: Future<Output = ()>>(
        &self,
        request: &R,
        n: u32,
        options: WaitOptions,
        sleep: impl FnMut(Duration) -> F,
    ) -> Result<Allowed<Cited>, Error<Cited>> {
        let attempt = |left| async move {
            let verdict = match self.check_n(request, n).await {
                Ok(verdict) => verdict,
                Err(capacity) => return Attempt::Fail(Error::Capacity(capacity)),
            };
            if n == 0 {
                return as_is(Ok(verdict.outcome()));
            }
            judge::<Unreserved, Cited>(verdict.outcome(), None, left, |_| false)
        };
        until_remote(&self.shared.clock, options, attempt, sleep).await
    }

    /// [`until_ready_with`](Self::until_ready_with) on `tokio::time::sleep`, with no bound.
    ///
    /// # Errors
    /// As [`until_ready_with`](Self::until_ready_with).
    pub async fn until_ready(&self, request: &R, n: u32) -> Result<Allowed<Cited>, Error<Cited>> {
        self.until_ready_with(request, n, WaitOptions::new(), tokio::time::sleep)
            .await
    }

    /// [`until_ready`](Self::until_ready) for at most `max_wait`.
    ///
    /// # Errors
    /// As [`until_ready_with`](Self::until_ready_with).
    pub async fn until_ready_within(
        &self,
        request: &R,
        n: u32,
        max_wait: Duration,
    ) -> Result<Allowed<Cited>, Error<Cited>> {
        let options = WaitOptions::new().at_most(max_wait);
        self.until_ready_with(request, n, options, tokio::time::sleep)
            .await
    }
}
