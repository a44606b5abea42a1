//! Policies: several quotas on one key, and layered named policies (global → per endpoint → per
//! user per endpoint), decided all-or-nothing.
//!
//! A [`Policies`] set is an ordered list of named [`Policy`]s over a request type `R` of yours.
//! Each policy has a key extractor (none for a global policy; a user, an endpoint, an IP
//! address, or any combination, borrowed from the request: see [`Key`]) and one or more
//! quotas, each with its algorithm: GCRA (a token bucket with lazy refill) unless another is
//! chosen ([`Policy::quota_with`], or an algorithm's name after the quota in a configuration
//! file: `"20000/day fixed"`). A request is admitted only if every quota of every policy that
//! applies admits it, and then it takes its cells from all of them; if any refuses, it takes
//! nothing from any.
//!
//! ```
//! use flowgate::algorithm::FixedWindow;
//! use flowgate::clock::ManualClock;
//! use flowgate::policy::{Policies, Policy};
//! use flowgate::Quota;
//!
//! struct Request { user: String }
//!
//! // Per user 200 per 10 s, 5000 per hour, and 20000 per day (a fixed window: day-long
//! // windows, midnight to midnight UTC), and 100 000 per 10 s for the whole server.
//! let clock = ManualClock::new();
//! let policies = Policies::<Request>::builder()
//!     .clock(clock.clone())
//!     .policy(
//!         Policy::keyed("per-user", |r: &Request| &r.user)
//!             .quotas(["200/10s".parse()?, "5000/h".parse()?])
//!             .quota_with(FixedWindow::new(&"20000/day".parse()?)?),
//!     )
//!     .policy(Policy::global("server").quota("100000/10s".parse()?))
//!     .build()?;
//!
//! let alice = Request { user: "alice".into() };
//! for _ in 0..200 {
//!     assert!(policies.check(&alice).is_ok());
//! }
//! let refused = policies.check(&alice).unwrap_err();
//! assert_eq!(refused.by().map(|by| by.policy()), Some("per-user"));
//! assert_eq!(refused.by().unwrap().quota_index(), 0); // the 200/10s quota
//! assert_eq!(refused.retry_after(), core::time::Duration::from_millis(50));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # All or nothing, and why it never over-admits
//! A decision takes its cells quota by quota, in policy order and in each policy's quota order,
//! each with one compare-and-swap on the quota's bucket word, through the same loop and
//! algorithm code as a single limiter. If a quota refuses, the decision undoes what it took,
//! in reverse order, each undo being one compare-and-swap **from the exact word it wrote back
//! to the word it replaced**, the crate's one way of giving cells back (a
//! [`Receipt`](crate::Receipt)'s too). It never gives cells back with an arithmetic refund: a
//! refund that lands after the refunded cell's time has passed would free a cell another
//! request has since been admitted against (GCRA books cells on a timeline, so "one cell back" is not the
//! same cell later; a window counter's cell given back after its window ended comes off the
//! next window's count), which is how chained limiters that "release" on failure can
//! over-admit. The exact undo is the same for every one-word algorithm.
//!
//! A decision that a panic ends (a key extractor's, a key's `Hash`, a metrics recorder's)
//! undoes what it took the same way, as it unwinds.
//!
//! An undo succeeds when no other request wrote the bucket after this one: the bucket is then
//! exactly as if this request never came. If another request did write it (it was admitted or
//! started its own decision on top of this one's cells), the undo gives way and the cells stay
//! taken: **a brief under-admission** of at most `n` cells per refused request, which needs two
//! requests racing on the same bucket within the nanoseconds between a commit and its undo,
//! and which drains like any other taken cell. Every admitted request's cells are in every
//! bucket it went through, and nothing else is ever added back, so no quota ever admits more
//! than it would alone; the loom models in `loom-tests` check the races (two requests on a
//! two-quota key, a two-layer chain whose second layer refuses, and a window counter's undo).
//!
//! A refusal is found before anything is written whenever the refusing quota comes first; order
//! the policies from the one that refuses most often (the narrowest key) to the broadest.
//!
//! # What a decision reports
//! A set's own outcome types: a quota's outcome ([`crate::Allowed`], [`crate::Refused`]), which
//! they dereference to, and what the set cites besides it (the quota, a dry run, the jitter):
//! * [`Allowed`]: its gauge is the enforcing quota with the fewest cells left (ties: the
//!   longer reset, then the first), and [`Allowed::by`] names it, for `X-RateLimit-*`-style
//!   headers; a shaping quota's [`delay`](crate::Allowed::delay) (the longest of them) is the
//!   request's.
//! * [`Refused`]: names the refusing policy and quota ([`Refused::by`]), with a
//!   [`retry_after`](Refused::retry_after) never earlier than the request's true conformance
//!   time: every enforcing quota the request goes through is looked at, and the longest wait
//!   wins (and names the quota), plus the policy's jitter if it has one ([`Policy::jitter`],
//!   drawn from a per-thread generator that [`seed_jitter`] seeds).
//! * [`InsufficientCapacity`]: `n` above an enforcing quota's capacity, naming it: the request
//!   can never succeed.
//! * A [`Refused`] whose cause is [`Cause::Rejected`](crate::Cause::Rejected): an enforcing
//!   policy's extractor rejected the request ([`Key::reject`]), for any number of cells, zero
//!   included; [`Refused::rejection`] says why. It never conforms.
//!
//! # Dry runs
//! A policy in [dry-run mode](Policy::dry_run) is evaluated like any other and takes cells from
//! its quotas when it would admit (so its buckets follow the traffic it would let through), but
//! never refuses: a request it would refuse passes, takes nothing from it, is counted in
//! [`Policies::stats`], and is reported by [`Allowed::dry_run`]. Its extractor's rejection is a
//! skip: neither counted nor reported. Dry-run policies never appear
//! in an outcome's [`by`](Allowed::by); a refusal may report one through
//! [`Refused::dry_run`].
//!
//! # Replacing quotas at run time
//! [`Policies::replace_quotas`] swaps a policy's quotas while requests are decided, keeping every
//! bucket (the same number of quotas, each keeping its algorithm); [`Policies::replace`] swaps
//! whole algorithms, as long as each new one reads the buckets the old one wrote
//! ([`AnyAlgorithm::reads_buckets_of`]). A GCRA-family bucket keeps its theoretical arrival
//! time: how far ahead of now it is booked, **in time, not in cells**. Under the new quota that
//! lead means `lead / new interval` cells taken: a bucket booked a whole window ahead is empty
//! under any quota with the same window, and refills at the new rate; one booked further ahead
//! than the new burst window allows is clamped to "empty" at its next refusal, so lowering a
//! limit takes effect at once. A window counter keeps its counts (its window length cannot
//! change). The set's algorithms are one immutable list, and a replacement builds the new list
//! and swaps it in whole: a decision takes its cells under one list, the old or the new,
//! never a mixture of the two (a loom model checks it), and a decision that starts after a
//! replacement returned reads the new one (a refusal's report of the quotas after the refusing
//! one, and a clamp, read the list in force when they are made). A configuration reload (`PoliciesConfig::apply`)
//! replaces every policy's quotas in one swap. With the `serde` feature, a whole set is built
//! from TOML or JSON (see `PoliciesConfig`).
//!
//! # Cost
//! One clock reading for the whole decision (taken just after the first bucket lookup, so that
//! it overlaps the lookup's cache miss), one read of the set's algorithms (the calling
//! thread's copy: a version check, nothing written that another thread reads), one hash per
//! keyed policy (not per quota), and per quota: one probe of its store (keyed), the
//! algorithm's own check, one compare-and-swap, and one four-word undo entry. No lock, no
//! allocation (a test counts them), except in a thread's first decision on a set and its first
//! after a replacement, which take the lock and copy the list for the thread (two
//! allocations, and a third when the thread's table of copies grows). Up to 256 live sets each
//! hold a slot of every thread's table of copies; beyond that, sets share slots, and a thread
//! deciding in turn on two that share one pays the lock and the copy on every decision that
//! misses, as does a decision made while its thread exits (see `policy::rules`).
//! `BENCHMARKS.md` has the measured costs.
//!
//! # Memory
//! A keyed policy keeps one table per quota, each like a
//! [`KeyedRateLimiter`](crate::KeyedRateLimiter)'s (about 18.3 bytes per key of capacity,
//! allocated up front; [`Policy::max_keys`] sets the capacity, 65 536 keys by default), and
//! evicts idle keys the same way. A global policy keeps one cache-padded word per quota. Each
//! thread that decides keeps a copy of the set's algorithms (a 256-byte counted block and the
//! list, about 88 bytes per quota) in a table of 24 bytes per slot, as long as the highest slot
//! of a set it decided on (at most 256 slots, 6 KiB), kept until another set's copy takes the
//! slot or the thread exits, even after the set is dropped.
//!
//! [`AnyAlgorithm::reads_buckets_of`]: crate::algorithm::AnyAlgorithm::reads_buckets_of

