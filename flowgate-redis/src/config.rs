//! A policy file whose set may decide in Redis ([`Config`]: flowgate's policies, `backend`,
//! and the `[redis]` table, [`RedisConfig`]), and the set it builds on the backend it names
//! (feature `serde`).

use flowgate::clock::Clock;
use flowgate::policy::{ConfigError, KeyExtractors, PoliciesConfig, PolicyConfig};
use serde::{Deserialize, Deserializer, Serialize};

use crate::any::{AnyPolicies, BuildRedis};
use crate::error::RedisConfigError;
use crate::settings::{Breaker, OnFailure, RedisBackend};

/// A policy set as written in a configuration file that may put it in Redis: flowgate's
/// [`PoliciesConfig`] with its `[redis]` table. The same file read by flowgate alone builds in
/// process and refuses `backend = "redis"`; read here, the file chooses.
///
/// ```
/// use flowgate::clock::ManualClock;
/// use flowgate::policy::KeyExtractors;
/// use flowgate_redis::Config;
///
/// let file: Config = toml::from_str(r#"
///     backend = "in_process"   # or "redis", with a [redis] table
///     [[policies]]
///     name = "per-key"
///     key = "api-key"
///     quotas = ["200/10s", "5000/h", "20000/day fixed"]
/// "#)?;
/// let keys = KeyExtractors::new().key("api-key", |key: &str, k| { k.add(key); });
/// let limits = file.build(&keys, ManualClock::new())?;
/// assert_eq!(limits.backend_name(), "in_process");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Where the set decides: `"in_process"` (the default) or `"redis"` (with
    /// [`redis`](Self::redis)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    /// The Redis settings of `backend = "redis"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis: Option<RedisConfig>,
    /// The policies, in evaluation order (as in [`PoliciesConfig`]).
    pub policies: Vec<PolicyConfig>,
}

impl Config {
    /// Builds the set on the backend the file names, finding each keyed policy's extractor in
    /// `keys`. Code that uses the result switches backends when the file does.
    ///
    /// # Errors
    /// A [`ConfigError`] for the first mistake: anything [`PoliciesConfig::build`] reports, an
    /// unknown backend, a Redis backend without its table, or a Redis setting that is invalid
    /// (field `redis.…`). Building in Redis needs a tokio runtime, as `build_redis` does.
    pub fn build<R: ?Sized + 'static, C: Clock + Clone + Send + Sync + 'static>(
        &self,
        keys: &KeyExtractors<R>,
        clock: C,
    ) -> Result<AnyPolicies<R, C>, ConfigError> {
        let file = PoliciesConfig {
            policies: self.policies.clone(),
            ..PoliciesConfig::default()
        };
        let builder = file.builder(keys, clock)?;
        match self.backend.as_deref() {
            None | Some("in_process") => {
                let set = builder.build().map_err(|e| file.blame(e))?;
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
                set.map(AnyPolicies::from)
                    .map_err(|error| blame(&file, error))
            }
            Some(other) => Err(ConfigError::setting(
                "backend",
                format!("{other:?}: expected \"in_process\" or \"redis\""),
            )),
        }
    }

    /// [`build`](Self::build), then, for a set in Redis whose table does not say
    /// `check_at_start = false`, [`AnyPolicies::ready`]: what a service calls at start-up, so
    /// that a wrong URL or a Redis that is down stops it with an error instead of a limiter
    /// that decides every request by its failure policy.
    ///
    /// # Errors
    /// As [`build`](Self::build), and, when Redis does not answer, an error on `redis.url`
    /// naming the server and why.
    pub async fn connect<R: ?Sized + 'static, C: Clock + Clone + Send + Sync + 'static>(
        &self,
        keys: &KeyExtractors<R>,
        clock: C,
    ) -> Result<AnyPolicies<R, C>, ConfigError> {
        let set = self.build(keys, clock)?;
        if self
            .redis
            .as_ref()
            .is_some_and(|r| r.check_at_start != Some(false))
        {
            let ready = set.ready().await;
            ready.map_err(|error| ConfigError::setting("redis.url", error.to_string()))?;
        }
        Ok(set)
    }
}

