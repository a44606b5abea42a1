//! Waiting for cells instead of being refused: blocking waits that sleep through the limiter's
//! clock, and asynchronous ones that sleep through a timer you pass (or tokio's, with the
//! `tokio` feature), on every limiter kind: [`RateLimiter`], [`KeyedRateLimiter`] and
//! [`Policies`](crate::Policies).
//!
//! # Two disciplines, chosen by the limiter's algorithm
//! * **Retry** (every algorithm that refuses: [`Gcra`](crate::Gcra), the windows, policies): a
//!   refused caller sleeps for the refusal's [`retry_after`](Refused::retry_after), then asks
//!   again. Under contention another caller may take the cell first; the waiter then sleeps
//!   again, so waiters are not served in arrival order (a policy's jitter spreads them out).
//! * **Reservation** (the shaping algorithms,
//!   [`LeakyBucket::shaper`](crate::algorithm::LeakyBucket::shaper) and
//!   [`Credit`](crate::algorithm::Credit), chosen by [`Algorithm::max_delay_nanos`]): a caller
//!   books its slot on arrival, in one compare-and-swap, and sleeps for the
//!   [`delay`](Allowed::delay) it was given. Waiters are served in the order they booked (first
//!   in, first out), nobody is overtaken, no herd forms, and the queue is bounded by the
//!   algorithm's maximum delay: a caller who would wait longer is refused at once and books
//!   nothing.
//!
//! A keyed table (or a keyed policy) that is full refuses new keys ([`Cause::TableFull`]); a
//! wait retries after the refusal's hint until a key is evicted (run a
//! [`Sweeper`](crate::Sweeper)), so an unbounded wait on a table that stays full waits as long.
//! [`WaitOptions::jitter`] spreads the retries of waiters refused together.
//!
//! [`Cause::TableFull`]: crate::Cause::TableFull
//!
//! # Bounded waits
//! The `try_wait_*_for`, `*_within` and [`WaitOptions::at_most`] variants never sleep only to
//! fail when that is known in
//! advance: a refusal whose `retry_after`, or a reservation whose delay, exceeds what is left of
//! `max_wait` ends the wait at once with [`WaitError::TooLong`]. A reservation found too long is
//! given back by an exact compare-and-swap from the word it wrote to the word it replaced; if
//! another caller booked after it in the meantime, it gives way and the slot stays booked, unused
//! (at most `n` cells of under-admission; never an extra admission). Under the retry discipline
//! a waiter overtaken while asleep can still run out of time after sleeping.
//!
//! # Cancellation (asynchronous waits)
//! Dropping a future of an asynchronous wait is safe at any point:
//! * while it sleeps before a retry, it holds nothing: the bucket is as if the caller never came;
//! * while it sleeps on a reservation, its reservation is given back, by the same exact
//!   compare-and-swap as above (so it gives way, leaving its slot unused, if someone booked after
//!   it: a queue does not shift).
//!
//! # Time
//! Blocking waits sleep through the limiter's clock ([`Clock::sleep`]): a
//! [`ManualClock`](crate::clock::ManualClock) moves itself forwards instead of sleeping, so
//! tests of waits take no real time. They need a clock that moves while the thread sleeps
//! (every clock flowgate ships, outside a paused tokio runtime): on a clock that stands still
//! a wait that must sleep never ends.
//!
//! Asynchronous waits sleep through the timer given, which must agree with the limiter's
//! clock: a timer that returns early makes the wait ask again sooner (a retry) or go ahead
//! sooner (a reservation, whose delay is not checked again). With the `tokio` feature,
//! `clock::TokioClock` follows tokio's clock, paused or not; the default
//! clock agrees with tokio's timer only when time is not paused. An asynchronous wait books
//! nothing until it is first polled: its place in a queue is taken then.
//!
//! An admission a wait returns has been waited for: its [`delay`](Allowed::delay) is already
//! slept.
//!
//! A reservation is given back by an exact compare-and-swap of the word it wrote; after
//! [`RateLimiter::reset`] the bucket can come back to that very word through other bookings,
//! and a give-back then takes the later booking instead (one slot of over-admission). Reset a
//! limiter only while no bounded or asynchronous wait is sleeping on a reservation.

