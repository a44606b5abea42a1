//! [`RateLimiter`]: one bucket (one `AtomicU64`), its algorithm and clock, and what users call.

#[cfg(feature = "std")]
mod wait;

use crate::algorithm::{Algorithm, Gcra};
use crate::cell::{noting, recording, Cell, Receipt, Wrote};
#[cfg(feature = "std")]
use crate::clock::QuantaClock;
use crate::clock::{Clock, DefaultClock};
use crate::outcome::{Allowed, InsufficientCapacity, Refused};
use crate::quota::Quota;

/// A rate limiter for one stream of requests: a single bucket whose whole state is one
/// `AtomicU64`, updated with a lock-free compare-and-swap loop, deciding with the
/// [`Algorithm`] `A` (GCRA unless chosen otherwise, see [`RateLimiter::with_algorithm`]).
///
/// ```
/// use flowgate::{Quota, RateLimiter};
///
/// let limiter = RateLimiter::new(Quota::per_second(10)?);
/// match limiter.check() {
///     Ok(allowed) => assert_eq!(allowed.remaining(), 9),
///     Err(refused) => panic!("a fresh bucket refused; retry after {:?}", refused.retry_after()),
/// }
/// # Ok::<(), flowgate::QuotaError>(())
/// ```
///
/// # Concurrency
/// Every method takes `&self`; share the limiter with `Arc` or a `static`. A decision is one
/// clock read, one load and (when admitted) one successful compare-and-swap; a refusal writes
/// nothing. (Only after the clock steps back does a refusal take a second, fresh reading to
/// clamp the bucket; see the [`clock` module](crate::clock).) No lock, allocation or syscall
/// is on the decision path.
///
/// # Time
/// All state is in nanoseconds since the Unix epoch, as the limiter's [`Clock`] reads it, once
/// per decision. Tests drive time with a [`ManualClock`](crate::clock::ManualClock). See the
/// [`clock` module](crate::clock) for what happens when readings go backwards, and the crate
/// docs' [Guarantees](crate#guarantees) for overflow at the clock's horizon (the year 2554).
#[derive(Debug)]
pub struct RateLimiter<C: Clock = DefaultClock, A: Algorithm = Gcra> {
    cell: Cell,
    algorithm: A,
    clock: C,
}

#[cfg(feature = "std")]
impl RateLimiter<QuantaClock> {
    /// A GCRA limiter for `quota` on the default clock, starting as [`Quota::initial`] says.
    pub fn new(quota: Quota) -> Self {
        Self::with_clock(quota, QuantaClock::new())
    }
}

impl<C: Clock> RateLimiter<C> {
    /// A GCRA limiter for `quota` on `clock`, starting as [`Quota::initial`] says.
    pub fn with_clock(quota: Quota, clock: C) -> Self {
        Self::with_algorithm(Gcra::new(&quota), clock)
    }
}

impl<C: Clock, A: Algorithm> RateLimiter<C, A> {
    /// A limiter deciding with `algorithm` on `clock`, starting as its quota's
    /// [`Quota::initial`] says.
    pub fn with_algorithm(algorithm: A, clock: C) -> Self {
        let word = algorithm.initial_word(clock.now());
        Self {
            cell: Cell::new(word),
            algorithm,
            clock,
        }
    }

    /// The quota this limiter enforces.
    pub fn quota(&self) -> &Quota {
        self.algorithm.quota()
    }

    /// The algorithm this limiter decides with.
    pub fn algorithm(&self) -> &A {
        &self.algorithm
    }

    /// The limiter's clock, which its decisions read.
    pub fn clock(&self) -> &C {
        &self.clock
    }
}

/// # Checking
impl<C: Clock, A: Algorithm> RateLimiter<C, A> {
    /// Takes one cell if one is available now.
    ///
    /// # Performance
    /// One clock read and one CAS; see `BENCHMARKS.md` for measured nanoseconds and
    /// instructions.
    #[inline(always)]
    pub fn check(&self) -> Result<Allowed, Refused> {
        self.check_at(self.clock.now())
    }

    /// Takes one cell if one is available at `now` (a reading of this limiter's clock).
    ///
    /// Pass fresh readings: a reading older than one already used on this limiter is judged as
    /// of its own time, and admitting at an old time can pass up to `age / interval` cells
    /// early. (A stale reading never *frees* cells: see the [`clock` module](crate::clock).)
    #[inline(always)]
    pub(crate) fn check_at(&self, now: u64) -> Result<Allowed, Refused> {
        // burst ≥ 1, so one cell is never more than the burst.
        self.answer(self.cell.update(|tat| self.algorithm.check(tat, now, 1)))
    }

