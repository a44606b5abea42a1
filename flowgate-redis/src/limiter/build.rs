//! How a [`PoliciesBuilder`]'s set is built in Redis: checked in full (the set, and what Redis
//! can run of it) before anything connects.

use core::time::Duration;
use std::sync::Arc;

use super::lease::{Leases, MAX_LEASE_CELLS};
use super::shield::Shield;
use super::{RedisLimiter, Shared};
use crate::error::RedisConfigError;
use crate::events;
use crate::failure::{local_limiter, Link};
use crate::script::{Prepared, Tag};
use crate::settings::{OnFailure, RedisBackend, Server};
use flowgate::clock::Clock;
use flowgate::policy::PoliciesBuilder;

/// The limiter `builder`'s set is on `backend` (`BuildRedis::build_redis`).
pub(crate) fn build<R, C>(
    builder: PoliciesBuilder<R, C>,
    backend: RedisBackend,
) -> Result<RedisLimiter<R, C>, RedisConfigError>
where
    R: ?Sized + 'static,
    C: Clock + Clone + Send + Sync + 'static,
{
    backend.check()?;
    let (policies, clock) = builder.into_policies()?;
    let fallback = match backend.on_failure {
        OnFailure::Local { share } => Some(local_limiter(
            &backend.prefix,
            &policies,
            share,
            clock.clone(),
        )?),
        _ => None,
    };
    // One keyed policy tags each key on its own, so keys spread over a cluster.
    let tag = if policies.len() == 1 && policies[0].settings().1 {
        Tag::Key
    } else if !matches!(backend.server, Server::One(_)) {
        Tag::Policy
    } else {
        Tag::Prefix
    };
    let mut prepared = Vec::with_capacity(policies.len());
    for (index, policy) in policies.into_iter().enumerate() {
        let place = (backend.prefix.as_str(), tag);
        prepared.push(Prepared::new(index, policy, place)?);
    }
    let leases = lease_in_millis(backend.lease)?
        .map(|lease| Leases::new(backend.max_leases.max(1), clock.now(), lease));
    // The shield is exact only where cells never come back (see limiter/shield.rs): off with
    // leases (given back) and with decisions across cluster slots (undone).
    let across = matches!(tag, Tag::Policy) && prepared.len() > 1;
    let shield = if leases.is_some() || across {
        0
    } else {
        backend.shield
    };
    let link = Link::new(&backend)?;
    events::built(
        &backend,
        &link.server,
        prepared.iter().map(|p| p.name.as_str()),
    );
    Ok(RedisLimiter {
        shared: Arc::new(Shared {
            link,
            prefix: backend.prefix,
            policies: prepared,
            fallback,
            leases,
            shield: Shield::new(shield),
            clock,
        }),
    })
}

/// A lease's cells and lifetime in whole milliseconds (at least one), checked.
fn lease_in_millis(lease: Option<(u32, Duration)>) -> Result<Option<(u32, u64)>, RedisConfigError> {
    let Some((cells, lifetime)) = lease else {
        return Ok(None);
    };
    if cells == 0 || cells > MAX_LEASE_CELLS || lifetime.is_zero() {
        return Err(RedisConfigError::Lease);
    }
    let millis = u64::try_from(lifetime.as_millis())
        .unwrap_or(u64::MAX)
        .max(1);
    Ok(Some((cells, millis)))
}
