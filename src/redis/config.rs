//! [`PoliciesConfig::build_any`]: a configuration file's set on the backend the file names
//! (feature `serde`).

use crate::clock::Clock;
use crate::policy::RedisConfig;
use crate::policy::{ConfigError, KeyExtractors, PoliciesConfig};

use super::AnyPolicies;

impl PoliciesConfig {
    /// Builds the set on the backend the file names (`backend`: `"in_process"`, the default,
    /// or `"redis"` with its `[redis]` table), finding each keyed policy's extractor in `keys`.
    /// Code that uses the result switches backends when the file does.
    ///
    /// ```
    /// use flowgate::clock::ManualClock;
    /// use flowgate::policy::{KeyExtractors, PoliciesConfig};
    ///
    /// let file: PoliciesConfig = toml::from_str(r#"
    ///     backend = "in_process"   # or "redis", with a [redis] table (feature `redis`)
    ///     [[policies]]
    ///     name = "per-key"
    ///     key = "api-key"
    ///     quotas = ["200/10s", "5000/h", "20000/day fixed"]
    /// "#)?;
    /// let keys = KeyExtractors::new().key("api-key", |key: &str, k| { k.add(key); });
    /// let limits = file.build_any(&keys, ManualClock::new())?;
    /// assert_eq!(limits.backend_name(), "in_process");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// A [`ConfigError`] for the first mistake: anything [`build`](Self::build) reports, an
    /// unknown backend, a Redis backend without its table (or without the `redis` feature), or
    /// a Redis setting that is invalid (field `redis.…`). Building in Redis needs a tokio
    /// runtime, as `build_redis` does.
    pub fn build_any<R: ?Sized + 'static, C: Clock + Clone + Send + Sync + 'static>(
        &self,
        keys: &KeyExtractors<R>,
        clock: C,
    ) -> Result<AnyPolicies<R, C>, ConfigError> {
        let builder = self.builder(keys, clock)?;
        match self.backend.as_deref() {
            None | Some("in_process") => {
                let set = builder.build().map_err(|e| self.blame(e))?;
                Ok(set.into())
            }
            Some("redis") => {
                let Some(redis) = &self.redis else {
                    return Err(ConfigError::setting(
                        "redis",
                        "backend = \"redis\" needs a [redis] table",
                    ));
                };
                let set = builder.build_redis(redis_backend(redis)?);
                set.map(AnyPolicies::from).map_err(|error| match error {
                    super::RedisConfigError::Policy(e) => self.blame(e),
                    other => ConfigError::setting("redis", other.to_string()),
                })
            }
            Some(other) => Err(ConfigError::setting(
                "backend",
                format!("{other:?}: expected \"in_process\" or \"redis\""),
            )),
        }
    }
}

/// The backend a `[redis]` table describes.
fn redis_backend(config: &RedisConfig) -> Result<super::RedisBackend, ConfigError> {
    use core::time::Duration;

    use super::{Breaker, OnFailure, RedisBackend};
    use crate::policy::BreakerConfig;
    use crate::quota::parse_duration;

    let duration = |field: &str, text: &str| {
        parse_duration(text)
            .map(Duration::from_nanos)
            .map_err(|e| ConfigError::setting(&format!("redis.{field}"), format!("{text:?}: {e}")))
    };
    let client = ::redis::Client::open(config.url.as_str())
        .map_err(|e| ConfigError::setting("redis.url", format!("{:?}: {e}", config.url)))?;
    let mut backend = match &config.cluster {
        None => RedisBackend::new(client),
        Some(more) => cluster(&config.url, more)?,
    };
    if let Some(prefix) = &config.prefix {
        backend = backend.prefix(prefix.as_str());
    }
    if let Some(timeout) = &config.timeout {
        backend = backend.timeout(duration("timeout", timeout)?);
    }
    let on_failure = match config.on_failure.as_deref() {
        None | Some("open") => OnFailure::Open,
        Some("closed") => OnFailure::Closed {
            retry_after: match &config.retry_after {
                Some(text) => duration("retry_after", text)?,
                None => Duration::from_secs(1),
            },
        },
        Some("local") => match config.local_share {
            Some(share) => OnFailure::Local { share },
            None => {
                return Err(ConfigError::setting(
                    "redis.local_share",
                    "\"local\" needs a share",
                ))
            }
        },
        Some(other) => {
            return Err(ConfigError::setting(
                "redis.on_failure",
                format!("{other:?}: expected \"open\", \"closed\" or \"local\""),
            ))
        }
    };
    backend = backend.on_failure(on_failure);
    if let Some((cells, lifetime)) = &config.lease {
        backend = backend.lease(*cells, duration("lease", lifetime)?);
    }
    backend = backend.breaker(match &config.breaker {
        None | Some(BreakerConfig::Enabled(true)) => Breaker::default(),
        Some(BreakerConfig::Enabled(false)) => Breaker::off(),
        Some(BreakerConfig::Settings(failures, cool_down)) => {
            let breaker = Breaker::new(*failures, duration("breaker", cool_down)?);
            if breaker.failures() == 0 || breaker.cool_down().is_zero() {
                return Err(ConfigError::setting(
                    "redis.breaker",
                    "a breaker needs at least one failure and a cool-down (or `false`)",
                ));
            }
            breaker
        }
    });
    Ok(backend)
}

/// The backend of a Redis Cluster whose seeds are `url` and `more`.
fn cluster(url: &str, more: &[String]) -> Result<super::RedisBackend, ConfigError> {
    #[cfg(feature = "redis-cluster")]
    {
        let seeds = core::iter::once(url).chain(more.iter().map(String::as_str));
        super::RedisBackend::cluster(seeds)
            .map_err(|e| ConfigError::setting("redis.cluster", e.to_string()))
    }
    #[cfg(not(feature = "redis-cluster"))]
    {
        let _ = (url, more);
        Err(ConfigError::setting(
            "redis.cluster",
            "a Redis Cluster needs the `redis-cluster` feature",
        ))
    }
}
