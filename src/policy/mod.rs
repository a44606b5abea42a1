//! Policies: several quotas on one key, and layered named policies (global → per endpoint → per
//! user per endpoint), decided all-or-nothing.
//!
//! A [`Policies`] set is an ordered list of named [`Policy`]s over a request type `R` of yours.
//! Each policy has a key extractor (none for a global policy; a user, an endpoint, an IP
//! address, or any combination, borrowed from the request: see [`Key`]) and one or more
//! quotas, every one a GCRA bucket (a token bucket with lazy refill). A request is admitted only
//! if every quota of every policy that applies admits it, and then it takes its cells from all
//! of them; if any refuses, it takes nothing from any.
//!
//! ```
//! use flowgate::clock::ManualClock;
//! use flowgate::policy::{Policies, Policy};
//! use flowgate::Quota;
//!
//! struct Request { user: String }
//!
//! // The users' limits: per user 200 per 10 s, 5000 per hour and 20000 per day,
//! // and 100 000 per 10 s for the whole server.
//! let clock = ManualClock::new();
//! let policies = Policies::<Request>::builder()
//!     .clock(clock.clone())
//!     .policy(Policy::keyed("per-user", |r: &Request| &r.user).quotas([
//!         "200/10s".parse()?,
//!         "5000/h".parse()?,
//!         "20000/day".parse()?,
//!     ]))
//!     .policy(Policy::global("server").quota("100000/10s".parse()?))
//!     .build()?;
//!
//! let alice = Request { user: "alice".into() };
//! for _ in 0..200 {
//!     assert!(policies.check(&alice).is_ok());
//! }
//! let refused = policies.check(&alice).unwrap_err();
//! assert_eq!(refused.policy(), "per-user");
//! assert_eq!(refused.by().quota(), "200/10s".parse::<Quota>()?);
//! assert_eq!(refused.retry_after(), core::time::Duration::from_millis(50));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # All or nothing, and why it never over-admits
//! A decision takes its cells quota by quota, in policy order and in each policy's quota order,
//! each with one compare-and-swap on the quota's bucket word, exactly as a single limiter does.
//! If a quota refuses, the decision undoes what it took, in reverse order, each undo being one
//! compare-and-swap **from the exact word it wrote back to the word it replaced**. It never
//! gives cells back with an arithmetic refund: a refund that lands after the refunded cell's
//! time has passed would free a cell another request has since been admitted against (GCRA
//! books cells on a timeline, so "one cell back" is not the same cell later), which is how
//! chained limiters that "release" on failure can over-admit.
//!
//! An undo succeeds when no other request wrote the bucket after this one: the bucket is then
//! exactly as if this request never came. If another request did write it (it was admitted or
//! started its own decision on top of this one's cells), the undo gives way and the cells stay
//! taken: **a brief under-admission** of at most `n` cells per refused request, which needs two
//! requests racing on the same bucket within the nanoseconds between a commit and its undo,
//! and which drains like any other taken cell within `n` emission intervals. Every admitted
//! request's cells are in every bucket it went through, and nothing else is ever added back,
//! so no quota ever admits more than it would alone; the loom models in `loom-tests` check
//! both races (two requests on a two-quota key, and a two-layer chain whose second layer
//! refuses).
//!
//! A refusal is found before anything is written whenever the refusing quota comes first; order
//! the policies from the one that refuses most often (the narrowest key) to the broadest, as
//! the users' three-layer example does.
//!
//! # What a decision reports
//! * [`Admitted::tightest`]: the enforcing quota with the fewest cells left, with its limit and
//!   reset, for `X-RateLimit-*`-style headers (worked out when called, so a caller that only
//!   wants a yes or no does not pay for it).
//! * [`Rejected`]: the refusing policy and quota, and a [`retry_after`](Rejected::retry_after)
//!   that is never earlier than the request's true conformance time: every enforcing quota the
//!   request goes through is looked at, and the longest wait wins (and names the quota), plus
//!   the policy's jitter if it has one ([`Policy::jitter`], drawn from a per-thread generator
//!   that [`seed_jitter`] seeds).
//! * [`Oversized`]: `n` above an enforcing quota's burst: the request can never succeed.
//!
//! # Dry runs
//! A policy in [dry-run mode](Policy::dry_run) is evaluated like any other and takes cells from
//! its quotas when it would admit (so its buckets follow the traffic it would let through), but
//! never refuses: a request it would refuse passes, takes nothing from it, is counted in
//! [`Policies::stats`], and is reported by [`Admitted::dry_run`]. Dry-run policies never appear
//! in `tightest` or in a refusal.
//!
//! # Replacing quotas at run time
//! [`Policies::replace_quotas`] swaps a policy's quotas while requests are decided, keeping every
//! bucket (the same number of quotas). A bucket keeps its theoretical arrival time: how far
//! ahead of now it is booked, **in time, not in cells**. Under the new quota that lead means
//! `lead / new interval` cells taken: a bucket booked a whole window ahead is empty under any
//! quota with the same window, and refills at the new rate; one booked further ahead than the
//! new burst window allows is clamped to "empty" at its next refusal, so lowering a limit takes
//! effect at once. (Carrying cell counts instead would need a pass over every bucket of every
//! table.) Each quota switches atomically (a sequence lock: a decision reads one quota or the
//! other, never a mixture; a loom model checks it); a decision under way may see some quotas of
//! a policy before a replacement and others after it, and one whose quota was replaced between
//! its first look and its refusal is decided again under the new quota. With the `serde`
//! feature, a whole set is built from TOML or JSON (see `PoliciesConfig`).
//!
//! # Cost
//! One clock reading for the whole decision (taken just after the first bucket lookup, so that
//! it overlaps the lookup's cache miss), one hash per keyed policy (not per quota), and per
//! quota: three words of its prepared rule (a sequence lock: plain loads on x86-64), one probe of
//! its table (keyed), a comparison of the debt the request would leave with the quota's window,
//! one compare-and-swap, and one four-word undo entry. The full algorithm runs only for new
//! keys and refusals. [`Admitted::tightest`] is worked out when called. No lock, no allocation
//! (a test counts them). The users' three-layer example executes about 560 instructions against
//! governor's 700 for three checks; `BENCHMARKS.md` has the measured times.
//!
//! # Memory
//! A keyed policy keeps one table per quota, each like a
//! [`KeyedRateLimiter`](crate::KeyedRateLimiter)'s (about 21.7 bytes per key of capacity,
//! allocated up front; [`Policy::max_keys`] sets the capacity, 65 536 keys by default), and
//! evicts idle keys the same way. A global policy keeps one cache-padded word per quota.

