//! [`RedisSlidingLog`]: the exact sliding window ([`SlidingLog`](flowgate::SlidingLog)) in Redis,
//! one sorted set of request times per key, decided by one script call (`log.lua`): at most
//! `limit` requests in any interval of the window's length, across every process on the same
//! prefix and name.

use core::fmt;
use core::time::Duration;
use std::sync::Arc;

use ::redis::{Cmd, Value};

use crate::error::{check_part, RedisConfigError};
use crate::failure::Link;
use crate::script;
use crate::settings::{OnFailure, RedisBackend};
use crate::stats::RedisStats;
use flowgate::backend::{Failure, Source, Verdict};
use flowgate::clock::Clock;
use flowgate::outcome::{Allowed, Gauge, InsufficientCapacity, Refused};
use flowgate::quota::{Quota, QuotaError};

/// The longest window a log in Redis may have: a day (its times are kept, one per request, for
/// a window; a longer one is a counter's job).
const MAX_LOG_WINDOW_MICROS: u64 = 86_400_000_000;

/// The exact sliding window in Redis: at most `limit` requests per key in **any** interval of
/// the window's length, shared by every process on the same prefix and name. A key's log is a
/// sorted set of its request times, trimmed on every call, never holding more than `limit`,
/// and expiring one window after its newest time.
///
/// ```no_run
/// use flowgate_redis::{RedisBackend, RedisSlidingLog};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let backend = RedisBackend::new(redis::Client::open("redis://127.0.0.1/")?).prefix("api");
/// let logins = RedisSlidingLog::new(backend, "logins", "5/min".parse()?)?;
/// if !logins.check("alice").await?.is_allowed() {
///     // 429: more than 5 logins in the last minute
/// }
/// # Ok(())
/// # }
/// ```
///
/// Times are whole µs (the window is rounded up to one). The failure policy is the backend's
/// (open or closed: a log keeps no local share). Limits: at most 65 536 requests per window, as
/// in process, and windows of at most a day.
pub struct RedisSlidingLog<C: Clock = flowgate::clock::QuantaClock> {
    shared: Arc<Log<C>>,
}

struct Log<C: Clock> {
    link: Link,
    prefix: String,
    name: String,
    window: u64,
    limit: u32,
    clock: C,
}

impl<C: Clock> Clone for RedisSlidingLog<C> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<C: Clock> fmt::Debug for RedisSlidingLog<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisSlidingLog")
            .field("prefix", &self.shared.prefix)
            .field("name", &self.shared.name)
            .field("limit", &self.shared.limit)
            .field("window_micros", &self.shared.window)
            .finish_non_exhaustive()
    }
}

impl RedisSlidingLog {
    /// A log of `quota` (`limit` per window) named `name` on `backend`, timed by the default
    /// clock (which only matters with [`RedisBackend::client_time`]).
    ///
    /// # Errors
    /// As [`with_clock`](Self::with_clock).
    pub fn new(
        backend: RedisBackend,
        name: impl Into<String>,
        quota: Quota,
    ) -> Result<Self, RedisConfigError> {
        Self::with_clock(backend, name, quota, flowgate::clock::QuantaClock::new())
    }
}

impl<C: Clock> RedisSlidingLog<C> {
    /// [`new`](RedisSlidingLog::new) on `clock`, whose readings decide with
    /// [`RedisBackend::client_time`] (tests).
    ///
    /// # Errors
    /// [`RedisConfigError::Quota`] for a quota a log cannot run (a separate burst, more than
    /// 65 536 per window, a window longer than a day), [`RedisConfigError::BadName`],
    /// [`RedisConfigError::LocalLog`] for `OnFailure::Local`, and the backend's own errors.
    pub fn with_clock(
        backend: RedisBackend,
        name: impl Into<String>,
        quota: Quota,
        clock: C,
    ) -> Result<Self, RedisConfigError> {
        let name = name.into();
        check_part(&name, "log")?;
        // The in-process log's rules (no separate burst, at most 65 536), then the script's.
        flowgate::SlidingLog::new(quota).map_err(RedisConfigError::Quota)?;
        let period = u64::try_from(quota.period().as_nanos()).unwrap_or(u64::MAX);
        let window = period.div_ceil(1_000);
        if window > MAX_LOG_WINDOW_MICROS {
            return Err(RedisConfigError::Quota(QuotaError::PeriodTooLong));
        }
        if matches!(backend.on_failure, OnFailure::Local { .. }) {
            return Err(RedisConfigError::LocalLog);
        }
        let link = Link::new(&backend)?;
        crate::events::built(&backend, &link.server, core::iter::once(name.as_str()));
        Ok(Self {
            shared: Arc::new(Log {
                link,
                prefix: backend.prefix,
                name,
                window,
                limit: quota.count(),
                clock,
            }),
        })
    }

