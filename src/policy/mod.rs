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
//!   reset, for `X-RateLimit-*`-style headers.
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
//! table.) Each quota switches atomically; a decision under way may see some
//! quotas of a policy before a replacement and others after it. With the `serde` feature, a
//! whole set is built from TOML or JSON (see `PoliciesConfig`).
//!
//! # Cost
//! One clock reading for the whole decision, one hash per keyed policy (not per quota), and per
//! quota the reads of its live quota (a sequence lock: plain loads on x86-64), one probe of its
//! table (keyed) and one compare-and-swap. No lock, no allocation (a test counts them).
//! `BENCHMARKS.md` has the measured cost against `governor`.
//!
//! # Memory
//! A keyed policy keeps one table per quota, each like a
//! [`KeyedRateLimiter`](crate::KeyedRateLimiter)'s (about 21.7 bytes per key of capacity,
//! allocated up front; [`Policy::max_keys`] sets the capacity, 65 536 keys by default), and
//! evicts idle keys the same way. A global policy keeps one cache-padded word per quota.

// `Admitted` and `Rejected` carry whole quota states (about 100 bytes each) by value: boxing
// them would allocate on every decision. Shrinking them (indices into the set, states built on
// demand) is the next step for the decision's cost; see BENCHMARKS.md.
#![allow(clippy::result_large_err)]

mod builder;
#[cfg(feature = "serde")]
mod config;
mod decision;
mod jitter;
mod key;
mod layer;
mod live;

use core::fmt;

use arrayvec::ArrayVec;

pub use builder::{PoliciesBuilder, Policy, PolicyError};
#[cfg(feature = "serde")]
pub use config::{ConfigError, KeyExtractors, PoliciesConfig, PolicyConfig};
pub use decision::{Admitted, DryRun, Oversized, QuotaState, Rejected};

use self::decision::Tight;
pub use jitter::seed_jitter;
pub use key::Key;

use self::layer::{Layer, Miss, Store};
use self::live::Rule;
use crate::algorithm::{Algorithm, Gcra};
use crate::clock::{Clock, QuantaClock};
use crate::decision::{Cause, Gauge, InsufficientCapacity, Refused};
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

/// One write to undo if a later quota refuses.
#[derive(Clone, Copy)]
struct Undo {
    layer: usize,
    quota: usize,
    tag: u64,
    before: u64,
    after: u64,
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
        // Every bucket is found before the clock is read: the clock read overlaps the misses.
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
        let mut tightest = Tightest::default();
        self.inspect_at(request, now, |state| {
            let gauge = state.gauge();
            tightest.offer_gauge(state.index, state.quota_index, gauge);
        });
        Admitted {
            tightest: tightest.found(self),
            dry_run: None,
        }
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

