//! What a Redis limiter decides over: its policies prepared for the script ([`Prepared`]:
//! quotas in the integer microseconds the script computes in, and which quota of which policy
//! each is), and the [`Plan`] of one decision: the buckets a request goes to, their Redis keys
//! (from the policies' own key extractors, recording instead of hashing), and which of them
//! belong to dry-run policies.

use core::fmt::Write as _;
#[cfg(feature = "cluster")]
use core::ops::Range;

use smallvec::SmallVec;

use flowgate::outcome::{InsufficientCapacity, PolicyQuota, Rejection};
use flowgate::policy::QuotaMetrics;
use flowgate::policy::{self, Policy};

use super::quota::{Bucket, Micros};
use super::Call;
use crate::error::{check_part, RedisConfigError};

/// One policy as the script runs it.
pub(crate) struct Prepared<R: ?Sized> {
    pub(crate) name: String,
    /// The policy as written: its key extractor records the request's key.
    policy: Policy<R>,
    pub(crate) quotas: Vec<Micros>,
    /// Each quota as outcomes name it.
    pub(crate) by: Vec<&'static PolicyQuota>,
    pub(crate) dry_run: bool,
    /// Whether it has a key extractor (its buckets are per key).
    pub(crate) keyed: bool,
    /// The retry-after jitter of refusals, uniform in `[min, max]` ns.
    pub(crate) jitter: (u64, u64),
    /// Each quota's Redis key around the request's key (see [`Affixes`]).
    pub(crate) affixes: Vec<Affixes>,
    /// Each quota's cells admitted and refused (nothing without the `metrics` feature), under
    /// the same names and labels as in process.
    pub(crate) metrics: Vec<QuotaMetrics>,
}

impl<R: ?Sized> Prepared<R> {
    /// Policy `index` of a set, `policy`, checked for the script (a name that can be part of a
    /// key, and quotas it runs exactly), its buckets named under `prefix` and tagged by `tag`.
    pub(crate) fn new(
        index: usize,
        policy: Policy<R>,
        (prefix, tag): (&str, Tag),
    ) -> Result<Self, RedisConfigError> {
        let name = policy.name().to_owned();
        check_part(&name, "policy")?;
        let (dry_run, keyed, (min, max)) = policy.settings();
        let count = policy.algorithms().len();
        let mut quotas = Vec::with_capacity(count);
        let mut by = Vec::with_capacity(count);
        let mut metrics = Vec::with_capacity(count);
        let mut affixes = Vec::with_capacity(count);
        for (q, algorithm) in policy.algorithms().iter().enumerate() {
            quotas.push(Micros::new(algorithm, &name, q)?);
            by.push(PolicyQuota::intern(&name, index, q));
            metrics.push(QuotaMetrics::new(&name, &algorithm.to_string()));
            affixes.push(Affixes::new(tag, prefix, &name, q, keyed));
        }
        // Checked to fit when the set was (`into_policies`).
        let nanos = |d: core::time::Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        Ok(Self {
            policy,
            quotas,
            by,
            dry_run,
            keyed,
            jitter: (nanos(min), nanos(max)),
            affixes,
            metrics,
            name,
        })
    }

    /// Pushes the Redis keys of this policy's buckets for `request` onto `keys`, in quota
    /// order; `Ok(false)` (and nothing pushed) if the extractor skipped the request, the
    /// rejection (nothing pushed) if it rejected it.
    ///
    /// The request's key is recorded once, straight after the last quota's front in the
    /// buffer that becomes that quota's key; the other quotas' keys copy it.
    fn push_keys(
        &self,
        request: &R,
        keys: &mut SmallVec<[Vec<u8>; INLINE]>,
    ) -> Result<bool, &'static Rejection> {
        let Some(last) = self.affixes.last() else {
            return Ok(true);
        };
        let mut recorded = Vec::with_capacity(last.front.len() + last.back.len() + 32);
        recorded.extend_from_slice(&last.front);
        if !self.policy.record_key(request, &mut recorded)? {
            return Ok(false);
        }
        if self.affixes.len() > 1 {
            let key = &recorded[last.front.len()..];
            push_around(keys, &self.affixes[..self.affixes.len() - 1], key);
        }
        recorded.extend_from_slice(&last.back);
        keys.push(recorded);
        Ok(true)
    }
}

/// Pushes the keys of the quotas `affixes` describe around the request's key `key` (a
/// policy's quotas but its last, whose key holds the recorded one).
#[inline(never)]
fn push_around(keys: &mut SmallVec<[Vec<u8>; INLINE]>, affixes: &[Affixes], key: &[u8]) {
    keys.extend(affixes.iter().map(|a| a.around(key)));
}

/// What goes before and after a request's key in the Redis key of one quota of a policy
/// (a global policy's whole key is its front).
///
/// `{prefix:key}:policy:quota` when tagged by key; `{prefix}:policy:quota:key` (or
/// `{prefix}:policy:quota` for a global policy) when tagged by prefix. Prefix and policy names
/// hold no `:`, `{` or `}`, and the quota index is digits, so distinct buckets never share a
/// key whatever the user's keys contain. Limiters that share a prefix and a policy name share
/// buckets: give each limit its own policy name (or prefix), since a bucket written under one
/// quota and read under another is taken as clamped or full by the other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Affixes {
    front: Box<[u8]>,
    back: Box<[u8]>,
}