use core::fmt;
use core::future::Future;
use core::time::Duration;

use crate::algorithm::Algorithm;
use crate::clock::Clock;
use crate::decision::{Allowed, Cause, InsufficientCapacity, Refused};
use crate::keyed::KeyedRateLimiter;
use crate::limiter::RateLimiter;

/// Why a wait ended without cells: `O` is the "never" error of the limiter kind
/// ([`InsufficientCapacity`], or a policy set's [`Oversized`](crate::policy::Oversized)), `R`
/// its refusal ([`Refused`], or [`Rejected`](crate::policy::Rejected)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitError<R = Refused, O = InsufficientCapacity> {
    /// More cells than a bucket holds: the request can never succeed.
    Capacity(O),
    /// The wait would be longer than allowed (the bounded variants' `max_wait`; a shaping
    /// algorithm's maximum delay; or never, past the clock's 584-year horizon). The refusal says
    /// how long it would have been; nothing was taken.
    TooLong(R),
}

impl<R: fmt::Display, O: fmt::Display> fmt::Display for WaitError<R, O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaitError::Capacity(capacity) => capacity.fmt(f),
            WaitError::TooLong(refused) => write!(f, "the wait would be too long: {refused}"),
        }
    }
}

impl<R: fmt::Debug + fmt::Display, O: fmt::Debug + fmt::Display> std::error::Error
    for WaitError<R, O>
{
}

/// How a `*_with` wait behaves: how long it may last, and the jitter its retries add.
///
/// ```
/// use core::time::Duration;
/// use flowgate::wait::WaitOptions;
///
/// let patient = WaitOptions::new()
///     .at_most(Duration::from_secs(2))
///     .jitter(Duration::ZERO, Duration::from_millis(50));
/// # let _ = patient;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitOptions {
    max_wait: u64,
    jitter: (u64, u64),
}

impl WaitOptions {
    /// No bound and no jitter: what [`RateLimiter::wait`] and `until_ready` use.
    pub const fn new() -> Self {
        Self {
            max_wait: u64::MAX,
            jitter: (0, 0),
        }
    }

    /// Waits at most `max_wait`: a wait known to be longer ends at once with
    /// [`WaitError::TooLong`], taking nothing.
    pub fn at_most(self, max_wait: Duration) -> Self {
        Self {
            max_wait: nanos(max_wait),
            ..self
        }
    }

    /// Each retry (the retry discipline) sleeps the refusal's `retry_after` plus a uniform draw
    /// from `[min, max]` (the bounds swapped if given the wrong way round), so that waiters
    /// refused together do not come back together (governor's remedy for a thundering herd).
    /// A draw never makes a wait exceed its bound. The generator is the policies' per-thread
    /// one, which [`seed_jitter`](crate::policy::seed_jitter) seeds; a policy's own jitter,
    /// already in its refusals, comes on top.
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
        let extra = if max == 0 {
            0
        } else {
            crate::policy::jitter::draw(min, max)
        };
        Duration::from_nanos(wait.saturating_add(extra.min(left.saturating_sub(wait))))
    }
}

impl Default for WaitOptions {
    fn default() -> Self {
        Self::new()
    }
}

/// What one attempt of a wait found.
pub(crate) enum Attempt<T, R, O> {
    /// Admitted: go ahead after `delay` ns. `reserved` holds the bucket's tag (keyed; 0
    /// otherwise) and its words before and after    /// a reservation (a delay > 0), for giving it back if the wait is abandoned.
    Ready {
        value: T,
        delay: u64,
        reserved: Option<(u64, u64, u64)>,
    },
    /// Refused for now: sleep this many ns and ask again.
    Retry(u64),
    /// The wait ends without cells.
    Fail(WaitError<R, O>),
}

