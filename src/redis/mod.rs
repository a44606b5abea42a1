//! Distributed limits in Redis (cargo feature `redis`): the same GCRA as in-process, decided by
//! one server-side script per decision, for services that run on many hosts.
//!
//! ```no_run
//! use flowgate::redis::{Level, RedisLimiter};
//! use flowgate::Quota;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = redis::Client::open("redis://127.0.0.1:6379/")?;
//! let limiter = RedisLimiter::<str>::builder(client)
//!     .prefix("api")
//!     .level(Level::per_key("user").quotas([Quota::per_second(20)?, Quota::per_hour(5_000)?]))
//!     .build()?;
//! let verdict = limiter.check("alice").await?;
//! match verdict.outcome() {
//!     Ok(allowed) => println!("go ahead, {} left", allowed.remaining()),
//!     Err(refused) => println!("429, retry after {:?}", refused.retry_after()),
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # One round trip, all or nothing
//! A limiter has one or more [`Level`]s (global, or one bucket per key), each with one or more
//! quotas. A decision takes `n` cells from every quota of every level that applies, or from
//! none, in one call of one Lua script (`EVALSHA`; the source is sent again only after
//! `NOSCRIPT`, when the server restarted or its scripts were flushed). The script:
//! * keeps each bucket as GCRA's theoretical arrival time in integer microseconds (exact in
//!   Lua's doubles: every value stays below 2^53);
//! * reads the server's clock (`TIME`), so hosts with skewed clocks agree;
//! * clamps a schedule booked further ahead than one window (the server's clock stepped back),
//!   as in-process;
//! * validates what it reads: a value that is not a schedule, or a key of another type, is
//!   counted ([`RedisStats::repaired`]), taken as fully booked (never admitting more) and
//!   rewritten;
//! * writes each bucket with a `PX` expiry at the moment it would be full again, so an idle
//!   key costs nothing.
//!
//! Quotas run in whole microseconds: each emission interval is rounded **up** to a whole µs
//! (never a faster rate than asked for), and windows must stay below
//! [`MAX_WINDOW_MICROS`](level::MAX_WINDOW_MICROS). The answers are those of the in-process
//! [`Gcra`](crate::Gcra) for the rounded quota, exactly: `tests/redis.rs` runs one sequence
//! of requests through both and requires the same decisions.
//!
//! # Redis Cluster
//! The keys of one decision share a hash tag, so the call is valid on a cluster. A limiter with
//! a single keyed level tags each key on its own (`{prefix:key}`), spreading keys over the
//! cluster; a limiter with a global level or several levels must put every bucket of a
//! decision in one slot, so it tags by prefix (`{prefix}`) and lives on one node. Give
//! unrelated limiters different prefixes.
//!
//! # When Redis does not answer
//! Every call has a timeout ([`RedisBuilder::timeout`], 50 ms unless set). A call that timed
//! out or failed on the connection is **never sent again**: it may have run, and a replay would
//! take its cells twice. The connection manager reconnects in the background. Meanwhile each
//! decision follows the limiter's [`OnFailure`] policy (admit, refuse, or decide with a local
//! limiter holding a share of each quota), and every such event is counted in [`RedisStats`].
//! Nothing panics.
//!
//! # Leases: a local fast path
//! With [`RedisBuilder::lease`], a decision that finds no cells in its local lease takes up to
//! `cells` cells from Redis in one call (never more than every bucket holds) and spends the rest
//! from a local atomic word, without a round trip, until they run out or the lease expires.
//! Unused cells go back to Redis with the next call for the same buckets (the script frees them
//! before deciding), or with [`RedisLimiter::return_leases`]. The price is precision: in any
//! window, all processes together admit at most what Redis alone would admit in it plus the
//! cells outstanding in leases when the window began (one lease per process and key set).
//!
//! # Minimum Rust version
//! The `redis` crate needs Rust 1.88, so this feature does too (the rest of flowgate: 1.75).

mod failure;
mod lease;
pub mod level;
mod script;
mod stats;

use core::fmt;
use core::time::Duration;
use std::sync::Arc;

use ::redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::clock::{Clock, QuantaClock};
use crate::decision::{Allowed, Gauge, InsufficientCapacity, Refused};
use crate::policy::decision::is_tighter;
use crate::policy::{Policies, Policy};
use crate::quota::Quota;

pub use failure::{Failure, OnFailure, Source};
pub use lease::MAX_LEASE_CELLS;
pub use level::Level;
pub use stats::RedisStats;

