//! How keys leave a [`Table`]: removed, or evicted when idle (an insert's look around its
//! probe chain, a sweep's pass over its lines), closing slots and shifting probe chains back so
//! that no tombstone is left behind.

use core::ops::Range;

use super::{Held, Shard, Table, LINE, SWEEP_CHUNK};
use crate::keyed::slot::{Slot, Tag, EMPTY};
use crate::primitive::Ordering;

impl Table {
    /// Claims the next `budget` slots (rounded up to whole cache lines) of the global sweep: the
    /// ranges of lines to visit, shard by shard, at most [`SWEEP_CHUNK`] slots each.
    pub(crate) fn claim_sweep(
        &self,
        budget: usize,
    ) -> impl Iterator<Item = (&Shard, Range<usize>)> {
        let total = (self.slots() / LINE) as u64;
        let budget = (budget.div_ceil(LINE) as u64).min(total);
        // Relaxed: the cursor only spreads concurrent sweeps over different lines; every slot
        // a sweep visits is read under its shard's lock.
        let start = self.cursor.fetch_add(budget, Ordering::Relaxed) % total;
        let len = self.shard_lines as u64;
        let mut at = start;
        let mut left = budget;
        // Sweeps run from the last line to the first (see `sweep_shard`): claimed position `p`
        // is line `total − 1 − p` counted over all shards.
        core::iter::from_fn(move || {
            if left == 0 {
                return None;
            }
            let line = total - 1 - at;
            let shard = (line / len) as usize;
            let end = (line % len) as usize + 1;
            let take = left.min(end as u64).min((SWEEP_CHUNK / LINE) as u64) as usize;
            left -= take as u64;
            at = (at + take as u64) % total;
            Some((&*self.shards[shard], end - take..end))
        })
    }

    /// Removes the key `tag` if it is there (lock holder). Whether it was.
    pub(crate) fn remove(&self, shard: &Shard, held: &mut Held<'_>, tag: Tag) -> bool {
        let Some(slot) = self.find_locked(held, tag) else {
            return false;
        };
        let at = self.position(shard, slot);
        slot.close(tag, self.nonce(held));
        self.shift_back(shard, held, at, at);
        self.forget(held, 1);
        true
    }

    /// Evicts the idle keys among the cache lines `lines` of `shard` (lock holder), last slot
    /// first; how many. Sweeps visit the table backwards, so a key a shift moves back into a hole
    /// mostly comes from a slot already visited. Two kinds come from a slot not visited yet: the
    /// key moved into the emptied slot itself (looked at again at once), and at most one key
    /// per shift carried into a visited slot from beyond the range's end (or, wrapping, from
    /// the shard's start), which is looked at where it lands. A sweep of every line in claim
    /// order so evicts every key idle throughout it, unless a move made between two of its
    /// steps (an insert's sweep, a reset) carries a key across the sweep's position; that key
    /// waits for the next sweep.
    pub(crate) fn sweep_shard(
        &self,
        shard: &Shard,
        held: &mut Held<'_>,
        lines: Range<usize>,
        idle: impl Fn(Tag, u64) -> bool,
    ) -> usize {
        let mut evicted = 0;
        // The first slot past the range: keys from there on (circularly, up to the slot being
        // swept) have not been looked at.
        let end = lines.end * LINE;
        // Backwards: a key the shift moves into a hole comes from a later slot, already looked
        // at; and when a run of idle keys goes, each shift stops at once instead of moving the
        // rest of the run (which makes a forward sweep quadratic in the run's length).
        for l in lines.rev() {
            let line = &self.lines(shard)[l];
            let mut k = LINE;
            while k > 0 {
                k -= 1;
                let slot = &line.0[k];
                let t = slot.tag();
                if t == EMPTY || !idle(t, slot.word_locked(t)) {
                    continue;
                }
                let here = l * LINE + k;
                let next = line.0.get(k + 1);
                let Some(mut landed) = self.evict(shard, held, (slot, t, next, here, end), &idle)
                else {
                    continue;
                };
                evicted += 1;
                // The shift may have moved into this slot a key from a slot this sweep has not
                // visited (when it started mid-shard): look at this slot again.
                if slot.tag() != EMPTY {
                    k += 1;
                }
                // A key the shift carried from beyond the range (not visited yet) into a slot it
                // had visited: look at it where it landed, and at each key its own eviction
                // carries in turn (each evicts a key, so this ends).
                while let Some(at) = landed.filter(|&at| at != here) {
                    let slot = self.slot(shard, at);
                    let t = slot.tag();
                    if t == EMPTY || !idle(t, slot.word_locked(t)) {
                        break;
                    }
                    let next = (at % LINE != LINE - 1).then(|| self.slot(shard, at + 1));
                    let Some(next) = self.evict(shard, held, (slot, t, next, at, end), &idle)
                    else {
                        break;
                    };
                    evicted += 1;
                    landed = next;
                }
            }
        }
        held.state.evicted += evicted as u64;
        self.forget(held, evicted);
        if evicted > 0 {
            self.metrics.evicted.increment(evicted as u64);
        }
        evicted
    }

