//! The response headers and the default refusal body, as pure functions of the quota states: the
//! IETF draft's `RateLimit-Policy` and `RateLimit` (structured-field lists, one item per quota),
//! the legacy `X-RateLimit-*` trio, `Retry-After`, and an `application/problem+json` body.

use core::fmt::Write as _;
use core::time::Duration;

use http::header::{HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};

use super::text::{number, Text};

use crate::outcome::{tightness, QuotaState};
use crate::quota::Quota;

/// Which quota headers responses carry (admitted and refused alike).
///
/// A refusal that can be retried always carries `Retry-After`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HeaderStyle {
    draft: bool,
    legacy: bool,
}

impl Default for HeaderStyle {
    fn default() -> Self {
        Self::DRAFT
    }
}

impl HeaderStyle {
    /// The IETF draft's `RateLimit-Policy` and `RateLimit` (the default).
    pub const DRAFT: Self = Self {
        draft: true,
        legacy: false,
    };
    /// `X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset` of the tightest
    /// quota.
    pub const LEGACY: Self = Self {
        draft: false,
        legacy: true,
    };
    /// Both.
    pub const BOTH: Self = Self {
        draft: true,
        legacy: true,
    };
    /// No quota headers.
    pub const NONE: Self = Self {
        draft: false,
        legacy: false,
    };

    pub(crate) fn any(self) -> bool {
        self.draft || self.legacy
    }
}

/// `RateLimit-Policy` (draft-ietf-httpapi-ratelimit-headers-10).
pub(super) const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
/// `RateLimit` (draft-ietf-httpapi-ratelimit-headers-10).
pub(super) const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
/// `X-RateLimit-Limit`: the tightest quota's burst.
const X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
/// `X-RateLimit-Remaining`: cells left in the tightest quota.
const X_RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
/// `X-RateLimit-Reset`: seconds (rounded up) until the tightest quota is full again.
const X_RATELIMIT_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");
/// `X-RateLimit-Source`: where a remote backend's decision came from (opt in:
/// [`RateLimitLayer::source_header`](super::RateLimitLayer::source_header)).
pub(super) const X_RATELIMIT_SOURCE: HeaderName = HeaderName::from_static("x-ratelimit-source");

/// Whole seconds, rounded up.
pub(crate) fn ceil_secs(nanos: u64) -> u64 {
    nanos.div_ceil(1_000_000_000)
}

/// `Retry-After` for a wait of `nanos`: whole seconds rounded up and never 0 (RFC 9110), so a
/// client that waits that long is admitted if nothing else is taken in between.
pub(crate) fn retry_after_secs(nanos: u64) -> u64 {
    ceil_secs(nanos).max(1)
}

/// A quota as the draft's `q` and `w`: `count` per `period`, the window in whole seconds. A
/// period that is not a whole number of seconds is widened to the next one and the quota
/// scaled to it, rounded down (`10/500ms` is `q=20;w=1`; `3/1500ms` is `q=4;w=2`), so the
/// advertised rate never exceeds the real one.
pub(crate) fn quota_and_window(quota: Quota) -> (u64, u64) {
    let period = quota.period().as_nanos().max(1);
    let window = ceil_secs(u64::try_from(period).unwrap_or(u64::MAX)).max(1);
    let scaled = u128::from(quota.count()) * u128::from(window) * 1_000_000_000 / period;
    (u64::try_from(scaled).unwrap_or(u64::MAX), window)
}

/// One item of `RateLimit-Policy`: a quota of a policy, and how its name is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Item {
    pub(crate) policy_index: usize,
    pub(crate) quota_index: usize,
    pub(crate) quota: Quota,
    pub(crate) name: Box<str>,
    pub(crate) several: bool,
}

impl Item {
    fn is(&self, state: &QuotaState) -> bool {
        self.policy_index == state.by().policy_index()
            && self.quota_index == state.by().quota_index()
            && self.quota == state.quota()
    }

    fn write(&self, out: &mut Text) {
        push_name(out, &self.name, self.quota_index, self.several);
        let (q, w) = quota_and_window(self.quota);
        out.push(b";q=");
        out.push_number(q);
        out.push(b";w=");
        out.push_number(w);
    }
}

