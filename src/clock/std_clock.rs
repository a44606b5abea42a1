//! [`StdClock`]: `std::time::Instant`, for those who prefer the OS clock to the CPU counter.

use std::time::Instant;

use super::Clock;

/// The operating system's monotonic clock (`std::time::Instant`, `CLOCK_MONOTONIC` on Linux),
/// for deployments that distrust the timestamp counter. About twice the cost of
/// [`QuantaClock`](super::QuantaClock) per reading (see `BENCHMARKS.md`).
///
/// The origin is the moment of construction; clones share it.
#[derive(Debug, Clone, Copy)]
pub struct StdClock {
    origin: Instant,
}

impl StdClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        Self {
            origin: Instant::now(),
        }
    }
}

impl Default for StdClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for StdClock {
    #[inline]
    fn now(&self) -> u64 {
        // `saturating_duration_since`: never panics should the OS clock step back.
        let elapsed = Instant::now().saturating_duration_since(self.origin);
        u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX)
    }

    /// 10 µs, as for [`QuantaClock`](super::QuantaClock): the OS clock reads the same counter.
    fn skew_nanos(&self) -> u64 {
        super::quanta::COUNTER_SKEW_NANOS
    }
}