mod backend;
mod builder;
#[cfg(feature = "serde")]
mod config;
mod decide;
mod error;
mod key;
mod layer;
mod manage;
mod named;
mod refuse;
mod report;
mod rules;
mod up_to;
mod wait;

pub use builder::PoliciesBuilder;
#[cfg(feature = "serde")]
pub use config::{ConfigError, KeyExtractors, PoliciesConfig, PolicyConfig};
pub use error::BuildError;
pub use key::{Extract, Key};
pub use manage::PolicyStats;
pub use named::Policy;

pub use crate::jitter::{refusal_jitter, seed_jitter};
pub use crate::observe::QuotaMetrics;
pub use crate::outcome::policy::{Allowed, Error, Refused};
pub use crate::outcome::{DryRun, PolicyQuota, QuotaState};

pub use wait::Booked;

use self::layer::Layer;
use self::report::Tightest;
use self::rules::Rules;
use crate::clock::{Clock, QuantaClock};
use crate::outcome::InsufficientCapacity;

/// The most quotas a set holds, over all its policies: 32 (the undo log of a decision lives on
/// the stack).
pub(crate) const MAX_QUOTAS: usize = 32;

/// An ordered set of named policies over requests of type `R`, decided all-or-nothing; see the
/// [module docs](self).
pub struct Policies<R: ?Sized, C: Clock = QuantaClock> {
    layers: Box<[Layer<R, C>]>,
    /// Every quota's algorithm, policy by policy: plain data, replaced whole.
    rules: Rules,
    clock: C,
}

