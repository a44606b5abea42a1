//! The connection to Redis: the connection manager a limiter calls through, set up for the
//! limiter's timeout, and the circuit breaker in front of it.

use core::time::Duration;
use std::sync::Arc;

use ::redis::aio::{ConnectionManager, ConnectionManagerConfig};

use super::breaker::Circuit;
use super::plan::check_part;
use super::{RedisBackend, RedisConfigError};
use crate::observe::RedisMetrics;

/// A connection manager for `backend`'s server, connecting lazily (inside a tokio runtime),
/// and the circuit breaker in front of it unless it is off.
///
/// With a breaker, the manager makes one attempt per reconnection and never sleeps between
/// attempts: the breaker is the backoff (one probe per cool-down), so a decision never waits
/// for a reconnection that is sleeping. Without one, the manager retries with its own backoff.
pub(super) fn connect(
    backend: &RedisBackend,
    metrics: &RedisMetrics,
) -> Result<(ConnectionManager, Option<Arc<Circuit>>), RedisConfigError> {
    if tokio::runtime::Handle::try_current().is_err() {
        return Err(RedisConfigError::NoRuntime);
    }
    if backend.timeout.is_zero() {
        return Err(RedisConfigError::Timeout);
    }
    if !backend.breaker.is_valid() {
        return Err(RedisConfigError::Breaker);
    }
    check_part(&backend.prefix, "prefix")?;
    let mut config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(backend.timeout.max(Duration::from_millis(250))))
        .set_response_timeout(None)
        .set_min_delay(Duration::from_millis(10))
        .set_max_delay(Duration::from_secs(1));
    if !backend.breaker.is_off() {
        config = config.set_number_of_retries(0);
    }
    let connection = ConnectionManager::new_lazy_with_config(backend.client.clone(), config)
        .map_err(|e| RedisConfigError::Client(e.to_string()))?;
    let circuit = (!backend.breaker.is_off()).then(|| {
        let state = metrics.breaker_state.clone();
        Circuit::new(
            backend.breaker,
            (connection.clone(), backend.timeout),
            state,
        )
    });
    Ok((connection, circuit))
}
