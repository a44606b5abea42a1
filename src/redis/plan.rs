//! What a Redis limiter decides over: its policies prepared for the script ([`Prepared`]:
//! quotas in the integer microseconds the script computes in, and which quota of which policy
//! each is), and the [`Plan`] of one decision: the buckets a request goes to, their Redis keys
//! (from the policies' own key extractors, recording instead of hashing), and which of them
//! belong to dry-run policies.

use core::fmt::Write as _;

use crate::algorithm::Algorithm;
use crate::observe::QuotaMetrics;
use crate::outcome::{InsufficientCapacity, PolicyQuota};
use crate::policy::{Key, Policy, Recording};

pub(crate) use super::quota::Micros;
use super::script::Bucket;

/// A policy's key extractor, shared by the limiter and its local fallback.
pub(crate) type SharedKey<R> = std::sync::Arc<dyn Fn(&R, &mut Key<'_>) + Send + Sync>;

use super::RedisConfigError;

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
    /// key, and quotas it runs exactly (the schedule family for now: GCRA, the leaky bucket,
    /// credit).
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
            quotas.push(Micros::new(algorithm, &policy.name, q)?);
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
    /// Each bucket as the script runs it.
    pub(crate) quotas: Vec<Bucket>,
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
            let Some(mut key) = policy.key(request) else {
                continue;
            };
            let first = plan.keys.len() + 1;
            let last = policy.quotas.len() - 1;
            for (q, micros) in policy.quotas.iter().enumerate() {
                let capacity = micros.algorithm.capacity();
                if !policy.dry_run && n > capacity {
                    // Never admitted: refused cells of the quota too small for them.
                    policy.metrics[q].refused.increment(u64::from(n));
                    return Err(InsufficientCapacity {
                        requested: n,
                        burst: capacity,
                        by: Some(policy.by[q]),
                    });
                }
                // The last quota's key is built around the recorded key, in its buffer.
                let out = match &mut key {
                    Some(recorded) if q == last => {
                        let mut out = core::mem::take(recorded);
                        around_key(&mut out, tag, prefix, &policy.name, q);
                        out
                    }
                    _ => {
                        let mut out = Vec::new();
                        bucket_key(&mut out, tag, prefix, &policy.name, q, key.as_deref());
                        out
                    }
                };
                plan.keys.push(out);
                plan.quotas.push(micros.bucket);
                plan.refs.push((p, q));
            }
            if policy.dry_run {
                if !plan.dry.is_empty() {
                    plan.dry.push(',');
                }
                // Writing to a String cannot fail.
                let _ = write!(plan.dry, "{first}-{}", plan.keys.len());
            }
        }
        Ok(plan)
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

/// [`bucket_key`] for the key `out` holds, built around it in its own buffer (no allocation
/// beyond growing it, where copying it into a new buffer allocated one more).
fn around_key(out: &mut Vec<u8>, tag: Tag, prefix: &str, policy: &str, quota: usize) {
    let mut digits = [0u8; 20];
    let digits = decimal(quota, &mut digits);
    let parts: [&[u8]; 7] = [
        b"{",
        prefix.as_bytes(),
        b"}:",
        policy.as_bytes(),
        b":",
        digits,
        b":",
    ];
    let (front, back): (&[&[u8]], &[&[u8]]) = match tag {
        // `{prefix:` before the key, `}:policy:quota` after it.
        Tag::ByKey => (&parts[..2], &parts[2..6]),
        // `{prefix}:policy:quota:` before it.
        Tag::ByPrefix => (&parts[..], &[]),
    };
    let front_len: usize =
        front.iter().map(|p| p.len()).sum::<usize>() + usize::from(tag == Tag::ByKey);
    let key_len = out.len();
    out.resize(key_len + front_len, 0);
    out.copy_within(..key_len, front_len);
    let mut at = 0;
    for part in front {
        out[at..at + part.len()].copy_from_slice(part);
        at += part.len();
    }
    if tag == Tag::ByKey {
        out[at] = b':';
    }
    for part in back {
        out.extend_from_slice(part);
    }
}

/// `n` in decimal, in the tail of `digits`.
fn decimal(n: usize, digits: &mut [u8; 20]) -> &[u8] {
    let mut at = digits.len();
    let mut rest = n;
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    &digits[at..]
}

/// Appends `:policy:quota`.
fn push_policy(out: &mut Vec<u8>, policy: &str, quota: usize) {
    out.push(b':');
    out.extend_from_slice(policy.as_bytes());
    out.push(b':');
    let mut digits = [0u8; 20];
    out.extend_from_slice(decimal(quota, &mut digits));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_would_make_keys_ambiguous_are_refused() {
        for bad in ["", "a:b", "{a}", "a}"] {
            assert!(check_part(bad, "prefix").is_err(), "{bad}");
        }
        assert!(check_part("flowgate-api_v2", "prefix").is_ok());
    }

    #[test]
    fn a_key_built_around_its_bytes_is_the_same_key() {
        for tag in [Tag::ByKey, Tag::ByPrefix] {
            for key in [&b"alice"[..], b"", b"x}:l:1"] {
                let mut copied = Vec::new();
                bucket_key(&mut copied, tag, "p", "user", 12, Some(key));
                let mut around = key.to_vec();
                around_key(&mut around, tag, "p", "user", 12);
                assert_eq!(around, copied, "{tag:?} {key:?}");
            }
        }
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