use lease::Leases;
use level::{bucket_key, check_part, Micros, Tag};
use script::{Call, Reply, Script};
use stats::{add, Counters};

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
    /// A quota's window exceeds [`MAX_WINDOW_MICROS`](level::MAX_WINDOW_MICROS).
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
    /// and spends them locally for at most `lifetime` (see the [module docs](self#leases-a-local-fast-path)).
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
        let mut levels = Vec::with_capacity(self.levels.len());
        for (i, level) in self.levels.iter().enumerate() {
            check_part(&level.name, "level")?;
            if self.levels[..i].iter().any(|l| l.name == level.name) {
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
            levels.push(Prepared {
                name: level.name.clone(),
                key: level.key.clone(),
                quotas,
            });
        }
        let fallback = match self.on_failure {
            OnFailure::Local { share } => Some(local_limiter(&levels, share, self.clock.clone())?),
            _ => None,
        };
        let lease = match self.lease {
            None => None,
            Some((cells, lifetime)) => {
                if cells == 0 || cells > MAX_LEASE_CELLS || lifetime.is_zero() {
                    return Err(RedisConfigError::Lease);
                }
                let millis = u64::try_from(lifetime.as_millis())
                    .unwrap_or(u64::MAX)
                    .max(1);
                Some((cells, millis))
            }
        };
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
                levels,
                timeout: self.timeout,
                on_failure: self.on_failure,
                fallback,
                lease,
                leases: Leases::new(self.max_leases.max(1)),
                client_time: self.client_time,
                clock: self.clock,
                counters: Counters::default(),
            }),
        })
    }
}

