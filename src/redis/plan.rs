//! What a Redis limiter decides over: its policies prepared for the script ([`Prepared`]:
//! quotas in the integer microseconds the script computes in, and which quota of which policy
//! each is), and the [`Plan`] of one decision: the buckets a request goes to, their Redis keys
//! (from the policies' own key extractors, recording instead of hashing), and which of them
//! belong to dry-run policies.

use crate::algorithm::{Algorithm, AnyAlgorithm};
use crate::observe::QuotaMetrics;
use crate::outcome::{Gauge, InsufficientCapacity, PolicyQuota};
use crate::policy::{Key, Policy, Recording};

/// A policy's key extractor, shared by the limiter and its local fallback.
pub(crate) type SharedKey<R> = std::sync::Arc<dyn Fn(&R, &mut Key<'_>) + Send + Sync>;
use crate::quota::Quota;

use super::RedisConfigError;

/// The longest window (`burst × interval`) a Redis quota may have, in µs: 2^51 µs, about 71
/// years. With the server's `TIME` (about 2^50.6 µs in 2026), `now + τ` stays below 2^53, where
/// the script's Lua doubles are exact.
pub const MAX_WINDOW_MICROS: u64 = 1 << 51;

/// One policy as the script runs it.
pub(crate) struct Prepared<R: ?Sized> {
    pub(crate) name: String,
    /// The key extractor; `None` for a global policy.
    pub(crate) extract: Option<SharedKey<R>>,
    pub(crate) quotas: Vec<Micros>,
    /// Each quota as outcomes name it.
    pub(crate) by: Vec<&'static PolicyQuota>,
    pub(crate) dry_run: bool,
    /// The retry-after jitter of refusals, uniform in `[min, max]` ns.
    pub(crate) jitter: (u64, u64),
    /// Each quota's cells admitted and refused (nothing without the `metrics` feature), under
    /// the same names and labels as in process.
    pub(crate) metrics: Vec<QuotaMetrics>,
}

impl<R: ?Sized> Prepared<R> {
    /// Policy `index` of a set, `policy`, checked for the script: a name that can be part of a
    /// key, and quotas it runs exactly (GCRA for now: the leaky-bucket meter decides as GCRA
    /// does).
    pub(crate) fn new(
        index: usize,
        (policy, extract): (Policy<R>, Option<SharedKey<R>>),
        jitter: (u64, u64),
    ) -> Result<Self, RedisConfigError> {
        check_part(&policy.name, "policy")?;
        let mut quotas = Vec::with_capacity(policy.quotas.len());
        let mut by = Vec::with_capacity(policy.quotas.len());
        let mut metrics = Vec::with_capacity(policy.quotas.len());
        for (q, algorithm) in policy.quotas.iter().enumerate() {
            let gcra = match algorithm {
                AnyAlgorithm::Gcra(_) => true,
                AnyAlgorithm::LeakyBucket(meter) => meter.max_delay().is_zero(),
                _ => false,
            };
            if !gcra {
                return Err(RedisConfigError::Algorithm {
                    policy: policy.name.clone(),
                    quota: q,
                    algorithm: algorithm.name(),
                });
            }
            quotas.push(Micros::new(algorithm.quota(), &policy.name, q)?);
            by.push(PolicyQuota::intern(&policy.name, index, q));
            metrics.push(QuotaMetrics::new(&policy.name, &algorithm.to_string()));
        }
        Ok(Self {
            extract,
            quotas,
            by,
            dry_run: policy.dry_run,
            jitter,
            metrics,
            name: policy.name,
        })
    }

    /// The request's key in this policy: `Some(None)` for a global policy, `Some(key)` for a
    /// keyed one, `None` if the extractor skipped the request.
    fn key(&self, request: &R) -> Option<Option<Vec<u8>>> {
        let Some(extract) = &self.extract else {
            return Some(None);
        };
        Recording::key_of(&**extract, request).map(Some)
    }
}

/// The buckets of one decision.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    pub(crate) keys: Vec<Vec<u8>>,
    /// Each bucket's (interval, window) in µs.
    pub(crate) quotas: Vec<(u64, u64)>,
    /// Each bucket's policy and quota index.
    pub(crate) refs: Vec<(usize, usize)>,
    /// The buckets of dry-run policies, as the script reads them: `first-last` ranges of bucket
    /// numbers (from 1), comma-separated; empty if there are none.
    pub(crate) dry: String,
}

