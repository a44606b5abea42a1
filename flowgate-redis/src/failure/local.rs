//! The local fallback of [`OnFailure::Local`](crate::OnFailure::Local): the same policies in
//! process, each quota scaled to the share of it one process may use while Redis does not
//! answer.

use flowgate::algorithm::{Algorithm, AnyAlgorithm};
use flowgate::clock::Clock;
use flowgate::policy::{Extract, Key, Policies, Policy};
use flowgate::quota::{Quota, QuotaError};

use crate::error::RedisConfigError;
use crate::script::Plan;

/// `algorithm` on `share` of its quota, the same algorithm (a shaper stays a shaper): a
/// schedule's interval divided by `share` (rounded up) and its burst times `share` (at least
/// one cell); a window counter's count and burst times `share` (at least one) over the same
/// window, which is what a counter can change. The error if that is no valid quota.
fn scaled(algorithm: &AnyAlgorithm, share: f64) -> Result<AnyAlgorithm, QuotaError> {
    let quota = algorithm.quota();
    let times = |cells: u32| ((f64::from(cells) * share).floor() as u32).max(1);
    let quota = match algorithm {
        AnyAlgorithm::IntervalRefill(_)
        | AnyAlgorithm::FixedWindow(_)
        | AnyAlgorithm::SlidingWindow(_) => Quota::new(times(quota.count()), quota.period())
            .and_then(|q| q.with_burst(times(quota.burst()).max(times(quota.count())))),
        _ => {
            let interval = (quota.interval().as_nanos() as f64 / share).ceil();
            // 2^64 ns and more: an `as` cast would saturate to a quota that is not the share.
            if interval >= 18_446_744_073_709_551_616.0 {
                return Err(QuotaError::PeriodTooLong);
            }
            Quota::new(1, core::time::Duration::from_nanos(interval as u64))
                .and_then(|q| q.with_burst(times(quota.burst())))
        }
    };
    algorithm.with_quota(&quota?)
}

/// The in-process set of [`OnFailure::Local`](crate::OnFailure::Local): the same policies
/// (dry runs, jitter, table settings), each quota scaled to `share` of its rate (the interval
/// divided by `share`, rounded up) and of its burst (at least one cell), with its own
/// algorithm. A keyed policy (`keyed` says which) keys its buckets by the decision's [`Plan`]:
/// the Redis key the request's key became, so that the fallback needs nothing of the request
/// once it is planned.
///
/// Its policies are named `redis:{prefix}:{policy}`, so that what the `metrics` feature reports
/// of them never mixes with an in-process policy of the same name.
pub(crate) fn local_limiter<R: ?Sized, C: Clock + Clone>(
    prefix: &str,
    policies: &[Policy<R>],
    share: f64,
    clock: C,
) -> Result<Policies<Plan, C>, RedisConfigError> {
    if !(share > 0.0 && share <= 1.0) {
        return Err(RedisConfigError::Share(share));
    }
    let mut builder = Policies::<Plan>::builder().clock(clock);
    for (index, policy) in policies.iter().enumerate() {
        let name = format!("redis:{prefix}:{}", policy.name());
        let extract = policy.settings().1.then(|| -> Extract<Plan> {
            Box::new(move |plan: &Plan, key: &mut Key<'_>| {
                match plan.key_of(index) {
                    Some(bytes) => key.add(bytes),
                    None => key.skip(),
                };
            })
        });
        let mut local = policy.like(name, extract);
        for algorithm in policy.algorithms() {
            let scaled = scaled(algorithm, share).map_err(|error| {
                let (policy, quota) = (policy.name().to_owned(), algorithm.to_string());
                RedisConfigError::ShareTooSmall {
                    policy,
                    quota,
                    share,
                    error,
                }
            })?;
            local = local.quota_with(scaled);
        }
        builder = builder.policy(local);
    }
    Ok(builder.build()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every algorithm scales to a local share, staying what it was: a schedule slower and
    /// smaller, a window counter counting fewer in the same window.
    #[test]
    fn every_algorithm_keeps_its_kind_on_a_local_share() {
        let scale = |text: &str| {
            scaled(&text.parse().unwrap(), 0.5)
                .ok()
                .map(|a| a.to_string())
        };
        assert_eq!(scale("10/s burst 4").as_deref(), Some("1/200ms burst 2"));
        assert_eq!(scale("100/min fixed").as_deref(), Some("50/min fixed"));
        assert_eq!(scale("10/min sliding").as_deref(), Some("5/min sliding"));
        assert_eq!(
            scale("5/s burst 20 interval").as_deref(),
            Some("2/s burst 10 interval")
        );
        let shaper = scale("10/s burst 1 shaper 250ms").unwrap();
        assert!(shaper.ends_with("shaper 250ms"), "{shaper}");
        let credit = scale("10/s burst 2 credit 1s").unwrap();
        assert!(credit.ends_with("credit 1s"), "{credit}");
        // One cell at least, whatever the share.
        assert_eq!(scale("3/day fixed").as_deref(), Some("1/d fixed"));
    }
}