/// The in-process limiter of [`OnFailure::Local`]: the same levels, each quota scaled to
/// `share` of its rate (the interval divided by `share`, rounded up) and of its burst (at
/// least one cell).
fn local_limiter<R: ?Sized + 'static, C: Clock + Clone>(
    levels: &[Prepared<R>],
    share: f64,
    clock: C,
) -> Result<Policies<R, C>, RedisConfigError> {
    if !(share > 0.0 && share <= 1.0) {
        return Err(RedisConfigError::Share(share));
    }
    let mut builder = Policies::<R>::builder().clock(clock);
    for level in levels {
        let mut policy = match &level.key {
            None => Policy::global(level.name.clone()),
            Some(key) => {
                let key = Arc::clone(key);
                Policy::keyed_with(level.name.clone(), move |request: &R, k| {
                    match key(request) {
                        Some(key) => {
                            k.add(&key);
                        }
                        None => {
                            k.skip();
                        }
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

/// A level ready to decide: its quotas in µs.
struct Prepared<R: ?Sized> {
    name: String,
    key: Option<level::KeyOf<R>>,
    quotas: Vec<Micros>,
}

struct Shared<R: ?Sized, C: Clock> {
    connection: ConnectionManager,
    script: Script,
    prefix: String,
    tag: Tag,
    levels: Vec<Prepared<R>>,
    timeout: Duration,
    on_failure: OnFailure,
    fallback: Option<Policies<R, C>>,
    /// Cells per lease and a lease's lifetime in ms.
    lease: Option<(u32, u64)>,
    leases: Leases,
    client_time: bool,
    clock: C,
    counters: Counters,
}

/// A rate limiter whose buckets live in Redis, shared by every process that uses the same
/// prefix and levels. Cheap to clone (the clones share one connection and one set of
/// counters). See the [module docs](self).
pub struct RedisLimiter<R: ?Sized = str, C: Clock = QuantaClock> {
    shared: Arc<Shared<R, C>>,
}

impl<R: ?Sized, C: Clock> Clone for RedisLimiter<R, C> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<R: ?Sized, C: Clock> fmt::Debug for RedisLimiter<R, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisLimiter")
            .field("prefix", &self.shared.prefix)
            .field("levels", &self.level_names().collect::<Vec<_>>())
            .field("on_failure", &self.shared.on_failure)
            .finish_non_exhaustive()
    }
}

/// The outcome of one decision, which quota it describes, and where it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    outcome: Result<Allowed, Refused>,
    quota: Option<(usize, usize)>,
    source: Source,
}

impl Verdict {
    /// Admitted (the tightest quota after taking the cells) or refused (the quota that waits
    /// longest, and when to retry): the same types, and for a decision Redis made the same
    /// values, as the in-process limiter's.
    pub fn outcome(&self) -> Result<Allowed, Refused> {
        self.outcome
    }

    /// Whether the request was admitted.
    pub fn is_allowed(&self) -> bool {
        self.outcome.is_ok()
    }

    /// Where the decision came from: Redis, a lease, or the failure policy.
    pub fn source(&self) -> Source {
        self.source
    }

    /// The level and the quota within it that [`outcome`](Self::outcome) describes; `None`
    /// when no level applied (an admission with nothing to report) or Redis did not decide.
    pub fn quota(&self) -> Option<(usize, usize)> {
        self.quota
    }
}

/// The buckets of one decision.
struct Plan {
    keys: Vec<String>,
    /// Each bucket's (interval, window) in µs.
    quotas: Vec<(u64, u64)>,
    /// Each bucket's level and quota index.
    refs: Vec<(usize, usize)>,
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

impl<R: ?Sized, C: Clock> RedisLimiter<R, C> {
    /// Takes one cell from every quota of every level that applies, or nothing.
    ///
    /// # Errors
    /// As [`check_n`](Self::check_n).
    pub async fn check(&self, request: &R) -> Result<Verdict, InsufficientCapacity> {
        self.check_n(request, 1).await
    }

    /// Takes `n` cells from every quota of every level that applies, or nothing. `n = 0`
    /// takes nothing and reports the buckets as they are.
    ///
    /// # Errors
    /// [`InsufficientCapacity`] when `n` exceeds the burst of a quota that applies: the
    /// request can never succeed. Checked before any round trip.
    ///
    /// # Performance
    /// One round trip (one `EVALSHA`), or none when a lease holds the cells. The keys are
    /// formatted into new strings each call.
    pub async fn check_n(&self, request: &R, n: u32) -> Result<Verdict, InsufficientCapacity> {
        let shared = &*self.shared;
        let plan = self.plan(request, n)?;
        add(&shared.counters.decisions, 1);
        let verdict = if plan.keys.is_empty() {
            Verdict {
                outcome: Ok(Allowed::new(Gauge::new(0, 1, u32::MAX, 0))),
                quota: None,
                source: Source::Redis,
            }
        } else {
            match self.lease_size(&plan, n) {
                Some(want) => self.leased(request, &plan, n, want).await,
                None => match self.call(&plan, n, n, 0).await {
                    Ok(reply) => self.verdict(&plan, &reply),
                    Err(failure) => self.fail(request, n, failure),
                },
            }
        };
        let outcome = if verdict.is_allowed() {
            &shared.counters.admitted
        } else {
            &shared.counters.refused
        };
        add(outcome, 1);
        Ok(verdict)
    }

    /// The counters since the limiter was built.
    pub fn stats(&self) -> RedisStats {
        self.shared.counters.snapshot()
    }

    /// The levels' names, in order.
    pub fn level_names(&self) -> impl Iterator<Item = &str> {
        self.shared.levels.iter().map(|l| l.name.as_str())
    }

    /// The quotas of level `level` as Redis enforces them (intervals rounded up to whole µs),
    /// or `None` if there is no such level.
    pub fn quotas(&self, level: usize) -> Option<Vec<Quota>> {
        let level = self.shared.levels.get(level)?;
        Some(level.quotas.iter().map(|m| m.quota).collect())
    }

    /// Gives every lease's unused cells back to Redis (at shutdown, or to hand capacity to
    /// other processes at once) and forgets the leases. Returns the cells given back.
    ///
    /// Cells whose call fails are counted in [`RedisStats::dropped_cells`].
    pub async fn return_leases(&self) -> u64 {
        self.give_back(|_| true).await
    }

    /// Gives back the unused cells of every lease that expired, and forgets those leases (a
    /// lease is otherwise returned by the next decision on its buckets). Returns the cells
    /// given back.
    pub async fn sweep_leases(&self) -> u64 {
        let now = self.now_millis();
        self.give_back(|entry| Leases::expired(entry, now)).await
    }

    async fn give_back(&self, pick: impl FnMut(&lease::Entry) -> bool) -> u64 {
        let counters = &self.shared.counters;
        let mut returned = 0;
        for entry in self.shared.leases.drain(pick) {
            let rest = entry.lease.take_rest();
            if rest == 0 {
                continue;
            }
            let plan = Plan {
                keys: entry.keys.clone(),
                quotas: entry.quotas.clone(),
                refs: Vec::new(),
            };
            match self.call(&plan, 0, 0, rest).await {
                Ok(_) => {
                    add(&counters.returned_cells, u64::from(rest));
                    returned += u64::from(rest);
                }
                Err(_) => add(&counters.dropped_cells, u64::from(rest)),
            }
        }
        returned
    }

    /// The buckets `request` goes to, or the error if `n` exceeds one's burst.
    fn plan(&self, request: &R, n: u32) -> Result<Plan, InsufficientCapacity> {
        let shared = &*self.shared;
        let mut plan = Plan {
            keys: Vec::new(),
            quotas: Vec::new(),
            refs: Vec::new(),
        };
        for (l, level) in shared.levels.iter().enumerate() {
            let key = match &level.key {
                None => None,
                Some(key_of) => match key_of(request) {
                    Some(key) => Some(key),
                    None => continue,
                },
            };
            for (q, micros) in level.quotas.iter().enumerate() {
                InsufficientCapacity::check(n, micros.burst)?;
                let mut out = String::new();
                bucket_key(
                    &mut out,
                    shared.tag,
                    &shared.prefix,
                    &level.name,
                    q,
                    key.as_deref(),
                );
                plan.keys.push(out);
                plan.quotas.push((micros.interval, micros.window));
                plan.refs.push((l, q));
            }
        }
        Ok(plan)
    }

    /// One script call within the timeout, counted.
    async fn call(&self, plan: &Plan, n: u32, want: u32, give: u32) -> Result<Reply, Failure> {
        let shared = &*self.shared;
        let counters = &shared.counters;
        let now = shared
            .client_time
            .then(|| (shared.clock.now() / 1_000).min(script::MAX_NOW_MICROS));
        let call = Call {
            keys: &plan.keys,
            quotas: &plan.quotas,
            now,
            n,
            want,
            give,
        };
        let mut connection = shared.connection.clone();
        let sent = shared.script.call(&mut connection, &call, counters);
        let result = match tokio::time::timeout(shared.timeout, sent).await {
            Ok(result) => result,
            Err(_) => Err(Failure::Timeout),
        };
        match &result {
            Ok(reply) => add(&counters.repaired, u64::from(reply.repaired())),
            Err(Failure::Timeout) => add(&counters.timeouts, 1),
            Err(Failure::Connection) => add(&counters.connection_failures, 1),
            Err(Failure::Reply) => add(&counters.reply_failures, 1),
        }
        result
    }

    /// The verdict of the script's reply.
    fn verdict(&self, plan: &Plan, reply: &Reply) -> Verdict {
        let gauge = |bucket: usize, debt: u64| {
            let (l, q) = plan.refs[bucket];
            let micros = &self.shared.levels[l].quotas[q];
            // debt ≤ 2^53 µs: × 1000 fits in u64.
            let debt = debt.saturating_mul(1_000);
            Gauge::new(debt, micros.interval * 1_000, micros.burst, debt)
        };
        match reply {
            Reply::Admitted { debts, .. } => {
                let mut best: Option<(usize, Gauge)> = None;
                for (bucket, &debt) in debts.iter().enumerate() {
                    let g = gauge(bucket, debt);
                    let tighter = match best {
                        None => true,
                        Some((_, b)) => is_tighter(
                            (g.remaining(), g.reset_after_nanos()),
                            (b.remaining(), b.reset_after_nanos()),
                        ),
                    };
                    if tighter {
                        best = Some((bucket, g));
                    }
                }
                // The plan is not empty, and the reply has one debt per bucket.
                let (bucket, g) = best.unwrap_or((0, Gauge::new(0, 1, u32::MAX, 0)));
                Verdict {
                    outcome: Ok(Allowed::new(g)),
                    quota: plan.refs.get(bucket).copied(),
                    source: Source::Redis,
                }
            }
            &Reply::Refused {
                index, debt, wait, ..
            } => {
                let wait = wait.map_or(u64::MAX, |w| w.saturating_mul(1_000));
                Verdict {
                    outcome: Err(Refused::new(gauge(index, debt), wait)),
                    quota: Some(plan.refs[index]),
                    source: Source::Redis,
                }
            }
        }
    }

    /// The decision of the failure policy.
    fn fail(&self, request: &R, n: u32, failure: Failure) -> Verdict {
        let shared = &*self.shared;
        let counters = &shared.counters;
        match (shared.on_failure, &shared.fallback) {
            (OnFailure::Local { .. }, Some(local)) => {
                add(&counters.local, 1);
                let outcome = match local.check_n(request, n) {
                    Ok(Ok(admitted)) => {
                        let gauge = admitted
                            .tightest()
                            .map_or(Gauge::new(0, 1, u32::MAX, 0), |s| s.gauge());
                        Ok(Allowed::new(gauge))
                    }
                    Ok(Err(rejected)) => Err(Refused::new(
                        rejected.by().gauge(),
                        rejected.retry_after_nanos(),
                    )
                    .because(rejected.cause())),
                    // n fits every quota in Redis but not this process's share of one: never,
                    // locally.
                    Err(oversized) => {
                        let burst = oversized.capacity().burst;
                        Err(Refused::new(
                            Gauge::new(u64::from(burst), 1, burst, 0),
                            u64::MAX,
                        ))
                    }
                };
                Verdict {
                    outcome,
                    quota: None,
                    source: Source::Local(failure),
                }
            }
            (OnFailure::Closed { retry_after }, _) => {
                add(&counters.failed_closed, 1);
                let wait = u64::try_from(retry_after.as_nanos())
                    .unwrap_or(u64::MAX)
                    .max(1);
                Verdict {
                    outcome: Err(Refused::new(Gauge::new(1, 1, 1, 0), wait)),
                    quota: None,
                    source: Source::FailedClosed(failure),
                }
            }
            _ => {
                add(&counters.failed_open, 1);
                Verdict {
                    outcome: Ok(Allowed::new(Gauge::new(0, 1, u32::MAX, 0))),
                    quota: None,
                    source: Source::FailedOpen(failure),
                }
            }
        }
    }

    fn now_millis(&self) -> u64 {
        self.shared.clock.now() / 1_000_000
    }

    /// The cells to lease for a decision of `n`, or `None` to decide without a lease.
    fn lease_size(&self, plan: &Plan, n: u32) -> Option<u32> {
        let (cells, _) = self.shared.lease?;
        let smallest = plan
            .refs
            .iter()
            .map(|&(l, q)| self.shared.levels[l].quotas[q].burst)
            .min()?;
        let want = cells.min(smallest);
        (n >= 1 && n <= want).then_some(want)
    }

    /// A decision through the lease of the plan's buckets.
    async fn leased(&self, request: &R, plan: &Plan, n: u32, want: u32) -> Verdict {
        let shared = &*self.shared;
        let counters = &shared.counters;
        let now = self.now_millis();
        let Some(entry) =
            shared
                .leases
                .entry(&plan.keys, &plan.quotas, now, &counters.dropped_cells)
        else {
            return match self.call(plan, n, n, 0).await {
                Ok(reply) => self.verdict(plan, &reply),
                Err(failure) => self.fail(request, n, failure),
            };
        };
        if let Some(verdict) = self.spend(plan, &entry.lease, n, now) {
            return verdict;
        }
        // One task at a time asks Redis for this lease; the others wait, then spend from it.
        let _renewing = entry.lease.renewing.lock().await;
        let now = self.now_millis();
        if let Some(verdict) = self.spend(plan, &entry.lease, n, now) {
            return verdict;
        }
        let rest = entry.lease.take_rest();
        match self.call(plan, n, want, rest).await {
            Ok(reply) => {
                add(&counters.returned_cells, u64::from(rest));
                if let Reply::Admitted {
                    granted, ref debts, ..
                } = reply
                {
                    add(&counters.leases, 1);
                    add(&counters.leased_cells, u64::from(granted));
                    let verdict = self.verdict(plan, &reply);
                    let bucket = plan
                        .refs
                        .iter()
                        .position(|&r| Some(r) == verdict.quota)
                        .unwrap_or(0);
                    let lifetime = shared.lease.map_or(0, |(_, ms)| ms);
                    entry.lease.fill(
                        granted - n,
                        now.saturating_add(lifetime),
                        debts.get(bucket).copied().unwrap_or(0),
                        bucket,
                    );
                    verdict
                } else {
                    self.verdict(plan, &reply)
                }
            }
            Err(failure) => {
                // The call may have run (given the rest back) or not: the rest is not spent
                // here, so at worst it stays booked in Redis.
                add(&counters.dropped_cells, u64::from(rest));
                self.fail(request, n, failure)
            }
        }
    }

    /// `n` cells from `lease`, if it holds them at `now_ms`.
    fn spend(&self, plan: &Plan, lease: &lease::Lease, n: u32, now_ms: u64) -> Option<Verdict> {
        let (debt, bucket) = lease.spend(n, now_ms)?;
        add(&self.shared.counters.lease_admitted, 1);
        let (l, q) = *plan.refs.get(bucket)?;
        let micros = &self.shared.levels[l].quotas[q];
        let debt = debt.saturating_mul(1_000);
        Some(Verdict {
            outcome: Ok(Allowed::new(Gauge::new(
                debt,
                micros.interval * 1_000,
                micros.burst,
                debt,
            ))),
            quota: Some((l, q)),
            source: Source::Lease,
        })
    }
}