/// Where and how a set decided in Redis keeps its buckets, as written in a configuration file
/// (the fields of [`RedisBackend`]).
///
/// ```toml
/// backend = "redis"
///
/// [redis]
/// url = "redis://127.0.0.1:6379/"
/// # cluster = ["redis://127.0.0.1:6380/"]  # a Redis Cluster: more seed nodes (feature `cluster`)
/// prefix = "api"
/// timeout = "20ms"
/// on_failure = "local"    # or "open" (the default), or "closed"
/// local_share = 0.25      # with "local": each process's share of every quota
/// # retry_after = "1s"    # with "closed": the Retry-After of those refusals
/// # lease = [10, "100ms"] # cells per lease and a lease's lifetime
/// breaker = [3, "100ms"]  # open after 3 failures in a row, probe every 100 ms (the
///                         # default); `false` for no breaker
/// check_at_start = true   # Config::connect fails if Redis does not answer (the default)
/// shield = 4096           # buckets Redis refused, refused here until they conform (the
///                         # default; 0 for none)
/// ```
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisConfig {
    /// The server, as `redis::Client::open` takes it.
    pub url: String,
    /// More seed nodes of a Redis Cluster (`["redis://10.0.0.2:6379/"]`, or `[]`): with it, the
    /// set decides in the cluster that `url` and these belong to (feature `cluster`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<Vec<String>>,
    /// The prefix of every key ("flowgate" if absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// The longest a decision waits for Redis, as a duration ("50ms" if absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(deserialize_with = "checked::<_, DURATION>")]
    pub timeout: Option<String>,
    /// What to decide when Redis does not answer: `"open"` (the default), `"closed"` or
    /// `"local"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(deserialize_with = "checked::<_, ON_FAILURE>")]
    pub on_failure: Option<String>,
    /// With `on_failure = "closed"`: the retry-after of those refusals ("1s" if absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(deserialize_with = "checked::<_, DURATION>")]
    pub retry_after: Option<String>,
    /// With `on_failure = "local"`: the share of every quota each process keeps, in `(0, 1]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(deserialize_with = "share")]
    pub local_share: Option<f64>,
    /// Cells per lease and a lease's lifetime (`[10, "100ms"]`); no leases if absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<(u32, String)>,
    /// The circuit breaker: failures in a row that open it and its cool-down
    /// (`[3, "100ms"]`), or `false` for none; the default breaker if absent (or `true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub breaker: Option<BreakerConfig>,
    /// The most buckets the hot-key shield holds (4096 if absent; 0 for none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shield: Option<usize>,
    /// Whether [`Config::connect`] fails when Redis does not answer at start-up (`true` if
    /// absent); `false` starts anyway, deciding by the failure policy until Redis answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_at_start: Option<bool>,
}

/// What a checked setting holds.
const DURATION: u8 = 0;
const ON_FAILURE: u8 = 1;

/// A setting of kind `K` checked as it is read, so that the format's parser reports a bad one
/// at its line and column (as flowgate checks the policies' values).
fn checked<'de, D: Deserializer<'de>, const K: u8>(d: D) -> Result<Option<String>, D::Error> {
    let text = Option::<String>::deserialize(d)?;
    if let Some(text) = &text {
        let fine = match K {
            DURATION => flowgate::quota::parse_duration(text).map_err(|e| e.to_string()),
            _ => on_failure(text).map(|_| 0),
        };
        fine.map_err(|e| serde::de::Error::custom(format!("{text:?}: {e}")))?;
    }
    Ok(text)
}

/// An `on_failure` value's name, if it is one.
fn on_failure(text: &str) -> Result<&str, String> {
    match text {
        "open" | "closed" | "local" => Ok(text),
        _ => Err("expected \"open\", \"closed\" or \"local\"".into()),
    }
}

/// A `local_share`, checked as it is read: in `(0, 1]`.
fn share<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    let share = Option::<f64>::deserialize(d)?;
    if let Some(share) = share.filter(|s| !(*s > 0.0 && *s <= 1.0)) {
        let message = RedisConfigError::Share(share).to_string();
        return Err(serde::de::Error::custom(message));
    }
    Ok(share)
}

/// The `breaker` setting of a [`RedisConfig`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum BreakerConfig {
    /// `true`: the default breaker; `false`: none.
    Enabled(bool),
    /// Consecutive failures that open it, and its cool-down as a duration (`[3, "100ms"]`).
    Settings(u32, String),
}

/// A Redis build's error, pointed at its policy or at the `[redis]` setting that caused it.
fn blame(file: &PoliciesConfig, error: RedisConfigError) -> ConfigError {
    let at = |policy: &str, field: String| ConfigError {
        policy: Some(format!("'{policy}'")),
        field,
        message: error.to_string(),
    };
    let field = match &error {
        RedisConfigError::Policy(e) => return file.blame(e.clone()),
        RedisConfigError::BadName {
            what: "policy",
            name,
        } => return at(name, "name".into()),
        RedisConfigError::WindowTooLong { policy, quota }
        | RedisConfigError::InitialNotFull { policy, quota } => {
            return at(policy, format!("quotas[{quota}]"))
        }
        RedisConfigError::ShareTooSmall { policy, .. } => return at(policy, "quotas".into()),
        RedisConfigError::BadName { what: "prefix", .. } => "redis.prefix",
        RedisConfigError::Share(_) => "redis.local_share",
        RedisConfigError::LocalLog => "redis.on_failure",
        RedisConfigError::Lease => "redis.lease",
        RedisConfigError::Timeout => "redis.timeout",
        RedisConfigError::Breaker => "redis.breaker",
        RedisConfigError::Client(_) | RedisConfigError::Unreachable { .. } => "redis.url",
        _ => "redis",
    };
    ConfigError::setting(field, error.to_string())
}

/// The backend a `[redis]` table describes.
fn redis_backend(config: &RedisConfig) -> Result<RedisBackend, ConfigError> {
    use core::time::Duration;

    use flowgate::quota::parse_duration;

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
    if let Some(buckets) = config.shield {
        backend = backend.shield(buckets);
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
fn cluster(url: &str, more: &[String]) -> Result<RedisBackend, ConfigError> {
    #[cfg(feature = "cluster")]
    {
        let seeds = core::iter::once(url).chain(more.iter().map(String::as_str));
        RedisBackend::cluster(seeds)
            .map_err(|e| ConfigError::setting("redis.cluster", e.to_string()))
    }
    #[cfg(not(feature = "cluster"))]
    {
        let _ = (url, more);
        Err(ConfigError::setting(
            "redis.cluster",
            "a Redis Cluster needs the `cluster` feature",
        ))
    }
}
