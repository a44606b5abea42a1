//! [`Refusal`]: why the middleware answered instead of the service, and the response it builds
//! for it (status, headers, and the default `application/problem+json` body).

use core::fmt::{self, Write as _};
use core::time::Duration;

use bytes::Bytes;
use http::header::{HeaderMap, HeaderValue, CONTENT_TYPE};
use http::{Response, StatusCode};

use super::headers::{json_string, retry_after_secs, write_retry_after, Ready};
use super::{grpc, Shared};
use crate::outcome::{Cause, DryRun, InsufficientCapacity, QuotaState};
use crate::policy::Refused;

/// Why a request was answered by the middleware, for a custom answer
/// ([`RateLimitLayer::refusal_response`](super::RateLimitLayer::refusal_response)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// A policy refused for now: `429 Too Many Requests` with `Retry-After`. Or, for a refusal
    /// whose [`cause`](crate::Refused::cause) is [`Cause::Unavailable`] (the backend did not answer
    /// and its failure policy refuses), `503 Service Unavailable` with `Retry-After`. Or, for a
    /// refusal whose cause is [`Cause::Rejected`] (a key extractor rejected the request:
    /// [`Key::reject`](crate::policy::Key::reject)), the rejection's status, without
    /// `Retry-After`.
    Limited(Refused),
    /// The request costs more than a policy's burst and can never be admitted: `429` without
    /// `Retry-After`.
    Oversized(InsufficientCapacity),
    /// The client's address could not be told and the rule is to refuse (see
    /// [`Unkeyed::Refuse`](super::Unkeyed::Refuse)), with its status. No policy was consulted.
    Unkeyed(StatusCode),
}

