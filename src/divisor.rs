//! [`Divisor`]: exact division by a number fixed in advance, as one 64×64→128-bit multiply and
//! two shifts instead of a hardware divide (tens of cycles, and a policy decision divides once
//! per quota to find the tightest one).
//!
//! The method is Granlund and Montgomery's ("Division by invariant integers using
//! multiplication", PLDI 1994, figure 4.1), for `N = 64`: with `ℓ = ⌈log₂ d⌉` and
//! `m = ⌊2⁶⁴·(2^ℓ − d) / d⌋ + 1` (which fits in 64 bits), every `n < 2⁶⁴` has
//! `⌊n / d⌋ = (t + ((n − t) >> min(ℓ, 1))) >> max(ℓ − 1, 0)` where `t = ⌊m·n / 2⁶⁴⌋`. The
//! tests check it against `/` on the edges of every power of two and on random pairs.

/// A divisor `d ≥ 1`, prepared for exact division.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Divisor {
    magic: u64,
    /// `min(ℓ, 1)` in the low byte, `max(ℓ − 1, 0)` in the next.
    shifts: u16,
}

impl Divisor {
    /// Prepares `d` (0 is taken as 1).
    pub(crate) const fn new(d: u64) -> Self {
        let d = if d == 0 { 1 } else { d };
        // ℓ = ⌈log₂ d⌉: 0 for d = 1, up to 64.
        let l = 64 - (d - 1).leading_zeros();
        // 2^ℓ − d < d, so the quotient is below 2⁶⁴, and below 2⁶⁴ − 1 (see the module docs).
        let magic = (((1u128 << l) - d as u128) << 64) / d as u128 + 1;
        let (first, second) = if l == 0 { (0, 0) } else { (1, l - 1) };
        Self {
            magic: magic as u64,
            shifts: (first | second << 8) as u16,
        }
    }

    /// The prepared numbers, to store in atomics (see `policy::live`).
    pub(crate) const fn to_parts(self) -> (u64, u16) {
        (self.magic, self.shifts)
    }

    /// A divisor from [`to_parts`](Self::to_parts).
    #[inline(always)]
    pub(crate) const fn from_parts(magic: u64, shifts: u16) -> Self {
        Self { magic, shifts }
    }

    /// `⌊n / d⌋`.
    #[inline(always)]
    pub(crate) const fn divide(self, n: u64) -> u64 {
        let t = ((self.magic as u128 * n as u128) >> 64) as u64;
        // t ≤ n, so neither the difference nor the sum overflows.
        (t + ((n - t) >> (self.shifts & 0xff))) >> (self.shifts >> 8)
    }
}

#[cfg(all(test, not(flowgate_loom)))]
mod tests {
    use super::*;

    fn check(d: u64, n: u64) {
        assert_eq!(Divisor::new(d).divide(n), n / d, "{n} / {d}");
    }

    #[test]
    fn matches_the_hardware_divide_on_every_edge() {
        let mut divisors = vec![1, 2, 3, 5, 7, 10, 1_000_000_007, u64::MAX, u64::MAX - 1];
        for k in 1..64 {
            let p = 1u64 << k;
            divisors.extend([p - 1, p, p + 1]);
        }
        for &d in &divisors {
            let mut numerators = vec![0, 1, d - 1, d, d.wrapping_add(1), u64::MAX, u64::MAX - 1];
            for k in 0..64 {
                let p = 1u64 << k;
                numerators.extend([p - 1, p, p.wrapping_add(1)]);
                // Around multiples of d, where an off-by-one would show.
                if let Some(m) = (p / d.max(1)).checked_mul(d) {
                    numerators.extend([m.wrapping_sub(1), m, m.wrapping_add(1)]);
                }
            }
            for n in numerators {
                check(d, n);
            }
        }
    }

    #[test]
    fn matches_the_hardware_divide_on_random_pairs() {
        // wyrand: deterministic, no dependency.
        let mut seed = 0x243f_6a88_85a3_08d3u64;
        let mut next = || {
            seed = seed.wrapping_add(0xa076_1d64_78bd_642f);
            let t = u128::from(seed) * u128::from(seed ^ 0xe703_7ed1_a0b4_28db);
            (t >> 64) as u64 ^ t as u64
        };
        for _ in 0..200_000 {
            let (d, n) = (next(), next());
            // Divisors of every magnitude, not only huge ones.
            let d = (d >> (d % 64)).max(1);
            check(d, n);
            check(d, n >> (n % 64));
        }
    }

    #[test]
    fn zero_is_taken_as_one() {
        assert_eq!(Divisor::new(0).divide(42), 42);
    }
}
