//! Failure handling between a limiter and its connection: [`Link`], through which every call
//! goes (the circuit breaker asked first, one deadline per decision, every outcome counted), and
//! the failure policy's answer when a call gives none ([`Link::fail`]).

mod breaker;
mod local;

use core::future::Future;
use core::time::Duration;
use std::sync::Arc;

use tokio::time::Instant;

pub use self::breaker::BreakerState;
use self::breaker::Breakers;
pub(crate) use self::local::local_limiter;
use crate::connection::{connect, describe, Connection};
use crate::error::RedisConfigError;
use crate::events::Fallbacks;
use crate::script::{Call, Reply, Script};
use crate::settings::{OnFailure, RedisBackend};
use crate::stats::Counters;
use flowgate::backend::{Failure, Source, Verdict};
use flowgate::outcome::{Cause, Gauge, Refused};

/// A limiter's way to Redis: the connection, the breaker in front of it, the timeout, the
/// failure policy, and the counters of everything that happens on the way.
pub(crate) struct Link {
    pub(crate) connection: Connection,
    /// Where the connection goes, for messages (`host:port`, or a cluster's seeds).
    pub(crate) server: Arc<str>,
    /// The failure policy's decisions, for the logs.
    fallbacks: Arc<Fallbacks>,
    /// The circuit breakers, one per server, unless they are off.
    breakers: Breakers,
    pub(crate) timeout: Duration,
    pub(crate) on_failure: OnFailure,
    /// Whether calls decide at the limiter's clock instead of the server's `TIME`.
    client_time: bool,
    pub(crate) counters: Counters,
    /// What tasks spawned by the limiter count (undos across cluster slots).
    pub(crate) background: Arc<Counters>,
}

impl Link {
    /// A link to `backend`'s server or cluster (connecting lazily, inside a tokio runtime), with
    /// the breaker `backend` asks for (none when it is off).
    pub(crate) fn new(backend: &RedisBackend) -> Result<Self, RedisConfigError> {
        let connection = connect(backend)?;
        let counters = Counters::new(&backend.prefix);
        let (server, fallbacks): (Arc<str>, _) = (describe(&backend.server).into(), Arc::default());
        let reports = (Arc::clone(&server), Arc::clone(&fallbacks));
        let breakers = Breakers::new(backend, &connection, reports);
        Ok(Self {
            connection,
            server,
            fallbacks,
            breakers,
            timeout: backend.timeout,
            on_failure: backend.on_failure,
            client_time: backend.client_time,
            background: Arc::new(Counters::new(&backend.prefix)),
            counters,
        })
    }

    /// The deadline of a decision that starts now, shared by everything it waits for (a
    /// lease's lock, connecting, the calls): the timeout from now (for a timeout too long to
    /// add to the clock, about 30 years from now, as tokio's own far future).
    #[inline]
    pub(crate) fn deadline(&self) -> Instant {
        let now = Instant::now();
        let far = || now + Duration::from_secs(86_400 * 365 * 30);
        now.checked_add(self.timeout).unwrap_or_else(far)
    }

    /// The reading a call decides at, in µs: the limiter's clock (`now`, in ns) with
    /// [`RedisBackend::client_time`], else `None` (the server's `TIME`).
    #[inline]
    pub(crate) fn reading(&self, now: impl FnOnce() -> u64) -> Option<u64> {
        self.client_time.then(|| crate::script::micros(now()))
    }

    /// One call of `script`, answered by `deadline`, counted.
    pub(crate) async fn call(
        &self,
        script: &Script,
        call: &Call<'_>,
        deadline: Instant,
    ) -> Result<Reply, Failure> {
        let counters = &self.counters;
        // Boxed: the call's future (the connection's, redis-rs's) is large, and every decision's
        // future holding it inline was moved whole, several times, at more cost than the box.
        let sent = Box::pin(async {
            let value = (self.connection)
                .eval(script, |verb, s| call.command(verb, s), counters)
                .await?;
            Reply::parse(&value, call).ok_or(Failure::Reply)
        });
        let key = call.keys.first().map(Vec::as_slice);
        let result = self.guarded(deadline, key, sent).await;
        if let Ok(reply) = &result {
            counters.repaired.add(u64::from(reply.repaired()));
        }
        result
    }