/// The attempt an answer of a single-bucket decision makes, with `left` ns of the budget left:
/// a reservation beyond it is given back with `give_back(before, after)`; a shaping
/// algorithm's refusal (its queue is full) ends the wait.
pub(crate) fn judge(
    answer: Result<Allowed, Refused>,
    (tag, wrote): (u64, Option<(u64, u64)>),
    left: u64,
    shaping: bool,
    give_back: impl FnOnce(u64, u64, u64),
) -> Attempt<Allowed, Refused, InsufficientCapacity> {
    match answer {
        Ok(allowed) => {
            let delay = allowed.delay_nanos();
            if delay > left {
                if let Some((before, after)) = wrote {
                    give_back(tag, before, after);
                }
                return Attempt::Fail(WaitError::TooLong(Refused::new(allowed.gauge(), delay)));
            }
            Attempt::Ready {
                value: allowed,
                delay,
                reserved: wrote
                    .filter(|_| delay > 0)
                    .map(|(before, after)| (tag, before, after)),
            }
        }
        Err(refused) => {
            // At least 1 ns: a custom algorithm's zero wait must not spin.
            let wait = refused.retry_after_nanos().max(1);
            // A shaping algorithm refuses on its quota only when its queue is full; a keyed
            // table's refusals (full table, new-key quota) are waited out like any other.
            let queue_full = shaping && refused.cause() == Cause::Quota;
            if queue_full || wait == u64::MAX || wait > left {
                Attempt::Fail(WaitError::TooLong(refused))
            } else {
                Attempt::Retry(wait)
            }
        }
    }
}

/// The attempt of a wait for zero cells, which takes nothing and never waits: the bucket as
/// `state` (a zero-cell check or peek) found it.
fn as_is(
    state: Result<Result<Allowed, Refused>, InsufficientCapacity>,
) -> Attempt<Allowed, Refused, InsufficientCapacity> {
    match state {
        Ok(Ok(state)) => Attempt::Ready {
            value: state,
            delay: 0,
            reserved: None,
        },
        Ok(Err(refused)) => Attempt::Fail(WaitError::TooLong(refused)),
        Err(capacity) => Attempt::Fail(WaitError::Capacity(capacity)),
    }
}

