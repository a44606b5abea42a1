//! [`RedisBackend`]: where and how a policy set decided in Redis keeps its buckets, and
//! [`BuildRedis::build_redis`](crate::BuildRedis::build_redis), which checks the set and those settings in full before
//! anything connects; [`RedisConfigError`], what can be wrong with them.

use core::fmt;
use core::time::Duration;
use std::sync::Arc;

use crate::metrics::RedisMetrics;
use flowgate::clock::Clock;
use flowgate::policy::{PoliciesBuilder, PolicyError};
use flowgate::quota::QuotaError;

use super::breaker::{Breaker, Circuit};
use super::connection::Server;
use super::lease::{Leases, MAX_LEASE_CELLS};
use super::local::local_limiter;
use super::plan::{check_part, Prepared, Tag};
use super::script::Script;
use super::stats::Counters;
use super::{AnyPolicies, BackendKind, BuildError};
use super::{OnFailure, RedisLimiter, Shared};

/// Why a policy set could not be built in Redis.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum RedisConfigError {
    /// The set is invalid on any backend (no policy, a policy without quotas, two policies
    /// with one name, …).
    Policy(PolicyError),
    /// The prefix or a policy name is empty or holds `:`, `{` or `}` (which would make keys
    /// ambiguous or break the hash tag).
    BadName {
        /// What was named: "prefix" or "policy".
        what: &'static str,
        /// The name.
        name: String,
    },
    /// A quota's lead (window and slack) exceeds [`MAX_WINDOW_MICROS`](super::MAX_WINDOW_MICROS),
    /// or a sliding window lasts 2^53 ns (104 days) or more.
    WindowTooLong {
        /// The policy.
        policy: String,
        /// The quota's index in the policy.
        quota: usize,
    },
    /// A quota starts its buckets less than full ([`Quota::with_initial`](flowgate::Quota::with_initial)): in Redis a missing
    /// key is a full bucket.
    InitialNotFull {
        /// The policy.
        policy: String,
        /// The quota's index in the policy.
        quota: usize,
    },
    /// [`OnFailure::Local`]'s share is not in `(0, 1]`.
    Share(f64),
    /// A quota scaled to [`OnFailure::Local`]'s share is no valid quota (a share so small that
    /// its interval overflows, for one).
    ShareTooSmall {
        /// The policy.
        policy: String,
        /// The quota as written (`"5/min"`).
        quota: String,
        /// The share.
        share: f64,
        /// What is wrong with the scaled quota.
        error: QuotaError,
    },
    /// The lease is empty, larger than [`MAX_LEASE_CELLS`], or its lifetime is zero.
    Lease,
    /// A sliding log's quota cannot run in Redis (see
    /// [`RedisSlidingLog`](super::RedisSlidingLog)).
    Quota(QuotaError),
    /// A sliding log keeps no local share: [`OnFailure::Local`] is not offered for one.
    LocalLog,
    /// The timeout is zero.
    Timeout,
    /// A circuit breaker that opens after no failure or stays open for no time (use
    /// [`Breaker::off`](super::Breaker::off) for none).
    Breaker,
    /// The set was built outside a tokio runtime (the connection manager needs one).
    NoRuntime,
    /// The `redis` crate refused the client's configuration.
    Client(String),
}

impl fmt::Display for RedisConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Policy(error) => error.fmt(f),
            Self::BadName { what, name } => {
                write!(f, "{what} {name:?} is empty or holds ':', '{{' or '}}'")
            }
            Self::WindowTooLong { policy, quota } => write!(
                f,
                "quota {quota} of policy {policy:?}: the window exceeds 2^51 µs"
            ),
            Self::InitialNotFull { policy, quota } => write!(
                f,
                "quota {quota} of policy {policy:?}: buckets in Redis start full"
            ),
            // `{:?}`: a short float (`1e-300`), where `{}` writes every digit.
            Self::Share(share) => write!(f, "local share {share:?} is not in (0, 1]"),
            Self::ShareTooSmall {
                policy,
                quota,
                share,
                error,
            } => write!(
                f,
                "quota {quota} of policy {policy:?} on a local share of {share:?}: {error}"
            ),
            Self::Lease => f.write_str("a lease needs 1 to 2^24 - 1 cells and a lifetime"),
            Self::Quota(error) => write!(f, "a sliding log in Redis: {error}"),
            Self::LocalLog => f.write_str(
                "a sliding log keeps no local share: fail open or closed when Redis is away",
            ),
            Self::Timeout => f.write_str("the timeout is zero"),
            Self::Breaker => f.write_str(
                "a circuit breaker needs at least one failure and a cool-down (or Breaker::off())",
            ),
            Self::NoRuntime => f.write_str("build a Redis limiter inside a tokio runtime"),
            Self::Client(error) => write!(f, "redis client: {error}"),
        }
    }
}

