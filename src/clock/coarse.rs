//! [`CoarseClock`]: a reading refreshed by a background thread, read with one relaxed load.

use core::time::Duration;
use std::io;
use std::sync::{Arc, Weak};

use super::{Clock, QuantaClock};
use crate::primitive::{AtomicU64, Ordering};

/// A clock that a background thread refreshes every `resolution`; reading it is one relaxed
/// load of a shared word, a few times cheaper than reading the CPU counter.
///
/// # Precision
/// A reading lags the true time by up to `resolution` plus the thread's scheduling delay (on a
/// loaded machine, possibly milliseconds more). A lagging reading is an early one, and flowgate's
/// decisions are monotone in time, so the lag can only make a limiter stricter: a request can be
/// refused up to one lag before it would have conformed, and its `retry_after` is late by as
/// much. No request is ever admitted early.
///
/// Readings never go backwards: the updater publishes the maximum it has read.
///
/// The updater thread holds only a weak reference and ends within one `resolution` after the
/// last clone of the clock is dropped.
#[derive(Debug, Clone)]
pub struct CoarseClock {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    now: AtomicU64,
    source: QuantaClock,
}

impl CoarseClock {
    /// Starts a clock refreshed every `resolution` (e.g. 1 ms) from a new [`QuantaClock`].
    ///
    /// # Errors
    /// `InvalidInput` if `resolution` is zero (the updater would spin), or the error of
    /// spawning the updater thread.
    pub fn new(resolution: Duration) -> io::Result<Self> {
        if resolution.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "CoarseClock resolution must be above zero",
            ));
        }
        let source = QuantaClock::new();
        let shared = Arc::new(Shared {
            now: AtomicU64::new(source.now()),
            source,
        });
        let weak: Weak<Shared> = Arc::downgrade(&shared);
        std::thread::Builder::new()
            .name("flowgate-coarse-clock".into())
            .spawn(move || {
                let mut latest = 0;
                while let Some(shared) = weak.upgrade() {
                    // Never backwards, even if this thread moves to a core whose counter lags.
                    latest = shared.source.now().max(latest);
                    // Release: pairs with the Acquire in `now` (see `cell`'s "Orderings").
                    shared.now.store(latest, Ordering::Release);
                    drop(shared);
                    std::thread::sleep(resolution);
                }
            })?;
        Ok(Self { shared })
    }
}

impl Clock for CoarseClock {
    #[inline]
    fn now(&self) -> u64 {
        // Acquire: a reading is never older than one that happened before it (see `cell`'s
        // "Orderings"); staleness against the true time is allowed (see "Precision").
        self.shared.now.load(Ordering::Acquire)
    }
}