/// Nanoseconds of a `Duration`, saturating.
fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// The blocking loop: attempts (given the reading and what is left of `max_wait`) until one is
/// ready or fails, sleeping through `clock` in between and before going ahead.
pub(crate) fn block<C: Clock, T, R, O>(
    clock: &C,
    options: WaitOptions,
    mut attempt: impl FnMut(u64, u64) -> Attempt<T, R, O>,
) -> Result<T, WaitError<R, O>> {
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

/// Gives a reservation (tag, words before and after) back when dropped, unless the wait
/// completed.
struct Reservation<G: FnMut(u64, u64, u64)> {
    words: Option<(u64, u64, u64)>,
    give_back: G,
}

impl<G: FnMut(u64, u64, u64)> Drop for Reservation<G> {
    fn drop(&mut self) {
        if let Some((tag, before, after)) = self.words.take() {
            (self.give_back)(tag, before, after);
        }
    }
}

/// The asynchronous loop: as [`block`], sleeping through `sleep`; a reservation is given back
/// (`give_back`) if the future is dropped while it sleeps on it.
pub(crate) async fn until<C: Clock, T, R, O, F: Future<Output = ()>>(
    clock: &C,
    options: WaitOptions,
    mut attempt: impl FnMut(u64, u64) -> Attempt<T, R, O>,
    give_back: impl FnMut(u64, u64, u64),
    sleep: impl FnMut(Duration) -> F,
) -> Result<T, WaitError<R, O>> {
    let start = clock.now();
    match attempt(start, options.max_wait) {
        // The uncontended case: nothing to sleep for, and the future stays small (the waiting
        // loop is boxed, allocated only by a wait that sleeps).
        Attempt::Ready {
            value, delay: 0, ..
        } => Ok(value),
        Attempt::Fail(error) => Err(error),
        first => {
            // Armed before the box is made: however the rest goes (even dropped unpolled),
            // a reservation the first attempt made is given back unless the wait completes.
            let words = match &first {
                Attempt::Ready { reserved, .. } => *reserved,
                _ => None,
            };
            let guard = Reservation { words, give_back };
            Box::pin(sleeping(
                clock, options, start, first, attempt, guard, sleep,
            ))
            .await
        }
    }
}

/// [`until`] once its first attempt asked for a sleep.
async fn sleeping<C: Clock, T, R, O, F: Future<Output = ()>>(
    clock: &C,
    options: WaitOptions,
    start: u64,
    first: Attempt<T, R, O>,
    mut attempt: impl FnMut(u64, u64) -> Attempt<T, R, O>,
    mut guard: Reservation<impl FnMut(u64, u64, u64)>,
    mut sleep: impl FnMut(Duration) -> F,
) -> Result<T, WaitError<R, O>> {
    let mut now = start;
    let mut next = Some(first);
    loop {
        let left = options.max_wait.saturating_sub(now.saturating_sub(start));
        let this = match next.take() {
            Some(first) => first,
            None => attempt(now, left),
        };
        match this {
            Attempt::Ready {
                value,
                delay,
                reserved,
            } => {
                if delay > 0 {
                    guard.words = reserved;
                    sleep(Duration::from_nanos(delay)).await;
                    // Slept through: the reservation is the caller's to use.
                    guard.words = None;
                }
                return Ok(value);
            }
            Attempt::Retry(wait) => sleep(options.retry_sleep(wait, left)).await,
            Attempt::Fail(error) => return Err(error),
        }
        now = clock.now();
    }
}

/// # Waiting
impl<C: Clock, A: Algorithm> RateLimiter<C, A> {
    /// Takes `n` cells, sleeping (through the clock) until they are available: see the
    /// [`wait` module docs](crate::wait) for the two disciplines.
    ///
    /// ```
    /// use core::time::Duration;
    /// use flowgate::{clock::ManualClock, Quota, RateLimiter};
    ///
    /// let clock = ManualClock::new();
    /// let limiter = RateLimiter::with_clock(Quota::per_second(2)?, clock.clone());
    /// limiter.wait(2)?; // the burst, at once
    /// limiter.wait(1)?; // half a second later: a manual clock moves instead of sleeping
    /// assert_eq!(clock.get(), Duration::from_millis(500).as_nanos() as u64);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`WaitError::Capacity`] if `n` exceeds the burst; [`WaitError::TooLong`] if the cells
    /// would only come back past the clock's horizon, or a shaping algorithm's queue is full.
    pub fn wait(&self, n: u32) -> Result<Allowed, WaitError> {
        self.wait_with(n, WaitOptions::new())
    }

    /// [`wait`](Self::wait) as `options` say (a bound, jitter on retries).
    ///
    /// # Errors
    /// As [`try_wait_for`](Self::try_wait_for).
    pub fn wait_with(&self, n: u32, options: WaitOptions) -> Result<Allowed, WaitError> {
        block(self.clock(), options, |now, left| {
            self.attempt(n, now, left)
        })
    }

    /// [`wait`](Self::wait), but for at most `max_wait`: a wait known to be longer returns
    /// [`WaitError::TooLong`] at once, taking nothing.
    ///
    /// # Errors
    /// As [`wait`](Self::wait), and [`WaitError::TooLong`] when the wait would exceed
    /// `max_wait`.
    pub fn try_wait_for(&self, n: u32, max_wait: Duration) -> Result<Allowed, WaitError> {
        self.wait_with(n, WaitOptions::new().at_most(max_wait))
    }

    /// [`wait_with`](Self::wait_with) without blocking a thread: sleeps through `sleep` (any
    /// async timer: `tokio::time::sleep`, `async_io::Timer::after`, …). Cancellation-safe (see
    /// the [module docs](crate::wait#cancellation-asynchronous-waits)).
    ///
    /// # Errors
    /// As [`try_wait_for`](Self::try_wait_for).
    pub fn until_ready_with<'a, F: Future<Output = ()> + 'a>(
        &'a self,
        n: u32,
        options: WaitOptions,
        sleep: impl FnMut(Duration) -> F + 'a,
    ) -> impl Future<Output = Result<Allowed, WaitError>> + 'a {
        let attempt = move |now, left| self.attempt(n, now, left);
        let give_back = move |_, before, after| {
            self.restore(before, after);
        };
        until(self.clock(), options, attempt, give_back, sleep)
    }

    #[inline]
    fn attempt(
        &self,
        n: u32,
        now: u64,
        left: u64,
    ) -> Attempt<Allowed, Refused, InsufficientCapacity> {
        if n == 0 {
            return as_is(self.check_n_at(0, now));
        }
        let shaping = self.algorithm().max_delay_nanos() > 0;
        // The words are noted whatever the algorithm says of itself: any admission with a delay
        // is a reservation that may have to be given back.
        let mut wrote = None;
        match self.check_recording(n, now, &mut wrote) {
            Ok(answer) => judge(answer, (0, wrote), left, shaping, |_, before, after| {
                self.restore(before, after);
            }),
            Err(capacity) => Attempt::Fail(WaitError::Capacity(capacity)),
        }
    }
}

