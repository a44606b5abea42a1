//! [`RedisConfig`]: the `[redis]` table of a configuration file whose set decides in Redis.

use serde::{Deserialize, Serialize};

/// Where and how a set decided in Redis keeps its buckets, as written in a configuration file
/// (the fields of `flowgate::redis::RedisBackend`).
///
/// ```toml
/// backend = "redis"
///
/// [redis]
/// url = "redis://127.0.0.1:6379/"
/// # cluster = ["redis://127.0.0.1:6380/"]  # a Redis Cluster: more seed nodes (`redis-cluster`)
/// prefix = "api"
/// timeout = "20ms"
/// on_failure = "local"    # or "open" (the default), or "closed"
/// local_share = 0.25      # with "local": each process's share of every quota
/// # retry_after = "1s"    # with "closed": the Retry-After of those refusals
/// # lease = [10, "100ms"] # cells per lease and a lease's lifetime
/// breaker = [3, "100ms"]  # open after 3 consecutive failures, probe every 100 ms (the
///                         # default); `false` for no breaker
/// ```
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisConfig {
    /// The server, as `redis::Client::open` takes it.
    pub url: String,
    /// More seed nodes of a Redis Cluster (`["redis://10.0.0.2:6379/"]`, or `[]`): with it, the
    /// set decides in the cluster that `url` and these belong to (feature `redis-cluster`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<Vec<String>>,
    /// The prefix of every key ("flowgate" if absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// The longest a decision waits for Redis, as a duration ("50ms" if absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// What to decide when Redis does not answer: `"open"` (the default), `"closed"` or
    /// `"local"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_failure: Option<String>,
    /// With `on_failure = "closed"`: the retry-after of those refusals ("1s" if absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<String>,
    /// With `on_failure = "local"`: the share of every quota each process keeps, in `(0, 1]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_share: Option<f64>,
    /// Cells per lease and a lease's lifetime (`[10, "100ms"]`); no leases if absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<(u32, String)>,
    /// The circuit breaker: consecutive failures that open it and its cool-down
    /// (`[3, "100ms"]`), or `false` for none; the default breaker if absent (or `true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub breaker: Option<BreakerConfig>,
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
