//! What a Redis limiter does when Redis does not answer: the configured policy
//! ([`OnFailure`]), and the [`Failure`] a `redis` error is.

use core::time::Duration;

pub use flowgate::backend::{Failure, Source};

/// The failure behind a `redis` error.
pub(crate) fn failure_of(error: &::redis::RedisError) -> Failure {
    if error.is_timeout() {
        Failure::Timeout
    } else if error.is_io_error() || error.is_connection_dropped() || error.is_connection_refusal()
    {
        Failure::Connection
    } else {
        Failure::Reply
    }
}

/// What a [`RedisLimiter`](super::RedisLimiter) decides when Redis does not answer in time or
/// at all.
///
/// There is no good answer, only a choice of what to lose. Failing open keeps the service up
/// and lets the limit go; failing closed keeps the limit and takes the service down with
/// Redis; a local limit keeps both, approximately: each process enforces `share` of every
/// quota on its own, so with `share = 1 / processes` the total stays near the limit as long as
/// the load is spread evenly.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[non_exhaustive]
pub enum OnFailure {
    #[default]
    /// Admit the request (the default, as most limiters do: a limiter should not turn a Redis
    /// outage into an outage of the service it protects).
    Open,
    /// Refuse the request, telling the client to retry after `retry_after`.
    Closed {
        /// The retry-after of such refusals.
        retry_after: Duration,
    },
    /// Decide with an in-process limiter holding the same levels, each quota scaled to `share`
    /// of its rate and burst (at least one cell). Its buckets are this process's alone and
    /// start full; they do not carry over into Redis when it answers again.
    Local {
        /// The fraction of each quota this process may use, in `(0, 1]`.
        share: f64,
    },
}
