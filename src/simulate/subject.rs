//! The subjects a replay decides with: the [`Subject`] trait, and subjects built from a crate
//! algorithm (one bucket per key), an exact sliding log per key, or a closure.

use std::collections::HashMap;
use std::time::Duration;

use super::{Request, MAX_KEYS};
use crate::clock::ManualClock;
use crate::{Algorithm, KeyedRateLimiter, Quota, QuotaError, SlidingLog};

/// Something that decides requests: an algorithm, a policy set, anything.
pub trait Subject {
    /// Its name in tables and charts.
    fn name(&self) -> &str;

    /// Decides `request` at reading `now` (ns; one day past the epoch plus the request's
    /// time): the delay after which it proceeds if admitted (zero unless the subject shapes),
    /// `None` if refused.
    fn decide(&mut self, request: &Request, now: u64) -> Option<Duration>;
}

/// A subject deciding with `algorithm`, one bucket per key (a [`KeyedRateLimiter`] of
/// 65 536 keys). A request above the algorithm's capacity is refused.
pub fn algorithm<A: Algorithm + 'static>(
    name: impl Into<String>,
    algorithm: A,
) -> Box<dyn Subject> {
    let clock = ManualClock::new();
    // Only a zero-sized table fails to build, and MAX_KEYS is not zero.
    let limiter = KeyedRateLimiter::<str, _, A>::builder(algorithm)
        .clock(clock.clone())
        .max_keys(MAX_KEYS)
        .build()
        .ok();
    Box::new(Keyed {
        name: name.into(),
        clock,
        limiter,
    })
}

/// The subject [`algorithm`] builds: a keyed table of `A`, read at each request's reading.
struct Keyed<A: Algorithm> {
    name: String,
    /// Set to each request's reading, so that whatever the table reads agrees with it.
    clock: ManualClock,
    limiter: Option<KeyedRateLimiter<str, ManualClock, A>>,
}

impl<A: Algorithm> Subject for Keyed<A> {
    fn name(&self) -> &str {
        &self.name
    }

    fn decide(&mut self, request: &Request, now: u64) -> Option<Duration> {
        let limiter = self.limiter.as_ref()?;
        self.clock.set(now);
        match limiter.check_key_n(&request.key, request.cost) {
            Ok(Ok(allowed)) => Some(allowed.delay()),
            _ => None,
        }
    }
}

/// A subject deciding with an exact [`SlidingLog`] per key (one slot per cell of the limit
/// each, so keep the keys few).
///
/// # Errors
/// As [`SlidingLog::with_clock`].
pub fn sliding_log(name: impl Into<String>, quota: Quota) -> Result<Box<dyn Subject>, QuotaError> {
    let clock = ManualClock::new();
    // Checked once here, so that every key's log builds.
    SlidingLog::with_clock(quota, clock.clone())?;
    Ok(Box::new(Logs {
        name: name.into(),
        quota,
        clock,
        logs: HashMap::new(),
    }))
}

/// The subject [`sliding_log`] builds: a log per key, each made when its key first comes.
struct Logs {
    name: String,
    quota: Quota,
    clock: ManualClock,
    logs: HashMap<String, SlidingLog<ManualClock>>,
}

impl Subject for Logs {
    fn name(&self) -> &str {
        &self.name
    }

    fn decide(&mut self, request: &Request, now: u64) -> Option<Duration> {
        if !self.logs.contains_key(&request.key) {
            let log = SlidingLog::with_clock(self.quota, self.clock.clone()).ok()?;
            self.logs.insert(request.key.clone(), log);
        }
        let log = self.logs.get(&request.key)?;
        self.clock.set(now);
        match log.check_n(request.cost) {
            Ok(Ok(allowed)) => Some(allowed.delay()),
            _ => None,
        }
    }
}

/// A subject deciding with `decide` (a policy set, a limiter of your own): see [`Subject::decide`].
pub fn from_fn<F>(name: impl Into<String>, decide: F) -> Box<dyn Subject>
where
    F: FnMut(&Request, u64) -> Option<Duration> + 'static,
{
    Box::new(FromFn {
        name: name.into(),
        decide,
    })
}

/// The subject [`from_fn`] builds: its name and its closure.
struct FromFn<F> {
    name: String,
    decide: F,
}

impl<F: FnMut(&Request, u64) -> Option<Duration>> Subject for FromFn<F> {
    fn name(&self) -> &str {
        &self.name
    }

    fn decide(&mut self, request: &Request, now: u64) -> Option<Duration> {
        (self.decide)(request, now)
    }
}

/// Every algorithm of the crate on `quota`, one bucket per key, as
/// `examples/algorithms.rs` and `examples/simulate.rs` compare them: GCRA, the leaky bucket as
/// a meter and as a shaper (queueing up to a sixth of the quota's period), credit (the same
/// debt), interval refill, the fixed and sliding window counters, and the exact sliding log.
/// An algorithm that cannot run `quota` (a window counter given a burst of its own) is left
/// out, and so is the sliding log above 10 000 cells per window (it holds 8 bytes per cell per
/// key).
pub fn every_algorithm(quota: &Quota) -> Vec<Box<dyn Subject>> {
    use crate::algorithm::{Credit, FixedWindow, IntervalRefill, LeakyBucket, SlidingWindow};
    let queue = quota.period() / 6;
    let mut subjects = vec![
        algorithm("GCRA", crate::Gcra::new(quota)),
        algorithm("leaky bucket (meter)", LeakyBucket::meter(quota)),
    ];
    let fallible = [
        LeakyBucket::shaper(quota, queue).map(|a| algorithm("leaky bucket (shaper)", a)),
        Credit::new(quota, queue).map(|a| algorithm("credit", a)),
        IntervalRefill::new(quota).map(|a| algorithm("interval refill", a)),
        FixedWindow::new(quota).map(|a| algorithm("fixed window", a)),
        SlidingWindow::new(quota).map(|a| algorithm("sliding window counter", a)),
        match quota.count() {
            0..=10_000 => sliding_log("sliding log", *quota),
            _ => Err(QuotaError::LimitTooLarge { max: 10_000 }),
        },
    ];
    subjects.extend(fallible.into_iter().flatten());
    subjects
}
