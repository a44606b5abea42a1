//! What a limiter tells the logs, through `tracing` (feature `tracing`; without it, nothing, at
//! no cost): a set built (where, and what it decides when Redis does not answer), the breaker
//! opening and closing (which server, why), and the decisions its failure policy made, summed
//! so that an outage writes a line every ten seconds at most, not one per request. Every event
//! has the target `flowgate_redis` and names the server (`host:port`, never a password).

use core::time::Duration;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::settings::{OnFailure, RedisBackend};
use flowgate::backend::Source;

/// The least time between two lines about fallbacks, in ms.
const EVERY_MS: u64 = 10_000;

/// The decisions a failure policy made since the last line about them.
#[derive(Debug)]
pub(crate) struct Fallbacks {
    origin: Instant,
    /// When the last line was written, in ms since `origin`, plus 1 (0: never).
    written: AtomicU64,
    /// Decisions since that line.
    unwritten: AtomicU64,
}

impl Default for Fallbacks {
    fn default() -> Self {
        Self {
            origin: Instant::now(),
            written: AtomicU64::new(0),
            unwritten: AtomicU64::new(0),
        }
    }
}

impl Fallbacks {
    /// One decision of the failure policy (`source`) while `server` did not answer: a line now
    /// if none was written in the last ten seconds, with the decisions since the last one.
    pub(crate) fn noted(&self, server: &str, source: Source) {
        if !cfg!(feature = "tracing") {
            return;
        }
        // Relaxed, here and below: a count and a rate limit on log lines, which publish
        // nothing else; a line more or fewer is the only thing a race can change.
        self.unwritten.fetch_add(1, Ordering::Relaxed);
        let now = u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX - 1) + 1;
        let written = self.written.load(Ordering::Relaxed);
        if written != 0 && now < written.saturating_add(EVERY_MS) {
            return;
        }
        let won = self
            .written
            .compare_exchange(written, now, Ordering::Relaxed, Ordering::Relaxed);
        if won.is_ok() {
            let decisions = self.unwritten.swap(0, Ordering::Relaxed);
            warn(server, decisions, source);
        }
    }

    /// Writes what is left unwritten: `server` answers again (the next outage's first
    /// decision is written at once).
    pub(crate) fn flush(&self, server: &str) {
        // Relaxed: as above.
        let decisions = self.unwritten.swap(0, Ordering::Relaxed);
        self.written.store(0, Ordering::Relaxed);
        #[cfg(feature = "tracing")]
        if decisions > 0 {
            tracing::info!(
                target: "flowgate_redis",
                server,
                decisions,
                "Redis answers again; decided by the failure policy since the last line"
            );
        }
        #[cfg(not(feature = "tracing"))]
        let _ = (server, decisions);
    }
}

fn warn(server: &str, decisions: u64, source: Source) {
    #[cfg(feature = "tracing")]
    tracing::warn!(
        target: "flowgate_redis",
        server,
        decisions,
        last = %source,
        "Redis did not answer: decided by the failure policy"
    );
    #[cfg(not(feature = "tracing"))]
    let _ = (server, decisions, source);
}

/// A set built on `backend` (at `server`), with its policies `names`.
pub(crate) fn built<'a>(
    backend: &RedisBackend,
    server: &str,
    names: impl Iterator<Item = &'a str>,
) {
    #[cfg(feature = "tracing")]
    {
        let policies = names.collect::<Vec<_>>().join(", ");
        let (prefix, timeout) = (backend.prefix.as_str(), backend.timeout);
        let on_failure = match backend.on_failure {
            OnFailure::Open => "open: admits every request while Redis does not answer".to_owned(),
            OnFailure::Closed { retry_after } => {
                format!("closed: refuses, retry after {retry_after:?}")
            }
            OnFailure::Local { share } => format!("local: {share:?} of each quota in this process"),
        };
        tracing::info!(
            target: "flowgate_redis",
            server,
            prefix,
            ?timeout,
            on_failure,
            policies,
            "policy set built in Redis (connecting lazily)"
        );
    }
    #[cfg(not(feature = "tracing"))]
    let _ = (backend, server, names, OnFailure::Open);
}

/// The breaker in front of `server` opened after `failures` failures, for `cool_down`.
pub(crate) fn opened(server: &str, failures: u64, cool_down: Duration) {
    #[cfg(feature = "tracing")]
    tracing::warn!(
        target: "flowgate_redis",
        server,
        failures,
        ?cool_down,
        "circuit breaker opened: Redis is not called until a probe answers"
    );
    #[cfg(not(feature = "tracing"))]
    let _ = (server, failures, cool_down);
}

/// The breaker in front of `server` closed: a probe answered.
pub(crate) fn closed(server: &str) {
    #[cfg(feature = "tracing")]
    tracing::info!(target: "flowgate_redis", server, "circuit breaker closed: Redis answers");
    #[cfg(not(feature = "tracing"))]
    let _ = server;
}
