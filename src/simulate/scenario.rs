//! Built-in traffic patterns, each a trace of [`Request`]s sorted by time. Deterministic: the
//! patterns that draw at random take a seed.

use std::time::Duration;

use super::Request;
use crate::Quota;

/// `rate` requests per second of one cell each from `key`, evenly spaced over `duration`
/// (none if `rate` is not positive and finite).
pub fn steady(key: &str, rate: f64, duration: Duration) -> Vec<Request> {
    if !(rate.is_finite() && rate > 0.0) {
        return Vec::new();
    }
    let count = (duration.as_secs_f64() * rate).floor();
    spaced(key, count, Duration::ZERO, duration)
}

/// `count` requests of one cell from `key` spread evenly over [`from`, `from + span`).
fn spaced(key: &str, count: f64, from: Duration, span: Duration) -> Vec<Request> {
    // A trace of more than 2^32 requests is not one to replay in memory.
    let count = count.min(f64::from(u32::MAX)) as u32;
    (0..count)
        .map(|i| {
            let offset = span.mul_f64(f64::from(i) / f64::from(count));
            Request::new(from + offset, key, 1)
        })
        .collect()
}

/// `bursts` bursts of `size` requests of one cell from `key`, all at once, one every `every`.
pub fn bursts(key: &str, size: u32, every: Duration, bursts: u32) -> Vec<Request> {
    (0..bursts)
        .flat_map(|b| (0..size).map(move |_| Request::new(every * b, key, 1)))
        .collect()
}

/// The fixed-window boundary attack of the users' articles: `limit` requests spread over the
/// last sixth of one `window` and `limit` more over the first sixth of the next, then quiet
/// until the end of the second window. A fixed window admits all `2 × limit`, in a third of a
/// window; a limiter that holds `limit` per any window does not.
pub fn boundary(limit: u32, window: Duration) -> Vec<Request> {
    let sixth = window / 6;
    let mut trace = spaced("attacker", f64::from(limit), window - sixth, sixth);
    trace.extend(spaced("attacker", f64::from(limit), window, sixth));
    // One request at the end, so that the trace (and its chart) spans both windows.
    trace.push(Request::new(
        window * 2 - Duration::from_millis(1),
        "attacker",
        1,
    ));
    trace
}

/// Many keys: `rate` requests per second of one cell, evenly spaced over `duration`, each from
/// one of `keys` keys (`"k0"`, `"k1"`, …) drawn with a Zipf distribution of exponent `s`
/// (key `i` with weight `1 / (i + 1)^s`: a few hot keys and a long tail), seeded by `seed`.
pub fn zipf(keys: u32, s: f64, rate: f64, duration: Duration, seed: u64) -> Vec<Request> {
    if keys == 0 || !(rate.is_finite() && rate > 0.0) || !s.is_finite() {
        return Vec::new();
    }
    let mut cumulative = Vec::with_capacity(keys as usize);
    let mut total = 0.0;
    for i in 0..keys {
        total += 1.0 / f64::from(i + 1).powf(s);
        cumulative.push(total);
    }
    let mut random = Rng::new(seed);
    let mut trace = spaced(
        "",
        (duration.as_secs_f64() * rate).floor(),
        Duration::ZERO,
        duration,
    );
    for request in &mut trace {
        let x = random.unit() * total;
        let i = cumulative
            .partition_point(|&c| c <= x)
            .min(keys as usize - 1);
        request.key = format!("k{i}");
    }
    trace
}

/// The names [`named`] knows.
pub const NAMES: [&str; 4] = ["boundary", "steady", "bursts", "zipf"];

/// A built-in pattern sized to `quota` (`count` cells per `period`, `burst` at once), by name:
/// * `boundary`: [`boundary`] with the quota's count and period;
/// * `steady`: twice the quota's rate for three periods;
/// * `bursts`: four bursts of the burst plus half the count, one per period;
/// * `zipf`: 1 000 keys with exponent 1.1, offered 100 times one key's rate for three periods.
pub fn named(name: &str, quota: &Quota) -> Option<Vec<Request>> {
    let period = quota.period();
    let rate = f64::from(quota.count()) / period.as_secs_f64();
    Some(match name {
        "boundary" => boundary(quota.count(), period),
        "steady" => steady("client", 2.0 * rate, period * 3),
        "bursts" => bursts("client", quota.burst() + quota.count() / 2, period, 4),
        "zipf" => zipf(1_000, 1.1, 100.0 * rate, period * 3, 1),
        _ => return None,
    })
}

/// xorshift64*: small, fast, and the same sequence on every platform.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        // Any seed but zero cycles; mix it so that nearby seeds give unrelated sequences.
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let bits = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11;
        bits as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_have_the_requests_they_promise() {
        let steady = steady("a", 10.0, Duration::from_secs(3));
        assert_eq!(steady.len(), 30);
        assert_eq!(steady[1].at, Duration::from_millis(100));
        assert!(super::steady("a", f64::NAN, Duration::from_secs(1)).is_empty());
        let bursts = bursts("a", 5, Duration::from_secs(10), 3);
        assert_eq!(bursts.len(), 15);
        assert_eq!(bursts[14].at, Duration::from_secs(20));
        let edge = boundary(120, Duration::from_secs(60));
        assert_eq!(edge.len(), 241);
        assert_eq!(edge[0].at, Duration::from_secs(50));
        assert!(edge[..240].iter().all(|r| r.at < Duration::from_secs(70)));
        assert_eq!(edge[240].at, Duration::from_millis(119_999));
    }

    #[test]
    fn zipf_keys_are_skewed_and_reproducible() {
        let trace = zipf(100, 1.1, 1000.0, Duration::from_secs(10), 7);
        assert_eq!(trace.len(), 10_000);
        assert_eq!(trace, zipf(100, 1.1, 1000.0, Duration::from_secs(10), 7));
        let count = |key: &str| trace.iter().filter(|r| r.key == key).count();
        // Key 0 holds 1 / H(100, 1.1) ≈ 22 % of the weight; key 99 about 0.15 %.
        assert!((1_900..2_500).contains(&count("k0")), "{}", count("k0"));
        assert!(count("k0") > 5 * count("k9"));
        assert!(count("k99") < 60);
        assert!(zipf(0, 1.0, 10.0, Duration::from_secs(1), 1).is_empty());
    }
}