    /// The command `command` makes for `script`, whose first key is `key` (for the breaker of
    /// its server), answered by `deadline`, counted.
    pub(crate) async fn eval(
        &self,
        script: &Script,
        (key, command): (&[u8], impl Fn(&str, &str) -> ::redis::Cmd),
        deadline: Instant,
    ) -> Result<::redis::Value, Failure> {
        let sent = self.connection.eval(script, command, &self.counters);
        self.guarded(deadline, Some(key), Box::pin(sent)).await
    }

    /// `sent` (a call whose first key is `key`) answered by `deadline`, unless the breaker of
    /// its server holds it back; counted, and reported to that breaker.
    pub(crate) async fn guarded<T>(
        &self,
        deadline: Instant,
        key: Option<&[u8]>,
        sent: impl Future<Output = Result<T, Failure>>,
    ) -> Result<T, Failure> {
        let counters = &self.counters;
        let circuit = self.breakers.of(&self.connection, key);
        // When the call was sent, on the breaker's clock (read only with a breaker).
        let mut sent_at = 0;
        if let Some(circuit) = &circuit {
            if !circuit.allows() {
                counters.failed(Failure::BreakerOpen);
                return Err(Failure::BreakerOpen);
            }
            sent_at = circuit.now();
        }
        let started = cfg!(feature = "metrics").then(std::time::Instant::now);
        let result = match tokio::time::timeout_at(deadline, sent).await {
            Ok(result) => result,
            Err(_) => Err(Failure::Timeout),
        };
        if let Some(started) = started {
            counters.calls.record(started.elapsed().as_secs_f64());
        }
        if let Err(failure) = &result {
            counters.failed(*failure);
        }
        if let Some(circuit) = &circuit {
            match result {
                Ok(_) => circuit.succeeded(),
                Err(_) => circuit.failed(sent_at),
            }
        }
        result
    }

    /// Whether Redis answers a `PING` (every master of a cluster) within the timeout or 1 s,
    /// whichever is longer (a start-up check, not a decision); else which server does not, and
    /// why.
    pub(crate) async fn ready(&self) -> Result<(), RedisConfigError> {
        let wait = self.timeout.max(Duration::from_secs(1));
        let Err((server, reason)) = self.connection.ready(wait).await else {
            return Ok(());
        };
        let server = if server.is_empty() {
            self.server.to_string()
        } else {
            server
        };
        Err(RedisConfigError::Unreachable { server, reason })
    }

    /// Where the circuit breaker stands ([`BreakerState::Off`] without one).
    pub(crate) fn breaker_state(&self) -> BreakerState {
        self.breakers.state(&self.connection)
    }

    /// The decision of a failure policy that does not decide locally: refused for the
    /// configured retry-after (closed), or admitted (open; and `Local` without its local set),
    /// counted.
    pub(crate) fn fail(&self, failure: Failure) -> Verdict {
        if let OnFailure::Closed { retry_after } = self.on_failure {
            self.counters.failed_closed.add(1);
            let wait = u64::try_from(retry_after.as_nanos())
                .unwrap_or(u64::MAX)
                .max(1);
            let refused = Refused::new(Gauge::new(1, 1, 1, 0), wait).because(Cause::Unavailable);
            let refused = flowgate::policy::Refused::new(refused, None, None, 0);
            let source = Source::FailedClosed(failure);
            self.noted(source);
            return Verdict::new(Err(refused), source);
        }
        self.counters.failed_open.add(1);
        self.noted(Source::FailedOpen(failure));
        Verdict::unlimited(Source::FailedOpen(failure))
    }

    /// A decision of the failure policy (`source`), for the logs.
    pub(crate) fn noted(&self, source: Source) {
        self.fallbacks.noted(&self.server, source);
    }
}