    /// Records one request for `key` if its window has room.
    ///
    /// # Errors
    /// As [`check_n`](Self::check_n).
    pub async fn check(&self, key: &str) -> Result<Verdict, InsufficientCapacity> {
        self.check_n(key, 1).await
    }

    /// Records `n` requests for `key` if its window has room for all of them, or none; `n = 0`
    /// records nothing and reports the log as it is.
    ///
    /// # Errors
    /// [`InsufficientCapacity`] when `n` exceeds the limit: it never fits. Checked before any
    /// round trip.
    pub async fn check_n(&self, key: &str, n: u32) -> Result<Verdict, InsufficientCapacity> {
        let log = &*self.shared;
        InsufficientCapacity::check(n, log.limit)?;
        let counters = &log.link.counters;
        counters.decisions.add(1);
        let verdict = match self.call(key, n).await {
            Ok(value) => match self.verdict(&value, n) {
                Some(verdict) => {
                    counters.answered.add(1);
                    verdict
                }
                None => log.link.fail(Failure::Reply),
            },
            Err(failure) => log.link.fail(failure),
        };
        counters.decided(verdict.is_allowed());
        Ok(verdict)
    }

    /// Whether Redis answers (see [`RedisLimiter::ready`](crate::RedisLimiter::ready)).
    ///
    /// # Errors
    /// [`RedisConfigError::Unreachable`], naming the server and why.
    pub async fn ready(&self) -> Result<(), RedisConfigError> {
        self.shared.link.ready().await
    }

    /// The counters since the log was built.
    pub fn stats(&self) -> RedisStats {
        let link = &self.shared.link;
        link.counters.snapshot_with(&link.background)
    }

    /// The window as Redis runs it (rounded up to a whole µs).
    pub fn window(&self) -> Duration {
        Duration::from_micros(self.shared.window)
    }

    /// One script call within the timeout.
    async fn call(&self, key: &str, n: u32) -> Result<Value, Failure> {
        let log = &*self.shared;
        let now = log.link.reading(|| log.clock.now());
        let tag = format!("{{{}:{key}}}:{}", log.prefix, log.name);
        let command = |verb: &str, script: &str| {
            let mut command = Cmd::new();
            command.arg(verb).arg(script).arg(1).arg(&tag);
            match now {
                Some(now) => command.arg(now),
                None => command.arg(""),
            };
            command.arg(n).arg(log.window).arg(log.limit);
            command
        };
        log.link
            .eval(
                script::log(),
                (tag.as_bytes(), command),
                log.link.deadline(),
            )
            .await
    }

    /// The verdict of the script's reply to `n` requests, or `None` if it is not one the
    /// script sends.
    fn verdict(&self, value: &Value, n: u32) -> Option<Verdict> {
        let log = &*self.shared;
        let Value::Array(items) = value else {
            return None;
        };
        let mut numbers = Vec::with_capacity(items.len());
        for item in items {
            let Value::Int(number) = item else {
                return None;
            };
            numbers.push(u64::try_from(*number).ok()?);
        }
        let limit = u64::from(log.limit);
        let gauge = |count: u64, reset: u64| {
            let reset = reset.checked_mul(1_000)?;
            (count <= limit && reset <= log.window * 1_000)
                .then(|| Gauge::new(count, 1, log.limit, reset))
        };
        let outcome = match *numbers.as_slice() {
            [1, repaired, count, reset] if count >= u64::from(n) => {
                log.link.counters.repaired.add(repaired);
                Ok(flowgate::policy::Allowed::new(
                    Allowed::new(gauge(count, reset)?),
                    None,
                    None,
                ))
            }
            [0, repaired, count, reset, wait] if wait >= 1 && wait <= log.window => {
                log.link.counters.repaired.add(repaired);
                let refused = Refused::new(gauge(count, reset)?, wait * 1_000);
                Err(flowgate::policy::Refused::new(refused, None, None, 0))
            }
            _ => return None,
        };
        Some(Verdict::new(outcome, Source::Buckets))
    }
}