    /// Evicts the key `t` in `slot`, slot `at` of `shard`, which `idle` judged idle, if it
    /// still is once closed (a check may take from it between the look and the close; then it
    /// stays); `next` is the following slot if it is in the same line, `end` as for
    /// [`shift_back`](Self::shift_back). `None` if the key stays; else `Some` of what
    /// `shift_back` returns. The caller accounts for the key.
    #[inline(always)]
    fn evict(
        &self,
        shard: &Shard,
        held: &mut Held<'_>,
        (slot, t, next, at, end): (&Slot, Tag, Option<&Slot>, usize, usize),
        idle: impl Fn(Tag, u64) -> bool,
    ) -> Option<Option<usize>> {
        let word = slot.close(t, self.nonce(held));
        if !idle(t, word) {
            // Taken from since the look: it stays.
            slot.publish(t, word);
            return None;
        }
        // The next slot empty (in this line, where it costs no index): no chain continues past
        // this key, so nothing moves.
        if next.is_some_and(|next| next.tag() == EMPTY) {
            slot.clear();
            return Some(None);
        }
        Some(self.shift_back(shard, held, at, end))
    }

    /// A fresh nonce for a close in `held`'s shard: nonzero, and a value no earlier close of
    /// the shard used (a Weyl sequence from the table's seed: an odd step, so 2⁶⁴ closes pass
    /// before one repeats). The words it is XORed into are masked with random tags, so a fixed,
    /// distinct nonce per close is all the protocol needs.
    pub(super) fn nonce(&self, held: &mut Held<'_>) -> u64 {
        held.state.closes = held.state.closes.wrapping_add(0x9e37_79b9_7f4a_7c15);
        (self.seed ^ held.state.closes) | 1
    }

    /// Accounts for `keys` removed from `held`'s shard.
    pub(super) fn forget(&self, held: &mut Held<'_>, keys: usize) {
        if keys > 0 {
            held.state.live -= keys;
            self.release(keys as u64);
            self.metrics.keys.decrement(keys as f64);
        }
    }

    /// Where the key `tag` is now, as (shard, slot), if the table holds it.
    #[cfg(any(test, flowgate_loom))]
    pub(crate) fn position_of(&self, tag: Tag) -> Option<(usize, usize)> {
        let shard = self.shard(tag);
        let held = shard.lock();
        let slot = self.find_locked(&held, tag)?;
        Some((self.shard_index(tag), self.position(shard, slot)))
    }

    /// The index of `slot` in `shard`.
    fn position(&self, shard: &Shard, slot: &Slot) -> usize {
        let base = self.lines(shard).as_ptr() as usize;
        (slot as *const Slot as usize - base) / core::mem::size_of::<Slot>()
    }

    /// Fills the hole left by the closed slot `hole` by moving later keys of its probe chain
    /// back (each closed at its old place before it is published at its new one, so no key is
    /// ever in two slots), then clears the last hole. Where a key from `end` or beyond (counted
    /// forwards from `hole`, wrapping at the shard's end) landed before `end`, if one did: a
    /// sweep that has visited the slots from `hole` to `end` has not looked at that key (at
    /// most one key per shift crosses `end`; `end` may be the shard's length).
    #[inline]
    fn shift_back(
        &self,
        shard: &Shard,
        held: &mut Held<'_>,
        mut hole: usize,
        end: usize,
    ) -> Option<usize> {
        let len = self.shard_len();
        // Slots from `from` forwards to `to`, wrapping (`from` below `len`, `to` at most `len`).
        let distance = |from: usize, to: usize| {
            if to >= from {
                to - from
            } else {
                to + len - from
            }
        };
        let (start, border) = (hole, distance(hole, end));
        let mut j = hole;
        let mut landed = None;
        loop {
            j += 1;
            if j == len {
                j = 0;
            }
            let slot = self.slot(shard, j);
            let t = slot.tag();
            if t == EMPTY {
                break;
            }
            // The key at j may move to the hole if the hole is on its chain: between its home
            // and j.
            if distance(self.home(t), j) >= distance(hole, j) {
                let word = slot.close(t, self.nonce(held));
                self.slot(shard, hole).publish(t, word);
                let crossed = distance(start, hole) < border && distance(start, j) >= border;
                if crossed && landed.is_none() {
                    landed = Some(hole);
                }
                hole = j;
            }
        }
        self.slot(shard, hole).clear();
        landed
    }
}

/// A dropped table takes its keys off the `flowgate_keys` gauge (a policy set rebuilt under
/// the same names reports only its own).
#[cfg(feature = "metrics")]
impl Drop for Table {
    fn drop(&mut self) {
        // Relaxed: the table is being dropped, so nothing else touches it.
        let live = self.live.load(Ordering::Relaxed);
        if live > 0 {
            self.metrics.keys.decrement(live as f64);
        }
    }
}
