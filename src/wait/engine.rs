//! The waiting loops: what one attempt found ([`Attempt`]), how a decision's answer becomes one
//! ([`judge`]), and the blocking ([`block`]) and asynchronous ([`until`]) loops that sleep
//! between attempts and give a reservation back when a wait is abandoned.

use core::future::Future;
use core::time::Duration;

use crate::cell::Receipt;
use crate::clock::Clock;
use crate::jitter;
use crate::outcome::policy;
use crate::outcome::{judge, Admission, Allowed, Attempt, GiveBack, InsufficientCapacity, Refused};

/// How a wait behaves: how long it may last, and the jitter its retries add.
///
/// ```
/// use core::time::Duration;
/// use flowgate::WaitOptions;
///
/// let patient = WaitOptions::new()
///     .at_most(Duration::from_secs(2))
///     .jitter(Duration::ZERO, Duration::from_millis(50));
/// # let _ = patient;
/// ```
#[must_use = "options do nothing until a wait is given them"]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitOptions {
    max_wait: u64,
    jitter: (u64, u64),
}

impl WaitOptions {
    /// No bound and no jitter: what `wait` and `until_ready` use.
    pub const fn new() -> Self {
        Self {
            max_wait: u64::MAX,
            jitter: (0, 0),
        }
    }

    /// Waits at most `max_wait`: a wait known to be longer ends at once with
    /// [`Error::Refused`](crate::Error::Refused), taking nothing.
    pub fn at_most(self, max_wait: Duration) -> Self {
        Self {
            max_wait: nanos(max_wait),
            ..self
        }
    }

    /// Each retry (the retry discipline) sleeps the refusal's `retry_after` plus a uniform draw
    /// from `[min, max]` (the bounds swapped if given the wrong way round), so that waiters
    /// refused together do not come back together (governor's remedy for a thundering herd).
    /// A draw never makes a wait exceed its bound. The generator is the per-thread one that
    /// [`seed_jitter`](crate::policy::seed_jitter) seeds; a policy's own jitter, already in its
    /// refusals, comes on top.
    pub fn jitter(self, min: Duration, max: Duration) -> Self {
        let (min, max) = (nanos(min), nanos(max));
        Self {
            jitter: (min.min(max), min.max(max)),
            ..self
        }
    }

    /// The sleep before a retry due in `wait` ns, with `left` ns of the bound left
    /// (`wait ≤ left`). Out of line: an uncontended wait never retries.
    #[cold]
    #[inline(never)]
    fn retry_sleep(&self, wait: u64, left: u64) -> Duration {
        let (min, max) = self.jitter;
        let extra = if max == 0 { 0 } else { jitter::draw(min, max) };
        Duration::from_nanos(wait.saturating_add(extra.min(left.saturating_sub(wait))))
    }
}

impl Default for WaitOptions {
    fn default() -> Self {
        Self::new()
    }
}

/// The attempt a reservation makes ([`RateLimiter::reserve`](crate::RateLimiter::reserve) and
/// its keyed twin), with `left` ns of the budget left: as [`judge`], the receipt held by
/// `holder` (if the admission wrote anything) giving the cells back. `shaping`: the algorithm
/// admits with delays, so that its refusals mean a full queue.
pub(crate) fn judge_reservation<G: GiveBack>(
    reservation: Result<Result<(Allowed, Receipt), Refused>, InsufficientCapacity>,
    holder: impl FnOnce(Receipt) -> G,
    left: u64,
    shaping: bool,
) -> Attempt<G, Allowed, crate::Error> {
    let (answer, reserved) = match reservation {
        Err(capacity) => return Attempt::Fail(capacity.into()),
        Ok(Err(refused)) => (Err(refused), None),
        Ok(Ok((allowed, receipt))) => (Ok(allowed), (!receipt.is_empty()).then(|| holder(receipt))),
    };
    judge(answer, reserved, left, |_| shaping)
}

/// Nanoseconds of a `Duration`, saturating.
fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// Takes `n` cells from every quota of every policy of `backend` that applies to `request`,
/// sleeping through `sleep` until all admit at once, within `options`' bound: the one wait
/// over the [`Backend`] seam, whatever the backend. Each refusal is slept out for its
/// retry-after (plus `options`' jitter, measured on the backend's clock); an admission a
/// shaping quota delays is a booking that the wait sleeps on, given back if the future is
/// dropped first. Cancellation-safe: between attempts it holds nothing.
///
/// ```
/// use flowgate::policy::{Policies, Policy};
/// use flowgate::wait::{until_ready, WaitOptions};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let limits = Policies::<str>::builder()
///     .policy(Policy::keyed("user", |user: &str| user).quota("2/min".parse()?))
///     .build()?;
/// let bounded = WaitOptions::new().at_most(core::time::Duration::from_millis(10));
/// let sleep = |_| async {};
/// assert!(until_ready(&limits, "alice", 2, bounded, sleep).await.is_ok());
/// // The next cell is 30 s away: past the bound, refused at once.
/// assert!(until_ready(&limits, "alice", 1, bounded, sleep).await.is_err());
/// # Ok(())
/// # }
/// # block_on(run()).unwrap();
/// # fn block_on<F: core::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
/// # }
/// ```
///
/// # Errors
/// [`Error::Capacity`](policy::Error::Capacity) if `n` exceeds an enforcing quota's capacity; [`Error::Refused`](policy::Error::Refused) when
/// the wait would exceed the bound, or a refusal never conforms (a failure policy's refusals
/// included: they are waited out like any other).
///
/// [`Backend`]: crate::backend::Backend
pub async fn until_ready<R, B, F>(
    backend: &B,
    request: &R,
    n: u32,
    options: WaitOptions,
    sleep: impl FnMut(Duration) -> F,
) -> Result<policy::Allowed, policy::Error>
where
    R: ?Sized,
    B: crate::backend::Backend<R>,
    F: Future<Output = ()>,
{
    let now = || backend.now();
    let attempt = |_, left| backend.attempt(request, n, left);
    sleeping(now, options, now(), None, attempt, sleep).await
}

