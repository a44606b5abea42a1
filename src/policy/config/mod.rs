//! Policy sets from configuration files (feature `serde`): [`PoliciesConfig`] reads from TOML,
//! JSON or any serde format, with quotas in the core's string grammar (an algorithm's name may
//! follow a quota: `"20000/day fixed"`; GCRA otherwise). A value that is wrong in itself (a
//! quota, a duration, `when_full`) is refused as it is read, so the format's parser reports it
//! at its line and column; what only the whole set can tell (an unknown key extractor, a
//! repeated name) comes from [`build`](PoliciesConfig::build) as a [`ConfigError`] naming the
//! policy and the field.
//!
//! ```
//! use flowgate::policy::PoliciesConfig;
//!
//! let file = "[[policies]]\nname = \"per-user\"\nquotas = [\"200/10s\", \"5000/1.5h\"]\n";
//! let error = toml::from_str::<PoliciesConfig>(file).unwrap_err().to_string();
//! assert!(error.starts_with("TOML parse error at line 3, column 10"), "{error}");
//! assert!(error.contains("\"5000/1.5h\": invalid quota string at byte 6: expected a whole \
//!                         number, not a fraction"), "{error}");
//! let json = r#"{ "policies": [{ "name": "api", "quotas": ["0/s"] }] }"#;
//! let error = serde_json::from_str::<PoliciesConfig>(json).unwrap_err().to_string();
//! assert!(error.starts_with("\"0/s\": invalid quota: the rate's count is 0"), "{error}");
//! assert!(error.ends_with("at line 1 column 49"), "{error}");
//! ```
//!
//! ```
//! use flowgate::clock::ManualClock;
//! use flowgate::policy::{KeyExtractors, PoliciesConfig};
//!
//! struct Request { user: String, endpoint: String }
//!
//! let config: PoliciesConfig = toml::from_str(r#"
//!     [[policies]]
//!     name = "per-user"
//!     key = "user"
//!     quotas = ["200/10s", "5000/h", "20000/day fixed"]
//!     jitter = ["1ms", "5ms"]
//!
//!     [[policies]]
//!     name = "per-endpoint"
//!     key = "endpoint"
//!     quotas = ["3000/min burst 4000"]
//!     dry_run = true
//!
//!     [[policies]]
//!     name = "server"
//!     quotas = ["100000/10s"]
//! "#)?;
//! let keys = KeyExtractors::new()
//!     .key("user", |r: &Request, k| { k.add(&r.user); })
//!     .key("endpoint", |r: &Request, k| { k.add(&r.endpoint); });
//! let policies = config.build(&keys, ManualClock::new())?;
//! let request = Request { user: "alice".into(), endpoint: "/search".into() };
//! assert!(policies.check(&request).is_ok());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! In JSON (`serde_json::from_str`) the same set is an object with an array:
//!
//! ```json
//! { "policies": [
//!     { "name": "per-user", "key": "user",
//!       "quotas": ["200/10s", "5000/h", "20000/day fixed"], "jitter": ["1ms", "5ms"] },
//!     { "name": "per-endpoint", "key": "endpoint", "quotas": ["3000/min burst 4000"],
//!       "dry_run": true },
//!     { "name": "server", "quotas": ["100000/10s"] }
//! ] }
//! ```

use core::fmt;
use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::builder::PoliciesBuilder;
use super::error::BuildError;
use super::key::Key;
use super::named::Policy;
use super::Policies;
use crate::algorithm::AnyAlgorithm;
use crate::clock::Clock;
use crate::quota::parse_duration;

mod checked;

use checked::{checked_list, checked_option, checked_pair, when_full, DURATION, QUOTA, WHEN_FULL};

/// A policy set as written in a configuration file.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoliciesConfig {
    /// Where the set decides: `"in_process"` (the default), or a remote backend's name
    /// (`"redis"`, with its `[redis]` table, read and built by the `flowgate-redis` crate's
    /// loader); [`build`](Self::build) builds in process only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    /// The policies, in evaluation order.
    pub policies: Vec<PolicyConfig>,
}

/// One policy as written in a configuration file.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    /// The policy's name (reported in refusals).
    pub name: String,
    /// The name of a key extractor registered in [`KeyExtractors`]; absent (or `"global"`) for
    /// a global policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Quotas in the quota grammar, each optionally followed by its algorithm: `"200/10s"`,
    /// `"5000/h"`, `"100/s burst 20"`, `"20000/day fixed"`, `"10/min sliding"` (see
    /// [`AnyAlgorithm`]).
    #[serde(deserialize_with = "checked_list::<_, QUOTA>")]
    pub quotas: Vec<String>,
    /// Dry-run mode: evaluated and counted, never refusing.
    #[serde(default)]
    pub dry_run: bool,
    /// Retry-after jitter, `[min, max]`, as durations: `["1ms", "5ms"]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(deserialize_with = "checked_pair::<_, DURATION>")]
    pub jitter: Option<[String; 2]>,
    /// Keys per table of a keyed policy (65 536 if absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_keys: Option<usize>,
    /// `"refuse"` (the default) or `"admit_untracked"`: what a full keyed table does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(deserialize_with = "checked_option::<_, WHEN_FULL>")]
    pub when_full: Option<String>,
}

