//! # flowgate
//!
//! Lock-free rate limiting for hot paths. Every bucket is one `AtomicU64` updated with a
//! compare-and-swap loop: no mutex, no allocation and no syscall on the decision path.
//!
//! ```
//! use flowgate::{Quota, RateLimiter};
//!
//! let quota: Quota = "100/s burst 20".parse()?;
//! let limiter = RateLimiter::new(quota);
//!
//! let allowed = limiter.check().expect("a fresh bucket has 20 cells");
//! assert_eq!(allowed.remaining(), 19);
//! assert_eq!(allowed.limit(), 20);
//!
//! // Requests for more than the burst can never succeed: a distinct error, not a refusal.
//! assert!(limiter.check_n(21).is_err());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! New here? The [`guide`] walks through choosing an algorithm, a rate and a burst, keyed
//! limits, policies, waiting, HTTP, Redis and metrics, and maps governor's API to flowgate's.
//!
//! ## Where to start
//! The crate root re-exports what most callers name: [`Quota`] (a rate and a burst),
//! [`RateLimiter`] (one bucket), [`KeyedRateLimiter`] (one bucket per key), [`Policies`] and
//! [`Policy`] (several quotas and layers, all or nothing), and the outcomes every one of them
//! answers in: [`Allowed`], [`Refused`], [`InsufficientCapacity`], and [`Error`], the owned
//! error that holds either of the last two. A policy set answers in its own
//! ([`policy::Allowed`], [`policy::Refused`], [`policy::Error`]): a quota's outcome, which they
//! dereference to, and the policy and quota they cite. `?` turns a refusal into the `Error` of
//! its kind, or into `Box<dyn Error + Send + Sync>`.
//!
//! ## Map of the crate
//! The public modules, in the order a decision flows through them, each with the feature that
//! compiles it (`std` is on by default and turns `alloc` on; every other feature turns `std`
//! on):
//! * [`quota`] (always): [`Quota`], a validated rate, burst and initial fill, its string
//!   grammar (`"100/s burst 20"`) and its typed errors ([`QuotaError`]).
//! * [`clock`] (always): the [`Clock`](clock::Clock) trait and [`FnClock`](clock::FnClock) over
//!   a timer of yours; with `std` the default TSC clock, a coarse clock and the OS clock; with
//!   `alloc` a manual clock for tests; with `tokio` a clock that follows tokio's.
//! * [`algorithm`] (always): the [`Algorithm`] trait, pure decision math over one packed word,
//!   and the algorithms ([`Gcra`], the default; the leaky bucket, credit, interval refill, fixed
//!   and sliding window counters), with a table to choose from;
//!   [`AnyAlgorithm`](algorithm::AnyAlgorithm) holds any of them as one value (what a policy
//!   quota is).
//! * (`cell`, private: the one compare-and-swap loop every bucket word runs in, a single
//!   limiter's, a keyed slot's and a policy quota's alike.)
//! * [`RateLimiter`] (always, at the crate root): one bucket. [`SlidingLog`] (`alloc`): the
//!   exact sliding window, a lock-free ring of request times (not one word, so it has a type of
//!   its own).
//! * [`keyed`] (`alloc`): [`KeyedRateLimiter`], one bucket per key in a bounded, sharded table
//!   that forgets idle keys, its [`Builder`] and tiers (the module docs give the memory model,
//!   eviction, and a full table); with `std`, the background [`Sweeper`].
//! * [`policy`] (`std`): [`Policies`] and [`Policy`], several quotas (any one-word algorithm)
//!   in named layers, keyed from your request type, decided all or nothing, with dry runs,
//!   jitter and quotas replaced while requests go on; configuration files with feature `serde`.
//! * [`outcome`] (always): what every decision reports ([`Allowed`], [`Refused`],
//!   [`InsufficientCapacity`], [`Error`]), and how a policy outcome names its quota.
//! * [`wait`] (`std`): waiting for cells instead of being refused: [`WaitOptions`] and the
//!   engine behind every limiter's `wait` and `until_ready` methods (`until_ready` with feature
//!   `tokio`).
//! * `http` (feature `tower`; `axum` adds axum's `ConnectInfo` and `MatchedPath`, `tonic`
//!   tonic's `TcpConnectInfo`, `actix` the actix-web middleware): `RateLimitLayer`, a tower middleware that decides each request with
//!   a policy set over `Inbound` (the request's head and its client) and answers 429 with
//!   `Retry-After` and the `RateLimit` headers (gRPC calls as `RESOURCE_EXHAUSTED`); `ClientIp`
//!   and `Cidr` tell the client's address, through trusted proxies only.
//! * [`backend`] (`std`): the [`Backend`](backend::Backend) trait a policy set is decided
//!   through, in process or remote; the HTTP layers and [`wait::until_ready`] take any.
//!   The `flowgate-redis` crate decides the same sets in Redis (and Redis Cluster), shared by
//!   many processes, with a failure policy, a circuit breaker and local leases.
//! * `simulate` (feature `simulate`): replays traffic through any algorithm or policy faster
//!   than real time, and draws what each admitted.
//! * `stream` (feature `futures`): a rate-limited `Stream` and `Sink`, items weighted by a
//!   cost function.
//! * [`guide`] (`std`): documentation only, the walk-through above.
//! * Feature `metrics` (no module of its own): counters and gauges through the `metrics` facade
//!   (see [Metrics](#metrics)).
//!
//! ## Guarantees
//! * **Never above the configured rate.** The emission interval is `⌈period / count⌉` whole
//!   nanoseconds, rounded up; [`Quota::interval`] reports the one in force.
//! * **No wrap.** `n ≤ burst` is checked first and `burst × interval ≤ 2⁶³ ns` at construction,
//!   so `n × interval` cannot overflow for any `n` and any valid quota. `tat + n × interval` is
//!   checked: past the clock's horizon (readings are Unix time in ns: the year 2554) every
//!   request is refused with a wait of `u64::MAX` ns.
//! * **`retry_after` is exact** for a clock that runs forwards: refused one nanosecond before
//!   it, admitted at it (tested against the reference model). A policy's includes its jitter.
//! * **All or nothing.** A [`Policies`] refusal undoes what earlier quotas took, each undo an
//!   exact compare-and-swap back to the word it replaced, never an arithmetic refund; when
//!   another request wrote the bucket in between, the undo gives way (at most `n` cells
//!   under-admitted, never over). The [`policy`] module documents it; loom models check it.
//! * **Windows aligned on UTC.** Window counters count windows from the Unix epoch, or from a
//!   UTC offset (`"20000/day fixed utc+02:00"`): a daily window starts at the same midnight in
//!   every process and in Redis, which counts from the server's `TIME`.
//! * **Clocks that step back, lag or go stale** never cause a panic or a wrap, and a stale
//!   reading never frees a booked cell: a reading older than the bucket is re-checked against a
//!   fresh one before it counts as a step back. After a real step back, a key is locked out for
//!   at most one window (`burst × interval`) plus the clock's declared skew; the price is that a
//!   clock stepping back by δ and forwards again can give back up to `⌈δ / interval⌉` cells,
//!   one burst at most (governor's choice is a lockout as long as the step). The [`clock`]
//!   module has the details.
//! * **Bounded memory per key.** A [`KeyedRateLimiter`] allocates its table once for
//!   `max_keys` (16 bytes a slot, at most 7/8 full; the key is hashed, never stored). Only full
//!   buckets are forgotten, so eviction changes no decision; a full table refuses new keys or
//!   admits them untracked, as chosen, and never touches a tracked key. Two keys share a bucket
//!   only if their 64-bit hashes collide.
//!
//! ## Without `std`
//! With `default-features = false` the crate is `#![no_std]`: [`Quota`], every one-word
//! [`algorithm`], and [`RateLimiter`] on a clock you supply ([`clock::FnClock`] over a timer of
//! yours; [`clock::DefaultClock`] is then an `FnClock`). The `alloc` feature adds
//! `SlidingLog`, `ManualClock` and `KeyedRateLimiter` (give it a hash seed: there is no
//! randomness source). Everything else needs `std`, which every other feature turns on. Targets
//! without 64-bit atomics build with the `portable-atomic` feature, and fail with an error
//! that says so without it. `scripts/nostd` links and runs a `#![no_std]` program over
//! these parts (`nostd/` in the repository).
//!
//! ## Metrics
//! With the feature `metrics`, flowgate reports through the [`metrics`](https://docs.rs/metrics)
//! facade, so any exporter works. Handles are registered when a limiter is built, so install
//! the recorder first; without the feature nothing is compiled in.
//!
//! | metric | kind | labels | what |
//! |---|---|---|---|
//! | `flowgate_admitted_cells_total` | counter | `policy`, `quota` | cells a policy's quota admitted |
//! | `flowgate_refused_cells_total` | counter | `policy`, `quota` | cells refused, against the quota that refused |
//! | `flowgate_dry_run_refused_cells_total` | counter | `policy`, `quota` | cells a dry-run quota would have refused |
//! | `flowgate_near_limit_total` | counter | `policy`, `quota` | admissions that left the quota's bucket at least 80 % used (Envoy's "near limit") |
//! | `flowgate_keys` | gauge | `policy` and `quota`, or `limiter` | keys a keyed table holds |
//! | `flowgate_keys_evicted_total` | counter | as `flowgate_keys` | idle keys forgotten |
//! | `flowgate_redis_decisions_total` (flowgate-redis) | counter | `prefix`, `source` | decisions of a set in Redis made by the script (`redis`) or from a lease (`lease`) |
//! | `flowgate_redis_call_seconds` (flowgate-redis) | histogram | `prefix` | time of each script call, answered or not |
//! | `flowgate_redis_failures_total` (flowgate-redis) | counter | `prefix`, `kind` | Redis calls that timed out (`timeout`), lost their connection (`connection`) or had a malformed reply (`reply`), or were not sent because the circuit breaker was open (`breaker`) |
//! | `flowgate_redis_breaker_state` (flowgate-redis) | gauge | `prefix` | the circuit breaker: 0 closed, 1 half open (probing), 2 open |
//! | `flowgate_redis_fallbacks_total` (flowgate-redis) | counter | `prefix`, `policy` | decisions made by the failure policy (`open`, `closed`, `local`) |
//! | `flowgate_http_unkeyed_total` | counter | none | HTTP requests whose client's address could not be told (feature `tower`: refused or not, as the layer's rule says) |
//!
//! `quota` is the quota's canonical text, its `Display` when the set was built (`"200/10s"`;
//! `"20000/day fixed"` is labelled `"20000/d fixed"`, `"5000/h"` stays `"5000/h"`): a quota
//! replaced at run time keeps counting under its first label.
//!
//! ```
//! # #[cfg(feature = "std")] {
//! let quota: flowgate::algorithm::AnyAlgorithm = "20000/day fixed".parse().unwrap();
//! assert_eq!(quota.to_string(), "20000/d fixed"); // its `quota` label
//! # }
//! ```
//! A set decided in Redis
//! counts its cells under the same names and labels as in process, so dashboards survive a
//! change of backend. Every metric is described to the recorder (an exporter's HELP lines).
//! A standalone [`KeyedRateLimiter`] reports its keys under `limiter = name` once given
//! [`metrics_label`](keyed::Builder::metrics_label); a policy set's tables always report, and
//! so does the local fallback of a Redis set, under `policy = "redis:{prefix}:{policy}"`.
//! Cells are counted per attempt: a request over a quota's burst counts as refused cells of
//! that quota, and a wait on a policy set that is refused, sleeps and is then admitted counts
//! its cells once as refused and once as admitted.

