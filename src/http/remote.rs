//! The middleware over a set decided in Redis (feature `redis`): the request's keys and cost
//! are read at once, as in process; the decision is then awaited while the inner service (made
//! ready) and the request's body wait for it; then the request goes on with the quota headers
//! of every quota the decision went through, or is refused with them. A decision Redis could
//! not make follows the set's failure policy, which sees the request as the policies do.

use std::net::IpAddr;
use std::sync::Arc;

use http::Request;

use super::future::{Deciding, Decision};
use super::refusal::{refusal_of, Refusal};
use super::{Inbound, Shared};
use crate::clock::Clock;
use crate::outcome::QuotaState;
use crate::redis::RedisLimiter;

/// The decision on `request` (its head) in Redis, as a future that gives the head back with
/// its conclusion: what [`RateLimitService`](super::RateLimitService) and the actix middleware
/// await before calling their inner service or refusing.
pub(super) fn decision<C>(
    shared: &Arc<Shared<C>>,
    limiter: &RedisLimiter<Inbound, C>,
    request: Request<()>,
    client: Option<IpAddr>,
) -> Deciding
where
    C: Clock + Send + Sync + 'static,
{
    // A request above a burst is refused whatever the buckets hold; the call then only looks
    // (n = 0), for the quota headers the refusal carries, as in process.
    let planned = Inbound::scope(&request, client, |inbound| {
        let cost = shared.cost.as_ref().map_or(1, |cost| cost(inbound));
        match limiter.plan(inbound, cost) {
            Ok(plan) => Ok((plan, cost, None)),
            Err(capacity) => limiter
                .plan(inbound, 0)
                .map(|plan| (plan, 0, Some(capacity))),
        }
    });
    let (plan, cost, oversized) = match planned {
        Ok(planned) => planned,
        // A look never exceeds a burst: not reached.
        Err(capacity) => {
            let refusal = Refusal::Oversized(capacity);
            let (response, delay) = refusal_of(shared, &refusal, || None, request.headers());
            let decided = (request.into_parts().0, Decision::Refuse(response, delay));
            return Box::pin(core::future::ready(decided));
        }
    };
    let shared = Arc::clone(shared);
    let limiter = limiter.clone();
    Box::pin(async move {
        // The decision's own deadline, which a refusal's looks across slots share.
        #[cfg(feature = "redis-cluster")]
        let deadline = limiter.deadline();
        let decided = limiter.decide(&plan, cost).await;
        #[cfg(feature = "redis-cluster")]
        let decided = match decided {
            Ok(decided) if shared.style.any() => {
                Ok(limiter.look_across(&plan, decided, deadline).await)
            }
            other => other,
        };
        let (verdict, decided) = match decided {
            Ok(decided) => (decided.verdict, Some(decided)),
            Err(failure) => {
                let fail = |inbound: &Inbound| limiter.fail(inbound, cost, failure);
                (Inbound::scope(&request, client, fail), None)
            }
        };
        let states = |visit: &mut dyn FnMut(QuotaState)| {
            if let Some(decided) = &decided {
                limiter.states(&plan, decided, visit);
            }
        };
        let refusal = match (oversized, verdict.outcome()) {
            (Some(capacity), _) => Refusal::Oversized(capacity),
            (None, Err(refused)) => {
                limiter.count(&verdict);
                Refusal::Limited(refused)
            }
            (None, Ok(_)) => {
                limiter.count(&verdict);
                let headers = shared
                    .style
                    .any()
                    .then(|| Box::new(shared.headers_of(None, states)));
                return (request.into_parts().0, Decision::Admit(headers));
            }
        };
        let quotas = || Some(shared.headers_of(Some(&refusal), states));
        let (response, delay) = refusal_of(&shared, &refusal, quotas, request.headers());
        let decision = Decision::Refuse(response, delay);
        (request.into_parts().0, decision)
    })
}