    /// Decides `n ≥ 1` cells at the reading `now()`: finds every bucket, reads the clock, then
    /// commits quota by quota, undoing on a refusal.
    #[inline]
    fn decide(
        &self,
        request: &R,
        n: u32,
        now: impl FnOnce() -> u64,
    ) -> Result<Result<Admitted<'_>, Rejected<'_>>, Oversized<'_>> {
        // The clock is read once the first bucket has been looked up (before anything is
        // written): the read overlaps the lookup's cache miss, where the first compare-and-swap
        // must wait for it. Order policies from the narrowest key (the likeliest miss) first.
        let mut clock = Some(now);
        let mut now = 0;
        let mut undo = ArrayVec::<Undo, MAX_QUOTAS>::new();
        let mut tightest = Tightest::default();
        let mut dry_run = None;
        for (index, layer) in self.layers.iter().enumerate() {
            let Some(tag) = layer.tag(request) else {
                continue;
            };
            let mark = undo.len();
            for (q, live) in layer.quotas.iter().enumerate() {
                let bucket = layer.find(q, tag);
                if let Some(read) = clock.take() {
                    now = read();
                }
                let (rule, version) = live.rule();
                let miss = if n > rule.burst() {
                    Miss::Oversized
                } else {
                    // n ≤ burst and burst·T ≤ 2⁶³ − 1 (a valid quota): no overflow.
                    let cost = u64::from(n) * rule.interval();
                    match Layer::<R, C>::take(bucket, tag, cost, rule.window(), now) {
                        Ok((before, after)) => {
                            // The hot path: admitted.
                            if !layer.dry_run {
                                tightest.offer(index, q, &rule, after - now);
                            }
                            // At most MAX_QUOTAS quotas in a set (checked at build): room.
                            undo.push(Undo {
                                layer: index,
                                quota: q,
                                tag,
                                before,
                                after,
                            });
                            continue;
                        }
                        Err(miss) => miss,
                    }
                };
                let (state, wait, cause) = match self.slow(index, q, tag, version, n, now, miss) {
                    Outcome::Taken { wrote, debt, rule } => {
                        if !layer.dry_run {
                            tightest.offer(index, q, &rule, debt);
                        }
                        if let Some((before, after)) = wrote {
                            undo.push(Undo {
                                layer: index,
                                quota: q,
                                tag,
                                before,
                                after,
                            });
                        }
                        continue;
                    }
                    Outcome::Refused(refused, quota) => (
                        state_of(layer, index, q, quota, refused.gauge()),
                        refused.retry_after_nanos(),
                        refused.cause(),
                    ),
                    Outcome::Oversized(quota) => {
                        if !layer.dry_run {
                            self.undo(&mut undo, 0);
                            return Err(oversized(layer, index, q, n, quota));
                        }
                        let state = self.peek_state(index, q, tag, now);
                        (state, u64::MAX, Cause::Quota)
                    }
                };
                if layer.dry_run {
                    self.undo(&mut undo, mark);
                    would_refuse(layer, &mut dry_run, state, wait);
                    break;
                }
                self.undo(&mut undo, 0);
                let first = Rejected {
                    by: state,
                    wait,
                    jitter: 0,
                    cause,
                    dry_run,
                };
                return self.reject(request, n, now, first);
            }
        }
        Ok(Ok(Admitted {
            tightest: tightest.found(self),
            dry_run,
        }))
    }

    /// What [`Layer::take`] left to the full algorithm: a bucket a keyed table lacks (created
    /// here, under the shard's lock), a request that does not fit (the refusal's details, and
    /// the clamp of a bucket booked further ahead than `now` can explain), or too many cells.
    /// If quota `q` is no longer at the `version` the hot path decided with (replaced in
    /// between), the request is decided again under the new quota.
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn slow(
        &self,
        index: usize,
        q: usize,
        tag: u64,
        version: u64,
        n: u32,
        now: u64,
        miss: Miss,
    ) -> Outcome {
        let layer = &self.layers[index];
        let (rule, quota, current) = layer.quotas[q].full();
        if n > quota.burst() {
            return Outcome::Oversized(quota);
        }
        let gcra = Gcra::new(&quota);
        let refused = match miss {
            Miss::Refused(word) if current == version => gcra.refusal(word, now, n),
            _ => {
                let mut wrote = None;
                return match layer.commit(q, tag, &gcra, n, now, &self.clock, &mut wrote) {
                    Ok(allowed) => Outcome::Taken {
                        wrote,
                        debt: allowed.gauge().reset_after_nanos(),
                        rule,
                    },
                    // A refused commit has clamped the bucket already.
                    Err(refused) => Outcome::Refused(refused, quota),
                };
            }
        };
        if refused.clock_behind {
            layer.catch_up(q, tag, &gcra, &self.clock);
        }
        Outcome::Refused(refused, quota)
    }

    /// Quota `q` of policy `index` for the bucket `tag` at `now`, taking nothing.
    #[cold]
    fn peek_state(&self, index: usize, q: usize, tag: u64, now: u64) -> QuotaState<'_> {
        let layer = &self.layers[index];
        let quota = layer.quotas[q].load();
        let gcra = Gcra::new(&quota);
        let gauge = gcra.state(layer.word(q, tag, &gcra, now), now).gauge();
        state_of(layer, index, q, quota, gauge)
    }

    /// Undoes the writes logged after `mark`, newest first.
    fn undo(&self, undo: &mut ArrayVec<Undo, MAX_QUOTAS>, mark: usize) {
        while undo.len() > mark {
            let Some(u) = undo.pop() else { break };
            // A bucket written since is left as it is: see the module docs.
            self.layers[u.layer].restore(u.quota, u.tag, u.before, u.after);
        }
    }

    /// Completes the refusal `first` (made by an enforcing quota, with everything undone): looks
    /// at every enforcing quota after it, so that the retry-after covers the one that conforms
    /// last, then adds that policy's jitter and counts the refusal against it.
    #[cold]
    #[inline(never)]
    fn reject<'p>(
        &'p self,
        request: &R,
        n: u32,
        now: u64,
        first: Rejected<'p>,
    ) -> Result<Result<Admitted<'p>, Rejected<'p>>, Oversized<'p>> {
        let mut worst = first;
        for (index, layer) in self.layers.iter().enumerate().skip(first.by.index) {
            if layer.dry_run {
                continue;
            }
            // The refusing policy's key is hashed again here: passing its tag in from `decide`
            // measured 19 more instructions on every admitted decision (BENCHMARKS.md), to
            // save one hash on a refusal.
            let Some(tag) = layer.tag(request) else {
                continue;
            };
            let from = if index == first.by.index {
                first.by.quota_index + 1
            } else {
                0
            };
            for (q, live) in layer.quotas.iter().enumerate().skip(from) {
                let quota = live.load();
                if n > quota.burst() {
                    return Err(oversized(layer, index, q, n, quota));
                }
                let gcra = Gcra::new(&quota);
                if let Err(refused) = gcra.peek(layer.word(q, tag, &gcra, now), now, n) {
                    if refused.clock_behind {
                        layer.catch_up(q, tag, &gcra, &self.clock);
                    }
                    if refused.retry_after_nanos() > worst.wait {
                        worst.by = state_of(layer, index, q, quota, refused.gauge());
                        worst.wait = refused.retry_after_nanos();
                        worst.cause = refused.cause();
                    }
                }
            }
        }
        let layer = &self.layers[worst.by.index];
        let (min, max) = layer.jitter;
        if max > 0 && worst.wait != u64::MAX {
            worst.jitter = jitter::draw(min, max);
        }
        // Relaxed: a statistic; nothing is ordered by it.
        layer.refused.fetch_add(1, Ordering::Relaxed);
        Ok(Err(worst))
    }
}

