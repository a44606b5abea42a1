//! The response headers and the default refusal body, as pure functions of the quota states: the
//! IETF draft's `RateLimit-Policy` and `RateLimit` (structured-field lists, one item per quota),
//! the legacy `X-RateLimit-*` trio, `Retry-After`, and an `application/problem+json` body.

use core::fmt::Write as _;
use core::time::Duration;

use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};

use crate::policy::QuotaState;
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
pub const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
/// `RateLimit` (draft-ietf-httpapi-ratelimit-headers-10).
pub const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
/// `X-RateLimit-Limit`: the tightest quota's burst.
pub const X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
/// `X-RateLimit-Remaining`: cells left in the tightest quota.
pub const X_RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
/// `X-RateLimit-Reset`: seconds (rounded up) until the tightest quota is full again.
pub const X_RATELIMIT_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

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

/// Builds the quota headers of one response, item by item.
#[derive(Default)]
pub(crate) struct QuotaHeaders {
    policy: String,
    state: String,
    tightest: Option<(u32, u32, u64)>,
}

impl QuotaHeaders {
    /// Adds one quota's state. `several` says whether its policy has more than one quota (the
    /// item is then named `policy.index`).
    pub(crate) fn push(&mut self, state: &QuotaState<'_>, several: bool) {
        let separator = if self.policy.is_empty() { "" } else { ", " };
        let (q, w) = quota_and_window(state.quota());
        self.policy.push_str(separator);
        write_name(&mut self.policy, state, several);
        let _ = write!(self.policy, ";q={q};w={w}");
        self.state.push_str(separator);
        write_name(&mut self.state, state, several);
        let reset = ceil_secs(state.reset_after_nanos());
        let _ = write!(self.state, ";r={};t={reset}", state.remaining());
        let candidate = (state.remaining(), state.limit(), reset);
        let tighter = self.tightest.map_or(true, |(remaining, _, t)| {
            (candidate.0, core::cmp::Reverse(candidate.2)) < (remaining, core::cmp::Reverse(t))
        });
        if tighter {
            self.tightest = Some(candidate);
        }
    }

    /// The headers in `style`, into `map`.
    pub(crate) fn write(self, style: HeaderStyle, map: &mut HeaderMap) {
        if style.draft && !self.policy.is_empty() {
            map.insert(RATELIMIT_POLICY, value(self.policy));
            map.insert(RATELIMIT, value(self.state));
        }
        if let (true, Some((remaining, limit, reset))) = (style.legacy, self.tightest) {
            map.insert(X_RATELIMIT_LIMIT, HeaderValue::from(limit));
            map.insert(X_RATELIMIT_REMAINING, HeaderValue::from(remaining));
            map.insert(X_RATELIMIT_RESET, HeaderValue::from(reset));
        }
    }
}

/// `Retry-After` into `map`.
pub(crate) fn write_retry_after(wait: Duration, map: &mut HeaderMap) {
    let nanos = u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX);
    map.insert(RETRY_AFTER, HeaderValue::from(retry_after_secs(nanos)));
}

fn value(text: String) -> HeaderValue {
    // Built from sf-strings (printable ASCII only, see `write_name`) and integers.
    HeaderValue::from_maybe_shared(Bytes::from(text))
        .unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// The item's name as a structured-field string: printable ASCII, `"` and `\` escaped, any
/// other byte written as `?`.
fn write_name(out: &mut String, state: &QuotaState<'_>, several: bool) {
    out.push('"');
    for c in state.policy().chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            ' '..='~' => out.push(c),
            _ => out.push('?'),
        }
    }
    if several {
        let _ = write!(out, ".{}", state.quota_index());
    }
    out.push('"');
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
    fn names_are_escaped_as_structured_field_strings_and_json() {
        let mut json = String::new();
        json_string(&mut json, "a\"b\\c\nd");
        assert_eq!(json, r#""a\"b\\c\u000ad""#);
    }
}
