//! Looking inside a running [`Policies`] set and changing it: its quotas (replaced while
//! requests are decided), names, counters, and the sweeps that forget idle keys.

use core::fmt;

use super::error::BuildError;
use super::layer::{Buckets, Layer};
use super::Policies;
use crate::algorithm::{Algorithm, AnyAlgorithm};
use crate::clock::Clock;
use crate::keyed::One;
use crate::primitive::Ordering;
use crate::quota::Quota;

/// What a policy has done, from [`Policies::stats`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PolicyStats {
    /// The policy's name.
    pub name: String,
    /// Whether it is in dry-run mode.
    pub dry_run: bool,
    /// Requests it refused; for a dry-run policy, requests it would have refused.
    pub refused: u64,
    /// Keys its tables hold now, summed over its quotas' tables (0 for a global policy).
    pub keys: usize,
}

/// # Replacing quotas, and looking inside
impl<R: ?Sized, C: Clock> Policies<R, C> {
    /// Replaces the quotas of the policy `name` while requests go on, keeping every bucket and
    /// each quota's algorithm (and its settings: a shaper's delay, a credit's debt); see the
    /// [module docs](super#replacing-quotas-at-run-time).
    ///
    /// # Errors
    /// [`BuildError::UnknownPolicy`] if no policy has that name, [`BuildError::QuotaCount`]
    /// if `quotas` does not have as many quotas as the policy, [`BuildError::Quota`] if an
    /// algorithm rejects its new quota, and [`BuildError::Incompatible`] if a window counter's
    /// window length would change. Nothing is replaced unless everything is valid.
    pub fn replace_quotas(&self, name: &str, quotas: &[Quota]) -> Result<(), BuildError> {
        let (_, layer) = self.layer(name)?;
        count_matches(layer, quotas.len())?;
        self.rules.replace(|now| {
            let old = layer.algorithms(now).iter().zip(quotas);
            let new = old.enumerate().map(|(q, (old, quota))| {
                old.with_quota(quota).map_err(|error| BuildError::Quota {
                    policy: name.into(),
                    quota: q,
                    error,
                })
            });
            let new = new.collect::<Result<Vec<_>, _>>()?;
            swapped(now, [(layer, &new[..])])
        })
    }

    /// Replaces the algorithms of the policy `name` (quotas and all) while requests go on,
    /// keeping every bucket: each new algorithm must read the buckets the old one wrote
    /// ([`AnyAlgorithm::reads_buckets_of`]: GCRA, the leaky bucket and credit among themselves;
    /// window counters with the same window length and UTC offset). See the
    /// [module docs](super#replacing-quotas-at-run-time).
    ///
    /// # Errors
    /// [`BuildError::UnknownPolicy`], [`BuildError::QuotaCount`], and
    /// [`BuildError::Incompatible`] for an algorithm that cannot take over its buckets.
    /// Nothing is replaced unless everything is valid.
    pub fn replace(&self, name: &str, algorithms: &[AnyAlgorithm]) -> Result<(), BuildError> {
        self.replace_all([(name, algorithms)])
    }