/// A key extractor that several policies of a file may name.
type Shared<R> = Arc<dyn Fn(&R, &mut Key<'_>) + Send + Sync>;

/// Key extractors by name, for the `key` field of [`PolicyConfig`] (code can't live in a
/// configuration file).
pub struct KeyExtractors<R: ?Sized> {
    keys: HashMap<String, Shared<R>>,
}

impl<R: ?Sized> KeyExtractors<R> {
    /// No extractors yet.
    pub fn new() -> Self {
        Self {
            keys: HashMap::new(),
        }
    }

    /// Registers `extract` under `name` (see [`Policy::keyed_with`]).
    pub fn key(
        mut self,
        name: impl Into<String>,
        extract: impl Fn(&R, &mut Key<'_>) + Send + Sync + 'static,
    ) -> Self {
        self.keys.insert(name.into(), Arc::new(extract));
        self
    }
}

impl<R: ?Sized> Default for KeyExtractors<R> {
    fn default() -> Self {
        Self::new()
    }
}

impl<R: ?Sized> fmt::Debug for KeyExtractors<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.keys.keys()).finish()
    }
}

/// A mistake in a configuration that only the whole set shows: which policy (by name, or by
/// place if it has none) or which setting of the file, which field, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The policy: `'name'`, or `#i` for the i-th (from 0) if the name is the problem; `None`
    /// for a setting of the whole file (`backend`, `redis.timeout`, `policies`).
    pub policy: Option<String>,
    /// The field: `quotas[1]`, `jitter[0]`, `key`, `name`, `redis.local_share`…
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.policy {
            Some(policy) => write!(f, "policy {policy}, field `{}`: ", self.field)?,
            None => write!(f, "setting `{}`: ", self.field)?,
        }
        f.write_str(&self.message)
    }
}

impl core::error::Error for ConfigError {}

impl ConfigError {
    /// A mistake in a setting of the whole file (`backend`, `redis.…`), not of one policy.
    pub fn setting(field: &str, message: impl Into<String>) -> Self {
        Self {
            policy: None,
            field: field.into(),
            message: message.into(),
        }
    }
}

