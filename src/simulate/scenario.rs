//! Built-in traffic patterns ([`Scenario`]), each a trace of [`Request`]s sorted by time.
//! Deterministic: the pattern that draws at random takes a seed. A pattern holds at most
//! [`Scenario::MAX_REQUESTS`] requests (a larger one is cut short at that count, keeping its
//! spacing) and draws from at most 1 000 000 keys, so that no argument can exhaust memory.

use std::time::Duration;

use super::Request;
use crate::Quota;

/// The most keys [`Scenario::Zipf`] draws from.
const MAX_KEYS: u32 = 1_000_000;

/// A built-in traffic pattern: what [`requests`](Self::requests) turns into a trace, sorted by
/// time. Every request takes one cell.
///
/// ```
/// use std::time::Duration;
/// use flowgate::simulate::Scenario;
///
/// let steady = Scenario::Steady { key: "a".into(), rate: 10.0, duration: Duration::from_secs(3) };
/// let trace = steady.requests();
/// assert_eq!(trace.len(), 30);
/// assert_eq!(trace[1].at, Duration::from_millis(100));
/// let quota = "120/min".parse()?;
/// assert_eq!(
///     Scenario::named("boundary", &quota),
///     Some(Scenario::Boundary { limit: 120, window: Duration::from_secs(60) }),
/// );
/// # Ok::<(), flowgate::quota::ParseQuotaError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum Scenario {
    /// `rate` requests per second from `key`, evenly spaced over `duration` (none if `rate` is
    /// not positive and finite).
    Steady {
        /// Whose requests they are.
        key: String,
        /// Requests per second.
        rate: f64,
        /// How long the pattern lasts.
        duration: Duration,
    },
    /// `count` bursts of `size` requests from `key`, each all at once, one every `every`.
    Bursts {
        /// Whose requests they are.
        key: String,
        /// Requests in one burst.
        size: u32,
        /// Time from one burst to the next.
        every: Duration,
        /// Bursts in all.
        count: u32,
    },
    /// The fixed-window boundary attack, from the key `"attacker"`: `limit` requests spread
    /// over the last sixth of one `window` and `limit` more over the first sixth of the next,
    /// and nothing else. A fixed window admits all `2 × limit`, in a third of a window; a
    /// limiter that holds `limit` per any window does not. The whole attack spans a third of a
    /// window, so the cells a subject admits in all are those it admits in its busiest window
    /// ([`Outcome::peak`](super::Outcome::peak)), unless it delays them by more than half a
    /// window.
    Boundary {
        /// Requests on each side of the boundary.
        limit: u32,
        /// The window whose boundary is attacked.
        window: Duration,
    },
    /// Many keys: `rate` requests per second, evenly spaced over `duration`, each from one of
    /// `keys` keys (`"k0"`, `"k1"`, …, at most 1 000 000) drawn with a Zipf distribution of
    /// exponent `exponent` (key `i` with weight `1 / (i + 1)^exponent`: a few hot keys and a
    /// long tail), seeded by `seed`.
    Zipf {
        /// Keys drawn from.
        keys: u32,
        /// The distribution's exponent.
        exponent: f64,
        /// Requests per second, over all keys.
        rate: f64,
        /// How long the pattern lasts.
        duration: Duration,
        /// The draw's seed: the same seed, the same trace.
        seed: u64,
    },
}

impl Scenario {
    /// The names [`named`](Self::named) knows.
    pub const NAMES: [&str; 4] = ["boundary", "steady", "bursts", "zipf"];

    /// The most requests a pattern holds (a request takes about 80 bytes with its key).
    pub const MAX_REQUESTS: u64 = 2_000_000;

    /// A pattern sized to `quota` (`count` cells per `period`, `burst` at once), by name:
    /// * `boundary`: [`Boundary`](Self::Boundary) with the quota's count and period;
    /// * `steady`: twice the quota's rate for three periods;
    /// * `bursts`: four bursts of the burst plus half the count, one per period;
    /// * `zipf`: 1 000 keys with exponent 1.1, offered 100 times one key's rate for three
    ///   periods.
    pub fn named(name: &str, quota: &Quota) -> Option<Self> {
        let period = quota.period();
        let rate = f64::from(quota.count()) / period.as_secs_f64();
        let key = String::from("client");
        Some(match name {
            "boundary" => Self::Boundary {
                limit: quota.count(),
                window: period,
            },
            "steady" => Self::Steady {
                key,
                rate: 2.0 * rate,
                duration: period * 3,
            },
            "bursts" => Self::Bursts {
                key,
                size: quota.burst().saturating_add(quota.count() / 2),
                every: period,
                count: 4,
            },
            "zipf" => Self::Zipf {
                keys: 1_000,
                exponent: 1.1,
                rate: 100.0 * rate,
                duration: period * 3,
                seed: 1,
            },
            _ => return None,
        })
    }