    /// [`replace`](Self::replace) for several policies at once: every decision sees all of
    /// them replaced or none (a configuration reload).
    pub(crate) fn replace_all<'a>(
        &self,
        changes: impl IntoIterator<Item = (&'a str, &'a [AnyAlgorithm])>,
    ) -> Result<(), BuildError> {
        let mut found = Vec::new();
        for (name, algorithms) in changes {
            let (_, layer) = self.layer(name)?;
            count_matches(layer, algorithms.len())?;
            found.push((layer, algorithms));
        }
        self.rules.replace(|now| swapped(now, found))
    }

    /// The quotas of the policy `name` now.
    ///
    /// # Errors
    /// [`BuildError::UnknownPolicy`] if no policy has that name.
    pub fn quotas(&self, name: &str) -> Result<Vec<Quota>, BuildError> {
        let algorithms = self.algorithms(name)?;
        Ok(algorithms.iter().map(|a| *a.quota()).collect())
    }

    /// The algorithms (quotas included) of the policy `name` now.
    ///
    /// # Errors
    /// [`BuildError::UnknownPolicy`] if no policy has that name.
    pub fn algorithms(&self, name: &str) -> Result<Vec<AnyAlgorithm>, BuildError> {
        let layer = self.layer(name)?.1;
        Ok(self.rules.with(|rules| layer.algorithms(rules).to_vec()))
    }

    /// The policies' names, in evaluation order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.layers.iter().map(|layer| &*layer.name)
    }

    /// What each policy has done, in evaluation order (takes each keyed table's shard locks in
    /// turn).
    pub fn stats(&self) -> Vec<PolicyStats> {
        self.layers
            .iter()
            .map(|layer| PolicyStats {
                name: layer.name.to_string(),
                dry_run: layer.dry_run,
                // Relaxed: a statistic.
                refused: layer.refused.load(Ordering::Relaxed),
                keys: layer.stores().map(|store| store.stats().keys).sum(),
            })
            .collect()
    }

    /// Forgets idle keys: sweeps the next `budget` slots of every keyed policy's tables (see
    /// [`KeyedRateLimiter::sweep`](crate::KeyedRateLimiter::sweep)), each judged by its quota's
    /// algorithm in force. Returns how many keys went.
    pub fn sweep(&self, budget: usize) -> usize {
        let now = || self.clock.now();
        self.rules.with(|rules| {
            let stores = self
                .layers
                .iter()
                .flat_map(|layer| (layer.stores()).zip(layer.algorithms(rules)));
            stores
                .map(|(store, algorithm)| store.sweep(budget, &One(algorithm), now))
                .sum()
        })
    }

    /// Forgets what `request`'s keys used: in every keyed policy that applies, its key is
    /// forgotten and comes back new (full, or as its quota's
    /// [`initial`](crate::Quota::initial) fill says). Global policies are untouched: their
    /// buckets are every client's, and resetting one client must not refill them for all
    /// (a [`RateLimiter::reset`](crate::RateLimiter::reset) of their own does that). Other
    /// keys are untouched.
    pub fn reset(&self, request: &R) {
        for layer in self.layers.iter() {
            let Buckets::Keyed { stores, .. } = &layer.buckets else {
                continue;
            };
            let Some(tag) = layer.tag_of(request) else {
                continue;
            };
            for store in stores.iter() {
                store.remove(tag);
            }
        }
    }

    /// Slots in the largest keyed table: a [`sweep`](Self::sweep) of this many visits them all.
    pub fn slots(&self) -> usize {
        let stores = self.layers.iter().flat_map(Layer::stores);
        stores.map(|s| s.table().slots()).max().unwrap_or(0)
    }

    /// The policy `name`, and its place in the set.
    fn layer(&self, name: &str) -> Result<(usize, &Layer<R, C>), BuildError> {
        self.layers
            .iter()
            .enumerate()
            .find(|(_, layer)| &*layer.name == name)
            .ok_or_else(|| BuildError::UnknownPolicy {
                policy: name.into(),
            })
    }
}

/// `Ok` if a replacement of `layer`'s quotas gives as many as it has.
fn count_matches<R: ?Sized, C: Clock>(layer: &Layer<R, C>, found: usize) -> Result<(), BuildError> {
    if found == layer.places.len() {
        return Ok(());
    }
    Err(BuildError::QuotaCount {
        policy: layer.name.to_string(),
        expected: layer.places.len(),
        found,
    })
}

/// The rules `now` with each layer's algorithms replaced by the new ones given with it (as
/// many as it has), if each reads the buckets of the one it replaces.
fn swapped<'a, R: ?Sized + 'a, C: Clock + 'a>(
    now: &[AnyAlgorithm],
    changes: impl IntoIterator<Item = (&'a Layer<R, C>, &'a [AnyAlgorithm])>,
) -> Result<Vec<AnyAlgorithm>, BuildError> {
    let mut list = now.to_vec();
    for (layer, new) in changes {
        for (q, (old, new)) in layer.algorithms(now).iter().zip(new).enumerate() {
            if !old.reads_buckets_of(new) {
                return Err(BuildError::Incompatible {
                    policy: layer.name.to_string(),
                    quota: q,
                    from: old.to_string(),
                    to: new.to_string(),
                });
            }
        }
        list[layer.first..][..new.len()].copy_from_slice(new);
    }
    Ok(list)
}

impl<R: ?Sized, C: Clock + fmt::Debug> fmt::Debug for Policies<R, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut list = f.debug_struct("Policies");
        self.rules.with(|rules| {
            for layer in self.layers.iter() {
                let quotas = layer.algorithms(rules).iter().map(|a| a.to_string());
                list.field(&layer.name, &quotas.collect::<Vec<_>>());
            }
        });
        list.field("clock", &self.clock).finish()
    }
}
