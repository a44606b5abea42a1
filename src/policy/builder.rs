//! [`PoliciesBuilder`]: a set's policies in order and its clock, checked once by
//! [`PoliciesBuilder::build`], which makes each policy a layer.

use core::fmt;
use core::time::Duration;

use super::error::BuildError;
use super::layer::{layer, Layer};
use super::named::Policy;
use super::rules::Rules;
use super::{Policies, MAX_QUOTAS};
use crate::clock::{Clock, QuantaClock};

/// Builds a [`Policies`] set: the policies in evaluation order, and the clock.
#[must_use = "a builder does nothing until it builds a set (`build`, or `build_redis` of flowgate-redis)"]
pub struct PoliciesBuilder<R: ?Sized, C: Clock = QuantaClock> {
    policies: Vec<Policy<R>>,
    clock: C,
    hash_seed: Option<u64>,
}

impl<R: ?Sized> PoliciesBuilder<R, QuantaClock> {
    pub(crate) fn new() -> Self {
        Self {
            policies: Vec::new(),
            clock: QuantaClock::new(),
            hash_seed: None,
        }
    }
}

impl<R: ?Sized, C: Clock> PoliciesBuilder<R, C> {
    /// Decides on `clock` (a [`ManualClock`](crate::clock::ManualClock) in tests).
    pub fn clock<C2: Clock>(self, clock: C2) -> PoliciesBuilder<R, C2> {
        PoliciesBuilder {
            policies: self.policies,
            clock,
            hash_seed: self.hash_seed,
        }
    }

    /// Appends a policy: policies are evaluated in the order they are added.
    pub fn policy(mut self, policy: Policy<R>) -> Self {
        self.policies.push(policy);
        self
    }

    /// Fixes the keyed policies' hash seed (see
    /// [`Builder::hash_seed`](crate::Builder::hash_seed)); random by default.
    pub fn hash_seed(mut self, seed: u64) -> Self {
        self.hash_seed = Some(seed);
        self
    }

    /// The policy set.
    ///
    /// # Errors
    /// [`BuildError`]: no policy, a policy without a name or quotas, two policies with one
    /// name, more than 32 quotas in all, a jitter whose minimum is above its maximum
    /// or beyond 292 years, or a keyed policy whose table cannot be built.
    pub fn build(self) -> Result<Policies<R, C>, BuildError>
    where
        C: Clone,
    {
        let now = self.clock.now();
        let hash_seed = self.hash_seed;
        let (policies, clock) = self.into_checked()?;
        let rules = policies.iter().flat_map(|(p, _)| p.quotas.iter().copied());
        let rules = Rules::new(rules.collect());
        let mut layers: Vec<Layer<R, C>> = Vec::with_capacity(policies.len());
        let mut first = 0;
        for (index, (policy, jitter)) in policies.into_iter().enumerate() {
            let quotas = policy.quotas.len();
            layers.push(layer(
                policy,
                (index, first, jitter),
                now,
                &clock,
                hash_seed,
            )?);
            first += quotas;
        }
        Ok(Policies {
            layers: layers.into_boxed_slice(),
            rules,
            clock,
        })
    }

    /// The policies and the clock, once every rule that holds on any backend is checked (as
    /// [`build`](Self::build) checks them): what a backend that keeps buckets elsewhere builds
    /// from.
    ///
    /// # Errors
    /// The [`BuildError`] [`build`](Self::build) would return for a set invalid anywhere.
    pub fn into_policies(self) -> Result<(Vec<Policy<R>>, C), BuildError> {
        let (checked, clock) = self.into_checked()?;
        Ok((
            checked.into_iter().map(|(policy, _)| policy).collect(),
            clock,
        ))
    }

    /// The policies, each with its jitter in ns, and the clock, once every rule that holds on
    /// any backend is checked: at least one policy, each named (uniquely) and with quotas, at
    /// most 32 in all, and jitters that fit.
    pub(crate) fn into_checked(self) -> Result<(Checked<R>, C), BuildError> {
        if self.policies.is_empty() {
            return Err(BuildError::NoPolicies);
        }
        let total: usize = self.policies.iter().map(|p| p.quotas.len()).sum();
        if total > MAX_QUOTAS {
            return Err(BuildError::TooManyQuotas { quotas: total });
        }
        let mut checked: Checked<R> = Vec::with_capacity(self.policies.len());
        for (index, policy) in self.policies.into_iter().enumerate() {
            if policy.name.is_empty() {
                return Err(BuildError::NoName { index });
            }
            if checked.iter().any(|(p, _)| p.name == policy.name) {
                return Err(BuildError::DuplicateName {
                    policy: policy.name,
                });
            }
            if policy.quotas.is_empty() {
                return Err(BuildError::NoQuotas {
                    policy: policy.name,
                });
            }
            let Some(jitter) = jitter_nanos(policy.jitter) else {
                return Err(BuildError::Jitter {
                    policy: policy.name,
                });
            };
            checked.push((policy, jitter));
        }
        Ok((checked, self.clock))
    }
}

/// A set's policies once checked, each with its jitter in ns.
pub(crate) type Checked<R> = Vec<(Policy<R>, (u64, u64))>;

/// A jitter range in nanoseconds, if `min ≤ max` and both fit in 292 years.
fn jitter_nanos((min, max): (Duration, Duration)) -> Option<(u64, u64)> {
    let min = u64::try_from(min.as_nanos()).ok()?;
    let max = u64::try_from(max.as_nanos()).ok()?;
    (min <= max && max <= crate::Quota::MAX_WINDOW_NANOS).then_some((min, max))
}

impl<R: ?Sized, C: Clock + fmt::Debug> fmt::Debug for PoliciesBuilder<R, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoliciesBuilder")
            .field("policies", &self.policies)
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}
