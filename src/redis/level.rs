//! [`Level`]: one named layer of a Redis limiter (global, or one bucket per key), its quotas in
//! the integer microseconds the script computes in, and the Redis keys of its buckets.

use core::time::Duration;
use std::sync::Arc;

use crate::outcome::Gauge;
use crate::quota::Quota;

use super::RedisConfigError;

/// The longest window (`burst × interval`) a Redis quota may have, in µs: 2^51 µs, about 71
/// years. With the server's `TIME` (about 2^50.6 µs in 2026), `now + τ` stays below 2^53, where
/// the script's Lua doubles are exact.
pub const MAX_WINDOW_MICROS: u64 = 1 << 51;

/// A key extractor: the request's key for a level, or `None` if the level does not apply.
pub(crate) type KeyOf<R> = Arc<dyn Fn(&R) -> Option<String> + Send + Sync>;

/// One layer of a [`RedisLimiter`](super::RedisLimiter): a name, a key (or none, for a limit
/// every request shares) and the quotas a request must conform to.
///
/// A request takes its cells from every quota of every level that applies, or from none.
///
/// ```
/// use flowgate::redis::Level;
/// use flowgate::Quota;
///
/// struct Request { user: String, endpoint: &'static str }
///
/// let levels = [
///     Level::<Request>::global("global").quota(Quota::per_second(10_000)?),
///     Level::keyed("endpoint", |r: &Request| Some(r.endpoint.to_owned()))
///         .quota(Quota::per_second(1_000)?),
///     Level::keyed("user-endpoint", |r: &Request| Some(format!("{}|{}", r.user, r.endpoint)))
///         .quotas([Quota::per_second(20)?, Quota::per_hour(5_000)?]),
/// ];
/// assert_eq!(levels[2].name(), "user-endpoint");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Level<R: ?Sized> {
    pub(crate) name: String,
    pub(crate) key: Option<KeyOf<R>>,
    pub(crate) quotas: Vec<Quota>,
}

impl<R: ?Sized> Level<R> {
    /// A level every request goes through: one bucket per quota, shared by all.
    pub fn global(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            key: None,
            quotas: Vec::new(),
        }
    }

    /// A level with one bucket per key; the closure names the request's key, or returns `None`
    /// when the level does not apply to it (an anonymous request and a per-user level).
    pub fn keyed<F>(name: impl Into<String>, key: F) -> Self
    where
        F: Fn(&R) -> Option<String> + Send + Sync + 'static,
    {
        Self {
            name: name.into(),
            key: Some(Arc::new(key)),
            quotas: Vec::new(),
        }
    }

    /// Adds a quota.
    pub fn quota(mut self, quota: Quota) -> Self {
        self.quotas.push(quota);
        self
    }

    /// Adds several quotas.
    pub fn quotas(mut self, quotas: impl IntoIterator<Item = Quota>) -> Self {
        self.quotas.extend(quotas);
        self
    }

    /// The level's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Level<str> {
    /// A level keyed by the string a limiter of `str` is called with.
    pub fn per_key(name: impl Into<String>) -> Self {
        Self::keyed(name, |key: &str| Some(key.to_owned()))
    }
}

impl<R: ?Sized> core::fmt::Debug for Level<R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Level")
            .field("name", &self.name)
            .field("keyed", &self.key.is_some())
            .field("quotas", &self.quotas)
            .finish()
    }
}

/// A quota as the script runs it: emission interval and window in whole microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Micros {
    /// `T`, rounded up to a whole µs (never a faster rate than asked for).
    pub(crate) interval: u64,
    /// `τ = burst × T`.
    pub(crate) window: u64,
    pub(crate) burst: u32,
    /// The quota the script enforces: `burst` cells, one per `interval` µs.
    pub(crate) quota: Quota,
}

impl Micros {
    /// The gauge of a bucket of this quota whose TAT lies `debt` µs ahead of now, in the
    /// in-process unit (ns; `debt` ≤ 2^53 µs, so × 1000 fits).
    pub(crate) fn gauge(&self, debt: u64) -> Gauge {
        let debt = debt.saturating_mul(1_000);
        Gauge::new(debt, self.interval * 1_000, self.burst, debt)
    }

    /// `quota` in µs, or why the script cannot run it.
    pub(crate) fn new(quota: &Quota, level: &str, index: usize) -> Result<Self, RedisConfigError> {
        let at = || (level.to_owned(), index);
        if quota.initial_cells() != quota.burst() {
            let (level, quota) = at();
            return Err(RedisConfigError::InitialNotFull { level, quota });
        }
        let interval = quota.interval_nanos().div_ceil(1_000);
        let window = interval.checked_mul(u64::from(quota.burst()));
        let Some(window) = window.filter(|&w| w <= MAX_WINDOW_MICROS) else {
            let (level, quota) = at();
            return Err(RedisConfigError::WindowTooLong { level, quota });
        };
        // interval ≥ 1 µs and burst·interval ≤ 2^51 µs: a valid in-process quota.
        let enforced = Quota::with_period(Duration::from_micros(interval))
            .and_then(|q| q.with_burst(quota.burst()))
            .map_err(|_| {
                let (level, quota) = at();
                RedisConfigError::WindowTooLong { level, quota }
            })?;
        Ok(Self {
            interval,
            window,
            burst: quota.burst(),
            quota: enforced,
        })
    }
}

