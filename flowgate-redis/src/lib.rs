#![doc = include_str!("../README.md")]
//!
//! # One description, two backends
//! A [`Policies`] set and a [`RedisLimiter`] are built from the same [`Policy`] values by the
//! same builder ([`PoliciesBuilder::build`] or [`BuildRedis::build_redis`]), and answer with the
//! same outcomes ([`Allowed`] and [`Refused`] naming their policy and quota,
//! [`InsufficientCapacity`]). In Redis a key extractor writes the key's bytes instead of hashing
//! them (see [`Key`]), so that every process finds the same buckets. Quotas run in whole
//! microseconds: an interval or window is rounded **up** (never a faster rate), a shaper's delay
//! or credit's debt **down**, and leads must stay below [`MAX_WINDOW_MICROS`];
//! [`RedisLimiter::algorithms`] gives the algorithms as Redis runs them, and an in-process set of
//! those decides exactly as Redis does (`integration/tests/redis.rs` requires it, decision for
//! decision).
//!
//! # One round trip, all or nothing
//! A decision takes `n` cells from every quota of every policy that applies, or from none, in
//! one call of one Lua script (`EVALSHA`; the source is sent again only after `NOSCRIPT`). A
//! dry-run policy takes its cells only if all its quotas admit, and never refuses. The script
//! reads the server's clock (`TIME`), so hosts with skewed clocks agree; clamps a schedule booked
//! further ahead than one window (the server's clock stepped back), as in process; takes a value
//! it cannot read (or a key of another type) as fully booked, counts it
//! ([`RedisStats::repaired`]) and rewrites it; and keeps each key until its bucket would be full
//! again, on a 10 ms grid (`PX`, rewritten once per 10 ms of schedule, not on every call). Needs
//! Redis 6.0 or later (tested on 7.0). The common call (one bucket, no lease) is answered with
//! one integer: per call, the server's side costs about what a common token-bucket script costs
//! (`scripts/redis-script-cost` runs both with `redis-benchmark`).
//!
//! # Keys and hash tags
//! A limiter with a single keyed policy tags each key on its own (`{prefix:key}:policy:quota`).
//! On one server, a limiter with a global policy or several policies puts every bucket in one
//! slot (`{prefix}:policy:quota:key`): one call per decision. Limiters that share a prefix and
//! a policy name share buckets: give each limit its own.
//!
//! # Redis Cluster
//! With the feature `cluster`, `RedisBackend::cluster` decides in a Redis Cluster, routing
//! each call itself (one connection manager per master). `MOVED` and `ASK` are followed (and
//! `TRYAGAIN`, `CLUSTERDOWN`, `READONLY` waited out), but a call that timed out or lost its
//! connection is never sent again. Each policy's buckets carry a tag of their own
//! (`{prefix:policy:key}:quota`), so per-user buckets spread over the masters.
//!
//! A decision over policies in different slots takes its cells slot by slot, in the policies'
//! order (one round trip each), and when a later slot refuses, puts back in each earlier slot the
//! value its take replaced, only where the key still holds the value written (a decision that
//! came in between keeps what it took: fewer admissions, never more). A slot that fails after an
//! earlier one took is decided by the failure policy and the earlier takes are undone in the
//! background; the failed call may still have run, so a failure costs at most the decision's
//! cells, never an admission more. Such a refusal names the first refusing policy in the set's
//! order (one server names the one with the longest wait), and its headers look at each other
//! slot (a call that takes nothing). A decision across slots takes no lease. Each master has a
//! circuit breaker of its own: a master that hangs stops calls to itself alone, its probe asks
//! it (and refreshes the slot map, so that its slots' calls go to the replica that took over),
//! and keys on the other masters are decided in Redis meanwhile.
//! `integration/tests/redis_cluster.rs` runs all of it on a real 3-master cluster with replicas:
//! agreement with one server, a slot moved under load, a master hung, a master killed and
//! failed over.
//!
//! # When Redis does not answer
//! Every decision has one deadline ([`RedisBackend::timeout`], 50 ms unless set), shared by
//! everything it waits for. A call that timed out or failed on the connection is **never sent
//! again**: it may have run, and a replay would take its cells twice. The decision follows the
//! [`OnFailure`] policy (admit, refuse, or decide with a local share of each quota), its
//! [`Verdict::source`] says so, and it is counted ([`RedisStats`], and the `metrics` feature's
//! `flowgate_redis_*`). A [`Breaker`] (on unless set off) keeps an outage from costing every
//! decision a timeout. Nothing panics.
//!
//! # The hot-key shield
//! A bucket Redis refused is refused in this process, without a call, until the refusal's wait
//! ends or for a second, whichever is sooner, for requests of as many cells or more
//! ([`Source::Shield`]; [`RedisStats::shielded`]): a client that keeps sending after its 429
//! costs Redis about one call per retry interval (or second) per process, not one per request.
//! Nothing is lost to it where cells never come back to a bucket: other processes of the same
//! set only take cells, the wait counts from when the call was sent, and requests for fewer
//! cells still go to Redis. So the shield is off in a set that takes leases (given back) or
//! decides across cluster slots (undone); a process configured otherwise, a reset elsewhere or
//! a server clock stepping forward can make a bucket conform sooner, and then the second bounds
//! what the shield refuses that Redis would admit. A reset in this process forgets its keys. At
//! most [`RedisBackend::shield`] buckets (4096 unless set; 0 for none).
//!
//! # Leases: a local fast path
//! With [`RedisBackend::lease`], a decision that finds no cells in its local lease takes up to
//! `cells` cells from Redis in one call (never more than every bucket holds) and spends the rest
//! locally, without a round trip, until they run out or the lease expires. Unused cells go back
//! to Redis before the next lease for the same buckets, or with
//! [`RedisLimiter::return_leases`], only while the buckets hold what the lease wrote (else they
//! stay booked: [`RedisStats::dropped_cells`]). The price is precision: in any window, all
//! processes together admit at most what Redis alone would admit in it plus the cells
//! outstanding in leases when it began (one lease per process and key set).

mod any;
#[cfg(feature = "serde")]
mod config;
mod connection;
mod error;
mod events;
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

pub use any::{AnyPolicies, BuildRedis};
#[cfg(feature = "serde")]
pub use config::{BreakerConfig, Config, RedisConfig};
pub use error::RedisConfigError;
pub use failure::BreakerState;
pub use flowgate::backend::{Failure, Source, Verdict};
pub use limiter::{RedisLimiter, MAX_LEASE_CELLS};
pub use log::RedisSlidingLog;
pub use script::MAX_WINDOW_MICROS;
pub use settings::{Breaker, OnFailure, RedisBackend};
pub use stats::RedisStats;

#[cfg(doc)]
use flowgate::outcome::{Allowed, InsufficientCapacity};
#[cfg(doc)]
use flowgate::policy::{Key, Policies, PoliciesBuilder, Policy};
#[cfg(doc)]
use flowgate::Refused;

/// `duration` in whole nanoseconds, saturating at `u64::MAX`: exact for what flowgate reports
/// (its waits and resets end at its clock's horizon, `u64::MAX` ns), capped for a configured one.
pub(crate) fn nanos(duration: core::time::Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}
