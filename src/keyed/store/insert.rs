//! A store's cold path for a key the lock-free probe missed: looked for again under the shard's
//! lock and created if absent, through the quota on new keys, or handled by the full-table rule
//! when there is no room.

use super::{Store, Tiers};
use crate::algorithm::Algorithm;
use crate::cell::{recording, Wrote};
use crate::clock::Clock;
use crate::keyed::slot::Tag;
use crate::keyed::table::{Entry, Held};
use crate::keyed::WhenFull;
use crate::outcome::{Allowed, Cause, Gauge, Refused};

impl<C: Clock> Store<C> {
    /// The slow path: the key was not found without the lock. Look again under it, and insert.
    #[cold]
    #[inline(never)]
    pub(super) fn insert<T: Tiers>(
        &self,
        tag: Tag,
        tiers: &T,
        (now, n): (u64, u32),
        wrote: &mut Wrote,
    ) -> Result<Allowed, Refused> {
        // `wrote` ends up with the words written, if any: an untracked admission writes none,
        // and must not hand an undo any, which could then take back another request's cells.
        *wrote = None;
        let shard = self.table.shard(tag);
        let mut held = shard.lock();
        tiers.with(tag, |algorithm| {
            let fresh = || algorithm.initial_word(now);
            let idle = |t: Tag, word: u64| tiers.with(t, |a| a.is_idle(word, now));
            match self
                .table
                .entry(shard, &mut held, tag, fresh, idle, || self.new_key(now))
            {
                Entry::Found(slot) | Entry::Inserted(slot) => {
                    let step = recording(algorithm, now, n, wrote);
                    if let Some(answer) = slot.update(tag, step) {
                        return answer;
                    }
                    // Tags change only under the lock we hold, so the key is still there; were
                    // it not, this answers as a new bucket would, writing nothing.
                    *wrote = None;
                    algorithm.check(fresh(), now, n).answer()
                }
                Entry::Denied(refused) => Err(refused),
                Entry::Full => self.full(&mut held, algorithm, now, n),
            }
        })
    }

    /// Takes a cell from the quota on new keys, if there is one. Asked only once a new key is
    /// certain to be created or admitted untracked, so that no cell ever has to be given back
    /// (it could be given back only exactly, and the gate's word moves on with every new key).
    fn new_key(&self, now: u64) -> Result<(), Refused> {
        match &self.new_keys {
            Some(gate) => gate
                .check_at(now)
                .map(|_| ())
                .map_err(|refused| refused.because(Cause::NewKeys)),
            None => Ok(()),
        }
    }

    /// A new key found no room.
    fn full<A: Algorithm>(
        &self,
        held: &mut Held<'_>,
        algorithm: &A,
        now: u64,
        n: u32,
    ) -> Result<Allowed, Refused> {
        match self.when_full {
            WhenFull::AdmitUntracked => {
                let answer = algorithm
                    .check(algorithm.initial_word(now), now, n)
                    .answer();
                if answer.is_ok() {
                    // An untracked admission takes a new-key cell; a refusal takes none.
                    self.new_key(now)?;
                    held.state.untracked += 1;
                }
                answer
            }
            WhenFull::Refuse => {
                held.state.refused += 1;
                let limit = algorithm.capacity();
                let hint = algorithm.quota().interval_nanos().max(1);
                let gauge = Gauge::new(u64::from(limit), 1, limit, hint);
                Err(Refused::new(gauge, hint).because(Cause::TableFull))
            }
        }
    }
}
