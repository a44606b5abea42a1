//! Waiting on a [`KeyedRateLimiter`]: as a single limiter waits (see the
//! [`wait` module docs](crate::wait)), on one key's bucket.

use core::future::Future;
use core::hash::Hash;
use core::time::Duration;

use super::KeyedRateLimiter;
use crate::algorithm::Algorithm;
use crate::cell::Receipt;
use crate::clock::Clock;
use crate::outcome::{Allowed, Error};
use crate::wait::{block, judge_reservation, until, Attempt, GiveBack, WaitOptions};

impl<K: ?Sized + Hash, C: Clock, A: Algorithm> GiveBack for (&KeyedRateLimiter<K, C, A>, Receipt) {
    fn give_back(self) {
        self.0.give_back(self.1);
    }
}

/// # Waiting
impl<K: ?Sized + Hash, C: Clock, A: Algorithm> KeyedRateLimiter<K, C, A> {
    /// Takes `n` cells from `key`'s bucket, sleeping (through the clock) until they are
    /// available; as [`RateLimiter::wait`](crate::RateLimiter::wait).
    ///
    /// # Errors
    /// As [`RateLimiter::wait`](crate::RateLimiter::wait).
    pub fn wait_key(&self, key: &K, n: u32) -> Result<Allowed, Error> {
        self.wait_key_with(key, n, WaitOptions::new())
    }

    /// [`wait_key`](Self::wait_key) as `options` say.
    ///
    /// # Errors
    /// As [`RateLimiter::try_wait_for`](crate::RateLimiter::try_wait_for).
    pub fn wait_key_with(&self, key: &K, n: u32, options: WaitOptions) -> Result<Allowed, Error> {
        block(self.clock(), options, |now, left| {
            self.attempt_key(key, n, now, left)
        })
    }

    /// [`wait_key`](Self::wait_key) for at most `max_wait`; as
    /// [`RateLimiter::try_wait_for`](crate::RateLimiter::try_wait_for).
    ///
    /// # Errors
    /// As [`RateLimiter::try_wait_for`](crate::RateLimiter::try_wait_for).
    pub fn try_wait_key_for(&self, key: &K, n: u32, max_wait: Duration) -> Result<Allowed, Error> {
        self.wait_key_with(key, n, WaitOptions::new().at_most(max_wait))
    }

    /// [`wait_key`](Self::wait_key) without blocking a thread; as
    /// [`RateLimiter::until_ready_with`](crate::RateLimiter::until_ready_with).
    ///
    /// # Errors
    /// As [`RateLimiter::try_wait_for`](crate::RateLimiter::try_wait_for).
    pub fn until_key_ready_with<'a, F: Future<Output = ()> + 'a>(
        &'a self,
        key: &'a K,
        n: u32,
        options: WaitOptions,
        sleep: impl FnMut(Duration) -> F + 'a,
    ) -> impl Future<Output = Result<Allowed, Error>> + 'a {
        until(
            self.clock(),
            options,
            move |now, left| self.attempt_key(key, n, now, left),
            sleep,
        )
    }

    fn attempt_key(&self, key: &K, n: u32, now: u64, left: u64) -> Attempt<(&Self, Receipt)> {
        // A shaping algorithm refuses on its quota only when its queue is full.
        let shaping = self.locate(key).1.max_delay_nanos() > 0;
        judge_reservation(
            self.reserve_key_at(key, n, now),
            |receipt| (self, receipt),
            left,
            shaping,
        )
    }
}

/// # Waiting on tokio's timer (feature `tokio`)
#[cfg(feature = "tokio")]
impl<K: ?Sized + Hash, C: Clock, A: Algorithm> KeyedRateLimiter<K, C, A> {
    /// [`until_key_ready_with`](Self::until_key_ready_with) on `tokio::time::sleep`, with no
    /// bound.
    ///
    /// # Errors
    /// As [`wait_key`](Self::wait_key).
    pub fn until_key_ready<'a>(
        &'a self,
        key: &'a K,
        n: u32,
    ) -> impl Future<Output = Result<Allowed, Error>> + 'a {
        self.until_key_ready_with(key, n, WaitOptions::new(), tokio::time::sleep)
    }

    /// [`until_key_ready`](Self::until_key_ready) for at most `max_wait`.
    ///
    /// # Errors
    /// As [`try_wait_key_for`](Self::try_wait_key_for).
    pub fn until_key_ready_within<'a>(
        &'a self,
        key: &'a K,
        n: u32,
        max_wait: Duration,
    ) -> impl Future<Output = Result<Allowed, Error>> + 'a {
        let options = WaitOptions::new().at_most(max_wait);
        self.until_key_ready_with(key, n, options, tokio::time::sleep)
    }
}
