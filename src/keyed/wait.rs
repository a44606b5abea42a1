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
    /// available, within `options`; as [`RateLimiter::wait`](crate::RateLimiter::wait).
    ///
    /// # Errors
    /// As [`RateLimiter::wait`](crate::RateLimiter::wait).
    pub fn wait_key(&self, key: &K, n: u32, options: WaitOptions) -> Result<Allowed, Error> {
        block(self.clock(), options, |now, left| {
            self.attempt_key(key, n, now, left)
        })
    }

    /// [`wait_key`](Self::wait_key) without blocking a thread, sleeping through `sleep`; as
    /// [`RateLimiter::until_ready`](crate::RateLimiter::until_ready).
    ///
    /// # Errors
    /// As [`RateLimiter::wait`](crate::RateLimiter::wait).
    pub fn until_key_ready<'a, F: Future<Output = ()> + 'a>(
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

    fn attempt_key(
        &self,
        key: &K,
        n: u32,
        now: u64,
        left: u64,
    ) -> Attempt<(&Self, Receipt), Allowed, Error> {
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