impl core::error::Error for RedisConfigError {}

impl From<PolicyError> for RedisConfigError {
    fn from(error: PolicyError) -> Self {
        Self::Policy(error)
    }
}

/// Where and how a policy set decided in Redis keeps its buckets: the server, the keys'
/// prefix, the timeout, what to do when Redis does not answer, and leases. Give it to
/// [`BuildRedis::build_redis`](crate::BuildRedis::build_redis).
///
/// ```no_run
/// use core::time::Duration;
/// use flowgate_redis::BuildRedis as _;
/// use flowgate::policy::{Policies, Policy};
/// use flowgate_redis::{OnFailure, RedisBackend};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let backend = RedisBackend::new(redis::Client::open("redis://127.0.0.1/")?)
///     .prefix("api")
///     .timeout(Duration::from_millis(20))
///     .on_failure(OnFailure::Local { share: 0.25 });
/// let limiter = Policies::<str>::builder()
///     .policy(Policy::keyed("user", |user: &str| user).quota("100/min".parse()?))
///     .build_redis(backend)?;
/// # Ok(())
/// # }
/// ```
#[must_use = "a RedisBackend does nothing until a policy set is built on it"]
#[derive(Clone)]
pub struct RedisBackend {
    pub(super) server: Server,
    pub(super) prefix: String,
    pub(super) timeout: Duration,
    pub(super) on_failure: OnFailure,
    lease: Option<(u32, Duration)>,
    max_leases: usize,
    pub(super) client_time: bool,
    pub(super) breaker: Breaker,
}

impl fmt::Debug for RedisBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisBackend")
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .field("on_failure", &self.on_failure)
            .field("lease", &self.lease)
            .field("breaker", &self.breaker)
            .finish_non_exhaustive()
    }
}

impl RedisBackend {
    /// Buckets on `client`'s server (see [`redis::Client::open`]), under the prefix
    /// "flowgate", with a 50 ms timeout, failing open, without leases, behind the default
    /// circuit breaker ([`Breaker::default`]: open after 3 consecutive failures, probe every
    /// 100 ms).
    ///
    /// [`redis::Client::open`]: https://docs.rs/redis/1/redis/struct.Client.html#method.open
    pub fn new(client: ::redis::Client) -> Self {
        Self::on(Server::One(client))
    }

    /// Buckets in the Redis Cluster that `nodes` (some of its nodes' URLs) belong to, with the
    /// defaults of [`new`](Self::new) (feature `cluster`). `MOVED` and `ASK` are
    /// followed; a call that timed out or lost its connection is never sent again. Each
    /// policy's buckets live in a slot of their own, and a decision over policies in
    /// different slots is all or nothing across them (see the
    /// [module docs](crate#redis-cluster)).
    ///
    /// # Errors
    /// [`RedisConfigError::Client`] if a node's URL is not one, there is none, or one is not a
    /// plain TCP address (`redis://`).
    #[cfg(feature = "cluster")]
    pub fn cluster<T: ::redis::IntoConnectionInfo>(
        nodes: impl IntoIterator<Item = T>,
    ) -> Result<Self, RedisConfigError> {
        let seeds = (nodes.into_iter())
            .map(|node| node.into_connection_info())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| RedisConfigError::Client(e.to_string()))?;
        let tcp = |seed: &::redis::ConnectionInfo| {
            matches!(seed.addr(), ::redis::ConnectionAddr::Tcp(..))
        };
        if seeds.is_empty() || !seeds.iter().all(tcp) {
            let what = "a cluster needs at least one node, each a redis:// URL";
            return Err(RedisConfigError::Client(what.to_owned()));
        }
        Ok(Self::on(Server::Cluster(seeds)))
    }

    fn on(server: Server) -> Self {
        Self {
            server,
            prefix: "flowgate".to_owned(),
            timeout: Duration::from_millis(50),
            on_failure: OnFailure::Open,
            lease: None,
            max_leases: 4096,
            client_time: false,
            breaker: Breaker::default(),
        }
    }

    /// Whether the buckets are in a Redis Cluster.
    pub(super) fn is_cluster(&self) -> bool {
        !matches!(self.server, Server::One(_))
    }

    /// The prefix of every key ("flowgate" unless set).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The longest a decision waits for Redis (50 ms unless set): one deadline for connecting,
    /// the call and, with leases, the wait while another task renews the lease.
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

    /// When to stop calling Redis after failures, and for how long ([`Breaker::default`]
    /// unless set; [`Breaker::off`] for none). See [`Breaker`].
    pub fn breaker(mut self, breaker: Breaker) -> Self {
        self.breaker = breaker;
        self
    }

    /// The most leases held at once (4096 unless set); a decision that finds no room goes to
    /// Redis without one.
    pub fn max_leases(mut self, max: usize) -> Self {
        self.max_leases = max;
        self
    }

    /// Decides at the set's clock (in µs) instead of the server's `TIME`: for tests and
    /// simulations with a [`ManualClock`](flowgate::clock::ManualClock), never in production
    /// (hosts' clocks differ, and a process's clock reads the wall clock once, at its start).
    /// Keys still expire in the server's real time.
    pub fn client_time(mut self, client_time: bool) -> Self {
        self.client_time = client_time;
        self
    }
}