    /// Takes `n` cells at once if they are all available now; otherwise takes nothing.
    ///
    /// `n = 0` is always allowed and takes nothing.
    ///
    /// # Errors
    /// The outer `Err` is [`InsufficientCapacity`] when `n` exceeds the burst: that request can
    /// never succeed and must not be retried. The inner `Err` is a [`Refused`] that says when it
    /// can.
    #[inline(always)]
    pub fn check_n(&self, n: u32) -> Result<Result<Allowed, Refused>, InsufficientCapacity> {
        self.check_n_at(n, self.clock.now())
    }

    /// [`check_n`](Self::check_n) at `now` (a reading of this limiter's clock).
    ///
    /// # Errors
    /// As [`check_n`](Self::check_n).
    #[inline(always)]
    pub(crate) fn check_n_at(
        &self,
        n: u32,
        now: u64,
    ) -> Result<Result<Allowed, Refused>, InsufficientCapacity> {
        if n == 0 {
            // Takes nothing: the bucket as it is (what `peek_at(0, now)` answers, inline: an
            // out-of-line call returning the outcome through memory would make every answer of
            // this function go through a copy).
            return Ok(Ok(self.algorithm.state(self.cell.load(), now)));
        }
        self.within_burst(n)?;
        Ok(self.answer(self.cell.update(|tat| self.algorithm.check(tat, now, n))))
    }

    /// Takes as many cells as the bucket holds now, up to `n`, and says how many: `Ok((k,
    /// allowed))` with `1 ≤ k ≤ n`, or the refusal of one cell when it holds none (which says
    /// when one will be there). The count and the take are one atomic step, unlike
    /// [`available`](Self::available) then [`check_n`](Self::check_n), where another request
    /// can take cells in between. `n` may exceed the burst (at most a burst is ever taken), and
    /// `n = 0` takes nothing: `Ok((0, state))`.
    ///
    /// `k` is the most that [`check_n`](Self::check_n) would admit at this moment: with a
    /// shaping algorithm ([`LeakyBucket::shaper`](crate::algorithm::LeakyBucket::shaper),
    /// [`Credit`](crate::algorithm::Credit)) that includes cells queued within its maximum
    /// delay, and [`Allowed::delay`] is the last one's.
    ///
    /// ```
    /// use flowgate::{clock::ManualClock, Quota, RateLimiter};
    ///
    /// let limiter = RateLimiter::with_clock(Quota::per_second(10)?, ManualClock::new());
    /// let (taken, _) = limiter.check_up_to(4).unwrap();
    /// assert_eq!(taken, 4);
    /// let (taken, allowed) = limiter.check_up_to(100).unwrap(); // only 6 are left
    /// assert_eq!((taken, allowed.remaining()), (6, 0));
    /// assert!(limiter.check_up_to(100).is_err()); // none left: when is the next one?
    /// # Ok::<(), flowgate::QuotaError>(())
    /// ```
    #[inline]
    pub fn check_up_to(&self, n: u32) -> Result<(u32, Allowed), Refused> {
        self.check_up_to_at(n, self.clock.now())
    }

    /// [`check_up_to`](Self::check_up_to) at `now` (a reading of this limiter's clock).
    #[inline]
    pub(crate) fn check_up_to_at(&self, n: u32, now: u64) -> Result<(u32, Allowed), Refused> {
        self.up_to(n, now, &mut None)
    }

    /// [`check_up_to`](Self::check_up_to) with a [`Receipt`] of what it took, to give it back
    /// exactly ([`give_back`](Self::give_back)); as [`reserve`](Self::reserve) is to
    /// [`check_n`](Self::check_n).
    ///
    /// # Errors
    /// As [`check_up_to`](Self::check_up_to).
    pub fn reserve_up_to(&self, n: u32) -> Result<(u32, Allowed, Receipt), Refused> {
        let mut wrote = None;
        let (k, allowed) = self.up_to(n, self.clock.now(), &mut wrote)?;
        Ok((k, allowed, Receipt::new(0, wrote)))
    }

    /// Up to `n` cells at `now`, noting in `wrote` what was written.
    #[inline(always)]
    fn up_to(&self, n: u32, now: u64, wrote: &mut Wrote) -> Result<(u32, Allowed), Refused> {
        if n == 0 {
            return Ok((0, self.algorithm.state(self.cell.load(), now)));
        }
        let step = |word| crate::algorithm::up_to(&self.algorithm, word, now, n);
        let answer = self.cell.update(noting(step, wrote));
        if let Err(refused) = &answer {
            if refused.clock_behind() {
                self.catch_up();
            }
        }
        answer
    }

