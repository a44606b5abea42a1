//! How many keys each shard of a table is sized for: its share of the key cap plus room for the
//! random spread of hashes over shards.

/// The shard count (`shards`, halved while a shard would get fewer than `min_per_shard` keys)
/// and each shard's key cap: its share of `max_keys`, plus five standard deviations of the
/// binomial spread of random hashes over shards, plus a little, at most `max_keys`.
pub(super) fn shards_and_cap(
    max_keys: usize,
    shards: usize,
    min_per_shard: usize,
) -> (usize, usize) {
    let mut shards = shards;
    while shards > 1 && max_keys / shards < min_per_shard {
        shards /= 2;
    }
    let share = max_keys.div_ceil(shards);
    let spread = if shards == 1 {
        0
    } else {
        5 * ceil_sqrt(share) + 8
    };
    (shards, share.saturating_add(spread).min(max_keys))
}

/// ⌈√n⌉, in integers (a build without `std` has no square root of a float).
fn ceil_sqrt(n: usize) -> usize {
    let n = n as u128;
    // Newton's method from above falls to ⌊√n⌋ (u128: `x + n / x` cannot overflow).
    let mut x = n;
    let mut next = x.div_ceil(2);
    while next < x {
        x = next;
        next = (x + n / x) / 2;
    }
    (if x * x == n { x } else { x + 1 }) as usize
}

#[cfg(test)]
mod tests {
    use super::ceil_sqrt;

    /// The integer root agrees with the float one it replaced wherever that one is exact, and
    /// at the edges: squares, their neighbours, and the largest `usize`.
    #[test]
    fn ceil_sqrt_is_the_least_root_not_below() {
        for n in 0..200_000usize {
            assert_eq!(ceil_sqrt(n), (n as f64).sqrt().ceil() as usize, "{n}");
        }
        for r in [2usize, 1_000, 65_535, 1 << 20, u32::MAX as usize] {
            assert_eq!(ceil_sqrt(r * r), r);
            assert_eq!(ceil_sqrt(r * r + 1), r + 1);
            assert_eq!(ceil_sqrt(r * r - 1), r);
        }
        assert_eq!(ceil_sqrt(usize::MAX), 1 << 32);
    }
}