// docs.rs (`[package.metadata.docs.rs]`): every feature on, and each gated item marked with the
// features it needs (`doc_cfg` shows them; it took over `doc_auto_cfg`, which nightly removed).
#![cfg_attr(docsrs, feature(doc_cfg))]
#![cfg_attr(not(feature = "std"), no_std)]
// Without `std`, the core still compiles the helpers it shares with what needs `std` (policy
// sets, waits, Redis), and some are used only there. Unused code is checked in the `std` build,
// where everything is used; the build without `std` is checked for every other lint.
#![cfg_attr(not(feature = "std"), allow(dead_code, unused_imports))]

#[cfg(feature = "alloc")]
extern crate alloc;

// Every bucket is one `AtomicU64`: without native 64-bit atomics there is nothing to build on
// but portable-atomic's (`flowgate_assume_no_atomic64` lets CI see this message on a target that
// has them).
#[cfg(all(
    any(not(target_has_atomic = "64"), flowgate_assume_no_atomic64),
    not(feature = "portable-atomic")
))]
compile_error!(
    "flowgate keeps every bucket in one AtomicU64, and this target has no 64-bit atomics. \
     Enable flowgate's `portable-atomic` feature, and give the portable-atomic crate one of its \
     fallbacks: its `critical-section` feature (with a critical-section implementation for your \
     chip), or `--cfg portable_atomic_unsafe_assume_single_core` on a single-core chip."
);