// `Rejected` carries the refusing quota's whole state, and `Admitted` the first dry-run
// refusal's (about 100 bytes each), by value: boxing them would allocate on every decision. An
// admission's enforcing quotas are references, described only when asked.
#![allow(clippy::result_large_err)]

mod builder;
#[cfg(feature = "serde")]
mod config;
mod decide;
pub(crate) mod decision;
pub(crate) mod jitter;
mod key;
mod layer;
mod live;

use core::fmt;

pub use builder::{PoliciesBuilder, Policy, PolicyError};
#[cfg(feature = "serde")]
pub use config::{ConfigError, KeyExtractors, PoliciesConfig, PolicyConfig};
#[cfg(feature = "tower")]
pub(crate) use decision::is_tighter;
pub use decision::{Admitted, DryRun, Oversized, QuotaState, Rejected};

pub use jitter::seed_jitter;
pub use key::Key;

use self::decide::{unreachable_oversized, Booking};
use self::layer::{Layer, Store};
use crate::clock::{Clock, QuantaClock};
use crate::primitive::{lock, Mutex, Ordering};
use crate::quota::Quota;

/// The most quotas a set holds, over all its policies: the undo log of a decision lives on the
/// stack.
pub const MAX_QUOTAS: usize = 32;

/// An ordered set of named policies over requests of type `R`, decided all-or-nothing; see the
/// [module docs](self).
pub struct Policies<R: ?Sized, C: Clock = QuantaClock> {
    layers: Box<[Layer<R, C>]>,
    clock: C,
    /// Serializes quota replacements (decisions never take it).
    replacing: Mutex<()>,
}