impl Plan {
    /// The buckets `request` goes to in `policies` (keys under `prefix`, tagged by `tag`), or
    /// the error if `n` exceeds an enforcing quota's burst (a dry-run quota's is left to the
    /// script, which finds that it would refuse).
    pub(crate) fn new<R: ?Sized>(
        policies: &[Prepared<R>],
        (prefix, tag): (&str, Tag),
        request: &R,
        n: u32,
    ) -> Result<Self, InsufficientCapacity> {
        let buckets = policies.iter().map(|p| p.quotas.len()).sum();
        let mut plan = Self {
            keys: Vec::with_capacity(buckets),
            quotas: Vec::with_capacity(buckets),
            refs: Vec::with_capacity(buckets),
            dry: String::new(),
        };
        for (p, policy) in policies.iter().enumerate() {
            let Some(key) = policy.key(request) else {
                continue;
            };
            let first = plan.keys.len() + 1;
            for (q, micros) in policy.quotas.iter().enumerate() {
                if !policy.dry_run && n > micros.burst {
                    // Never admitted: refused cells of the quota too small for them.
                    policy.metrics[q].refused.increment(u64::from(n));
                    return Err(InsufficientCapacity {
                        requested: n,
                        burst: micros.burst,
                        by: Some(policy.by[q]),
                    });
                }
                let mut out = Vec::new();
                bucket_key(&mut out, tag, prefix, &policy.name, q, key.as_deref());
                plan.keys.push(out);
                plan.quotas.push((micros.interval, micros.window));
                plan.refs.push((p, q));
            }
            if policy.dry_run {
                if !plan.dry.is_empty() {
                    plan.dry.push(',');
                }
                plan.dry.push_str(&format!("{first}-{}", plan.keys.len()));
            }
        }
        Ok(plan)
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

    /// Nanoseconds until a bucket of this quota booked `debt` ns ahead holds one more cell.
    #[cfg_attr(not(feature = "tower"), allow(dead_code))]
    pub(crate) fn next_cell(&self, debt: u64) -> u64 {
        crate::algorithm::next_cell_of_debt(debt, self.interval * 1_000)
    }

    /// `quota` in µs, or why the script cannot run it.
    pub(crate) fn new(quota: &Quota, policy: &str, index: usize) -> Result<Self, RedisConfigError> {
        let at = || (policy.to_owned(), index);
        if quota.initial_cells() != quota.burst() {
            let (policy, quota) = at();
            return Err(RedisConfigError::InitialNotFull { policy, quota });
        }
        let interval = quota.interval_nanos().div_ceil(1_000);
        let window = interval.checked_mul(u64::from(quota.burst()));
        let Some(window) = window.filter(|&w| w <= MAX_WINDOW_MICROS) else {
            let (policy, quota) = at();
            return Err(RedisConfigError::WindowTooLong { policy, quota });
        };
        // The quota as written when its interval is whole µs (headers then advertise it as
        // written); otherwise the same count over a period stretched to the rounded interval.
        // interval ≥ 1 µs and burst·interval ≤ 2^51 µs: a valid in-process quota.
        let enforced = if quota.interval_nanos() == interval * 1_000 {
            Ok(*quota)
        } else {
            let period = interval * 1_000 * u64::from(quota.count());
            Quota::from_nanos(quota.count(), period).and_then(|q| q.with_burst(quota.burst()))
        };
        let enforced = enforced.map_err(|_| {
            let (policy, quota) = at();
            RedisConfigError::WindowTooLong { policy, quota }
        })?;
        Ok(Self {
            interval,
            window,
            burst: quota.burst(),
            quota: enforced,
        })
    }
}

/// Checks that `part` (a prefix or a policy name) can be part of a key unambiguously.
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
/// carries the same hash tag. A limiter with one keyed policy tags by key (`{prefix:key}`), so
/// keys spread over the cluster; a limiter with a global policy or several policies tags by
/// prefix (`{prefix}`), so all its buckets live on one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tag {
    ByKey,
    ByPrefix,
}

/// Appends the Redis key of quota `quota` of policy `policy` for `key` (`None`: global) to
/// `out`.
///
/// `{prefix:key}:policy:quota` when tagged by key; `{prefix}:policy:quota:key` (or
/// `{prefix}:policy:quota` for a global policy) when tagged by prefix. Prefix and policy names
/// hold no `:`, `{` or `}`, and the quota index is digits, so distinct buckets never share a
/// key whatever the user's keys contain. Limiters that share a prefix and a policy name share
/// buckets: give each limit its own policy name (or prefix), since a bucket written under one
/// quota and read under another is taken as clamped or full by the other.
pub(crate) fn bucket_key(
    out: &mut Vec<u8>,
    tag: Tag,
    prefix: &str,
    policy: &str,
    quota: usize,
    key: Option<&[u8]>,
) {
    // Built from pieces, not with `write!`: the formatting machinery cost more than the rest of
    // a decision's client side (callgrind, BENCHMARKS.md "Redis").
    out.clear();
    out.reserve(prefix.len() + policy.len() + key.map_or(0, <[u8]>::len) + 24);
    out.push(b'{');
    out.extend_from_slice(prefix.as_bytes());
    if let (Tag::ByKey, Some(key)) = (tag, key) {
        out.push(b':');
        out.extend_from_slice(key);
        out.push(b'}');
        push_policy(out, policy, quota);
    } else {
        out.push(b'}');
        push_policy(out, policy, quota);
        if let Some(key) = key {
            out.push(b':');
            out.extend_from_slice(key);
        }
    }
}

/// Appends `:policy:quota`.
fn push_policy(out: &mut Vec<u8>, policy: &str, quota: usize) {
    out.push(b':');
    out.extend_from_slice(policy.as_bytes());
    out.push(b':');
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
    out.extend_from_slice(&digits[at..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    use core::time::Duration;

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
        let mut a = Vec::new();
        let mut b = Vec::new();
        bucket_key(&mut a, Tag::ByKey, "p", "l", 0, Some(b"x}:l:1"));
        bucket_key(&mut b, Tag::ByKey, "p", "l", 1, Some(b"x"));
        assert_eq!(a, b"{p:x}:l:1}:l:0");
        assert_ne!(a, b);
        bucket_key(&mut a, Tag::ByPrefix, "p", "user", 0, Some(b"0:x"));
        bucket_key(&mut b, Tag::ByPrefix, "p", "user", 0, None);
        assert_eq!(a, b"{p}:user:0:0:x");
        assert_eq!(b, b"{p}:user:0");
        bucket_key(&mut a, Tag::ByKey, "p", "l", 105, Some(b"x"));
        assert_eq!(a, b"{p:x}:l:105");
        bucket_key(&mut a, Tag::ByPrefix, "p", "l", 10, None);
        assert_eq!(a, b"{p}:l:10");
    }
}
