//! [`QuantaClock`]: the default clock, the CPU's timestamp counter read through `quanta`.

use super::Clock;

/// The default clock: the CPU's invariant timestamp counter (`rdtsc` on x86-64, `cntvct_el0` on
/// AArch64) through [`quanta`], falling back to the OS monotonic clock where quanta finds the
/// counter unreliable.
///
/// # How a reading becomes nanoseconds
/// quanta calibrates the counter against the OS monotonic clock once per process. At
/// construction this clock asks quanta how many nanoseconds 2³² ticks are, and afterwards turns
/// a reading into nanoseconds with one 64×64-bit multiply and a fixed shift, instead of quanta's
/// general scaling on each call. The factor is rounded down, so this clock never runs faster
/// than quanta's own (the difference is below one part in 10⁹ of elapsed time), and a limiter
/// on it is never more permissive than one on [`quanta::Clock::now`].
///
/// On x86-64, when quanta has chosen the timestamp counter (verified at construction: quanta's
/// raw reading falls between two `rdtsc` reads), the counter is read inline rather than through
/// quanta's out-of-line dispatch, which saves about a quarter of the cost of a decision.
///
/// A reading is nanoseconds since the Unix epoch: the counter's ticks since construction,
/// scaled, added to the Unix time of construction (from the process's one reading of the wall
/// clock, see the [module docs](super)). A counter on another core lagging by a few cycles
/// behind the construction reads as the construction, and past the year 2554 readings stay at
/// `u64::MAX`.
///
/// [`quanta`]: https://docs.rs/quanta/0.12
/// [`quanta::Clock::now`]: https://docs.rs/quanta/0.12/quanta/struct.Clock.html#method.now
#[derive(Debug, Clone)]
pub struct QuantaClock {
    clock: ::quanta::Clock,
    /// The counter at construction, and the Unix time then in ns.
    origin: u64,
    base: u64,
    nanos_per_2_32_ticks: u64,
    inline_tsc: bool,
}

impl QuantaClock {
    /// A clock reading Unix time.
    ///
    /// The first clock in a process waits for quanta's calibration (a few milliseconds).
    pub fn new() -> Self {
        let clock = ::quanta::Clock::new();
        let nanos_per_2_32_ticks = clock.delta_as_nanos(0, 1 << 32);
        let inline_tsc = tsc::reads_like(&clock);
        let origin = clock.raw();
        Self {
            clock,
            origin,
            base: super::unix_nanos(std::time::Instant::now()),
            nanos_per_2_32_ticks,
            inline_tsc,
        }
    }

    #[inline(always)]
    fn raw(&self) -> u64 {
        if self.inline_tsc {
            tsc::read()
        } else {
            self.clock.raw()
        }
    }
}

impl Default for QuantaClock {
    fn default() -> Self {
        Self::new()
    }
}

/// The skew tolerance of a hardware counter: cross-core offsets of an invariant TSC that the
/// OS has synchronized are far below this (tens of nanoseconds), and an unordered `rdtsc` may
/// execute a few dozen cycles early.
pub(super) const COUNTER_SKEW_NANOS: u64 = 10_000;

impl Clock for QuantaClock {
    #[inline]
    fn now(&self) -> u64 {
        let ticks = self.raw().saturating_sub(self.origin);
        let nanos = (u128::from(ticks) * u128::from(self.nanos_per_2_32_ticks)) >> 32;
        // The nanoseconds since construction fit in a u64 for 584 years of the process.
        self.base.saturating_add(nanos as u64)
    }

    /// 10 µs: cross-core counter offsets and an unordered counter read.
    fn skew_nanos(&self) -> u64 {
        COUNTER_SKEW_NANOS
    }
}

// Miri cannot execute `rdtsc`; under Miri the clock reads through quanta only.
#[cfg(all(target_arch = "x86_64", not(miri)))]
mod tsc {
    /// Reads the timestamp counter.
    #[inline(always)]
    pub(super) fn read() -> u64 {
        // SAFETY: `rdtsc` has no preconditions: it reads a register every x86-64 CPU has (the
        // intrinsic is `unsafe` only because all `core::arch` intrinsics were declared so). It is
        // used only after `reads_like` saw quanta itself reading this counter.
        unsafe { core::arch::x86_64::_rdtsc() }
    }

    /// Whether `clock.raw()` reads the timestamp counter (quanta's `Counter` source), checked by
    /// bracketing one quanta reading between two of ours, a few times.
    pub(super) fn reads_like(clock: &quanta::Clock) -> bool {
        (0..3).any(|_| {
            let before = read();
            let raw = clock.raw();
            let after = read();
            before <= raw && raw <= after && after - before < 1 << 20
        })
    }
}

#[cfg(not(all(target_arch = "x86_64", not(miri))))]
mod tsc {
    pub(super) fn read() -> u64 {
        0
    }

    pub(super) fn reads_like(_: &quanta::Clock) -> bool {
        false
    }
}