impl Refusal {
    /// The response status, unless
    /// [`refusal_response`](super::RateLimitLayer::refusal_response) sets another.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::Limited(r) if r.cause() == Cause::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Self::Limited(r) if r.cause() == Cause::Rejected => {
                let status = r.rejection().map_or(400, |why| why.status());
                StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST)
            }
            Self::Limited(_) | Self::Oversized(_) => StatusCode::TOO_MANY_REQUESTS,
            Self::Unkeyed(status) => *status,
        }
    }

    /// The refusing policy's name, if a policy refused.
    pub fn policy(&self) -> Option<&'static str> {
        match self {
            Self::Limited(refused) => refused.by().map(|by| by.policy()),
            Self::Oversized(capacity) => capacity.by().map(|by| by.policy()),
            Self::Unkeyed(_) => None,
        }
    }

    /// The `Retry-After` value in seconds (rounded up, at least 1), if the request can succeed
    /// later (not when it never conforms before the clock's horizon).
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            Self::Limited(rejected)
                if rejected.conforms_after().as_nanos() >= u128::from(u64::MAX) =>
            {
                None
            }
            Self::Limited(rejected) => Some(retry_after_secs(rejected.retry_after_nanos())),
            Self::Oversized(_) | Self::Unkeyed(_) => None,
        }
    }

    /// The default body: an RFC 9457 problem naming the policy, as `application/problem+json`.
    ///
    /// ```
    /// # use flowgate::http::Refusal;
    /// let (content_type, body) = Refusal::Unkeyed(http::StatusCode::BAD_REQUEST).problem();
    /// assert_eq!(content_type, "application/problem+json");
    /// assert_eq!(
    ///     body,
    ///     r#"{"type":"about:blank","title":"Bad Request","status":400,"detail":"the client's address could not be determined"}"#
    /// );
    /// ```
    pub fn problem(&self) -> (HeaderValue, Bytes) {
        let status = self.status();
        let mut json = String::with_capacity(192);
        json.push_str(r#"{"type":"about:blank","title":"#);
        json_string(&mut json, status.canonical_reason().unwrap_or("Refused"));
        let _ = write!(json, r#","status":{},"detail":"#, status.as_u16());
        json_string(&mut json, &self.detail());
        if let Some(policy) = self.policy() {
            json.push_str(r#","policy":"#);
            json_string(&mut json, policy);
        }
        if let Some(secs) = self.retry_after_secs() {
            let _ = write!(json, r#","retry_after":{secs}"#);
        }
        json.push('}');
        (
            HeaderValue::from_static("application/problem+json"),
            Bytes::from(json),
        )
    }

    /// The response the middleware sends by default, before its `Retry-After` and quota
    /// headers: [`status`](Self::status), and the [`problem`](Self::problem) body with its
    /// content type. A [`refusal_response`](super::RateLimitLayer::refusal_response) can start
    /// from it.
    pub fn response(&self) -> Response<Bytes> {
        let (content_type, body) = self.problem();
        let mut response = Response::new(body);
        *response.status_mut() = self.status();
        response.headers_mut().insert(CONTENT_TYPE, content_type);
        response
    }

    /// The refusal as one sentence: the problem body's `detail`, and a gRPC refusal's
    /// `grpc-message`.
    ///
    /// ```
    /// # use flowgate::http::Refusal;
    /// let refusal = Refusal::Unkeyed(http::StatusCode::BAD_REQUEST);
    /// assert_eq!(refusal.detail(), "the client's address could not be determined");
    /// ```
    pub fn detail(&self) -> String {
        self.to_string()
    }
}

/// # gRPC
impl Refusal {
    /// The gRPC status code a gRPC call is refused with, the [`status`](Self::status)'s (or
    /// that of the status a [`refusal_response`](super::RateLimitLayer::refusal_response) sets):
    /// 429 is `RESOURCE_EXHAUSTED` (8), 503 `UNAVAILABLE` (14), 401 `UNAUTHENTICATED` (16), 403
    /// `PERMISSION_DENIED` (7), 404 `NOT_FOUND` (5), any other 4xx `INVALID_ARGUMENT` (3), any
    /// other 5xx `INTERNAL` (13). So a policy's refusal (for now, for good, or with a full
    /// table) is 8, an unavailable limiter's 14, and a client whose address could not be told,
    /// or a rejection, that of its status (13 for the former's default 500).
    ///
    /// A refused gRPC call (content type `application/grpc`, alone or with `+codec` or
    /// parameters) is answered with HTTP 200, trailers-only: this code in `grpc-status`,
    /// [`detail`](Self::detail) percent-encoded in `grpc-message`, and, when the call can
    /// succeed later, `Retry-After` in whole seconds and the wait to the nanosecond in
    /// `grpc-status-details-bin` (a `google.rpc.Status` with a `google.rpc.RetryInfo`, which
    /// tonic reads with `tonic_types::StatusExt::get_details_retry_info`). The quota headers
    /// come as metadata. A [`refusal_response`](super::RateLimitLayer::refusal_response)'s
    /// status sets the code; its body is not sent.
    /// The layer goes on tonic's own server (`Server::builder().layer(...)`, with the feature
    /// `tonic` for the peer's address) or on an axum router of tonic's routes;
    /// `integration/tests/grpc.rs` calls both with a tonic client.
    ///
    /// ```
    /// # use flowgate::http::Refusal;
    /// assert_eq!(Refusal::Unkeyed(http::StatusCode::INTERNAL_SERVER_ERROR).grpc_code(), 13);
    /// ```
    pub fn grpc_code(&self) -> u8 {
        Self::grpc_code_of(self.status())
    }

    /// [`grpc_code`](Self::grpc_code) of a refusal answered with `status` (anything but a 4xx
    /// or 5xx is `UNKNOWN`, 2).
    pub(super) fn grpc_code_of(status: StatusCode) -> u8 {
        match status.as_u16() {
            429 => 8,
            503 => 14,
            401 => 16,
            403 => 7,
            404 => 5,
            400..=499 => 3,
            500..=599 => 13,
            _ => 2,
        }
    }
}

/// The refusal as one sentence, as [`detail`](Refusal::detail) gives it: `rate limited by policy
/// 'per-client': retry after 2 s` (whole seconds, rounded up, as `Retry-After` says).
impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Limited(refused) if refused.cause() == Cause::TableFull => write!(
                f,
                "policy '{}' has no room for another client now",
                refused.by().map(|by| by.policy()).unwrap_or_default()
            ),
            Self::Limited(refused) if refused.cause() == Cause::Rejected => {
                f.write_str(refused.rejection().map_or("rejected", |why| why.message()))
            }
            Self::Limited(refused) if refused.cause() == Cause::Unavailable => write!(
                f,
                "the rate limiter is unavailable: retry after {} s",
                self.retry_after_secs().unwrap_or(1)
            ),
            Self::Limited(refused) => {
                let policy = refused.by().map(|by| by.policy()).unwrap_or_default();
                write!(f, "rate limited by policy '{policy}'")?;
                match self.retry_after_secs() {
                    Some(secs) => write!(f, ": retry after {secs} s"),
                    None => Ok(()),
                }
            }
            Self::Oversized(capacity) => write!(
                f,
                "the request costs {} cells, more than the {} a quota of policy '{}' ever holds: \
                 it can never be admitted",
                capacity.requested,
                capacity.burst,
                capacity.by().map(|by| by.policy()).unwrap_or_default(),
            ),
            Self::Unkeyed(status) if status.is_server_error() => f.write_str(
                "the client's address could not be determined: the server does not see the \
                 connection's peer address",
            ),
            Self::Unkeyed(_) => f.write_str("the client's address could not be determined"),
        }
    }
}