/// Building a [`PoliciesBuilder`]'s set in Redis: `use flowgate_redis::BuildRedis`, then
/// `Policies::builder()…build_redis(backend)` where `build()` builds in process.
pub trait BuildRedis<R: ?Sized, C: Clock> {
    /// The policy set, decided in Redis: the same policies (names, keys, quotas, dry runs,
    /// jitter, order) as `build` decides in process, their buckets shared by every process
    /// that uses the same prefix. The set's clock times leases and the local fallback (and,
    /// with [`RedisBackend::client_time`], the decisions). A keyed policy's table settings
    /// ([`Policy::max_keys`](flowgate::Policy::max_keys),
    /// [`Policy::when_full`](flowgate::Policy::when_full)) apply to the local fallback only:
    /// Redis keeps a key until its buckets are full again.
    ///
    /// It connects lazily: a set built while Redis is down decides by its failure policy until
    /// Redis answers.
    ///
    /// # Errors
    /// A [`RedisConfigError`] naming what is wrong: the set itself
    /// ([`RedisConfigError::Policy`], as `build` would say), or what Redis cannot run.
    fn build_redis(self, backend: RedisBackend) -> Result<RedisLimiter<R, C>, RedisConfigError>;

    /// The policy set on `backend`: `build` for [`BackendKind::InProcess`],
    /// [`build_redis`](Self::build_redis) for [`BackendKind::Redis`].
    ///
    /// # Errors
    /// [`BuildError::Policy`] for a set that is invalid anywhere; [`BuildError::Redis`] for
    /// what Redis cannot run.
    fn build_on(self, backend: BackendKind) -> Result<AnyPolicies<R, C>, BuildError>;
}

impl<R, C> BuildRedis<R, C> for PoliciesBuilder<R, C>
where
    R: ?Sized + 'static,
    C: Clock + Clone + Send + Sync + 'static,
{
    fn build_redis(self, backend: RedisBackend) -> Result<RedisLimiter<R, C>, RedisConfigError> {
        check_part(&backend.prefix, "prefix")?;
        if backend.timeout.is_zero() {
            return Err(RedisConfigError::Timeout);
        }
        let (policies, clock) = self.into_policies()?;
        let fallback = match backend.on_failure {
            OnFailure::Local { share } => Some(local_limiter(
                &backend.prefix,
                &policies,
                share,
                clock.clone(),
            )?),
            _ => None,
        };
        // One keyed policy tags each key on its own, so keys spread over a cluster.
        let tag = if policies.len() == 1 && policies[0].settings().1 {
            Tag::Key
        } else if backend.is_cluster() {
            Tag::Policy
        } else {
            Tag::Prefix
        };
        let mut prepared = Vec::with_capacity(policies.len());
        for (index, policy) in policies.into_iter().enumerate() {
            let place = (backend.prefix.as_str(), tag);
            prepared.push(Prepared::new(index, policy, place)?);
        }
        let lease = lease_in_millis(backend.lease)?;
        let metrics = RedisMetrics::new(&backend.prefix);
        let (connection, circuit) = Circuit::connect(&backend, &metrics)?;
        Ok(RedisLimiter {
            shared: Arc::new(Shared {
                connection,
                circuit,
                script: Script::new(),
                prefix: backend.prefix,
                policies: prepared,
                timeout: backend.timeout,
                on_failure: backend.on_failure,
                fallback,
                lease,
                leases: Leases::new(backend.max_leases.max(1), clock.now()),
                client_time: backend.client_time,
                clock,
                counters: Counters::default(),
                background: Arc::default(),
                metrics,
            }),
        })
    }

    fn build_on(self, backend: BackendKind) -> Result<AnyPolicies<R, C>, BuildError> {
        match backend {
            BackendKind::InProcess => Ok(self.build()?.into()),
            BackendKind::Redis(redis) => Ok(self.build_redis(redis)?.into()),
        }
    }
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
