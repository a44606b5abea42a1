//! [`Slot`]: one key's bucket in the table, a tag word naming the key and a state word holding
//! its algorithm word, and the protocol that lets checks run without a lock while keys come and
//! go under the shard's lock.
//!
//! # The words
//! * **tag**: [`EMPTY`] (never used since the last deletion; ends a probe), [`BUSY`] (being
//!   written under the shard's lock; a probe passes over it), or a key's [`Tag`] (≥ [`FIRST_TAG`]).
//! * **word**: the algorithm's word XOR a mask made from the tag. Masking the word with its
//!   owner's mask makes the words of two keys different values even when their algorithm words
//!   are equal, so a check that stalled on a key's slot while the slot passed to another key
//!   cannot complete its compare-and-swap on the other key's word (see "Reuse" below).
//!
//! # Protocol
//! Only the shard's lock holder changes a tag. Checks change only the word, with a CAS.
//! * **Publish** (insert, or the destination of a move): write the word, then the tag, both with
//!   `Release`; a check that reads the tag with `Acquire` then reads that word or a later one,
//!   and a check of the slot's previous key that reads the word with `Acquire` then sees that
//!   the tag is no longer its key's.
//! * **Close** (eviction, or the source of a move): set the tag to `BUSY`, then XOR the word with
//!   a fresh nonce (nonzero, never used before in the shard) in a `Release`
//!   read-modify-write, which returns the key's final word. A check that loaded an earlier word
//!   fails its CAS unless the closed word equals one the slot held before, which a fixed flip
//!   could not exclude (a check's own write can flip the same bit back: a window counter going
//!   from 2 to 3 changes bit 0 only) and a fresh nonce makes a 2⁻⁶³ coincidence. A check that
//!   loads the closed word sees, through the `Release`/`Acquire` pair, the `BUSY` tag when it
//!   validates, and looks again.
//! * **Check**: load the tag; if it is the key's, load the word (`Acquire`), then load the tag
//!   again: if it still names the key, the word was the key's when loaded. This needs every
//!   write of a word to be `Release` and to follow, in its thread or through the shard's lock,
//!   the tag change that made the slot another key's: closes, publications, and checks' and
//!   clamps' CAS all are. A refusal (no write) is answered only if a third load finds the word
//!   unchanged, so a closed word read just before a re-publication is not taken for the key's
//!   own (unless the word comes back to that exact value: the nonce's 2⁻⁶³ coincidence).
//!   These loads, the step and the CAS are the crate's one loop (`cell::Cell::update_as`), run
//!   with the slot's key as the word's owner: the owner's check is the tag load, its mask the
//!   tag's, its orderings `Acquire`.
//!
//! # Reuse
//! A slot whose key was closed may be published again for another key while a check of the old
//! key is stalled between its loads and its CAS. That CAS expects the old key's masked word; it
//! can succeed on the new key's word only if `new_word ^ mask(new_tag) == old_word ^
//! mask(old_tag)`: the two algorithm words must differ by exactly the XOR of the masks of two
//! distinct, randomly seeded hashes, which differ from their lowest differing bit up; for a
//! given pair of words that happens with probability on the order of 2⁻⁶⁰. Likewise a closed
//! word equals an earlier word of the slot only by a 2⁻⁶³ coincidence (the nonce's low bit is
//! always set). These are the same order as the collision of two keys' fingerprints, which the
//! table already accepts (see the keyed module's docs); no ordering of events is needed for
//! them.

use crate::algorithm::Step;
use crate::cell::{Cell, Owner};
use crate::primitive::{AtomicU64, Ordering};

/// A key's tag: its 64-bit hash (with the tier in the low bits), never below [`FIRST_TAG`].
pub(crate) type Tag = u64;

/// Tag of a slot unused since it was last cleared: a probe for a key stops here.
pub(crate) const EMPTY: u64 = 0;
/// Tag of a slot the lock holder is writing: a probe passes over it.
pub(crate) const BUSY: u64 = 1;
/// The smallest tag a key can have.
pub(crate) const FIRST_TAG: u64 = 2;

/// The mask of `tag`'s words: the tag times an odd constant, a bijection that carries every
/// difference between two tags up through all the higher bits. (The tags of two keys that can
/// share a slot agree in their high bits, which chose the shard and the line; used as masks
/// directly, they would leave those bits of two keys' words equal. Their low bits are random,
/// so their products differ from about bit 0 up.) One multiply, off the memory path.
#[inline(always)]
fn mask(tag: Tag) -> u64 {
    tag.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// One key's place in a shard: 16 bytes, aligned so that a slot never straddles a cache line.
#[derive(Debug)]
#[repr(C, align(16))]
pub(crate) struct Slot {
    tag: AtomicU64,
    word: Cell,
}

/// The key `tag` deciding on `slot`'s word through the cell's loop: the word is the key's while
/// the slot's tag names it (checked before every step, and again by a second load of the word
/// before a refusal is answered), and it is stored masked with the tag's mask.
struct Tagged<'a> {
    slot: &'a Slot,
    tag: Tag,
}

impl Owner for Tagged<'_> {
    // Acquire: pairs with the Release of a close, so a closed word is seen with its BUSY tag
    // (and with a publication's, so the word read after the tag is the published one or later).
    const LOAD: Ordering = Ordering::Acquire;
    const CONFIRM_KEEP: bool = true;

    #[inline(always)]
    fn holds(&self) -> bool {
        self.slot.tag() == self.tag
    }

    #[inline(always)]
    fn mask(&self) -> u64 {
        mask(self.tag)
    }
}

