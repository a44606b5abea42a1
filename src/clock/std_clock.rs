//! [`StdClock`]: `std::time::Instant`, for those who prefer the OS clock to the CPU counter.

use std::time::Instant;

use super::Clock;

/// The operating system's monotonic clock (`std::time::Instant`, `CLOCK_MONOTONIC` on Linux),
/// for deployments that distrust the timestamp counter. It costs more per reading than
/// [`QuantaClock`](super::QuantaClock) (`cargo bench -p flowgate-benches --bench direct` times
/// both).
///
/// A reading is nanoseconds since the Unix epoch: the Unix time of construction (from the
/// process's one reading of the wall clock, see the [module docs](super)) plus the monotonic
/// time elapsed since.
#[derive(Debug, Clone, Copy)]
pub struct StdClock {
    origin: Instant,
    /// The Unix time at `origin`, in ns.
    base: u64,
}

impl StdClock {
    /// A clock reading Unix time.
    pub fn new() -> Self {
        let origin = Instant::now();
        Self {
            origin,
            base: super::unix_nanos(origin),
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
        self.base.saturating_add(super::nanos(elapsed))
    }

    /// 10 µs, as for [`QuantaClock`](super::QuantaClock): the OS clock reads the same counter.
    fn skew_nanos(&self) -> u64 {
        super::quanta::COUNTER_SKEW_NANOS
    }
}