/// What a policy has done, from [`Policies::stats`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PolicyStats {
    /// The policy's name.
    pub name: String,
    /// Whether it is in dry-run mode.
    pub dry_run: bool,
    /// Requests it refused; for a dry-run policy, requests it would have refused.
    pub refused: u64,
    /// Keys its tables hold now, summed over its quotas' tables (0 for a global policy).
    pub keys: usize,
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
    /// [`Rejected`] names the refusing policy and quota and says when to retry.
    ///
    /// # Performance
    /// One clock read, one hash per keyed policy, one CAS per quota (see the module docs).
    #[inline]
    pub fn check(&self, request: &R) -> Result<Admitted<'_>, Rejected<'_>> {
        // The clock is read just after the first bucket lookup, overlapping its cache miss.
        match self.decide(request, 1, || self.clock.now()) {
            Ok(answer) => answer,
            Err(oversized) => unreachable_oversized(oversized),
        }
    }

    /// [`check`](Self::check) at `now` (a reading of this set's clock).
    ///
    /// # Errors
    /// As [`check`](Self::check).
    #[inline]
    pub fn check_at(&self, request: &R, now: u64) -> Result<Admitted<'_>, Rejected<'_>> {
        // Every quota's burst is at least 1, so one cell never exceeds it.
        match self.decide(request, 1, || now) {
            Ok(answer) => answer,
            Err(oversized) => unreachable_oversized(oversized),
        }
    }

    /// Takes `n` cells from every quota of every policy that applies, or nothing. `n = 0` takes
    /// nothing and reports the quotas as they are.
    ///
    /// # Errors
    /// The outer `Err` is [`Oversized`] when `n` exceeds the burst of a quota of an enforcing
    /// policy that applies: the request can never succeed. The inner `Err` is a [`Rejected`].
    #[inline]
    pub fn check_n(
        &self,
        request: &R,
        n: u32,
    ) -> Result<Result<Admitted<'_>, Rejected<'_>>, Oversized<'_>> {
        if n == 0 {
            return Ok(Ok(self.state(request, self.clock.now())));
        }
        self.decide(request, n, || self.clock.now())
    }

    /// [`check_n`](Self::check_n) at `now` (a reading of this set's clock).
    ///
    /// # Errors
    /// As [`check_n`](Self::check_n).
    #[inline]
    pub fn check_n_at(
        &self,
        request: &R,
        n: u32,
        now: u64,
    ) -> Result<Result<Admitted<'_>, Rejected<'_>>, Oversized<'_>> {
        if n == 0 {
            return Ok(Ok(self.state(request, now)));
        }
        self.decide(request, n, || now)
    }

    /// The quotas that apply to `request` as they are at `now`, taking nothing.
    fn state(&self, request: &R, now: u64) -> Admitted<'_> {
        let mut booking = Booking::default();
        self.inspect_at(request, now, |state| {
            let live = &self.layers[state.index].quotas[state.quota_index];
            booking.push(live, state.reset_after_nanos());
        });
        booking.admitted(None)
    }

    /// Calls `visit` with the state of every quota of every enforcing policy that applies to
    /// `request`, in evaluation order, taking nothing (for headers that list every policy, such
    /// as the IETF draft's `RateLimit`; a key the tables do not hold is reported as new).
    pub fn inspect<'p>(&'p self, request: &R, visit: impl FnMut(QuotaState<'p>)) {
        self.inspect_at(request, self.clock.now(), visit);
    }

    /// [`inspect`](Self::inspect) at `now` (a reading of this set's clock).
    pub fn inspect_at<'p>(&'p self, request: &R, now: u64, mut visit: impl FnMut(QuotaState<'p>)) {
        for (index, layer) in self.layers.iter().enumerate() {
            if layer.dry_run {
                continue;
            }
            let Some(tag) = layer.tag(request) else {
                continue;
            };
            for q in 0..layer.quotas.len() {
                visit(self.peek_state(index, q, tag, now));
            }
        }
    }
}