/// What the layer decided about a request, put in the request's extensions for the inner
/// service when the layer attaches its decisions ([`RateLimitLayer::attach_decisions`]) or
/// lets every request through ([`RateLimitLayer::permissive`]). A handler reads it as axum's
/// `Extension<Ruling>`, actix-web's `ReqData<Ruling>`, or from a tonic request's
/// `extensions()`.
///
/// [`RateLimitLayer::attach_decisions`]: super::RateLimitLayer::attach_decisions
/// [`RateLimitLayer::permissive`]: super::RateLimitLayer::permissive
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ruling {
    pub(super) refusal: Option<Refusal>,
    pub(super) states: Vec<QuotaState>,
    pub(super) dry_run: Option<DryRun>,
}

impl Ruling {
    /// Why the layer would have refused the request: `None` for an admission (`Some` only in
    /// permissive mode, which lets refused requests through). Its wait is the decision's; the
    /// `Retry-After` a refusal is sent with can be later, raised to a quota's next cell.
    pub fn refusal(&self) -> Option<&Refusal> {
        self.refusal.as_ref()
    }

    /// Every enforcing quota that applied, in evaluation order, as it stands after the
    /// decision: its policy and quota ([`QuotaState::by`]), cells left and time to the next
    /// cell; a refusing quota with nothing left. Empty for a request refused before any
    /// policy ran, by a full table, by the quota on new keys, or by an unavailable backend. A
    /// Redis set's refusal of a key it refused moments before, answered by its local shield,
    /// lists the refusing quota alone. Nested layers each add theirs, outer layer first.
    pub fn quotas(&self) -> &[QuotaState] {
        &self.states
    }

    /// The tightest of [`quotas`](Self::quotas) (fewest cells left, then the longest reset),
    /// as the legacy headers report it.
    pub fn tightest(&self) -> Option<&QuotaState> {
        self.states.iter().reduce(|kept, state| {
            if state.gauge().is_tighter_than(&kept.gauge()) {
                state
            } else {
                kept
            }
        })
    }

    /// The first dry-run policy that would have refused the request, with its wait.
    pub fn dry_run(&self) -> Option<DryRun> {
        self.dry_run
    }

    /// This ruling, an inner layer's, after `outer`'s (the ruling an outer layer put in the
    /// request's extensions): the quotas of both, the outer refusal and dry run first.
    pub(super) fn after(mut self, outer: Option<Ruling>) -> Ruling {
        let Some(mut outer) = outer else {
            return self;
        };
        outer.states.append(&mut self.states);
        outer.refusal = outer.refusal.or(self.refusal);
        outer.dry_run = outer.dry_run.or(self.dry_run);
        outer
    }
}

impl Refusal {
    /// Whether the refusal describes quotas: not a new client's (a full table, the quota on new
    /// keys: the tables do not hold the client, so the quotas would describe a fresh bucket next
    /// to a 429), nor an unavailable limiter's or a rejection's (no quota was asked).
    pub(super) fn describes_quotas(&self) -> bool {
        !matches!(self, Refusal::Limited(r) if matches!(r.cause(),
            Cause::TableFull | Cause::NewKeys | Cause::Unavailable | Cause::Rejected))
    }
}

/// A refusal as the middleware sends it: the response, and how long to hold it first.
pub(super) type Answer = (Response<Bytes>, Option<Duration>);

