//! Everything a user sets to decide in Redis, checked before anything connects: where the
//! buckets are and how a decision reaches them ([`RedisBackend`]), what to decide when Redis does
//! not answer ([`OnFailure`]), and when to stop asking ([`Breaker`]).

use core::fmt;
use core::time::Duration;

use crate::error::{check_part, RedisConfigError};

/// Where a limiter's buckets are.
#[derive(Debug, Clone)]
pub(crate) enum Server {
    /// One server (a primary, perhaps behind Sentinel).
    One(::redis::Client),
    /// A Redis Cluster, from its seed nodes.
    #[cfg(feature = "cluster")]
    Cluster(Vec<::redis::ConnectionInfo>),
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
    pub(crate) server: Server,
    pub(crate) prefix: String,
    pub(crate) timeout: Duration,
    pub(crate) on_failure: OnFailure,
    pub(crate) lease: Option<(u32, Duration)>,
    pub(crate) max_leases: usize,
    pub(crate) shield: usize,
    pub(crate) client_time: bool,
    pub(crate) breaker: Breaker,
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
    /// circuit breaker ([`Breaker::default`]: open after 3 failures in a row, probe every
    /// 100 ms), with a hot-key shield of 4096 buckets.
    ///
    /// [`redis::Client::open`]: https://docs.rs/redis/1/redis/struct.Client.html#method.open
    pub fn new(client: ::redis::Client) -> Self {
        Self::on(Server::One(client))
    }

    /// Buckets in the Redis Cluster that `nodes` (some of its nodes' URLs) belong to, with the
    /// defaults of [`new`](Self::new) (feature `cluster`; see the
    /// [crate docs](crate#redis-cluster)).
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
            shield: 4096,
            client_time: false,
            breaker: Breaker::default(),
        }
    }

    /// Checks the prefix (it can be part of a key), the timeout and the breaker.
    pub(crate) fn check(&self) -> Result<(), RedisConfigError> {
        check_part(&self.prefix, "prefix")?;
        if self.timeout.is_zero() {
            return Err(RedisConfigError::Timeout);
        }
        let Breaker {
            failures,
            cool_down,
        } = self.breaker;
        if !self.breaker.is_off() && (failures == 0 || cool_down.is_zero()) {
            return Err(RedisConfigError::Breaker);
        }
        Ok(())
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

    /// What to decide when Redis does not answer ([`OnFailure::Open`] unless set: every such
    /// request is admitted, and the set's start-up log says so). Measured with the defaults
    /// (`cargo bench -p flowgate-benches --bench redis_defaults`): two instances of an axum
    /// service at twice the quota, both CPUs kept busy by spinning threads or a parallel build,
    /// made no decision by the failure policy and admitted less than the bound. A runtime
    /// starved for longer than the timeout admits by this policy instead: choose
    /// [`OnFailure::Local`] or [`OnFailure::Closed`] where the limit must hold then.
    pub fn on_failure(mut self, on_failure: OnFailure) -> Self {
        self.on_failure = on_failure;
        self
    }

    /// Leases up to `cells` cells per call (no more than the smallest burst of the decision)
    /// and spends them locally for at most `lifetime` (see the
    /// [crate docs](crate#leases-a-local-fast-path)).
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

    /// The most buckets the hot-key shield holds (4096 unless set; 0 for none): a bucket Redis
    /// refused is refused in this process, without a call, until it can conform (a second at
    /// most), for requests of as many cells or more. Off in a set with leases or decisions
    /// across cluster slots (see the [crate docs](crate#the-hot-key-shield)).
    pub fn shield(mut self, buckets: usize) -> Self {
        self.shield = buckets;
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

/// What a [`RedisLimiter`](crate::RedisLimiter) decides when Redis does not answer in time or
/// at all.
///
/// There is no good answer, only a choice of what to lose. Failing open keeps the service up
/// and lets the limit go; failing closed keeps the limit and takes the service down with
/// Redis; a local limit keeps both, approximately: each process enforces `share` of every
/// quota on its own, so with `share = 1 / processes` the total stays near the limit as long as
/// the load is spread evenly.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[non_exhaustive]
pub enum OnFailure {
    #[default]
    /// Admit the request (the default, as most limiters do: a limiter should not turn a Redis
    /// outage into an outage of the service it protects).
    Open,
    /// Refuse the request, telling the client to retry after `retry_after`.
    Closed {
        /// The retry-after of such refusals.
        retry_after: Duration,
    },
    /// Decide with an in-process limiter holding the same levels, each quota scaled to `share`
    /// of its rate and burst (at least one cell). Its buckets are this process's alone and
    /// start full; they do not carry over into Redis when it answers again.
    Local {
        /// The fraction of each quota this process may use, in `(0, 1]`.
        share: f64,
    },
}

/// When a [`RedisLimiter`](crate::RedisLimiter) stops calling Redis, and for how long: its
/// circuit breaker. Give it to [`RedisBackend::breaker`](RedisBackend::breaker).
///
/// After `failures` failed calls with no success between them (timeouts, lost connections,
/// error replies) the limiter stops calling Redis and decides by its failure policy at once, for `cool_down`.
/// Then one `PING`, sent by a task of its own so that no decision waits for it, asks whether
/// Redis answers again: if it does, calls go through again; if not, another cool-down starts.
/// With a breaker the connection manager tries each reconnection once, without sleeping: the
/// cool-down is the backoff.
///
/// The default opens after 3 failures and probes every 100 ms (`integration/tests/redis_outage.rs`
/// measures an outage through a `kill -9` and a restart).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Breaker {
    /// Consecutive failures that open it; 0 for no breaker.
    failures: u32,
    cool_down: Duration,
}

impl Default for Breaker {
    fn default() -> Self {
        Self::new(3, Duration::from_millis(100))
    }
}

impl Breaker {
    /// A breaker that opens after `failures` failed calls in a row and stays open for
    /// `cool_down` before each probe. A cool-down too long to add to the clock keeps the
    /// breaker open for as long as the clock runs (about 146 years).
    ///
    /// A breaker with no failure or no cool-down is refused when a set is built
    /// ([`RedisConfigError::Breaker`]): [`Breaker::off`] is the way to have none.
    pub const fn new(failures: u32, cool_down: Duration) -> Self {
        Self {
            failures,
            cool_down,
        }
    }

    /// No breaker: every decision calls Redis and waits for its answer or the timeout, and
    /// the connection manager reconnects with its own backoff (up to 1 s between attempts).
    pub const fn off() -> Self {
        Self {
            failures: 0,
            cool_down: Duration::ZERO,
        }
    }

    /// Whether this is [`Breaker::off`].
    pub const fn is_off(&self) -> bool {
        self.failures == 0 && self.cool_down.is_zero()
    }

    /// The failures in a row that open it.
    pub const fn failures(&self) -> u32 {
        self.failures
    }

    /// How long it stays open before a probe.
    pub const fn cool_down(&self) -> Duration {
        self.cool_down
    }
}
