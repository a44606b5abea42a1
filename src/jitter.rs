//! Random jitter: uniform draws in `[min, max]` from a per-thread generator that tests seed with
//! [`seed_jitter`], for a policy's retry-after and for the retries of a wait.
//!
//! The generator is wyrand (a 64-bit Weyl sequence through a 128-bit multiply): a handful of
//! instructions, no lock, no shared state, and statistically sound for spreading retries. It is
//! not cryptographic, and need not be: jitter only spreads honest clients' retries. Each thread
//! starts from its own random seed unless [`seed_jitter`] gives one.

use core::cell::Cell;

std::thread_local! {
    /// The generator's state; 0 until first used or seeded.
    static STATE: Cell<u64> = const { Cell::new(0) };
}

/// Seeds this thread's jitter generator: the same seed gives the same jitter afterwards, on this
/// thread (for tests and reproducible simulations). The generator serves a policy's
/// [`jitter`](crate::Policy::jitter) and [`WaitOptions::jitter`](crate::WaitOptions::jitter).
///
/// ```
/// use core::time::Duration;
/// use flowgate::clock::ManualClock;
/// use flowgate::policy::{seed_jitter, Policies, Policy};
/// use flowgate::Quota;
///
/// let policies = Policies::<()>::builder()
///     .clock(ManualClock::new())
///     .policy(
///         Policy::global("global")
///             .quota(Quota::per_second(1)?)
///             .jitter(Duration::from_millis(10), Duration::from_millis(20)),
///     )
///     .build()?;
/// assert!(policies.check(&()).is_ok());
/// seed_jitter(7);
/// let first = policies.check(&()).unwrap_err().retry_after();
/// seed_jitter(7);
/// let again = policies.check(&()).unwrap_err().retry_after();
/// assert_eq!(first, again);
/// assert!(first >= Duration::from_millis(1010) && first <= Duration::from_millis(1020));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn seed_jitter(seed: u64) {
    // 0 marks an unseeded generator; a seed of 0 is as good as any other.
    STATE.with(|state| state.set(seed | 1 << 63));
}

/// The jitter, in ns, a policy with the range `(min, max)` ns adds to a refusal that conforms
/// in `wait` ns: a draw from this thread's generator ([`seed_jitter`]), or none for a policy
/// without jitter or a refusal that never conforms. What a backend adds to its refusals.
pub fn refusal_jitter((min, max): (u64, u64), wait: u64) -> u64 {
    if max > 0 && wait != u64::MAX {
        draw(min, max)
    } else {
        0
    }
}

/// A uniform draw in `[min, max]` (`min ≤ max`), in nanoseconds.
pub(crate) fn draw(min: u64, max: u64) -> u64 {
    debug_assert!(min <= max);
    let span = max - min;
    if span == 0 {
        return min;
    }
    let x = next();
    if span == u64::MAX {
        return x;
    }
    // Multiply-shift: uniform up to a bias of span / 2⁶⁴, far below anything a client notices.
    min + ((u128::from(x) * u128::from(span + 1)) >> 64) as u64
}

/// The next 64 random bits from this thread's generator.
fn next() -> u64 {
    STATE.with(|state| {
        let mut s = state.get();
        if s == 0 {
            s = ahash::RandomState::new().hash_one(0u8) | 1;
        }
        s = s.wrapping_add(0xa076_1d64_78bd_642f);
        state.set(s);
        let t = u128::from(s) * u128::from(s ^ 0xe703_7ed1_a0b4_28db);
        (t >> 64) as u64 ^ t as u64
    })
}

#[cfg(all(test, not(flowgate_loom)))]
mod tests {
    use super::*;

    #[test]
    fn draws_cover_the_range_and_stay_in_it() {
        seed_jitter(1);
        let (mut low, mut high) = (false, false);
        for _ in 0..10_000 {
            let x = draw(5, 9);
            assert!((5..=9).contains(&x));
            low |= x == 5;
            high |= x == 9;
        }
        assert!(low && high);
        assert_eq!(draw(3, 3), 3);
        let _ = draw(0, u64::MAX);
    }

    #[test]
    fn a_seed_repeats_its_draws() {
        seed_jitter(42);
        let a: Vec<u64> = (0..8).map(|_| draw(0, 1_000_000)).collect();
        seed_jitter(42);
        let b: Vec<u64> = (0..8).map(|_| draw(0, 1_000_000)).collect();
        assert_eq!(a, b);
        seed_jitter(43);
        let c: Vec<u64> = (0..8).map(|_| draw(0, 1_000_000)).collect();
        assert_ne!(a, c);
    }
}
