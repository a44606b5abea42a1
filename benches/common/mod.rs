//! Limiters shared by the benches, built the same way for flowgate and governor so that both
//! answer the same question in the same run.
#![allow(dead_code)]

use std::num::NonZeroU32;

use flowgate::{Quota, RateLimiter};
use governor::{clock::DefaultClock, state::InMemoryState, state::NotKeyed};

pub type Governor = governor::RateLimiter<NotKeyed, InMemoryState, DefaultClock>;

const HUGE: u32 = 1_000_000_000;

/// 10⁹/s with a burst of 10⁹: every check in a benchmark loop is admitted.
pub fn flowgate_allowing() -> RateLimiter {
    RateLimiter::new(allowing_quota())
}

/// 1/hour with burst 1, already used: every check is refused.
pub fn flowgate_refusing() -> RateLimiter {
    let limiter = RateLimiter::new(Quota::per_hour(1).unwrap());
    assert!(limiter.check().is_ok());
    limiter
}

pub fn allowing_quota() -> Quota {
    Quota::per_second(HUGE).unwrap()
}

pub fn governor_allowing() -> Governor {
    let n = NonZeroU32::new(HUGE).unwrap();
    governor::RateLimiter::direct(governor::Quota::per_second(n))
}

pub fn governor_refusing() -> Governor {
    let one = NonZeroU32::new(1).unwrap();
    let limiter = governor::RateLimiter::direct(governor::Quota::per_hour(one));
    assert!(limiter.check().is_ok());
    limiter
}