/// The blocking loop: attempts (given the reading and what is left of `max_wait`) until one is
/// ready or fails, sleeping through `clock` in between and before going ahead.
pub(crate) fn block<C: Clock, G: GiveBack, A: Admission>(
    clock: &C,
    options: WaitOptions,
    mut attempt: impl FnMut(u64, u64) -> Attempt<G, A, A::Error>,
) -> Result<A, A::Error> {
    let start = clock.now();
    let mut now = start;
    loop {
        // A clock that steps back counts as no time spent.
        let left = options.max_wait.saturating_sub(now.saturating_sub(start));
        match attempt(now, left) {
            Attempt::Ready { value, delay, .. } => {
                if delay > 0 {
                    clock.sleep(Duration::from_nanos(delay));
                }
                return Ok(value);
            }
            Attempt::Retry(wait) => clock.sleep(options.retry_sleep(wait, left)),
            Attempt::Fail(error) => return Err(error),
        }
        now = clock.now();
    }
}

/// Gives a reservation back when dropped, unless the wait completed.
struct Reservation<G: GiveBack> {
    reserved: Option<G>,
}

impl<G: GiveBack> Drop for Reservation<G> {
    fn drop(&mut self) {
        if let Some(reserved) = self.reserved.take() {
            reserved.give_back();
        }
    }
}

/// The asynchronous loop: as [`block`], sleeping through `sleep`; a reservation is given back
/// if the future is dropped while it sleeps on it.
pub(crate) async fn until<C: Clock, G: GiveBack, A: Admission, F: Future<Output = ()>>(
    clock: &C,
    options: WaitOptions,
    mut attempt: impl FnMut(u64, u64) -> Attempt<G, A, A::Error>,
    sleep: impl FnMut(Duration) -> F,
) -> Result<A, A::Error> {
    let start = clock.now();
    match attempt(start, options.max_wait) {
        // The uncontended case: nothing to sleep for, and the future stays small (the waiting
        // loop is boxed, allocated only by a wait that sleeps).
        Attempt::Ready {
            value, delay: 0, ..
        } => Ok(value),
        Attempt::Fail(error) => Err(error),
        first => {
            let attempt = |now, left| core::future::ready(attempt(now, left));
            let now = || clock.now();
            Box::pin(sleeping(now, options, start, Some(first), attempt, sleep)).await
        }
    }
}

/// The loop of an asynchronous wait that began at `start` (by `now`'s readings), from its
/// `first` attempt if it has one: each attempt (given the reading and what is left of
/// `max_wait`) awaited, refusals slept out, and an admission's delay slept on with its
/// reservation armed, given back if the future is dropped first. [`until`] once its first
/// attempt asked for a sleep, and the wait over the seam ([`until_ready`]).
async fn sleeping<G, A, E, T, F>(
    now: impl Fn() -> u64,
    options: WaitOptions,
    start: u64,
    mut first: Option<Attempt<G, A, E>>,
    mut attempt: impl FnMut(u64, u64) -> T,
    mut sleep: impl FnMut(Duration) -> F,
) -> Result<A, E>
where
    G: GiveBack,
    T: Future<Output = Attempt<G, A, E>>,
    F: Future<Output = ()>,
{
    let mut reading = start;
    loop {
        // A clock that steps back counts as no time spent.
        let left = options
            .max_wait
            .saturating_sub(reading.saturating_sub(start));
        let this = match first.take() {
            Some(first) => first,
            None => attempt(reading, left).await,
        };
        match this {
            Attempt::Ready {
                value,
                delay,
                reserved,
            } => {
                // Armed before the sleep: however the rest goes (the future dropped while it
                // sleeps), the reservation is given back unless the wait completes.
                let mut guard = Reservation { reserved };
                if delay > 0 {
                    sleep(Duration::from_nanos(delay)).await;
                }
                // Slept through: the reservation is the caller's to use.
                guard.reserved = None;
                return Ok(value);
            }
            Attempt::Retry(wait) => sleep(options.retry_sleep(wait, left)).await,
            Attempt::Fail(error) => return Err(error),
        }
        reading = now();
    }
}