/// The state of quota `q` of `layer` (policy `index`).
#[inline(always)]
fn state_of<'p, R: ?Sized, C: Clock>(
    layer: &'p Layer<R, C>,
    index: usize,
    q: usize,
    quota: Quota,
    gauge: Gauge,
) -> QuotaState<'p> {
    QuotaState {
        policy: &layer.name,
        index,
        quota_index: q,
        quota,
        gauge,
    }
}

/// The tightest quota so far: fewest cells left, then the longest reset, then the first. A
/// comparison costs a multiply ([`Rule::remaining`]); the state is built once, at the end.
struct Tightest {
    /// Above every count (`u64::MAX`) until a quota is offered.
    remaining: u64,
    debt: u64,
    /// Policy and quota indices (meaningless until a quota is offered).
    at: (usize, usize),
}

impl Default for Tightest {
    fn default() -> Self {
        Self {
            remaining: u64::MAX,
            debt: 0,
            at: (0, 0),
        }
    }
}

impl Tightest {
    /// Offers quota `q` of policy `index`, booked `debt ≤ τ` ns ahead.
    #[inline(always)]
    fn offer(&mut self, index: usize, q: usize, rule: &Rule, debt: u64) {
        self.offer_counted(index, q, rule.remaining(debt), debt);
    }

    /// Offers quota `q` of policy `index` as `gauge` describes it (GCRA: used = reset = debt).
    fn offer_gauge(&mut self, index: usize, q: usize, gauge: Gauge) {
        self.offer_counted(index, q, gauge.remaining(), gauge.reset_after_nanos());
    }

    #[inline(always)]
    fn offer_counted(&mut self, index: usize, q: usize, remaining: u32, debt: u64) {
        let remaining = u64::from(remaining);
        if remaining < self.remaining || (remaining == self.remaining && debt > self.debt) {
            self.remaining = remaining;
            self.debt = debt;
            self.at = (index, q);
        }
    }

    /// The tightest quota, for [`Admitted`] to describe when asked.
    #[inline]
    fn found<'p, R: ?Sized, C: Clock>(&self, set: &'p Policies<R, C>) -> Option<Tight<'p>> {
        if self.remaining == u64::MAX {
            return None;
        }
        let (index, q) = self.at;
        let layer = &set.layers[index];
        Some(Tight {
            policy: &layer.name,
            index,
            quota_index: q,
            debt: self.debt,
            live: &layer.quotas[q],
        })
    }
}

/// How one quota answered a decision.
enum Outcome {
    /// Admitted: the words written (if any; an untracked new key writes none), the debt left,
    /// and the rule it was admitted under.
    Taken {
        wrote: Option<(u64, u64)>,
        debt: u64,
        rule: Rule,
    },
    /// Refused, under this quota.
    Refused(Refused, Quota),
    /// `n` above this quota's burst.
    Oversized(Quota),
}

/// Counts a dry-run policy's would-be refusal, and reports it if it is the first.
#[cold]
fn would_refuse<'p, R: ?Sized, C: Clock>(
    layer: &Layer<R, C>,
    dry_run: &mut Option<DryRun<'p>>,
    state: QuotaState<'p>,
    wait: u64,
) {
    // Relaxed: a statistic; nothing is ordered by it.
    layer.refused.fetch_add(1, Ordering::Relaxed);
    dry_run.get_or_insert(DryRun { state, wait });
}

/// `n` cells asked of quota `q` of `layer`, whose burst is smaller.
#[cold]
fn oversized<'p, R: ?Sized, C: Clock>(
    layer: &'p Layer<R, C>,
    index: usize,
    q: usize,
    n: u32,
    quota: Quota,
) -> Oversized<'p> {
    Oversized {
        policy: &layer.name,
        index,
        quota_index: q,
        quota,
        capacity: InsufficientCapacity {
            requested: n,
            burst: quota.burst(),
        },
    }
}

/// One cell never exceeds a burst (every burst is at least 1); were it reported anyway, a
/// refusal that never conforms is the safe answer.
#[cold]
fn unreachable_oversized(oversized: Oversized<'_>) -> Result<Admitted<'_>, Rejected<'_>> {
    debug_assert!(false, "one cell exceeded a burst");
    let limit = oversized.capacity.burst;
    Err(Rejected {
        by: QuotaState {
            policy: oversized.policy,
            index: oversized.index,
            quota_index: oversized.quota_index,
            quota: oversized.quota,
            gauge: Gauge::new(u64::from(limit), 1, limit, u64::MAX),
        },
        wait: u64::MAX,
        jitter: 0,
        cause: crate::Cause::Quota,
        dry_run: None,
    })
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