/// # Waiting
impl<K: ?Sized + core::hash::Hash, C: Clock, A: Algorithm> KeyedRateLimiter<K, C, A> {
    /// Takes `n` cells from `key`'s bucket, sleeping (through the clock) until they are
    /// available; as [`RateLimiter::wait`].
    ///
    /// # Errors
    /// As [`RateLimiter::wait`].
    pub fn wait_key(&self, key: &K, n: u32) -> Result<Allowed, WaitError> {
        self.wait_key_with(key, n, WaitOptions::new())
    }

    /// [`wait_key`](Self::wait_key) as `options` say.
    ///
    /// # Errors
    /// As [`RateLimiter::try_wait_for`].
    pub fn wait_key_with(
        &self,
        key: &K,
        n: u32,
        options: WaitOptions,
    ) -> Result<Allowed, WaitError> {
        block(self.clock(), options, |now, left| {
            self.attempt_key(key, n, now, left)
        })
    }

    /// [`wait_key`](Self::wait_key) for at most `max_wait`; as [`RateLimiter::try_wait_for`].
    ///
    /// # Errors
    /// As [`RateLimiter::try_wait_for`].
    pub fn try_wait_key_for(
        &self,
        key: &K,
        n: u32,
        max_wait: Duration,
    ) -> Result<Allowed, WaitError> {
        self.wait_key_with(key, n, WaitOptions::new().at_most(max_wait))
    }

    /// [`wait_key`](Self::wait_key) without blocking a thread; as
    /// [`RateLimiter::until_ready_with`].
    ///
    /// # Errors
    /// As [`RateLimiter::try_wait_for`].
    pub fn until_key_ready_with<'a, F: Future<Output = ()> + 'a>(
        &'a self,
        key: &'a K,
        n: u32,
        options: WaitOptions,
        sleep: impl FnMut(Duration) -> F + 'a,
    ) -> impl Future<Output = Result<Allowed, WaitError>> + 'a {
        let attempt = move |now, left| self.attempt_key(key, n, now, left);
        // The tag the reservation was made with (not the key hashed again).
        let give_back = move |tag, before, after| {
            self.restore_tag(tag, before, after);
        };
        until(self.clock(), options, attempt, give_back, sleep)
    }

    fn attempt_key(
        &self,
        key: &K,
        n: u32,
        now: u64,
        left: u64,
    ) -> Attempt<Allowed, Refused, InsufficientCapacity> {
        if n == 0 {
            return as_is(self.peek_key_at(key, 0, now));
        }
        let mut wrote = None;
        match self.check_key_recording(key, n, now, &mut wrote) {
            Ok((answer, tag, shaping)) => {
                judge(answer, (tag, wrote), left, shaping, |tag, before, after| {
                    self.restore_tag(tag, before, after);
                })
            }
            Err(capacity) => Attempt::Fail(WaitError::Capacity(capacity)),
        }
    }
}

/// A policy set's wait error.
pub type PolicyWaitError<'p> = WaitError<crate::policy::Rejected<'p>, crate::policy::Oversized<'p>>;

