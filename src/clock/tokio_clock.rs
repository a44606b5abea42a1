//! [`TokioClock`]: time as tokio's timer sees it (feature `tokio`).

use core::time::Duration;

use super::Clock;

/// A clock that reads tokio's clock ([`tokio::time::Instant`]): nanoseconds since the Unix
/// epoch, as the Unix time of construction (see the [module docs](super)) plus tokio's time
/// elapsed since. Inside a runtime whose time is paused (`#[tokio::test(start_paused = true)]`), it
/// follows the paused time, so a limiter on it and the asynchronous waits that sleep through
/// `tokio::time::sleep` agree on every reading, and tests of asynchronous waits take no real
/// time. (A *blocking* wait sleeps the thread, which paused time does not see: in a paused
/// runtime it never ends. Use the asynchronous waits there.)
///
/// For production use the default [`QuantaClock`](super::QuantaClock) is cheaper; the waits work
/// with any clock.
///
/// [`tokio::time::Instant`]: https://docs.rs/tokio/1/tokio/time/struct.Instant.html
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    origin: tokio::time::Instant,
    /// The Unix time at `origin`, in ns.
    base: u64,
}

impl TokioClock {
    /// A clock reading Unix time, moving on as tokio's time does.
    pub fn new() -> Self {
        Self {
            origin: tokio::time::Instant::now(),
            base: super::unix_nanos(std::time::Instant::now()),
        }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for TokioClock {
    fn now(&self) -> u64 {
        let elapsed = tokio::time::Instant::now().saturating_duration_since(self.origin);
        self.base.saturating_add(super::nanos(elapsed))
    }

    /// Blocks the thread (`std::thread::sleep`); in asynchronous code, wait with the
    /// `until_*` methods instead, which sleep through tokio's timer.
    fn sleep(&self, duration: Duration) {
        std::thread::sleep(duration);
    }
}
