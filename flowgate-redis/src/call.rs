//! One script call to Redis, guarded: the circuit breaker asked first, the decision's
//! deadline, and every outcome counted (statistics, metrics, the breaker).

use core::future::Future;
use std::sync::Arc;

use tokio::time::Instant;

use super::breaker::Circuit;
use super::connection::Connection;
use super::script::{self, Call, Reply};
use super::stats::add;
use super::stats::Counters;
use super::{Failure, Plan, RedisLimiter};
use crate::metrics::RedisMetrics;
use flowgate::clock::Clock;

impl<R: ?Sized, C: Clock> RedisLimiter<R, C> {
    /// One script call answered by `deadline`, counted.
    pub(super) async fn call(
        &self,
        plan: &Plan,
        (n, want): (u32, u32),
        deadline: Instant,
    ) -> Result<Reply, Failure> {
        let shared = &*self.shared;
        let counters = &shared.counters;
        let call = Call {
            keys: &plan.keys,
            quotas: &plan.quotas,
            dry: &plan.dry,
            now: self.reading(),
            n,
            want,
        };
        // Boxed: the call's future (the connection's, redis-rs's) is large, and every decision's
        // future holding it inline was moved whole, several times, at more cost than the box.
        let result = match &shared.connection {
            Connection::One(manager) => {
                let mut connection = manager.clone();
                let sent = Box::pin(shared.script.call(&mut connection, &call, counters));
                self.guarded(deadline, sent).await
            }
            #[cfg(feature = "cluster")]
            Connection::Cluster(cluster) => {
                let mut connection = cluster.clone();
                let sent = Box::pin(shared.script.call(&mut connection, &call, counters));
                self.guarded(deadline, sent).await
            }
        };
        if let Ok(reply) = &result {
            add(&counters.repaired, u64::from(reply.repaired()));
        }
        result
    }

    /// The reading a call decides at, in µs: the set's clock with
    /// [`RedisBackend::client_time`](super::RedisBackend::client_time), else `None` (the
    /// server's `TIME`).
    #[inline]
    pub(super) fn reading(&self) -> Option<u64> {
        let shared = &*self.shared;
        (shared.client_time).then(|| (shared.clock.now() / 1_000).min(script::MAX_NOW_MICROS))
    }

    /// `sent` answered by `deadline`, unless the breaker holds it back; counted.
    #[inline]
    pub(super) fn guarded<'a, T: 'a>(
        &'a self,
        deadline: Instant,
        sent: impl Future<Output = Result<T, Failure>> + 'a,
    ) -> impl Future<Output = Result<T, Failure>> + 'a {
        let shared = &*self.shared;
        let watch = (shared.circuit.as_ref(), &shared.counters, &shared.metrics);
        guarded(watch, deadline, sent)
    }
}

/// `sent` answered by `deadline`, unless `circuit` holds it back; counted in `counters` and
/// `metrics`, and reported to `circuit`.
pub(super) async fn guarded<T>(
    (circuit, counters, metrics): (Option<&Arc<Circuit>>, &Counters, &RedisMetrics),
    deadline: Instant,
    sent: impl Future<Output = Result<T, Failure>>,
) -> Result<T, Failure> {
    if let Some(circuit) = circuit {
        if !circuit.allows() {
            counters.failed(Failure::BreakerOpen, metrics);
            return Err(Failure::BreakerOpen);
        }
    }
    let started = crate::metrics::ENABLED.then(std::time::Instant::now);
    let result = match tokio::time::timeout_at(deadline, sent).await {
        Ok(result) => result,
        Err(_) => Err(Failure::Timeout),
    };
    if let Some(started) = started {
        metrics.calls.record(started.elapsed().as_secs_f64());
    }
    if let Err(failure) = &result {
        counters.failed(*failure, metrics);
    }
    if let Some(circuit) = circuit {
        match result {
            Ok(_) => circuit.succeeded(),
            Err(_) => circuit.failed(),
        }
    }
    result
}

/// The deadline of a call that starts now and may take `timeout` (for a timeout too long to
/// add to the clock, about 30 years from now, as tokio's own far future).
#[inline]
pub(super) fn deadline_after(timeout: core::time::Duration) -> Instant {
    let now = Instant::now();
    let far = || now + core::time::Duration::from_secs(86_400 * 365 * 30);
    now.checked_add(timeout).unwrap_or_else(far)
}
