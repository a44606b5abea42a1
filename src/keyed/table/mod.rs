//! [`Table`]: the cache-padded shards of [`Slot`]s, sized once for a key cap; how keys are found
//! (without a lock), inserted, removed and swept (under the shard's lock).
//!
//! Each shard is an open-addressing table with linear probing over a fixed array of slots, at
//! most 7/8 full, laid out four to a 64-byte cache line. A key's shard comes from its tag's
//! high bits and its home from the bits below them: the first slot of a cache line (a
//! multiply-shift, so shard lengths need not be powers of two), so that a probe usually loads
//! one line (`scripts/no-thp` runs a bench without huge pages, to compare). Deletion shifts the rest of the probe chain
//! back instead of leaving tombstones, so probe chains stay as short as the load factor makes
//! them however many keys come and go. Every shard's lines are in one allocation, on huge pages
//! where the system gives them (see `lines`).
//!
//! The key cap is global: a counter of keys (touched only when a key is inserted or removed)
//! never exceeds `max_keys`. Shards are sized for their share of it plus five standard
//! deviations of the binomial spread of random hashes (1.4–8 % at a million keys, for 8 to 256
//! shards), so the chance that one shard fills before the table does is below 10⁻⁶ per shard.
//!
//! A lookup that finds its key is answered without the lock. One that does not is not trusted
//! (a key can be mid-move); the caller takes the shard's lock and looks again, and only the
//! lock holder inserts, closes, moves or clears slots.

mod evict;
mod lines;
mod size;

use alloc::boxed::Box;
use alloc::vec::Vec;

use crossbeam_utils::CachePadded;

use self::lines::{Lines, LINE};
use super::slot::{Slot, Tag, EMPTY};
use crate::observe::TableMetrics;
use crate::primitive::{compare_exchange_weak, lock, AtomicU64, Mutex, MutexGuard, Ordering};

/// Most slots one locked sweep step visits: the longest a sweep holds a shard's lock.
pub(crate) const SWEEP_CHUNK: usize = 256;
/// Slots an insert into a full shard sweeps, from the shard's own cursor, looking for room.
const INSERT_SWEEP: usize = 64;

/// The shards.
#[derive(Debug)]
pub(crate) struct Table {
    shards: Box<[CachePadded<Shard>]>,
    /// Every shard's lines, shard after shard, in one allocation (see `lines`).
    lines: Lines,
    /// Lines per shard (every shard has the same number).
    shard_lines: usize,
    /// Keys held and evicted, for the `metrics` feature (nothing without it).
    metrics: TableMetrics,
    /// log2 of the shard count.
    shard_bits: u32,
    /// Where the next global sweep starts, in slots over all shards.
    cursor: AtomicU64,
    /// Keys held in all shards.
    live: AtomicU64,
    /// The most keys held in all shards.
    max_keys: u64,
    /// Seeds the close nonces (from the key hasher, so unknown outside the process unless the
    /// hash seed is fixed).
    seed: u64,
}

/// One shard: its slots and the lock that serializes changes to which key owns which slot.
#[derive(Debug)]
pub(crate) struct Shard {
    /// The table's line where this shard's lines begin (its index × `shard_lines`): kept for
    /// the locked paths (an insert, a sweep, a removal), which hold a shard, not a tag's index;
    /// the lock-free probe derives it from the tag instead (`Table::line_of`).
    first: usize,
    /// The most keys this shard holds.
    cap: usize,
    state: Mutex<State>,
}

/// What the shard's lock guards besides the right to change tags.
#[derive(Debug, Default)]
pub(crate) struct State {
    /// Keys held.
    pub(crate) live: usize,
    /// The line where this shard's next insert-time sweep ends (0: the shard's end).
    cursor: usize,
    /// Keys removed because they were idle.
    pub(crate) evicted: u64,
    /// Keys inserted.
    pub(crate) created: u64,
    /// Requests from new keys admitted without a bucket because the shard was full.
    pub(crate) untracked: u64,
    /// Requests from new keys refused because the shard was full.
    pub(crate) refused: u64,
    /// The nonce sequence's position.
    closes: u64,
}