/// `RateLimit-Policy` made once for the usual response: every enforcing quota applies, as the
/// layer was built with. A response that differs (a policy skipped, a quota replaced since)
/// has its own formatted.
#[derive(Debug, Clone)]
pub(crate) struct PolicyCache {
    items: Box<[Item]>,
    value: HeaderValue,
}

impl PolicyCache {
    pub(crate) fn new(items: Vec<Item>) -> Self {
        let mut text = Text::default();
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                text.push(b", ");
            }
            item.write(&mut text);
        }
        Self {
            items: items.into_boxed_slice(),
            value: text.value(),
        }
    }
}

/// Formats the quota headers of one response, item by item.
pub(crate) struct QuotaHeaders<'s> {
    style: HeaderStyle,
    cache: &'s PolicyCache,
    /// While the items so far are the cache's first `matched`: `Some(matched)`, and `policy`
    /// is still empty.
    matched: Option<usize>,
    policy: Text,
    state: Text,
    tightest: Option<(u32, u32, u64)>,
    /// The latest `t` (ns) of a quota with no cell left: a refusal's `Retry-After` is never
    /// earlier.
    exhausted_next: u64,
}

/// The quota headers of a response, ready to be added to it.
#[derive(Debug)]
pub(crate) struct Ready {
    draft: Option<(HeaderValue, HeaderValue)>,
    legacy: Option<(u32, u32, u64)>,
    /// See [`QuotaHeaders`]: the earliest a refusal's `Retry-After` may point, in ns.
    pub(crate) retry_floor: u64,
}

impl<'s> QuotaHeaders<'s> {
    #[inline]
    pub(crate) fn new(style: HeaderStyle, cache: &'s PolicyCache) -> Self {
        Self {
            style,
            cache,
            matched: Some(0),
            policy: Text::default(),
            state: Text::default(),
            tightest: None,
            exhausted_next: 0,
        }
    }

    /// Adds one quota's state. `several` says whether its policy has more than one quota (the
    /// item is then named `policy.index`).
    pub(crate) fn push(&mut self, state: &QuotaState, several: bool) {
        // The draft's `t`: when more quota comes (the next cell), not when the bucket is full
        // again (the legacy `X-RateLimit-Reset`).
        let next = ceil_secs(state.next_cell_after_nanos());
        if state.gauge().remaining() == 0 {
            self.exhausted_next = self.exhausted_next.max(state.next_cell_after_nanos());
        }
        if self.style.draft {
            let first = self.state.is_empty();
            if !first {
                self.state.push(b", ");
            }
            push_name(
                &mut self.state,
                state.by().policy(),
                state.by().quota_index(),
                several,
            );
            self.state.push(b";r=");
            self.state.push_number(u64::from(state.gauge().remaining()));
            self.state.push(b";t=");
            self.state.push_number(next);

            match self.matched {
                Some(k) if self.cache.items.get(k).is_some_and(|item| item.is(state)) => {
                    self.matched = Some(k + 1);
                }
                _ => {
                    self.spill_matched();
                    if !first {
                        self.policy.push(b", ");
                    }
                    push_name(
                        &mut self.policy,
                        state.by().policy(),
                        state.by().quota_index(),
                        several,
                    );
                    let (q, w) = quota_and_window(state.quota());
                    self.policy.push(b";q=");
                    self.policy.push_number(q);
                    self.policy.push(b";w=");
                    self.policy.push_number(w);
                }
            }
        }
        let candidate = tightness(state.gauge().remaining(), state.gauge().reset_after_nanos());
        let tighter = self.tightest.map_or(true, |(remaining, _, nanos)| {
            candidate < tightness(remaining, nanos)
        });
        if tighter {
            self.tightest = Some((
                state.gauge().remaining(),
                state.gauge().limit(),
                state.gauge().reset_after_nanos(),
            ));
        }
    }

    /// Writes out the cached items matched so far, when the list turns out to differ.
    fn spill_matched(&mut self) {
        if let Some(k) = self.matched.take() {
            for (i, item) in self.cache.items[..k].iter().enumerate() {
                if i > 0 {
                    self.policy.push(b", ");
                }
                item.write(&mut self.policy);
            }
        }
    }