/// # Replacing quotas, and looking inside
impl<R: ?Sized, C: Clock> Policies<R, C> {
    /// Replaces the quotas of the policy `name` while requests go on, keeping every bucket; see
    /// the [module docs](self#replacing-quotas-at-run-time).
    ///
    /// # Errors
    /// [`PolicyError::UnknownPolicy`] if no policy has that name, and
    /// [`PolicyError::QuotaCount`] if `quotas` does not have as many quotas as the policy.
    pub fn replace_quotas(&self, name: &str, quotas: &[Quota]) -> Result<(), PolicyError> {
        let layer = self.layer(name)?;
        if quotas.len() != layer.quotas.len() {
            return Err(PolicyError::QuotaCount {
                policy: name.into(),
                expected: layer.quotas.len(),
                found: quotas.len(),
            });
        }
        let _replacing = lock(&self.replacing);
        for (live, quota) in layer.quotas.iter().zip(quotas) {
            live.store(quota);
        }
        Ok(())
    }

    /// The quotas of the policy `name` now.
    ///
    /// # Errors
    /// [`PolicyError::UnknownPolicy`] if no policy has that name.
    pub fn quotas(&self, name: &str) -> Result<Vec<Quota>, PolicyError> {
        Ok(self.layer(name)?.quotas.iter().map(|q| q.load()).collect())
    }

    /// The policies' names, in evaluation order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.layers.iter().map(|layer| &*layer.name)
    }

    /// What each policy has done, in evaluation order (takes each keyed table's shard locks in
    /// turn).
    pub fn stats(&self) -> Vec<PolicyStats> {
        self.layers
            .iter()
            .map(|layer| PolicyStats {
                name: layer.name.to_string(),
                dry_run: layer.dry_run,
                // Relaxed: a statistic.
                refused: layer.refused.load(Ordering::Relaxed),
                keys: match &layer.store {
                    Store::Global(_) => 0,
                    Store::Keyed { tables, .. } => tables.iter().map(|t| t.len()).sum(),
                },
            })
            .collect()
    }

    /// Forgets idle keys: sweeps the next `budget` slots of every keyed policy's tables (see
    /// [`KeyedRateLimiter::sweep`](crate::KeyedRateLimiter::sweep)). Returns how many keys went.
    pub fn sweep(&self, budget: usize) -> usize {
        self.tables().map(|table| table.sweep(budget)).sum()
    }

    /// Slots in the largest keyed table: a [`sweep`](Self::sweep) of this many visits them all.
    pub fn slots(&self) -> usize {
        self.tables().map(|table| table.slots()).max().unwrap_or(0)
    }

    /// The set's clock, whose readings the `*_at` methods expect.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    fn tables(&self) -> impl Iterator<Item = &layer::Table<C>> {
        self.layers.iter().flat_map(|layer| match &layer.store {
            Store::Global(_) => &[][..],
            Store::Keyed { tables, .. } => &tables[..],
        })
    }

    fn layer(&self, name: &str) -> Result<&Layer<R, C>, PolicyError> {
        self.layers
            .iter()
            .find(|layer| &*layer.name == name)
            .ok_or_else(|| PolicyError::UnknownPolicy {
                policy: name.into(),
            })
    }
}

impl<R: ?Sized, C: Clock + fmt::Debug> fmt::Debug for Policies<R, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut list = f.debug_struct("Policies");
        for layer in self.layers.iter() {
            let quotas: Vec<Quota> = layer.quotas.iter().map(|q| q.load()).collect();
            list.field(&layer.name, &quotas);
        }
        list.field("clock", &self.clock).finish()
    }
}