/// The result of a locked lookup that may insert.
pub(crate) enum Entry<'a, E> {
    /// The key was there.
    Found(&'a Slot),
    /// The key was inserted.
    Inserted(&'a Slot),
    /// The key was not there and there was no room.
    Full,
    /// The key was not there, there was room, and `admit` said no.
    Denied(E),
}

/// Asks `admit` if it has not been asked yet; `Ok` if it was asked before (and said yes).
fn admitted<E>(admit: &mut Option<impl FnOnce() -> Result<(), E>>) -> Result<(), E> {
    admit.take().map_or(Ok(()), |admit| admit())
}

/// Errors sizing a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SizeError {
    /// The slots would not fit in memory (or in `usize`).
    TooLarge,
}

impl Table {
    /// A table for at most `max_keys ≥ 1` keys in `shards` (a power of two) shards; fewer shards
    /// if there would be fewer than `min_per_shard` keys in each.
    pub(crate) fn new(
        max_keys: usize,
        shards: usize,
        min_per_shard: usize,
        seed: u64,
        metrics: TableMetrics,
    ) -> Result<Self, SizeError> {
        debug_assert!(max_keys >= 1 && shards.is_power_of_two());
        let (shards, cap) = size::shards_and_cap(max_keys, shards, min_per_shard);
        // At most 7/8 full, always one EMPTY slot to end every probe, in whole cache lines.
        let lines = cap
            .checked_add(cap.div_ceil(7))
            .and_then(|n| n.checked_add(1))
            .ok_or(SizeError::TooLarge)?
            .div_ceil(LINE);
        let all = lines
            .checked_mul(shards)
            .and_then(Lines::new)
            .ok_or(SizeError::TooLarge)?;
        let mut list = Vec::new();
        list.try_reserve_exact(shards)
            .map_err(|_| SizeError::TooLarge)?;
        for s in 0..shards {
            list.push(CachePadded::new(Shard {
                first: s * lines,
                cap,
                state: Mutex::new(State::default()),
            }));
        }
        Ok(Self {
            shards: list.into_boxed_slice(),
            lines: all,
            shard_lines: lines,
            shard_bits: shards.trailing_zeros(),
            cursor: AtomicU64::new(0),
            live: AtomicU64::new(0),
            max_keys: max_keys as u64,
            seed,
            metrics,
        })
    }

    /// The shard of `tag`: its high bits.
    #[inline(always)]
    pub(crate) fn shard(&self, tag: Tag) -> &Shard {
        &self.shards[self.shard_index(tag)]
    }

    /// The index of `tag`'s shard: its top `shard_bits` bits.
    #[inline(always)]
    pub(crate) fn shard_index(&self, tag: Tag) -> usize {
        // Two shifts, so that 0 shard bits give shard 0 (a single shift by 64 would not).
        ((tag >> (63 - self.shard_bits)) >> 1) as usize
    }

    /// The shards.
    pub(crate) fn shards(&self) -> &[CachePadded<Shard>] {
        &self.shards
    }

    /// Slots in all shards.
    pub(crate) fn slots(&self) -> usize {
        self.shards.len() * self.shard_len()
    }

