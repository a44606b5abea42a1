//! What a key's bucket gives besides a plain check: as many cells as it holds, up to a limit
//! ([`KeyedRateLimiter::check_key_up_to`]), and cells with a [`Receipt`] to give them back
//! exactly ([`KeyedRateLimiter::reserve_key`], [`KeyedRateLimiter::give_back`]).

use core::hash::Hash;

use super::slot::FIRST_TAG;
use super::KeyedRateLimiter;
use crate::algorithm::{up_to, Algorithm};
use crate::cell::Receipt;
use crate::clock::Clock;
use crate::outcome::{Allowed, Cause, InsufficientCapacity, Refused};

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
    pub(crate) fn check_key_up_to_at(
        &self,
        key: &K,
        n: u32,
        now: u64,
    ) -> Result<(u32, Allowed), Refused> {
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

/// # Giving cells back
impl<K: ?Sized + Hash, C: Clock, A: Algorithm> KeyedRateLimiter<K, C, A> {
    /// Takes `n` cells from `key`'s bucket as [`check_key_n`](Self::check_key_n) does, with a
    /// [`Receipt`] of what the admission wrote, to give them back exactly
    /// ([`give_back`](Self::give_back)); as [`RateLimiter::reserve`](crate::RateLimiter::reserve).
    ///
    /// # Errors
    /// As [`check_key_n`](Self::check_key_n).
    pub fn reserve_key(
        &self,
        key: &K,
        n: u32,
    ) -> Result<Result<(Allowed, Receipt), Refused>, InsufficientCapacity> {
        self.reserve_key_at(key, n, self.store.clock().now())
    }

    /// [`reserve_key`](Self::reserve_key) at `now` (a reading of this limiter's clock).
    ///
    /// # Errors
    /// As [`check_key_n`](Self::check_key_n).
    pub(crate) fn reserve_key_at(
        &self,
        key: &K,
        n: u32,
        now: u64,
    ) -> Result<Result<(Allowed, Receipt), Refused>, InsufficientCapacity> {
        let mut wrote = None;
        let (answer, tag) = self.check_key_n_with(key, n, || now, &mut wrote)?;
        Ok(answer.map(|allowed| (allowed, Receipt::new(tag, wrote))))
    }

    /// Gives back the cells of the admission `receipt` describes, exactly, as
    /// [`RateLimiter::give_back`](crate::RateLimiter::give_back); nothing to a key evicted or
    /// reset since (its new bucket started full).
    pub fn give_back(&self, receipt: Receipt) -> bool {
        match receipt.wrote() {
            // A keyed bucket's receipt: a key's tag.
            Some((tag, before, after)) if tag >= FIRST_TAG => {
                self.store.restore(tag, before, after)
            }
            _ => false,
        }
    }
}