pub mod algorithm;
#[cfg(feature = "std")]
pub mod backend;
mod cell;
pub mod clock;
#[cfg(feature = "std")]
pub mod guide;
#[cfg(feature = "tower")]
pub mod http;
#[cfg(feature = "std")]
mod jitter;
#[cfg(feature = "alloc")]
pub mod keyed;
mod limiter;
#[cfg(feature = "alloc")]
mod observe;
pub mod outcome;
#[cfg(feature = "std")]
pub mod policy;
mod primitive;
pub mod quota;
#[cfg(feature = "simulate")]
pub mod simulate;
#[cfg(feature = "alloc")]
mod sliding_log;
#[cfg(feature = "futures")]
pub mod stream;
#[cfg(feature = "std")]
pub mod wait;

pub use algorithm::{Algorithm, Gcra};
pub use cell::Receipt;
#[cfg(feature = "std")]
pub use keyed::Sweeper;
#[cfg(feature = "alloc")]
pub use keyed::{Builder, KeyedError, KeyedRateLimiter, KeyedStats, WhenFull};
pub use limiter::RateLimiter;
pub use outcome::{Allowed, Cause, Error, Gauge, InsufficientCapacity, Refused};
#[cfg(feature = "std")]
pub use policy::{Policies, Policy};
pub use quota::{Initial, Quota, QuotaError};
#[cfg(feature = "alloc")]
pub use sliding_log::SlidingLog;
#[cfg(feature = "std")]
pub use wait::WaitOptions;

/// Hooks for the loom model tests in `loom-tests/`; present only under `--cfg flowgate_loom`.
#[cfg(flowgate_loom)]
#[doc(hidden)]
pub mod loom {
    pub use crate::primitive::fail_next_cas;
}