impl Affixes {
    /// The affixes of quota `quota` of policy `policy` (keyed or global) under `prefix`,
    /// tagged by `tag`. Worked out once, when the limiter is built: formatting keys from
    /// their pieces on every call cost more than the rest of a decision's client side
    /// (callgrind: `scripts/redis-instructions`).
    fn new(tag: Tag, prefix: &str, policy: &str, quota: usize, keyed: bool) -> Self {
        let by_key = keyed && tag == Tag::Key;
        let mut front = format!("{{{prefix}");
        let mut back = String::new();
        let named = format!(":{policy}:{quota}");
        if tag == Tag::Policy {
            // `{prefix:policy:key}:quota`, or `{prefix:policy}:quota` for a global policy.
            front.push_str(&format!(":{policy}"));
            let quota = format!("}}:{quota}");
            if keyed {
                front.push(':');
                back = quota;
            } else {
                front.push_str(&quota);
            }
        } else if by_key {
            front.push(':');
            back = format!("}}{named}");
        } else {
            front.push('}');
            front.push_str(&named);
            if keyed {
                front.push(':');
            }
        }
        Self {
            front: front.into_bytes().into(),
            back: back.into_bytes().into(),
        }
    }

    /// The whole key around the request's key `key`.
    fn around(&self, key: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.front.len() + key.len() + self.back.len());
        out.extend_from_slice(&self.front);
        out.extend_from_slice(key);
        out.extend_from_slice(&self.back);
        out
    }
}

/// Up to this many buckets of a decision are held inline, without an allocation: a Plan's
/// allocations cost more than the rest of its work (callgrind: `scripts/redis-instructions`).
const INLINE: usize = 2;

/// The buckets of one decision.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    pub(crate) keys: SmallVec<[Vec<u8>; INLINE]>,
    /// Each bucket as the script runs it.
    pub(crate) quotas: SmallVec<[Bucket; INLINE]>,
    /// Each bucket's policy and quota index.
    pub(crate) refs: SmallVec<[(usize, usize); INLINE]>,
    /// The buckets of dry-run policies, as the script reads them: `first-last` ranges of bucket
    /// numbers (from 1), comma-separated; empty if there are none.
    pub(crate) dry: String,
    /// The refusal of the first enforcing policy whose extractor rejected the request: decided
    /// without Redis. Its buckets are left out, and the other policies' kept, for what only
    /// looks at or forgets buckets.
    pub(crate) rejected: Option<policy::Refused>,
}

impl Plan {
    /// The buckets `request` goes to in `policies`, or the error if `n` exceeds an enforcing
    /// quota's burst (a dry-run quota's is left to the script, which finds that it would
    /// refuse).
    pub(crate) fn new<R: ?Sized>(
        policies: &[Prepared<R>],
        request: &R,
        n: u32,
    ) -> Result<Self, InsufficientCapacity> {
        let mut plan = Self::default();
        for (p, policy) in policies.iter().enumerate() {
            let first = plan.keys.len() + 1;
            match policy.push_keys(request, &mut plan.keys) {
                Ok(true) => {}
                Ok(false) => continue,
                // A dry-run policy never refuses: its rejection is a skip.
                Err(_) if policy.dry_run => continue,
                Err(why) => {
                    let by = policy.by.first().copied();
                    plan.rejected
                        .get_or_insert(policy::Refused::rejected(why, by, None));
                    continue;
                }
            }
            for (q, micros) in policy.quotas.iter().enumerate() {
                // After a rejection, decided without Redis, a capacity is never asked.
                if !policy.dry_run && n > micros.capacity && plan.rejected.is_none() {
                    return Err(too_many(policy, q, n));
                }
                plan.quotas.push(micros.bucket);
                plan.refs.push((p, q));
            }
            if policy.dry_run {
                plan.dry_range(first);
            }
        }
        Ok(plan)
    }

    /// The plan without its rejection: for what looks at buckets, which a rejecting policy
    /// passes by.
    pub(crate) fn unrejected(self) -> Self {
        Self {
            rejected: None,
            ..self
        }
    }

    /// The key of policy `policy`'s first bucket, if the policy applies: what the local
    /// fallback keys that policy's buckets by.
    pub(crate) fn key_of(&self, policy: usize) -> Option<&[u8]> {
        let at = self.refs.iter().position(|&(p, _)| p == policy)?;
        Some(&self.keys[at])
    }

