//! Rate-limited streams and sinks (feature `futures`): [`RateLimited`], a `Stream` that yields
//! its inner stream's items no faster than a limit allows, and [`RateLimitedSink`], a `Sink`
//! that passes items on to its inner sink no faster. Each item costs cells: one by default, or
//! what a cost function says (bytes, rows, tokens). The limit is a [`RateLimiter`] (in an
//! `Arc`), or any [`Backend`] (a policy set, in process or in Redis) with the request every
//! item is decided for: [`Over`].
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use futures_util::StreamExt;
//! use flowgate::stream::RateLimited;
//! use flowgate::{clock::TokioClock, Quota, RateLimiter};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let runtime = tokio::runtime::Builder::new_current_thread()
//! #     .enable_time()
//! #     .start_paused(true)
//! #     .build()?;
//! # runtime.block_on(async {
//! // 1 000 bytes a second, a burst of 1 000: chunks cost their length.
//! let limiter = Arc::new(RateLimiter::with_clock(Quota::per_second(1_000)?, TokioClock::new()));
//! let chunks = futures_util::stream::iter([vec![0u8; 500], vec![0; 1_500], vec![0; 250]]);
//! let mut limited = RateLimited::new(chunks, limiter).with_cost(|chunk: &Vec<u8>| chunk.len() as u32);
//! let start = tokio::time::Instant::now();
//! limited.next().await; // 500 of the 1 000 at once
//! limited.next().await; // 500 now, 1 000 more a second later
//! assert_eq!(start.elapsed(), Duration::from_secs(1));
//! limited.next().await; // 250 more: a quarter second
//! assert_eq!(start.elapsed(), Duration::from_millis(1_250));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })
//! # }
//! ```
//!
//! # How an item is paid for
//! An item takes its cells as they come: [`RateLimiter::check_up_to`] (or
//! [`Backend::check_up_to`]) takes what the bucket holds (the tightest quota), up to what the
//! item still owes, and when it holds none the adapter sleeps on its timer for the refusal's
//! `retry_after` (plus a draw of jitter, if [`with_jitter`](RateLimited::with_jitter) asks) and
//! asks again. So an item costing more than the
//! burst still passes (over more than one burst's time, at the limiter's rate), and
//! nothing is ever dropped or refused. With a shaping algorithm the cells may come with a
//! delay ([`Allowed::delay`](crate::Allowed::delay)), which the adapter sleeps before the item
//! goes on.
//!
//! **Fair.** Items go on in their stream's order. An item holds the cells it has taken while it
//! waits for the rest, so several streams or sinks sharing one limiter each progress: a costly
//! item is not starved by cheap ones that would otherwise take every cell the moment it
//! appears (as happens when each waits for all its cells at once).
//!
//! **Cancellation-safe.** Dropping the stream or sink, or a future that drives it, between two
//! polls: an item that has taken part of its cost gives back exactly what may be given back
//! ([`RateLimiter::give_back`]): the cells it took since another request last took some, and
//! only if no request took any after them (a request decided against cells keeps them booked);
//! an item pulled from the inner stream but not yet yielded stays in the adapter. Cells taken
//! through a [`Backend`] are not given back (a remote booking cannot be undone exactly): they
//! stay spent, which can leave cells unused and never admits an item too many.
//!
//! # Time
//! `RateLimited::new` and `RateLimitedSink::new` sleep on tokio's timer (feature `tokio`);
//! [`with_timer`](RateLimited::with_timer) takes any other: a function from a duration to a
//! future that ends once it has passed, never before (`futures_timer::Delay::new`,
//! `async_io::Timer::after` with its output dropped, …; `Send`, as the adapters are), so that
//! the adapters run on any executor. A timer that ends early lets a refused item ask again
//! sooner (and be refused again), but a shaper's delay is not checked again: its item goes on
//! early. The limiter's clock must agree with the timer: `clock::TokioClock` with tokio's (it
//! also follows a paused test clock), the default clock with a timer of real time. A timer that
//! moves a [`ManualClock`](crate::clock::ManualClock) instead of sleeping runs with no executor
//! at all:
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use futures_util::{FutureExt, StreamExt};
//! use flowgate::clock::ManualClock;
//! use flowgate::stream::RateLimited;
//! use flowgate::RateLimiter;
//!
//! let clock = ManualClock::new();
//! let limiter = Arc::new(RateLimiter::with_clock("10/s burst 1".parse()?, clock.clone()));
//! let timer = clock.clone();
//! let sleep = move |wait: Duration| {
//!     timer.advance(wait);
//!     core::future::ready(())
//! };
//! let items = RateLimited::with_timer(futures_util::stream::iter(0..3), limiter, sleep);
//! // Nothing ever waits for real time: the stream ends within one poll.
//! assert_eq!(items.collect::<Vec<_>>().now_or_never(), Some(vec![0, 1, 2]));
//! assert_eq!(clock.get(), 200_000_000); // the burst at once, then one every 100 ms
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod limited;
mod payment;
mod sink;

pub use self::limited::RateLimited;
pub use self::payment::{Over, Payee};
pub use self::sink::RateLimitedSink;

#[cfg(doc)]
use crate::{backend::Backend, RateLimiter};
