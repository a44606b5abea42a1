//! Distributed limits for flowgate in Redis: the same policy sets as in process,
//! decided by one server-side script per decision, for services that run on many hosts.
//!
//! ```no_run
//! use flowgate_redis::BuildRedis as _;
//! use flowgate::policy::{Policies, Policy};
//! use flowgate_redis::RedisBackend;
//! use flowgate::Quota;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = redis::Client::open("redis://127.0.0.1:6379/")?;
//! let limiter = Policies::<str>::builder()
//!     .policy(
//!         Policy::keyed("user", |user: &str| user)
//!             .quotas([Quota::per_second(20)?, Quota::per_hour(5_000)?]),
//!     )
//!     .build_redis(RedisBackend::new(client).prefix("api"))?;
//! let verdict = limiter.check("alice").await?;
//! match verdict.outcome() {
//!     Ok(allowed) => println!("go ahead, {} left", allowed.remaining()),
//!     Err(refused) => println!("429, retry after {:?}", refused.retry_after()),
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # One description, two backends
//! A [`Policies`] set and a [`RedisLimiter`] are built from the same [`Policy`] values by the
//! same builder ([`PoliciesBuilder::build`] or [`BuildRedis::build_redis`]): the same
//! names, key extractors, quotas, dry runs, jitter and order, and the same outcomes
//! ([`Allowed`] and [`Refused`] naming their policy and quota, [`InsufficientCapacity`]). In
//! Redis a key extractor writes the key's bytes instead of hashing them (see [`Key`]), so that
//! every process finds the same buckets. Every one-word algorithm runs in Redis: GCRA, the
//! leaky bucket (meter and shaper: a shaper's admissions carry their delay), credit, the
//! interval refill, the fixed window and the sliding window counter. The script decides and
//! writes; every reported number (gauges, delays, waits, the next cell) is the in-process
//! algorithm's own answer on the state the script left, so the two cannot drift apart in what
//! they report.
//!
//! # One round trip, all or nothing
//! A decision takes `n` cells from every quota of every policy that applies, or from none, in
//! one call of one Lua script (`EVALSHA`; the source is sent again only after `NOSCRIPT`, when
//! the server restarted or its scripts were flushed). A dry-run policy takes its cells only if
//! all its quotas admit, never refuses, and is reported ([`Allowed::dry_run`]) as in process.
//! The script:
//! * keeps each bucket as GCRA's theoretical arrival time in integer microseconds (exact in
//!   Lua's doubles: every value stays below 2^53);
//! * reads the server's clock (`TIME`), so hosts with skewed clocks agree;
//! * clamps a schedule booked further ahead than one window (the server's clock stepped back),
//!   as in-process;
//! * validates what it reads: a value that is not a schedule, or a key of another type, is
//!   counted ([`RedisStats::repaired`]), taken as fully booked (never admitting more) and
//!   rewritten;
//! * keeps each key until its bucket would be full again, on a 10 ms grid: the expiry is set
//!   (`PX`) two grid cells past the cell the schedule ends in, and left alone (the schedule
//!   moved with `INCRBY`, which keeps it) while the schedule stays in that cell. A busy key's
//!   TTL is rewritten once per 10 ms of schedule, not on every call; an idle key costs nothing
//!   20 ms after its bucket is full at the latest. Needs Redis 6.0 or later (tested on 7.0).
//!
//! The common call (one bucket, no lease) is answered with one integer rather than a table:
//! per call, the server's side costs about what a common token-bucket script costs (one that
//! keeps tokens and a timestamp with HGET/HSET, trusts the client's clock and never expires its
//! keys; `benches/article.lua`, compared in BENCHMARKS.md, "Redis").
//!
//! Quotas run in whole microseconds: each emission interval or window length is rounded **up**
//! to a whole µs (never a faster rate than asked for), a shaper's delay or credit's debt
//! **down** (never a longer queue), and leads must stay below [`MAX_WINDOW_MICROS`];
//! [`RedisLimiter::algorithms`] gives the algorithms as Redis runs them. The answers are those
//! of the in-process set with the rounded quotas,
//! exactly: `integration/tests/redis.rs` runs one sequence of requests through both and requires
//! the same
//! decisions.
//!
//! # Keys and hash tags
//! A limiter with a single keyed policy tags each key on its own (`{prefix:key}:policy:quota`).
//! On one server, a limiter with a global policy or several policies puts every bucket in one
//! slot (`{prefix}:policy:quota:key`): one call per decision. Limiters that share a prefix and
//! a policy name share buckets: give each limit its own.
//!
//! # Taking up to n
//! [`RedisLimiter::check_up_to`] takes as many cells as the tightest enforcing quota holds, up
//! to `n`, and says how many, with [`Policies::check_up_to`]'s semantics (dry runs do not limit
//! the count, `n` may exceed every burst): on one server the script counts and takes in the same
//! call, so racing takers never take more than a bucket holds (`integration/tests/redis_up_to.rs`
//! checks it
//! decision for decision against the in-process set). It takes no lease.
//!
//! # Redis Cluster
//! With the feature `cluster`, `RedisBackend::cluster` decides in a Redis Cluster.
//! `MOVED` and `ASK` are followed (and `TRYAGAIN`, `CLUSTERDOWN`, `READONLY` waited out), but
//! a call that timed out or lost its connection is never sent again. Each policy's buckets
//! carry a tag of their own (`{prefix:policy:key}:quota`, `{prefix:policy}:quota` for a global
//! one), so per-user buckets spread over the masters. A decision over policies in different
//! slots takes its cells slot by slot and, if a later slot refuses, puts the earlier buckets
//! back exactly, unless another decision changed them in between (then they keep the cells:
//! fewer admissions, never more). A slot that fails after an earlier one took costs at most
//! the decision's cells, never an admission more. `integration/tests/redis_cluster.rs` runs all of
//! it on
//! a real 3-master cluster with replicas: agreement with one server, a slot moved under load,
//! a master killed and failed over.
//!
//! What differs from one server: a decision across slots takes one round trip per slot (a
//! refusal's HTTP quota headers one more per other slot, to look), takes no lease, and when
//! refused names the first refusing policy in the set's order (one server reports the refusal
//! with the longest wait); one circuit breaker covers the whole cluster;
//! `check_up_to` counts on each slot first (one more round trip per policy), then takes the
//! count across the slots, counting again (4 counts at most, then one cell) if another
//! decision took cells in between.
//!
//! # When Redis does not answer
//! Every decision has one deadline ([`RedisBackend::timeout`], 50 ms unless set), shared by
//! everything it waits for. A call that timed out or failed on the connection is **never sent
//! again**: it may have run, and a replay would take its cells twice. Meanwhile each decision
//! follows the limiter's [`OnFailure`] policy (admit, refuse, or decide with a local limiter
//! holding a share of each quota), and every such event is counted in [`RedisStats`]. Nothing
//! panics.
//!
//! A circuit breaker ([`Breaker`], on unless set off) keeps an outage from costing every
//! decision a timeout: after a few consecutive failures the limiter decides by the failure
//! policy at once, until a probe finds Redis answering again ([`RedisLimiter::breaker_state`]).
//!
//! # Leases: a local fast path
//! With [`RedisBackend::lease`], a decision that finds no cells in its local lease takes up to
//! `cells` cells from Redis in one call (never more than every bucket holds) and spends the rest
//! from a local atomic word, without a round trip, until they run out or the lease expires.
//! Unused cells go back to Redis before the next lease for the same buckets, or with
//! [`RedisLimiter::return_leases`], only while the buckets hold what the lease wrote (after
//! another decision on top, they stay booked: [`RedisStats::dropped_cells`]). The price is
//! precision: in any window, all processes together admit at most what Redis alone would admit
//! in it plus the cells outstanding in leases when it began (one per process and key set).
//!
//! # Minimum Rust version
//! The `redis` crate needs Rust 1.88, so this feature does too (the rest of flowgate: 1.81).

mod any;
#[cfg(feature = "serde")]
mod config;
mod connection;
mod failure;
mod limiter;
mod log;
mod script;
mod settings;
mod stats;

/// A way in to the reply check, for the fuzz targets (`fuzz/`; only under `--cfg fuzzing`).
#[cfg(fuzzing)]
#[doc(hidden)]
pub mod fuzzing;

pub use any::{AnyPolicies, BackendKind, BuildError, BuildRedis};
#[cfg(feature = "serde")]
pub use config::{BreakerConfig, Config, RedisConfig};
pub use failure::BreakerState;
pub use flowgate::backend::{Failure, Source, Verdict};
pub use limiter::{RedisLimiter, MAX_LEASE_CELLS};
pub use log::RedisSlidingLog;
pub use script::MAX_WINDOW_MICROS;
pub use settings::{Breaker, OnFailure, RedisBackend, RedisConfigError};
pub use stats::RedisStats;

#[cfg(doc)]
use flowgate::outcome::{Allowed, InsufficientCapacity};
#[cfg(doc)]
use flowgate::policy::{Key, Policies, PoliciesBuilder, Policy};
#[cfg(doc)]
use flowgate::Refused;