    /// The script call that takes `n` cells (up to `want`) from the plan's buckets, at the
    /// reading `now` (µs; `None`: the server's `TIME`).
    pub(crate) fn call(&self, (n, want): (u32, u32), now: Option<u64>) -> Call<'_> {
        Call {
            keys: &self.keys,
            quotas: &self.quotas,
            dry: &self.dry,
            now,
            n,
            want,
        }
    }

    #[cfg(feature = "cluster")]
    /// The buckets of each policy, in order: one slot each in a cluster.
    pub(crate) fn parts(&self) -> SmallVec<[Range<usize>; 4]> {
        let mut parts = SmallVec::new();
        let mut start = 0;
        for i in 1..=self.refs.len() {
            if i == self.refs.len() || self.refs[i].0 != self.refs[start].0 {
                parts.push(start..i);
                start = i;
            }
        }
        parts
    }

    #[cfg(feature = "cluster")]
    /// Whether the plan's buckets belong to more than one policy.
    pub(crate) fn spans_policies(&self) -> bool {
        self.refs
            .first()
            .is_some_and(|first| self.refs.iter().any(|r| r.0 != first.0))
    }

    #[cfg(feature = "cluster")]
    /// The plan of the buckets `range` (one policy's, a dry run's if `dry_run`).
    pub(crate) fn part(&self, range: Range<usize>, dry_run: bool) -> Self {
        let dry = if dry_run {
            format!("1-{}", range.len())
        } else {
            String::new()
        };
        Self {
            keys: self.keys[range.clone()].iter().cloned().collect(),
            quotas: self.quotas[range.clone()].iter().copied().collect(),
            refs: self.refs[range].iter().copied().collect(),
            dry,
            rejected: None,
        }
    }

    /// Adds the dry-run range `first` to the last bucket so far.
    #[cold]
    #[inline(never)]
    fn dry_range(&mut self, first: usize) {
        if !self.dry.is_empty() {
            self.dry.push(',');
        }
        // Writing to a String cannot fail.
        let _ = write!(self.dry, "{first}-{}", self.keys.len());
    }
}

/// The error of `n` cells for quota `q` of `policy`, which is too small for them: they are
/// never admitted, and counted as refused by that quota.
#[cold]
#[inline(never)]
fn too_many<R: ?Sized>(policy: &Prepared<R>, q: usize, n: u32) -> InsufficientCapacity {
    policy.metrics[q].refused(u64::from(n));
    InsufficientCapacity::of(n, policy.quotas[q].capacity, policy.by[q])
}

/// Where a decision's buckets live.
///
/// A script call may only touch keys of one Redis Cluster slot, so the keys of one call carry
/// the same hash tag. A limiter with one keyed policy tags by key (`{prefix:key}`), so keys
/// spread over a cluster. On one server, a limiter with a global policy or several policies
/// tags by prefix (`{prefix}`): every bucket in one slot, every decision one call. In a cluster
/// (feature `cluster`) such a limiter tags by policy (`{prefix:policy:key}`, or
/// `{prefix:policy}` for a global one), so that a per-user policy spreads over the nodes; a
/// decision over several policies then takes one call per policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tag {
    Key,
    Prefix,
    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    Policy,
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

    /// The Redis key of quota `q` of `policy` for `key` (`None`: a global policy).
    fn key(tag: Tag, policy: &str, q: usize, key: Option<&[u8]>) -> Vec<u8> {
        Affixes::new(tag, "p", policy, q, key.is_some()).around(key.unwrap_or_default())
    }

    #[test]
    fn keys_of_distinct_buckets_differ() {
        let a = key(Tag::Key, "l", 0, Some(b"x}:l:1"));
        assert_eq!(a, b"{p:x}:l:1}:l:0");
        assert_ne!(a, key(Tag::Key, "l", 1, Some(b"x")));
        assert_eq!(key(Tag::Prefix, "user", 0, Some(b"0:x")), b"{p}:user:0:0:x");
        assert_eq!(key(Tag::Prefix, "user", 0, None), b"{p}:user:0");
        assert_eq!(key(Tag::Key, "l", 105, Some(b"x")), b"{p:x}:l:105");
        assert_eq!(key(Tag::Prefix, "l", 10, None), b"{p}:l:10");
        assert_eq!(key(Tag::Key, "l", 2, None), b"{p}:l:2", "a global policy's");
        assert_eq!(key(Tag::Policy, "user", 1, Some(b"x")), b"{p:user:x}:1");
        assert_eq!(key(Tag::Policy, "all", 0, None), b"{p:all}:0");
    }

    /// Every quota's key holds the request's key, recorded once and copied to the others, and
    /// a skipped request has none.
    #[test]
    fn each_quota_of_a_keyed_policy_has_its_key() {
        for tag in [Tag::Key, Tag::Prefix, Tag::Policy] {
            let policy = Policy::keyed_with("user", |name: &str, key| {
                match name {
                    "-" => key.skip(),
                    name => key.add(name),
                };
            })
            .quota(flowgate::Quota::per_second(1).unwrap())
            .quota(flowgate::Quota::per_minute(10).unwrap());
            let prepared = Prepared::new(0, policy, ("p", tag)).unwrap();
            let mut keys = SmallVec::new();
            assert_eq!(prepared.push_keys("alice", &mut keys), Ok(true));
            let expected: Vec<_> = (0..2)
                .map(|q| key(tag, "user", q, Some(b"alice")))
                .collect();
            assert_eq!(keys.as_slice(), expected, "{tag:?}");
            assert_eq!(prepared.push_keys("-", &mut keys), Ok(false));
            assert_eq!(keys.len(), 2);
        }
    }
}