impl<R: ?Sized> Policies<R> {
    /// A builder of a policy set on the default clock.
    pub fn builder() -> PoliciesBuilder<R, QuantaClock> {
        PoliciesBuilder::new()
    }
}

/// # Checking
impl<R: ?Sized, C: Clock> Policies<R, C> {
    /// Takes one cell from every quota of every policy that applies to `request`, or nothing.
    ///
    /// # Errors
    /// [`Refused`] names the refusing policy and quota and says when to retry.
    ///
    /// # Performance
    /// One clock read, one hash per keyed policy, one CAS per quota (see the module docs).
    #[inline]
    pub fn check(&self, request: &R) -> Result<Allowed, Refused> {
        // The clock is read just after the first bucket lookup, overlapping its cache miss.
        one_cell(self.decide(request, 1, || self.clock.now(), Tightest::default()))
    }

    /// Takes `n` cells from every quota of every policy that applies, or nothing. `n = 0` takes
    /// nothing and reports the quotas as they are.
    ///
    /// # Errors
    /// The outer `Err` is [`InsufficientCapacity`] when `n` exceeds the capacity of a quota of
    /// an enforcing policy that applies (it names the quota): the request can never succeed.
    /// The inner `Err` is a [`Refused`], naming the refusing policy and quota.
    #[inline]
    pub fn check_n(
        &self,
        request: &R,
        n: u32,
    ) -> Result<Result<Allowed, Refused>, InsufficientCapacity> {
        if n == 0 {
            return Ok(self.state(request, self.clock.now()));
        }
        self.decide(request, n, || self.clock.now(), Tightest::default())
    }

    /// [`check_n`](Self::check_n) at `now` (a reading of this set's clock).
    ///
    /// # Errors
    /// As [`check_n`](Self::check_n).
    #[inline]
    pub(crate) fn check_n_at(
        &self,
        request: &R,
        n: u32,
        now: u64,
    ) -> Result<Result<Allowed, Refused>, InsufficientCapacity> {
        if n == 0 {
            return Ok(self.state(request, now));
        }
        self.decide(request, n, || now, Tightest::default())
    }

    /// The quotas that apply to `request` as they are at `now`, taking nothing; or the
    /// rejection of an enforcing policy's extractor (zero cells are rejected as any other).
    pub(super) fn state(&self, request: &R, now: u64) -> Result<Allowed, Refused> {
        if let Some(rejected) = self.rejection(request) {
            return Err(rejected);
        }
        let mut tightest = Tightest::default();
        self.inspect_at(request, now, |state| {
            tightest.offer(state.by(), state.gauge())
        });
        Ok(tightest.allowed(0, None))
    }

    /// Calls `visit` with the state of every quota of every enforcing policy that applies to
    /// `request`, in evaluation order, taking nothing (for headers that list every policy, such
    /// as the IETF draft's `RateLimit`; a key the tables do not hold is reported as new).
    pub fn inspect(&self, request: &R, visit: impl FnMut(QuotaState)) {
        self.inspect_at(request, self.clock.now(), visit);
    }

    /// [`inspect`](Self::inspect) at `now` (a reading of this set's clock).
    pub(crate) fn inspect_at(&self, request: &R, now: u64, mut visit: impl FnMut(QuotaState)) {
        self.rules.with(|rules| {
            for layer in self.layers.iter() {
                if layer.dry_run {
                    continue;
                }
                let Some(tag) = layer.tag_of(request) else {
                    continue;
                };
                for (q, algorithm) in layer.algorithms(rules).iter().enumerate() {
                    visit(self.peek_state(layer, (q, tag), algorithm, now));
                }
            }
        });
    }

    /// The set's clock, which its decisions read.
    pub fn clock(&self) -> &C {
        &self.clock
    }
}

/// The answer to a request of one cell, which never exceeds a capacity (every capacity is at
/// least 1); were it reported anyway, a refusal that never conforms is the safe answer.
#[inline(always)]
fn one_cell(
    answer: Result<Result<Allowed, Refused>, InsufficientCapacity>,
) -> Result<Allowed, Refused> {
    match answer {
        Ok(answer) => answer,
        Err(capacity) => {
            debug_assert!(false, "one cell exceeded a capacity");
            Err(capacity.never())
        }
    }
}