/// # Waiting
///
/// Every quota of a policy set is GCRA, so its waits retry: a refused request sleeps for the
/// refusal's [`retry_after`](crate::policy::Rejected::retry_after) (which covers every refusing
/// quota and carries the refusing policy's jitter, so that waiters refused together do not
/// come back together), then asks again.
// A policy refusal is large (see `policy`'s note on `result_large_err`); boxing it would
// allocate on every refusal.
#[allow(clippy::result_large_err)]
impl<R: ?Sized, C: Clock> crate::Policies<R, C> {
    /// Takes `n` cells from every quota that applies to `request`, sleeping (through the clock)
    /// until all are available at once.
    ///
    /// # Errors
    /// [`WaitError::Capacity`] (an [`Oversized`](crate::policy::Oversized)) if `n` exceeds an
    /// enforcing quota's burst; [`WaitError::TooLong`] only past the clock's horizon.
    pub fn wait(
        &self,
        request: &R,
        n: u32,
    ) -> Result<crate::policy::Admitted<'_>, PolicyWaitError<'_>> {
        self.wait_with(request, n, WaitOptions::new())
    }

    /// [`wait`](Self::wait) as `options` say (a bound, jitter on retries on top of the
    /// policies' own).
    ///
    /// # Errors
    /// As [`try_wait_for`](Self::try_wait_for).
    pub fn wait_with(
        &self,
        request: &R,
        n: u32,
        options: WaitOptions,
    ) -> Result<crate::policy::Admitted<'_>, PolicyWaitError<'_>> {
        block(self.clock(), options, |now, left| {
            self.attempt(request, n, now, left)
        })
    }

    /// [`wait`](Self::wait) for at most `max_wait`: a wait known to be longer returns
    /// [`WaitError::TooLong`] at once, taking nothing.
    ///
    /// # Errors
    /// As [`wait`](Self::wait), and [`WaitError::TooLong`] when the wait would exceed
    /// `max_wait`.
    pub fn try_wait_for(
        &self,
        request: &R,
        n: u32,
        max_wait: Duration,
    ) -> Result<crate::policy::Admitted<'_>, PolicyWaitError<'_>> {
        self.wait_with(request, n, WaitOptions::new().at_most(max_wait))
    }

    /// [`wait_with`](Self::wait_with) without blocking a thread, sleeping through `sleep`.
    /// Cancellation-safe: between attempts it holds nothing.
    ///
    /// # Errors
    /// As [`try_wait_for`](Self::try_wait_for).
    pub async fn until_ready_with<F: Future<Output = ()>>(
        &self,
        request: &R,
        n: u32,
        options: WaitOptions,
        sleep: impl FnMut(Duration) -> F,
    ) -> Result<crate::policy::Admitted<'_>, PolicyWaitError<'_>> {
        let attempt = |now, left| self.attempt(request, n, now, left);
        // A policy decision never reserves ahead: nothing to give back.
        until(self.clock(), options, attempt, |_, _, _| {}, sleep).await
    }

    fn attempt<'p>(
        &'p self,
        request: &R,
        n: u32,
        now: u64,
        left: u64,
    ) -> Attempt<
        crate::policy::Admitted<'p>,
        crate::policy::Rejected<'p>,
        crate::policy::Oversized<'p>,
    > {
        match self.check_n_at(request, n, now) {
            Ok(Ok(admitted)) => Attempt::Ready {
                value: admitted,
                delay: 0,
                reserved: None,
            },
            Ok(Err(rejected)) => {
                // Judged by when the request conforms; the policy's jitter (in `retry_after`)
                // is added only as far as the bound allows, like `WaitOptions::jitter`.
                let conforms = u64::try_from(rejected.conforms_after().as_nanos())
                    .unwrap_or(u64::MAX)
                    .max(1);
                if conforms == u64::MAX || conforms > left {
                    Attempt::Fail(WaitError::TooLong(rejected))
                } else {
                    Attempt::Retry(rejected.retry_after_nanos().clamp(conforms, left))
                }
            }
            Err(oversized) => Attempt::Fail(WaitError::Capacity(oversized)),
        }
    }
}