/// The response to `refusal`, and how long to hold it: its status, body, `Retry-After`, and
/// the quota headers `quotas` gives (every enforcing quota that applies), if the style has
/// any; to a gRPC call (from `request`'s headers), a trailers-only gRPC answer with the same
/// headers.
pub(super) fn refusal_of<B>(
    shared: &Shared<B>,
    refusal: &Refusal,
    quotas: impl FnOnce() -> Option<Ready>,
    request: &HeaderMap,
) -> Answer {
    let quotas = (shared.style.any() && refusal.describes_quotas())
        .then(quotas)
        .flatten();
    // Never earlier than the draft's `t` of a quota with nothing left (the refusal's wait
    // covers every quota, so it is rarely raised: by a booking made after the decision; the
    // floor keeps the headers and the body consistent whatever an algorithm reports).
    let floor = quotas.as_ref().map_or(0, |quotas| quotas.retry_floor);
    let raised = match refusal {
        Refusal::Limited(r) if r.retry_after_nanos() < floor && r.bucket.wait != u64::MAX => {
            let mut r = *r;
            r.bucket.wait = floor.saturating_sub(r.jitter);
            Some(Refusal::Limited(r))
        }
        _ => None,
    };
    let refusal = raised.as_ref().unwrap_or(refusal);
    let wait = match (refusal, refusal.retry_after_secs()) {
        (Refusal::Limited(rejected), Some(_)) => {
            Some(Duration::from_nanos(rejected.retry_after_nanos()))
        }
        _ => None,
    };
    let custom = shared.respond.as_ref().map(|respond| respond(refusal));
    let mut response = if grpc::requested(request) {
        let status = custom.map_or_else(|| refusal.status(), |custom| custom.status());
        let mut response = Response::new(Bytes::new());
        let message = refusal.detail();
        let code = Refusal::grpc_code_of(status);
        grpc::write(code, &message, wait, response.headers_mut());
        response
    } else {
        custom.unwrap_or_else(|| refusal.response())
    };
    let headers = response.headers_mut();
    if let Some(wait) = wait {
        write_retry_after(wait, headers);
    }
    if let Some(quotas) = quotas {
        quotas.write(headers);
    }
    // A delay needs tokio's timer; outside a runtime the refusal goes at once.
    let delay = (!shared.delay.is_zero() && tokio::runtime::Handle::try_current().is_ok())
        .then_some(shared.delay);
    (response, delay)
}

#[cfg(test)]
mod tests {
    use http::StatusCode;

    use super::Refusal;
    use crate::outcome::{Cause, Gauge, InsufficientCapacity, PolicyQuota, Refused};
    use crate::policy;

    /// `Display` is the `detail` sentence, whole seconds rounded up as `Retry-After` says; a
    /// rejection is its status and its message, in the problem body too.
    #[test]
    fn a_refusal_reads_as_its_detail() {
        let by = PolicyQuota::intern("per-client", 0, 0);
        let bucket = Refused::new(Gauge::new(5, 1, 5, 0), 1_200_000_000);
        let refused = policy::Refused::new(bucket, Some(by), None, 0);
        let limited = Refusal::Limited(refused);
        assert_eq!(
            limited.to_string(),
            "rate limited by policy 'per-client': retry after 2 s"
        );
        assert_eq!(limited.detail(), limited.to_string());
        let capacity = InsufficientCapacity {
            requested: 9,
            burst: 5,
            by: Some(by),
        };
        assert_eq!(
            Refusal::Limited(capacity.never()).to_string(),
            "rate limited by policy 'per-client'"
        );
        assert_eq!(
            Refusal::Oversized(capacity).to_string(),
            "the request costs 9 cells, more than the 5 a quota of policy 'per-client' ever \
             holds: it can never be admitted"
        );
        let unavailable = Refused::new(Gauge::new(1, 1, 1, 0), 2_000_000_000);
        let unavailable =
            policy::Refused::new(unavailable.because(Cause::Unavailable), None, None, 0);
        let unavailable = Refusal::Limited(unavailable);
        assert_eq!(
            unavailable.to_string(),
            "the rate limiter is unavailable: retry after 2 s"
        );
        assert_eq!(
            (
                unavailable.status(),
                unavailable.policy(),
                unavailable.grpc_code()
            ),
            (StatusCode::SERVICE_UNAVAILABLE, None, 14)
        );
        static NO_KEY: crate::outcome::Rejection =
            crate::outcome::Rejection::new(401, "no \"API\" key");
        let rejected = Refusal::Limited(policy::Refused::rejected(&NO_KEY, Some(by), None));
        assert_eq!(
            (
                rejected.status(),
                rejected.grpc_code(),
                rejected.retry_after_secs()
            ),
            (StatusCode::UNAUTHORIZED, 16, None)
        );
        assert_eq!(
            rejected.problem().1,
            r#"{"type":"about:blank","title":"Unauthorized","status":401,"detail":"no \"API\" key","policy":"per-client"}"#
        );
        assert!(!rejected.describes_quotas());
        assert_eq!(
            Refusal::Unkeyed(StatusCode::INTERNAL_SERVER_ERROR).to_string(),
            "the client's address could not be determined: the server does not see the \
             connection's peer address"
        );
    }
}