    /// The header values.
    pub(crate) fn finish(mut self) -> Ready {
        let draft = (self.style.draft && !self.state.is_empty()).then(|| {
            let policy = if self.matched == Some(self.cache.items.len()) {
                self.cache.value.clone()
            } else {
                self.spill_matched();
                self.policy.value()
            };
            (policy, self.state.value())
        });
        Ready {
            draft,
            legacy: self.tightest.filter(|_| self.style.legacy),
            retry_floor: self.exhausted_next,
        }
    }
}

impl Ready {
    /// Adds the headers to `map`.
    pub(crate) fn write(self, map: &mut HeaderMap) {
        if let Some((policy, state)) = self.draft {
            // Appended: the lists of nested layers (or of the service itself) add up.
            map.append(RATELIMIT_POLICY, policy);
            map.append(RATELIMIT, state);
        }
        if let Some((remaining, limit, reset)) = self.legacy {
            map.insert(X_RATELIMIT_LIMIT, number(u64::from(limit)));
            map.insert(X_RATELIMIT_REMAINING, number(u64::from(remaining)));
            map.insert(X_RATELIMIT_RESET, number(ceil_secs(reset)));
        }
    }
}

/// `Retry-After` into `map`.
pub(crate) fn write_retry_after(wait: Duration, map: &mut HeaderMap) {
    let nanos = u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX);
    map.insert(RETRY_AFTER, number(retry_after_secs(nanos)));
}

/// The item's name as a structured-field string: printable ASCII, `"` and `\\` escaped, any
/// other character written as `?`; `.index` after it when its policy has several quotas.
fn push_name(out: &mut Text, name: &str, quota_index: usize, several: bool) {
    out.push(b"\"");
    if name
        .bytes()
        .all(|b| (b' '..=b'~').contains(&b) && b != b'"' && b != b'\\')
    {
        out.push(name.as_bytes());
    } else {
        for c in name.chars() {
            match c {
                '"' | '\\' => out.push(&[b'\\', c as u8]),
                ' '..='~' => out.push(&[c as u8]),
                _ => out.push(b"?"),
            }
        }
    }
    if several {
        out.push(b".");
        out.push_number(quota_index as u64);
    }
    out.push(b"\"");
}

/// A JSON string literal of `text`.
pub(crate) fn json_string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::super::text::decimal;
    use super::*;

    #[test]
    fn retry_after_rounds_up_and_is_never_zero() {
        assert_eq!(retry_after_secs(0), 1);
        assert_eq!(retry_after_secs(1), 1);
        assert_eq!(retry_after_secs(1_000_000_000), 1);
        assert_eq!(retry_after_secs(1_000_000_001), 2);
        assert_eq!(retry_after_secs(u64::MAX), 18_446_744_074);
        assert_eq!(ceil_secs(0), 0);
    }

    #[test]
    fn quotas_are_advertised_per_whole_seconds_never_above_their_rate() {
        let q = |s: &str| quota_and_window(s.parse().unwrap());
        assert_eq!(q("200/10s"), (200, 10));
        assert_eq!(q("5000/h"), (5000, 3600));
        assert_eq!(q("10/500ms"), (20, 1));
        assert_eq!(q("3/1500ms"), (4, 2));
        assert_eq!(q("1/day"), (1, 86_400));
    }

    #[test]
    fn numbers_are_written_in_decimal() {
        for n in [0, 7, 10, 99, 100, 101, 1_000_000_007, u64::MAX] {
            let mut digits = [0u8; 20];
            assert_eq!(decimal(n, &mut digits), n.to_string().as_bytes());
        }
    }

    #[test]
    fn item_names_are_structured_field_strings() {
        let mut text = Text::default();
        push_name(&mut text, r#"a"b\c é"#, 2, true);
        assert_eq!(text.as_bytes(), br#""a\"b\\c ?.2""#);
        let mut long = Text::default();
        for _ in 0..100 {
            push_name(&mut long, "per-client", 0, false);
        }
        assert_eq!(long.as_bytes().len(), 1200); // spilled past the stack buffer, whole
    }

    #[test]
    fn names_are_escaped_as_structured_field_strings_and_json() {
        let mut json = String::new();
        json_string(&mut json, "a\"b\\c\nd");
        assert_eq!(json, r#""a\"b\\c\u000ad""#);
    }
}
