//! [`RedisBuilder`]: a Redis limiter's configuration, checked in full before anything connects,
//! and [`RedisConfigError`], what can be wrong with it.

use core::fmt;
use core::time::Duration;
use std::sync::Arc;

use ::redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::clock::{Clock, QuantaClock};
use crate::observe::RedisMetrics;
use crate::policy::{Policies, Policy};
use crate::quota::Quota;

use super::lease::{Leases, MAX_LEASE_CELLS};
use super::level::{check_part, Level, Micros, Tag};
use super::script::Script;
use super::stats::Counters;
use super::{OnFailure, Prepared, RedisLimiter, Shared};

/// Why a [`RedisBuilder`] could not build a limiter.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum RedisConfigError {
    /// The limiter has no level, or a level has no quota.
    Empty {
        /// The level without quotas; empty if there is no level at all.
        level: String,
    },
    /// A prefix or level name is empty or holds `:`, `{` or `}` (which would make keys
    /// ambiguous or break the hash tag), or two levels share a name.
    BadName {
        /// What was named: "prefix" or "level".
        what: &'static str,
        /// The name.
        name: String,
    },
    /// A quota's window exceeds [`MAX_WINDOW_MICROS`](super::level::MAX_WINDOW_MICROS).
    WindowTooLong {
        /// The level.
        level: String,
        /// The quota's index in the level.
        quota: usize,
    },
    /// A quota starts its buckets less than full ([`Quota::with_initial`]): in Redis a missing
    /// key is a full bucket.
    InitialNotFull {
        /// The level.
        level: String,
        /// The quota's index in the level.
        quota: usize,
    },
    /// [`OnFailure::Local`]'s share is not in `(0, 1]`, or a scaled quota is invalid.
    Share(f64),
    /// The lease is empty, larger than [`MAX_LEASE_CELLS`], or its lifetime is zero.
    Lease,
    /// The timeout is zero.
    Timeout,
    /// `build` was called outside a tokio runtime (the connection manager needs one).
    NoRuntime,
    /// The `redis` crate refused the client's configuration.
    Client(String),
}

impl fmt::Display for RedisConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty { level } if level.is_empty() => f.write_str("no level"),
            Self::Empty { level } => write!(f, "level {level:?} has no quota"),
            Self::BadName { what, name } => write!(
                f,
                "{what} {name:?} is empty, repeated, or holds ':', '{{' or '}}'"
            ),
            Self::WindowTooLong { level, quota } => write!(
                f,
                "quota {quota} of level {level:?}: the window exceeds 2^51 µs"
            ),
            Self::InitialNotFull { level, quota } => write!(
                f,
                "quota {quota} of level {level:?}: buckets in Redis start full"
            ),
            Self::Share(share) => write!(f, "local share {share} is not in (0, 1]"),
            Self::Lease => f.write_str("a lease needs 1 to 2^24 - 1 cells and a lifetime"),
            Self::Timeout => f.write_str("the timeout is zero"),
            Self::NoRuntime => f.write_str("build a Redis limiter inside a tokio runtime"),
            Self::Client(error) => write!(f, "redis client: {error}"),
        }
    }
}

impl std::error::Error for RedisConfigError {}

/// Builds a [`RedisLimiter`]; from [`RedisLimiter::builder`].
pub struct RedisBuilder<R: ?Sized, C: Clock = QuantaClock> {
    client: ::redis::Client,
    prefix: String,
    levels: Vec<Level<R>>,
    timeout: Duration,
    on_failure: OnFailure,
    lease: Option<(u32, Duration)>,
    max_leases: usize,
    client_time: bool,
    clock: C,
}

impl<R: ?Sized + 'static, C: Clock + Clone + Send + Sync + 'static> RedisBuilder<R, C> {
    /// The prefix of every key ("flowgate" unless set).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Adds a level; levels are decided in the order they are added.
    pub fn level(mut self, level: Level<R>) -> Self {
        self.levels.push(level);
        self
    }