impl PoliciesConfig {
    /// Builds the set on `clock`, finding each keyed policy's extractor in `keys`.
    ///
    /// # Errors
    /// A [`ConfigError`] for the first mistake: an invalid quota or duration, an unknown key
    /// extractor or `when_full` value, an empty or repeated name, or anything
    /// [`PoliciesBuilder::build`] rejects.
    pub fn build<R: ?Sized + 'static, C: Clock + Clone>(
        &self,
        keys: &KeyExtractors<R>,
        clock: C,
    ) -> Result<Policies<R, C>, ConfigError> {
        match self.backend.as_deref() {
            None | Some("in_process") => {}
            Some(other) => {
                return Err(ConfigError::setting(
                    "backend",
                    format!(
                        "{other:?}: `build` builds in process; a remote backend's crate \
                         builds the set where the file says (flowgate-redis: `Config::build`)"
                    ),
                ))
            }
        }
        self.builder(keys, clock)?
            .build()
            .map_err(|e| self.blame(e))
    }

    /// A builder holding the file's policies, on `clock`, for a backend to build the set on.
    ///
    /// # Errors
    /// As [`build`](Self::build), for what is wrong with a policy as written.
    pub fn builder<R: ?Sized + 'static, C: Clock>(
        &self,
        keys: &KeyExtractors<R>,
        clock: C,
    ) -> Result<PoliciesBuilder<R, C>, ConfigError> {
        let mut builder = PoliciesBuilder::new().clock(clock);
        for (index, policy) in self.policies.iter().enumerate() {
            builder = builder.policy(policy.to_policy(index, keys)?);
        }
        Ok(builder)
    }

    /// Replaces the quotas of every policy in `policies` with this configuration's, keeping
    /// every bucket (see [`Policies::replace`]): a configuration reload. Every quota is
    /// checked before any is replaced, so a bad file changes nothing, and every decision sees
    /// the whole file applied or none of it.
    ///
    /// # Errors
    /// A [`ConfigError`] if a quota is invalid, a policy is not in the set (or the set has one
    /// the file lacks), a policy's number of quotas changed, or a quota's algorithm would read
    /// its buckets differently (another family, or another window length: see
    /// [`AnyAlgorithm::reads_buckets_of`]). Other fields (key, dry run, jitter, table sizes)
    /// are fixed when the set is built and are not compared.
    pub fn apply<R: ?Sized, C: Clock>(&self, policies: &Policies<R, C>) -> Result<(), ConfigError> {
        let mut all = Vec::with_capacity(self.policies.len());
        for (index, policy) in self.policies.iter().enumerate() {
            let quotas = policy.quotas(index)?;
            let current = policies
                .algorithms(&policy.name)
                .map_err(|e| self.blame(e))?;
            if current.len() != quotas.len() {
                return Err(policy.error(
                    index,
                    "quotas",
                    format!(
                        "the policy has {} quotas; a reload must keep their number",
                        current.len()
                    ),
                ));
            }
            if let Some(q) = (0..quotas.len()).find(|&q| !current[q].reads_buckets_of(&quotas[q])) {
                return Err(policy.error(
                    index,
                    format!("quotas[{q}]"),
                    format!(
                        "`{}` cannot take over the buckets of `{}` (another kind of algorithm, or \
                         another window length): it needs a new set",
                        quotas[q], current[q]
                    ),
                ));
            }
            all.push((&policy.name, quotas));
        }
        if let Some(missing) = policies
            .names()
            .find(|name| !self.policies.iter().any(|p| p.name == *name))
        {
            return Err(ConfigError {
                policy: Some(format!("'{missing}'")),
                field: "name".into(),
                message: "the running set has this policy and the configuration does not".into(),
            });
        }
        let all = all
            .iter()
            .map(|(name, quotas)| (name.as_str(), &quotas[..]));
        policies.replace_all(all).map_err(|e| self.blame(e))
    }

    /// A builder's error, pointed at its policy.
    pub fn blame(&self, error: BuildError) -> ConfigError {
        let named = |policy: &str| Some(format!("'{policy}'"));
        let (policy, field) = match &error {
            BuildError::NoPolicies => (None, "policies"),
            BuildError::NoName { index } => (Some(format!("#{index}")), "name"),
            BuildError::DuplicateName { policy } | BuildError::UnknownPolicy { policy } => {
                (named(policy), "name")
            }
            BuildError::NoQuotas { policy }
            | BuildError::QuotaCount { policy, .. }
            | BuildError::Quota { policy, .. }
            | BuildError::Incompatible { policy, .. } => (named(policy), "quotas"),
            BuildError::TooManyQuotas { .. } => (None, "policies"),
            BuildError::Jitter { policy } => (named(policy), "jitter"),
            BuildError::Keyed { policy, .. } => (named(policy), "max_keys"),
        };
        ConfigError {
            policy,
            field: field.into(),
            message: error.to_string(),
        }
    }
}

impl PolicyConfig {
    fn error(&self, index: usize, field: impl Into<String>, message: String) -> ConfigError {
        let policy = Some(if self.name.is_empty() {
            format!("#{index}")
        } else {
            format!("'{}'", self.name)
        });
        ConfigError {
            policy,
            field: field.into(),
            message,
        }
    }

    fn quotas(&self, index: usize) -> Result<Vec<AnyAlgorithm>, ConfigError> {
        self.quotas
            .iter()
            .enumerate()
            .map(|(i, text)| {
                text.parse::<AnyAlgorithm>().map_err(|e| {
                    self.error(index, format!("quotas[{i}]"), format!("{text:?}: {e}"))
                })
            })
            .collect()
    }

    fn to_policy<R: ?Sized + 'static>(
        &self,
        index: usize,
        keys: &KeyExtractors<R>,
    ) -> Result<Policy<R>, ConfigError> {
        let mut policy = match self.key.as_deref() {
            None | Some("global") => Policy::global(self.name.clone()),
            Some(name) => {
                let extract = keys.keys.get(name).cloned().ok_or_else(|| {
                    let mut known: Vec<&str> = keys.keys.keys().map(String::as_str).collect();
                    known.sort_unstable();
                    self.error(
                        index,
                        "key",
                        format!("no key extractor is named {name:?} (known: {known:?})"),
                    )
                })?;
                Policy::keyed_with(self.name.clone(), move |r: &R, k: &mut Key<'_>| {
                    extract(r, k)
                })
            }
        };
        for algorithm in self.quotas(index)? {
            policy = policy.quota_with(algorithm);
        }
        policy = policy.dry_run(self.dry_run);
        if let Some([min, max]) = &self.jitter {
            let duration = |i: usize, text: &String| {
                parse_duration(text)
                    .map(core::time::Duration::from_nanos)
                    .map_err(|e| {
                        self.error(index, format!("jitter[{i}]"), format!("{text:?}: {e}"))
                    })
            };
            policy = policy.jitter(duration(0, min)?, duration(1, max)?);
        }
        if let Some(max_keys) = self.max_keys {
            policy = policy.max_keys(max_keys);
        }
        if let Some(text) = &self.when_full {
            let full = when_full(text).map_err(|e| self.error(index, "when_full", e))?;
            policy = policy.when_full(full);
        }
        Ok(policy)
    }
}