/// Checks that `part` (a prefix or a level name) can be part of a key unambiguously.
pub(crate) fn check_part(part: &str, what: &'static str) -> Result<(), RedisConfigError> {
    let bad = part.is_empty() || part.contains([':', '{', '}']);
    if bad {
        return Err(RedisConfigError::BadName {
            what,
            name: part.to_owned(),
        });
    }
    Ok(())
}

/// Where a decision's buckets live.
///
/// A script call may only touch keys of one Redis Cluster slot, so every key of one decision
/// carries the same hash tag. A limiter with one keyed level tags by key (`{prefix:key}`), so
/// keys spread over the cluster; a limiter with a global level or several levels tags by prefix
/// (`{prefix}`), so all its buckets live on one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tag {
    ByKey,
    ByPrefix,
}

/// Appends the Redis key of quota `quota` of level `level` for `key` (`None`: global) to `out`.
///
/// `{prefix:key}:level:quota` when tagged by key; `{prefix}:level:quota:key` (or
/// `{prefix}:level:quota` for a global level) when tagged by prefix. Prefix and level names
/// hold no `:`, `{` or `}`, and the quota index is digits, so distinct buckets never share a
/// key whatever the user's keys contain. Limiters that share a prefix and a level name share
/// buckets: give each limit its own level name (or prefix), since a bucket written under one
/// quota and read under another is taken as clamped or full by the other.
pub(crate) fn bucket_key(
    out: &mut String,
    tag: Tag,
    prefix: &str,
    level: &str,
    quota: usize,
    key: Option<&str>,
) {
    // Built from pieces, not with `write!`: the formatting machinery cost more than the rest of
    // a decision's client side (callgrind, BENCHMARKS.md "Redis").
    out.clear();
    out.reserve(prefix.len() + level.len() + key.map_or(0, str::len) + 24);
    out.push('{');
    out.push_str(prefix);
    if let (Tag::ByKey, Some(key)) = (tag, key) {
        out.push(':');
        out.push_str(key);
        out.push('}');
        push_level(out, level, quota);
    } else {
        out.push('}');
        push_level(out, level, quota);
        if let Some(key) = key {
            out.push(':');
            out.push_str(key);
        }
    }
}

/// Appends `:level:quota`.
fn push_level(out: &mut String, level: &str, quota: usize) {
    out.push(':');
    out.push_str(level);
    out.push(':');
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = quota;
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    for &digit in &digits[at..] {
        out.push(char::from(digit));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_the_interval_up_to_whole_microseconds() {
        let quota = Quota::per_second(3).unwrap(); // 333 333.33… µs
        let micros = Micros::new(&quota, "l", 0).unwrap();
        assert_eq!(micros.interval, 333_334);
        assert_eq!(micros.window, 3 * 333_334);
        assert_eq!(micros.quota.interval_nanos(), 333_334_000);
        let fast = Quota::per_second(2_000_000).unwrap(); // 500 ns
        assert_eq!(Micros::new(&fast, "l", 0).unwrap().interval, 1);
    }

    #[test]
    fn refuses_what_the_script_cannot_run_exactly() {
        let long = Quota::with_period(Duration::from_secs(3_600 * 24 * 365 * 80)).unwrap();
        assert!(matches!(
            Micros::new(&long, "l", 2),
            Err(RedisConfigError::WindowTooLong { quota: 2, .. })
        ));
        let empty = Quota::per_second(5)
            .unwrap()
            .with_initial(crate::quota::Initial::Empty)
            .unwrap();
        assert!(matches!(
            Micros::new(&empty, "l", 0),
            Err(RedisConfigError::InitialNotFull { .. })
        ));
        for bad in ["", "a:b", "{a}", "a}"] {
            assert!(check_part(bad, "prefix").is_err(), "{bad}");
        }
        assert!(check_part("flowgate-api_v2", "prefix").is_ok());
    }

    #[test]
    fn keys_of_distinct_buckets_differ() {
        let mut a = String::new();
        let mut b = String::new();
        bucket_key(&mut a, Tag::ByKey, "p", "l", 0, Some("x}:l:1"));
        bucket_key(&mut b, Tag::ByKey, "p", "l", 1, Some("x"));
        assert_eq!(a, "{p:x}:l:1}:l:0");
        assert_ne!(a, b);
        bucket_key(&mut a, Tag::ByPrefix, "p", "user", 0, Some("0:x"));
        bucket_key(&mut b, Tag::ByPrefix, "p", "user", 0, None);
        assert_eq!(a, "{p}:user:0:0:x");
        assert_eq!(b, "{p}:user:0");
        bucket_key(&mut a, Tag::ByKey, "p", "l", 105, Some("x"));
        assert_eq!(a, "{p:x}:l:105");
        bucket_key(&mut a, Tag::ByPrefix, "p", "l", 10, None);
        assert_eq!(a, "{p}:l:10");
    }
}