impl Slot {
    /// An empty slot.
    pub(crate) fn empty() -> Self {
        Self {
            tag: AtomicU64::new(EMPTY),
            word: Cell::new(0),
        }
    }

    /// The tag now.
    #[inline(always)]
    pub(crate) fn tag(&self) -> u64 {
        // Acquire: pairs with `publish`'s Release, so the word read next is the published one or
        // later.
        self.tag.load(Ordering::Acquire)
    }

    #[inline(always)]
    fn owner(&self, tag: Tag) -> Tagged<'_> {
        Tagged { slot: self, tag }
    }

    /// Applies `step` to the key `tag`'s algorithm word atomically, through the cell's loop.
    /// `None` if the slot stopped holding `tag` (closed or moved): look again.
    #[inline(always)]
    pub(crate) fn update<T>(&self, tag: Tag, step: impl FnMut(u64) -> Step<T>) -> Option<T> {
        self.word.update_as(&self.owner(tag), step)
    }

    /// Puts the key `tag`'s word back to `before` if it still holds `after`, a word this thread
    /// wrote (see `Cell::restore_as`). `None` if the slot no longer holds `tag` (look for the key
    /// again: a move carries its word unchanged).
    pub(crate) fn restore(&self, tag: Tag, after: u64, before: u64) -> Option<bool> {
        self.word.restore_as(&self.owner(tag), after, before)
    }

    /// Replaces the key `tag`'s word by `clamp(word)` while that returns `Some` (see
    /// `Cell::clamp_as`); gives up if the slot stops holding `tag`.
    pub(crate) fn clamp(&self, tag: Tag, clamp: impl FnMut(u64) -> Option<u64>) {
        self.word.clamp_as(&self.owner(tag), clamp);
    }

    /// The key `tag`'s algorithm word as last written, for the lock holder, who knows the slot
    /// holds `tag`. A check may change it at any moment: a hint, to be confirmed by a close.
    #[inline]
    pub(crate) fn word_locked(&self, tag: Tag) -> u64 {
        // Relaxed: a debug check of a tag only the lock holder, this thread, writes.
        debug_assert_eq!(self.tag.load(Ordering::Relaxed), tag);
        self.word.load_relaxed() ^ mask(tag)
    }

    /// Closes the slot (lock holder only): no check of its key can write to it any more. Returns
    /// the key's final algorithm word.
    #[inline]
    pub(crate) fn close(&self, tag: Tag, nonce: u64) -> u64 {
        // Relaxed: a debug check of a tag only the lock holder, this thread, writes.
        debug_assert_eq!(self.tag.load(Ordering::Relaxed), tag);
        debug_assert_ne!(nonce, 0);
        // Relaxed: the Release of the flip below publishes this store to whoever sees its
        // result.
        self.tag.store(BUSY, Ordering::Relaxed);
        // The flip is Release: a check that loads the closed word then sees BUSY.
        self.word.flip(nonce) ^ mask(tag)
    }

    /// Publishes `word` for the key `tag` in this slot (lock holder only; the slot is `EMPTY` or
    /// closed).
    pub(crate) fn publish(&self, tag: Tag, word: u64) {
        debug_assert!(tag >= FIRST_TAG);
        // The word's store is Release: a check of the slot's previous key that loads this word
        // (Acquire) must then see a tag other than its own when it validates; this store is what
        // it synchronizes with (the lock holder saw the close, and a Relaxed store would end the
        // close's release sequence).
        self.word.store(word ^ mask(tag));
        // Release: a check that reads this tag with Acquire reads this word or a later one.
        self.tag.store(tag, Ordering::Release);
    }

    /// Marks a closed slot empty (lock holder only).
    pub(crate) fn clear(&self) {
        // Release: orders the close before the slot can be seen free.
        self.tag.store(EMPTY, Ordering::Release);
    }
}

#[cfg(all(test, not(flowgate_loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_slot_is_sixteen_bytes_on_its_own_line_share() {
        assert_eq!(core::mem::size_of::<Slot>(), 16);
        assert_eq!(core::mem::align_of::<Slot>(), 16);
    }

    #[test]
    fn a_closed_slot_refuses_its_old_key() {
        let slot = Slot::empty();
        slot.publish(7, 100);
        assert_eq!(slot.update(7, Step::Keep), Some(100));
        assert_eq!(slot.update(8, Step::Keep), None);
        assert_eq!(slot.close(7, 0x5a5a), 100);
        assert_eq!(slot.update(7, Step::Keep), None);
        assert_eq!(slot.update(7, |w| Step::Write(w + 1, ())), None);
        slot.clear();
        slot.publish(9, 100);
        assert_eq!(slot.update(9, |w| Step::Write(w + 1, w)), Some(100));
        assert_eq!(slot.update(9, Step::Keep), Some(101));
    }

    #[test]
    fn equal_words_of_two_keys_are_different_values() {
        let slot = Slot::empty();
        slot.publish(7, 5);
        let raw_seven = slot.word.load_relaxed();
        slot.close(7, 1);
        slot.clear();
        slot.publish(9, 5);
        assert_ne!(slot.word.load_relaxed(), raw_seven);
    }
}
