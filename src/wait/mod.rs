//! Waiting for cells instead of being refused: the engine behind the blocking waits (which
//! sleep through the limiter's clock) and the asynchronous ones (which sleep through a timer you
//! pass, or tokio's with the `tokio` feature) of every limiter kind. The methods themselves sit
//! beside each type: [`RateLimiter::wait`](crate::RateLimiter::wait),
//! [`KeyedRateLimiter::wait_key`](crate::KeyedRateLimiter::wait_key),
//! [`Policies::wait`](crate::Policies::wait) and their `until_*` forms.
//!
//! # Two disciplines, chosen by the limiter's algorithm
//! * **Retry** (every algorithm that refuses: [`Gcra`](crate::Gcra), the windows, policies): a
//!   refused caller sleeps for the refusal's [`retry_after`](Refused::retry_after), then asks
//!   again. Under contention another caller may take the cell first; the waiter then sleeps
//!   again, so waiters are not served in arrival order (a policy's jitter spreads them out).
//! * **Reservation** (the shaping algorithms,
//!   [`LeakyBucket::shaper`](crate::algorithm::LeakyBucket::shaper) and
//!   [`Credit`](crate::algorithm::Credit), chosen by
//!   [`Algorithm::max_delay_nanos`](crate::Algorithm::max_delay_nanos)): a caller books its
//!   slot on arrival, in one compare-and-swap, and sleeps for the [`delay`](Allowed::delay) it
//!   was given. Waiters are served in the order they booked (first in, first out), nobody is
//!   overtaken, no herd forms, and the queue is bounded by the algorithm's maximum delay: a
//!   caller who would wait longer is refused at once and books nothing. A policy set whose
//!   quotas include a shaping one reserves the same way, all or nothing across its quotas.
//!
//! A keyed table (or a keyed policy) that is full refuses new keys ([`Cause::TableFull`]); a
//! wait retries after the refusal's hint until a key is evicted (run a
//! [`Sweeper`](crate::Sweeper)), so an unbounded wait on a table that stays full waits as long.
//! [`WaitOptions::jitter`] spreads the retries of waiters refused together.
//!
//! # Bounded waits
//! The `try_wait_*_for`, `*_within` and [`WaitOptions::at_most`] variants never sleep only to
//! fail when that is known in advance: a refusal whose `retry_after`, or a reservation whose
//! delay, exceeds what is left of `max_wait` ends the wait at once with [`Error::Refused`]. A
//! reservation found too long is given back by an exact compare-and-swap from the word it wrote
//! to the word it replaced; if another caller booked after it in the meantime, it gives way and
//! the slot stays booked, unused (at most `n` cells of under-admission; never an extra
//! admission). Under the retry discipline a waiter overtaken while asleep can still run out of
//! time after sleeping.
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
//! [`RateLimiter::reset`](crate::RateLimiter::reset) the bucket can come back to that very word
//! through other bookings, and a give-back then takes the later booking instead (one slot of
//! over-admission). Reset a limiter only while no bounded or asynchronous wait is sleeping on a
//! reservation.
//!
//! [`Cause::TableFull`]: crate::Cause::TableFull

mod engine;

pub(crate) use crate::outcome::{as_is, judge};
pub use crate::outcome::{Attempt, GiveBack};
pub(crate) use engine::{block, judge_reservation, until};
pub use engine::{until_ready, WaitOptions};

#[cfg(doc)]
use crate::clock::Clock;
#[cfg(doc)]
use crate::outcome::{Allowed, Error, Refused};