    /// The longest a decision waits for Redis (50 ms unless set), connecting included.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// What to decide when Redis does not answer ([`OnFailure::Open`] unless set).
    pub fn on_failure(mut self, on_failure: OnFailure) -> Self {
        self.on_failure = on_failure;
        self
    }

    /// Leases up to `cells` cells per call (no more than the smallest burst of the decision)
    /// and spends them locally for at most `lifetime` (see the [module docs](super#leases-a-local-fast-path)).
    pub fn lease(mut self, cells: u32, lifetime: Duration) -> Self {
        self.lease = Some((cells, lifetime));
        self
    }

    /// The most leases held at once (4096 unless set); a decision that finds no room goes to
    /// Redis without one.
    pub fn max_leases(mut self, max: usize) -> Self {
        self.max_leases = max;
        self
    }

    /// The clock that times leases and the local fallback (the TSC clock unless set).
    pub fn clock<C2: Clock + Clone + Send + Sync + 'static>(
        self,
        clock: C2,
    ) -> RedisBuilder<R, C2> {
        RedisBuilder {
            client: self.client,
            prefix: self.prefix,
            levels: self.levels,
            timeout: self.timeout,
            on_failure: self.on_failure,
            lease: self.lease,
            max_leases: self.max_leases,
            client_time: self.client_time,
            clock,
        }
    }

    /// Decides at this limiter's clock (in µs) instead of the server's `TIME`: for tests and
    /// simulations with a [`ManualClock`](crate::clock::ManualClock), never in production
    /// (hosts' clocks differ, and the default clock's origin is per process). Keys still
    /// expire in the server's real time.
    pub fn client_time(mut self, client_time: bool) -> Self {
        self.client_time = client_time;
        self
    }

    /// The limiter. It connects lazily: a limiter built while Redis is down decides by its
    /// failure policy until Redis answers.
    ///
    /// # Errors
    /// A [`RedisConfigError`] naming what is wrong.
    pub fn build(self) -> Result<RedisLimiter<R, C>, RedisConfigError> {
        check_part(&self.prefix, "prefix")?;
        if self.levels.is_empty() {
            return Err(RedisConfigError::Empty {
                level: String::new(),
            });
        }
        if self.timeout.is_zero() {
            return Err(RedisConfigError::Timeout);
        }
        let levels = prepare(&self.levels)?;
        let fallback = match self.on_failure {
            OnFailure::Local { share } => Some(local_limiter(
                &self.prefix,
                &levels,
                share,
                self.clock.clone(),
            )?),
            _ => None,
        };
        let lease = lease_in_millis(self.lease)?;
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(RedisConfigError::NoRuntime);
        }
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.timeout.max(Duration::from_millis(250))))
            .set_response_timeout(None)
            .set_min_delay(Duration::from_millis(10))
            .set_max_delay(Duration::from_secs(1));
        let connection = ConnectionManager::new_lazy_with_config(self.client, config)
            .map_err(|e| RedisConfigError::Client(e.to_string()))?;
        let single_keyed = levels.len() == 1 && levels[0].key.is_some();
        let metrics = RedisMetrics::new(&self.prefix);
        Ok(RedisLimiter {
            shared: Arc::new(Shared {
                connection,
                script: Script::new(),
                tag: if single_keyed {
                    Tag::ByKey
                } else {
                    Tag::ByPrefix
                },
                prefix: self.prefix,
                buckets: levels.iter().map(|l| l.quotas.len()).sum(),
                levels,
                timeout: self.timeout,
                on_failure: self.on_failure,
                fallback,
                lease,
                leases: Leases::new(self.max_leases.max(1)),
                client_time: self.client_time,
                clock: self.clock,
                counters: Counters::default(),
                metrics,
            }),
        })
    }
}