/// # Waiting on tokio's timer (feature `tokio`)
#[cfg(feature = "tokio")]
impl<C: Clock, A: Algorithm> RateLimiter<C, A> {
    /// [`until_ready_with`](Self::until_ready_with) on `tokio::time::sleep`, with no bound.
    ///
    /// ```
    /// use flowgate::{clock::TokioClock, Quota, RateLimiter};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let clock = TokioClock::new();
    /// let limiter = RateLimiter::with_clock(Quota::per_second(1)?, clock);
    /// let start = tokio::time::Instant::now();
    /// limiter.until_ready(1).await?; // at once
    /// limiter.until_ready(1).await?; // a second later, on tokio's (here paused) clock
    /// assert_eq!(start.elapsed(), std::time::Duration::from_secs(1));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// As [`wait`](Self::wait).
    pub fn until_ready(&self, n: u32) -> impl Future<Output = Result<Allowed, WaitError>> + '_ {
        self.until_ready_with(n, WaitOptions::new(), tokio::time::sleep)
    }

    /// [`until_ready`](Self::until_ready) for at most `max_wait`.
    ///
    /// # Errors
    /// As [`try_wait_for`](Self::try_wait_for).
    pub fn until_ready_within(
        &self,
        n: u32,
        max_wait: Duration,
    ) -> impl Future<Output = Result<Allowed, WaitError>> + '_ {
        self.until_ready_with(n, WaitOptions::new().at_most(max_wait), tokio::time::sleep)
    }
}

/// # Waiting on tokio's timer (feature `tokio`)
#[cfg(feature = "tokio")]
impl<K: ?Sized + core::hash::Hash, C: Clock, A: Algorithm> KeyedRateLimiter<K, C, A> {
    /// [`until_key_ready_with`](Self::until_key_ready_with) on `tokio::time::sleep`, with no
    /// bound.
    ///
    /// # Errors
    /// As [`wait_key`](Self::wait_key).
    pub fn until_key_ready<'a>(
        &'a self,
        key: &'a K,
        n: u32,
    ) -> impl Future<Output = Result<Allowed, WaitError>> + 'a {
        self.until_key_ready_with(key, n, WaitOptions::new(), tokio::time::sleep)
    }

    /// [`until_key_ready`](Self::until_key_ready) for at most `max_wait`.
    ///
    /// # Errors
    /// As [`try_wait_key_for`](Self::try_wait_key_for).
    pub fn until_key_ready_within<'a>(
        &'a self,
        key: &'a K,
        n: u32,
        max_wait: Duration,
    ) -> impl Future<Output = Result<Allowed, WaitError>> + 'a {
        self.until_key_ready_with(
            key,
            n,
            WaitOptions::new().at_most(max_wait),
            tokio::time::sleep,
        )
    }
}

/// # Waiting on tokio's timer (feature `tokio`)
#[cfg(feature = "tokio")]
#[allow(clippy::result_large_err)]
impl<R: ?Sized, C: Clock> crate::Policies<R, C> {
    /// [`until_ready_with`](Self::until_ready_with) on `tokio::time::sleep`, with no bound.
    ///
    /// # Errors
    /// As [`wait`](Self::wait).
    pub async fn until_ready(
        &self,
        request: &R,
        n: u32,
    ) -> Result<crate::policy::Admitted<'_>, PolicyWaitError<'_>> {
        self.until_ready_with(request, n, WaitOptions::new(), tokio::time::sleep)
            .await
    }

    /// [`until_ready`](Self::until_ready) for at most `max_wait`.
    ///
    /// # Errors
    /// As [`try_wait_for`](Self::try_wait_for).
    pub async fn until_ready_within(
        &self,
        request: &R,
        n: u32,
        max_wait: Duration,
    ) -> Result<crate::policy::Admitted<'_>, PolicyWaitError<'_>> {
        self.until_ready_with(
            request,
            n,
            WaitOptions::new().at_most(max_wait),
            tokio::time::sleep,
        )
        .await
    }
}
