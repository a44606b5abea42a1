//! [`Verdict`]: what one decision of a [`RedisLimiter`] answers, and how a script's reply or a
//! failure policy becomes one.

use super::failure::{Failure, OnFailure, Source};
use super::script::Reply;
use super::stats::add;
use super::{Plan, RedisLimiter, UNLIMITED};
use crate::clock::Clock;
use crate::outcome::{tightness, Allowed, Gauge, Refused};

/// The outcome of one decision, which quota it describes, and where it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    pub(super) outcome: Result<Allowed, Refused>,
    pub(super) quota: Option<(usize, usize)>,
    pub(super) source: Source,
}

impl Verdict {
    /// Admitted (the tightest quota after taking the cells) or refused (the quota that waits
    /// longest, and when to retry): the same types, and for a decision Redis made the same
    /// values, as the in-process limiter's.
    pub fn outcome(&self) -> Result<Allowed, Refused> {
        self.outcome
    }

    /// Whether the request was admitted.
    pub fn is_allowed(&self) -> bool {
        self.outcome.is_ok()
    }

    /// Where the decision came from: Redis, a lease, or the failure policy.
    pub fn source(&self) -> Source {
        self.source
    }

    /// The level and the quota within it that [`outcome`](Self::outcome) describes; `None`
    /// when no level applied (an admission with nothing to report) or Redis did not decide.
    pub fn quota(&self) -> Option<(usize, usize)> {
        self.quota
    }
}

impl<R: ?Sized, C: Clock> RedisLimiter<R, C> {
    /// The verdict of the script's reply.
    pub(super) fn verdict(&self, plan: &Plan, reply: &Reply) -> Verdict {
        let gauge = |bucket: usize, debt: u64| {
            let (l, q) = plan.refs[bucket];
            self.shared.levels[l].quotas[q].gauge(debt)
        };
        match reply {
            Reply::Admitted { debts, .. } => {
                let mut best: Option<(usize, Gauge)> = None;
                for (bucket, &debt) in debts.iter().enumerate() {
                    let g = gauge(bucket, debt);
                    let tighter = best.map_or(true, |(_, b)| {
                        tightness(g.remaining(), g.reset_after_nanos())
                            < tightness(b.remaining(), b.reset_after_nanos())
                    });
                    if tighter {
                        best = Some((bucket, g));
                    }
                }
                // The plan is not empty, and the reply has one debt per bucket.
                let (bucket, g) = best.unwrap_or((0, UNLIMITED));
                Verdict {
                    outcome: Ok(Allowed::new(g)),
                    quota: plan.refs.get(bucket).copied(),
                    source: Source::Redis,
                }
            }
            &Reply::Refused {
                index, debt, wait, ..
            } => {
                let wait = wait.map_or(u64::MAX, |w| w.saturating_mul(1_000));
                Verdict {
                    outcome: Err(Refused::new(gauge(index, debt), wait)),
                    quota: Some(plan.refs[index]),
                    source: Source::Redis,
                }
            }
        }
    }

    /// The decision of the failure policy.
    pub(super) fn fail(&self, request: &R, n: u32, failure: Failure) -> Verdict {
        let shared = &*self.shared;
        let counters = &shared.counters;
        match (shared.on_failure, &shared.fallback) {
            (OnFailure::Local { .. }, Some(local)) => {
                add(&counters.local, 1);
                shared.metrics.local.increment(1);
                // The local policies name themselves `redis:{prefix}:{level}`.
                let outcome = match local.check_n(request, n) {
                    Ok(answer) => answer,
                    // n fits every quota in Redis but not this process's share of one: never,
                    // locally.
                    Err(capacity) => {
                        let burst = capacity.burst;
                        Err(Refused::new(
                            Gauge::new(u64::from(burst), 1, burst, 0),
                            u64::MAX,
                        ))
                    }
                };
                Verdict {
                    outcome,
                    quota: None,
                    source: Source::Local(failure),
                }
            }
            (OnFailure::Closed { retry_after }, _) => {
                add(&counters.failed_closed, 1);
                shared.metrics.failed_closed.increment(1);
                let wait = u64::try_from(retry_after.as_nanos())
                    .unwrap_or(u64::MAX)
                    .max(1);
                Verdict {
                    outcome: Err(Refused::new(Gauge::new(1, 1, 1, 0), wait)),
                    quota: None,
                    source: Source::FailedClosed(failure),
                }
            }
            _ => {
                add(&counters.failed_open, 1);
                shared.metrics.failed_open.increment(1);
                Verdict {
                    outcome: Ok(Allowed::new(UNLIMITED)),
                    quota: None,
                    source: Source::FailedOpen(failure),
                }
            }
        }
    }
}