/// The levels as the script runs them (quotas in µs), each checked: a valid name no other level
/// has, and at least one quota that fits.
fn prepare<R: ?Sized>(levels: &[Level<R>]) -> Result<Vec<Prepared<R>>, RedisConfigError> {
    let mut prepared = Vec::with_capacity(levels.len());
    for (i, level) in levels.iter().enumerate() {
        check_part(&level.name, "level")?;
        if levels[..i].iter().any(|l| l.name == level.name) {
            return Err(RedisConfigError::BadName {
                what: "level",
                name: level.name.clone(),
            });
        }
        if level.quotas.is_empty() {
            return Err(RedisConfigError::Empty {
                level: level.name.clone(),
            });
        }
        let quotas = (level.quotas.iter().enumerate())
            .map(|(q, quota)| Micros::new(quota, &level.name, q))
            .collect::<Result<Vec<_>, _>>()?;
        prepared.push(Prepared {
            name: level.name.clone(),
            key: level.key.clone(),
            quotas,
        });
    }
    Ok(prepared)
}

/// A lease's cells and lifetime in whole milliseconds (at least one), checked.
fn lease_in_millis(lease: Option<(u32, Duration)>) -> Result<Option<(u32, u64)>, RedisConfigError> {
    let Some((cells, lifetime)) = lease else {
        return Ok(None);
    };
    if cells == 0 || cells > MAX_LEASE_CELLS || lifetime.is_zero() {
        return Err(RedisConfigError::Lease);
    }
    let millis = u64::try_from(lifetime.as_millis())
        .unwrap_or(u64::MAX)
        .max(1);
    Ok(Some((cells, millis)))
}

/// The in-process limiter of [`OnFailure::Local`]: the same levels, each quota scaled to
/// `share` of its rate (the interval divided by `share`, rounded up) and of its burst (at
/// least one cell).
///
/// Its policies are named `redis:{prefix}:{level}`, so that what the `metrics` feature reports
/// of them never mixes with an in-process policy named like a level.
fn local_limiter<R: ?Sized + 'static, C: Clock + Clone>(
    prefix: &str,
    levels: &[Prepared<R>],
    share: f64,
    clock: C,
) -> Result<Policies<R, C>, RedisConfigError> {
    if !(share > 0.0 && share <= 1.0) {
        return Err(RedisConfigError::Share(share));
    }
    let mut builder = Policies::<R>::builder().clock(clock);
    for level in levels {
        let name = format!("redis:{prefix}:{}", level.name);
        let mut policy = match &level.key {
            None => Policy::global(name),
            Some(key) => {
                let key = Arc::clone(key);
                Policy::keyed_with(name, move |request: &R, k| match key(request) {
                    Some(key) => {
                        k.add(&key);
                    }
                    None => {
                        k.skip();
                    }
                })
            }
        };
        for micros in &level.quotas {
            let interval = (micros.quota.interval_nanos() as f64 / share).ceil();
            let burst = ((f64::from(micros.burst) * share).floor() as u32).max(1);
            let quota = Quota::from_nanos(1, interval as u64)
                .and_then(|q| q.with_burst(burst))
                .map_err(|_| RedisConfigError::Share(share))?;
            policy = policy.quota(quota);
        }
        builder = builder.policy(policy);
    }
    builder.build().map_err(|_| RedisConfigError::Share(share))
}

impl<R: ?Sized + 'static> RedisLimiter<R, QuantaClock> {
    /// A builder for a limiter on `client`'s server (see [`redis::Client::open`]).
    pub fn builder(client: ::redis::Client) -> RedisBuilder<R, QuantaClock> {
        RedisBuilder {
            client,
            prefix: "flowgate".to_owned(),
            levels: Vec::new(),
            timeout: Duration::from_millis(50),
            on_failure: OnFailure::Open,
            lease: None,
            max_leases: 4096,
            client_time: false,
            clock: QuantaClock::new(),
        }
    }
}
