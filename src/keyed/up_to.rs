//! [`KeyedRateLimiter::check_key_up_to`]: as many cells as a key's bucket holds, up to a limit.

use core::hash::Hash;

use super::KeyedRateLimiter;
use crate::algorithm::{up_to, Algorithm};
use crate::clock::Clock;
use crate::outcome::{Allowed, Cause, Refused};

/// # Taking up to `n`
impl<K: ?Sized + Hash, C: Clock, A: Algorithm> KeyedRateLimiter<K, C, A> {
    /// Takes as many cells as `key`'s bucket holds now, up to `n`, and says how many (`1 ≤ k ≤
    /// n`), or refuses one cell when it holds none: as
    /// [`RateLimiter::check_up_to`](crate::RateLimiter::check_up_to), one atomic step on a key
    /// the table holds. A new key gets what a new bucket holds, through the same insert as
    /// [`check_key_n`](Self::check_key_n) (so a full table or the quota on new keys may refuse
    /// it); if another request creates the key first, the count is taken again from its
    /// bucket. `n = 0` takes nothing and creates nothing.
    ///
    /// ```
    /// use flowgate::{KeyedRateLimiter, Quota};
    ///
    /// let limiter = KeyedRateLimiter::<str>::new(Quota::per_second(5)?, 1_000)?;
    /// assert_eq!(limiter.check_key_up_to("batch", 3).unwrap().0, 3);
    /// assert_eq!(limiter.check_key_up_to("batch", 3).unwrap().0, 2); // the last two
    /// assert!(limiter.check_key_up_to("batch", 3).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn check_key_up_to(&self, key: &K, n: u32) -> Result<(u32, Allowed), Refused> {
        self.check_key_up_to_at(key, n, self.store.clock().now())
    }

    /// [`check_key_up_to`](Self::check_key_up_to) at `now` (a reading of this limiter's clock).
    pub fn check_key_up_to_at(&self, key: &K, n: u32, now: u64) -> Result<(u32, Allowed), Refused> {
        if n == 0 {
            // Zero cells are within every capacity, and a request for none is never refused.
            return match self.peek_key_at(key, 0, now) {
                Ok(Ok(state)) => Ok((0, state)),
                Ok(Err(refused)) => Err(refused),
                Err(_) => unreachable!("no capacity is below zero cells"),
            };
        }
        let (tag, algorithm) = self.locate(key);
        loop {
            // A bucket the table holds: counted and taken in one compare-and-swap.
            let step = |word| up_to(algorithm, word, now, n);
            if let Some(answer) = self.store.update(tag, step) {
                if matches!(&answer, Err(refused) if refused.clock_behind()) {
                    self.store.catch_up(tag, &self.tiers);
                }
                return answer;
            }
            // A new key: what a new bucket holds, taken through the insert.
            let fresh = algorithm.initial_word(now);
            let Ok((k, _)) = up_to(algorithm, fresh, now, n).answer() else {
                // A new bucket holds nothing: the insert's own refusal of one cell.
                return self
                    .decide(tag, algorithm, 1, || now, &mut None)
                    .map(|a| (1, a));
            };
            match self.decide(tag, algorithm, k, || now, &mut None) {
                Ok(allowed) => return Ok((k, allowed)),
                // Created meanwhile by another request, which took cells: count again.
                Err(refused) if refused.cause() == Cause::Quota => continue,
                Err(refused) => return Err(refused),
            }
        }
    }
}