    /// Bytes the table holds: its slots and shard headers.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.slots() * core::mem::size_of::<Slot>()
            + self.shards.len() * core::mem::size_of::<CachePadded<Shard>>()
            + core::mem::size_of::<Self>()
    }

    /// The most keys the table holds.
    pub(crate) fn max_keys(&self) -> usize {
        self.max_keys as usize
    }

    /// Counts one more key if the table has room for it (lock holder of the key's shard).
    fn reserve(&self) -> bool {
        // Relaxed: a counter; each shard's own count is exact under its lock, and this one only
        // needs its read-modify-writes to be atomic to never pass `max_keys`.
        let mut live = self.live.load(Ordering::Relaxed);
        while live < self.max_keys {
            // Relaxed: as above. A compare-and-swap, not an add undone on overshoot, so that
            // racing inserts never refuse each other while there is room.
            match compare_exchange_weak(
                &self.live,
                live,
                live + 1,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => live = now,
            }
        }
        false
    }

    /// Counts `keys` keys fewer.
    fn release(&self, keys: u64) {
        // Relaxed: as in `reserve`.
        self.live.fetch_sub(keys, Ordering::Relaxed);
    }

    /// The home slot of `tag`: the first slot of the cache line picked by the bits below the
    /// shard bits, scaled to the shard's lines. A probe starts at a line's start, so a key is
    /// most often found in the one line its probe loads.
    #[inline(always)]
    pub(crate) fn home(&self, tag: Tag) -> usize {
        self.home_line(tag) * LINE
    }

    /// The cache line [`home`](Self::home) is the first slot of.
    #[inline(always)]
    fn home_line(&self, tag: Tag) -> usize {
        let below = tag << self.shard_bits;
        ((u128::from(below) * self.shard_lines as u128) >> 64) as usize
    }

    /// The index, over all the table's lines, of `tag`'s home line: its shard's first line plus
    /// [`home_line`](Self::home_line), in one multiply. The shards' lines lie shard after shard,
    /// `shard_lines` each, and the shard is the tag's top `shard_bits` bits, so
    /// `⌊tag · shards · shard_lines / 2⁶⁴⌋ = shard · shard_lines + ⌊(tag << shard_bits) ·
    /// shard_lines / 2⁶⁴⌋`. The hot path so reads no shard header.
    #[inline(always)]
    pub(crate) fn line_of(&self, tag: Tag) -> usize {
        ((u128::from(tag) * self.lines.len() as u128) >> 64) as usize
    }

    /// The slot holding `tag`, without a lock. `None` is not proof of absence (the key may be
    /// moving): look again under the lock with [`find_locked`](Self::find_locked).
    #[inline(always)]
    pub(crate) fn find(&self, tag: Tag) -> Option<&Slot> {
        // Line by line from the home line (every probe starts at a line's first slot), every
        // slot of the shard at most once, wrapping at the shard's end to its start.
        let (lines, len) = (&*self.lines, self.shard_lines);
        let first = self.shard_index(tag) * len;
        let end = first + len;
        let mut l = self.line_of(tag);
        for _ in 0..len {
            for slot in &lines[l].0 {
                match slot.tag() {
                    t if t == tag => return Some(slot),
                    EMPTY => return None,
                    _ => {}
                }
            }
            l += 1;
            if l == end {
                l = first;
            }
        }
        None
    }

    /// The slot holding `tag` (holder of its shard's lock: the answer is exact).
    pub(crate) fn find_locked(&self, _held: &Held<'_>, tag: Tag) -> Option<&Slot> {
        self.find(tag)
    }

    /// Finds `tag`, or inserts it with the word `fresh()`: in a free slot of its home line that
    /// leaves the line one to spare (idle keys stay for their owners), else in an idle slot of
    /// its probe chain (probes stay short), else in the free slot further on, else in one made
    /// by sweeping part of the shard when it is full (`idle` says which slots may go). `Full` if
    /// there is no room; `Denied` if there is, but `admit`, asked just before the key would be
    /// written, refuses.
    pub(crate) fn entry<'a, E>(
        &'a self,
        shard: &Shard,
        held: &mut Held<'_>,
        tag: Tag,
        fresh: impl Fn() -> u64,
        idle: impl Fn(Tag, u64) -> bool,
        admit: impl FnOnce() -> Result<(), E>,
    ) -> Entry<'a, E> {
        // `admit` runs at most once, when the key is absent and there is room for it, and
        // before anything is written for it.
        let mut admit = Some(admit);
        for attempt in 0..2 {
            let len = self.shard_len();
            let home = self.home(tag);
            let mut i = home;
            let mut reusable = None;
            // The chain from the home slot to the first EMPTY slot (there is always one).
            loop {
                let slot = self.slot(shard, i);
                let t = slot.tag();
                if t == tag {
                    return Entry::Found(slot);
                }
                if t == EMPTY {
                    break;
                }
                if reusable.is_none() && idle(t, slot.word_locked(t)) {
                    reusable = Some((slot, t));
                }
                i += 1;
                if i == len {
                    i = 0;
                }
            }
            // A free slot in the key's home line that leaves the line a free slot (so a miss
            // there still ends in the line) goes before an idle key's slot: the idle key's
            // owner, back within its interval, is found instead of inserted again. Any other
            // free slot comes after one: taking it would lengthen the probes that cross it.
            let near = reusable.is_none() || i.wrapping_sub(home) < LINE - 1;
            for free in [near, !near] {
                let entry = if free {
                    self.insert_free(shard, held, (i, tag), &fresh, &mut admit)
                } else {
                    let reuse = reusable.take();
                    reuse.and_then(|old| {
                        self.insert_idle(held, old, tag, (&fresh, &idle), &mut admit)
                    })
                };
                if let Some(entry) = entry {
                    return entry;
                }
            }
            if attempt == 0 {
                // The next lines below the shard's cursor, backwards like every sweep.
                let end = match held.state.cursor {
                    0 => self.shard_lines,
                    end => end,
                };
                let from = end.saturating_sub(INSERT_SWEEP / LINE);
                held.state.cursor = from;
                if self.sweep_shard(shard, held, from..end, &idle) == 0 {
                    break;
                }
            }
        }
        Entry::Full
    }

    /// [`entry`](Self::entry) in the free slot `i`, if the table and the shard have room.
    fn insert_free<'a, E>(
        &'a self,
        shard: &Shard,
        held: &mut Held<'_>,
        (i, tag): (usize, Tag),
        fresh: impl Fn() -> u64,
        admit: &mut Option<impl FnOnce() -> Result<(), E>>,
    ) -> Option<Entry<'a, E>> {
        if held.state.live >= shard.cap || !self.reserve() {
            return None;
        }
        if let Err(denied) = admitted(admit) {
            self.release(1);
            return Some(Entry::Denied(denied));
        }
        let slot = self.slot(shard, i);
        slot.publish(tag, fresh());
        held.state.live += 1;
        held.state.created += 1;
        self.metrics.keys.increment(1.0);
        Some(Entry::Inserted(slot))
    }

    /// [`entry`](Self::entry) in the slot of the key `old` the chain's look found idle, if it
    /// still is once closed.
    fn insert_idle<'a, E>(
        &'a self,
        held: &mut Held<'_>,
        (slot, old): (&'a Slot, Tag),
        tag: Tag,
        (fresh, idle): (impl Fn() -> u64, impl Fn(Tag, u64) -> bool),
        admit: &mut Option<impl FnOnce() -> Result<(), E>>,
    ) -> Option<Entry<'a, E>> {
        // Computed before the close, so that little runs with the slot closed.
        let new = fresh();
        let word = slot.close(old, self.nonce(held));
        if !idle(old, word) {
            // Taken from since the look: it stays.
            slot.publish(old, word);
            return None;
        }
        if let Err(denied) = admitted(admit) {
            slot.publish(old, word);
            return Some(Entry::Denied(denied));
        }
        slot.publish(tag, new);
        held.state.evicted += 1;
        held.state.created += 1;
        // One key for another: the count of keys stays.
        self.metrics.evicted.increment(1);
        Some(Entry::Inserted(slot))
    }
}

/// Proof that a shard's lock is held, with what it guards.
pub(crate) struct Held<'a> {
    pub(crate) state: MutexGuard<'a, State>,
}

impl Shard {
    /// Takes this shard's lock.
    pub(crate) fn lock(&self) -> Held<'_> {
        Held {
            state: lock(&self.state),
        }
    }
}