    /// The pattern's requests, sorted by time (cut at [`MAX_REQUESTS`](Self::MAX_REQUESTS)).
    pub fn requests(&self) -> Vec<Request> {
        match self {
            Self::Steady {
                key,
                rate,
                duration,
            } => steady(key, *rate, *duration),
            Self::Bursts {
                key,
                size,
                every,
                count,
            } => bursts(key, *size, *every, *count),
            Self::Boundary { limit, window } => boundary(*limit, *window),
            Self::Zipf {
                keys,
                exponent,
                rate,
                duration,
                seed,
            } => zipf(*keys, *exponent, *rate, *duration, *seed),
        }
    }
}

/// [`Scenario::Steady`].
fn steady(key: &str, rate: f64, duration: Duration) -> Vec<Request> {
    if !(rate.is_finite() && rate > 0.0) {
        return Vec::new();
    }
    spaced(key, count(duration, rate), Duration::ZERO, duration)
}

/// Requests at `rate` per second over `duration`: the product rounded down, with a tolerance
/// for the rounding of the product itself (21/min for 360 s is 126, not 125.999…).
fn count(duration: Duration, rate: f64) -> f64 {
    (duration.as_secs_f64() * rate * (1.0 + 1e-12)).floor()
}

/// `count` requests of one cell from `key` spread evenly over [`from`, `from + span`), cut at
/// [`Scenario::MAX_REQUESTS`].
fn spaced(key: &str, count: f64, from: Duration, span: Duration) -> Vec<Request> {
    let total = count.clamp(0.0, 1e18) as u64;
    (0..total.min(Scenario::MAX_REQUESTS))
        .map(|i| {
            let offset = span.mul_f64(i as f64 / total as f64);
            Request::new(from.saturating_add(offset), key, 1)
        })
        .collect()
}

/// [`Scenario::Bursts`], cut at [`Scenario::MAX_REQUESTS`].
fn bursts(key: &str, size: u32, every: Duration, bursts: u32) -> Vec<Request> {
    (0..bursts)
        .flat_map(|b| (0..size).map(move |_| Request::new(every.saturating_mul(b), key, 1)))
        .take(Scenario::MAX_REQUESTS as usize)
        .collect()
}

/// [`Scenario::Boundary`].
fn boundary(limit: u32, window: Duration) -> Vec<Request> {
    let sixth = window / 6;
    let mut trace = spaced("attacker", f64::from(limit), window - sixth, sixth);
    trace.extend(spaced("attacker", f64::from(limit), window, sixth));
    trace
}

/// [`Scenario::Zipf`], with exponent `s`.
fn zipf(keys: u32, s: f64, rate: f64, duration: Duration, seed: u64) -> Vec<Request> {
    if keys == 0 || !(rate.is_finite() && rate > 0.0) || !s.is_finite() {
        return Vec::new();
    }
    let keys = keys.min(MAX_KEYS);
    let mut cumulative = Vec::with_capacity(keys as usize);
    let mut total = 0.0;
    for i in 0..keys {
        total += 1.0 / f64::from(i + 1).powf(s);
        cumulative.push(total);
    }
    let mut random = Rng::new(seed);
    let mut trace = spaced("", count(duration, rate), Duration::ZERO, duration);
    for request in &mut trace {
        let x = random.unit() * total;
        let i = cumulative
            .partition_point(|&c| c <= x)
            .min(keys as usize - 1);
        request.key = format!("k{i}");
    }
    trace
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
        assert_eq!(edge.len(), 240);
        assert_eq!(edge[0].at, Duration::from_secs(50));
        assert_eq!(edge[120].at, Duration::from_secs(60));
        assert!(edge.iter().all(|r| r.at < Duration::from_secs(70)));
        // Rounding does not lose a request; short windows and huge patterns stay in bounds.
        assert_eq!(
            super::steady("a", 21.0 / 60.0, Duration::from_secs(360)).len(),
            126
        );
        let tiny = boundary(1, Duration::from_micros(100));
        assert_eq!(tiny.len(), 2);
        assert_eq!(tiny.last().unwrap().at, Duration::from_micros(100));
        assert_eq!(
            super::steady("a", 1e9, Duration::from_secs(60)).len() as u64,
            Scenario::MAX_REQUESTS
        );
        assert!(
            super::bursts("a", u32::MAX, Duration::from_secs(1), 3).len() as u64
                <= Scenario::MAX_REQUESTS
        );
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