    /// Takes `n` cells as [`check_n`](Self::check_n) does, with a [`Receipt`] of what the
    /// admission wrote, so that the cells can be given back exactly if the work they were for
    /// is not done ([`give_back`](Self::give_back)). With
    /// [`LeakyBucket::shaper`](crate::algorithm::LeakyBucket::shaper) or
    /// [`Credit`](crate::algorithm::Credit), the admission may carry a delay the caller must
    /// wait before going ahead ([`Allowed::delay`]): a place in the queue, which the receipt
    /// gives up.
    ///
    /// # Errors
    /// As [`check_n`](Self::check_n).
    #[inline]
    pub fn reserve(
        &self,
        n: u32,
    ) -> Result<Result<(Allowed, Receipt), Refused>, InsufficientCapacity> {
        self.reserve_at(n, self.clock.now())
    }

    /// [`reserve`](Self::reserve) at `now` (a reading of this limiter's clock).
    ///
    /// # Errors
    /// As [`check_n`](Self::check_n).
    pub(crate) fn reserve_at(
        &self,
        n: u32,
        now: u64,
    ) -> Result<Result<(Allowed, Receipt), Refused>, InsufficientCapacity> {
        if n == 0 {
            return Ok(Ok((
                self.algorithm.state(self.cell.load(), now),
                Receipt::default(),
            )));
        }
        self.within_burst(n)?;
        let mut wrote = None;
        let answer = self.answer(
            self.cell
                .update(recording(&self.algorithm, now, n, &mut wrote)),
        );
        Ok(answer.map(|allowed| (allowed, Receipt::new(0, wrote))))
    }

    /// Gives back the cells of the admission `receipt` describes, exactly: the bucket returns
    /// to the word the admission replaced if it still holds the word the admission wrote.
    /// Whether it did; if another request changed the bucket since, it is left as it is and the
    /// cells stay taken (see [`Receipt`]).
    pub fn give_back(&self, receipt: Receipt) -> bool {
        match receipt.wrote() {
            // A single limiter's receipt: no tag.
            Some((0, before, after)) => self.cell.restore(after, before),
            _ => false,
        }
    }

    /// The decision [`check_n`](Self::check_n) would make now, without taking anything.
    ///
    /// # Errors
    /// As [`check_n`](Self::check_n).
    pub fn peek(&self, n: u32) -> Result<Result<Allowed, Refused>, InsufficientCapacity> {
        self.peek_at(n, self.clock.now())
    }

    /// [`peek`](Self::peek) at `now` (a reading of this limiter's clock).
    ///
    /// # Errors
    /// As [`check_n`](Self::check_n).
    pub(crate) fn peek_at(
        &self,
        n: u32,
        now: u64,
    ) -> Result<Result<Allowed, Refused>, InsufficientCapacity> {
        self.within_burst(n)?;
        let tat = self.cell.load();
        if n == 0 {
            return Ok(Ok(self.algorithm.state(tat, now)));
        }
        Ok(self.algorithm.peek(tat, now, n))
    }

    /// Forgets past requests: the bucket starts over as [`Quota::initial`] says, as of now
    /// (full by default).
    pub fn reset(&self) {
        self.cell
            .store(self.algorithm.initial_word(self.clock.now()));
    }

    /// Passes the answer on; first, if it was refused because the bucket is booked more than a
    /// window ahead of the reading, clamps the bucket against a fresh reading (see
    /// [`Gcra::catch_up`]).
    #[inline(always)]
    fn answer(&self, answer: Result<Allowed, Refused>) -> Result<Allowed, Refused> {
        if let Err(refused) = &answer {
            if refused.clock_behind() {
                self.catch_up();
            }
        }
        answer
    }

    fn catch_up(&self) {
        self.cell.catch_up(&self.algorithm, &self.clock);
    }

    #[inline(always)]
    fn within_burst(&self, n: u32) -> Result<(), InsufficientCapacity> {
        InsufficientCapacity::check(n, self.algorithm.capacity())
    }
}

/// # What the bucket holds
impl<C: Clock, A: Algorithm> RateLimiter<C, A> {
    /// Cells (tokens) available now.
    pub fn available(&self) -> u32 {
        self.algorithm
            .state(self.cell.load(), self.clock.now())
            .remaining()
    }
}
