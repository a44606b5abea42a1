//! [`Rules`]: the algorithms of a set's quotas, one immutable list that decisions read as plain
//! data and that a replacement swaps whole.
//!
//! # Protocol
//! The list in force sits behind a lock with its version number. A replacement (rare: a
//! configuration reload) builds the new list, puts it in under the lock with the next version,
//! and then publishes that version. A decision loads the published version and, if its thread
//! holds a copy of the list of that version, reads that copy: no lock, no atomic
//! read-modify-write, nothing written that another thread reads. Otherwise it takes the lock
//! once and copies the list it finds for its thread (two allocations, and a third when the
//! thread's table grows: after each replacement, and after the thread's copy was evicted,
//! below).
//!
//! A decision takes and gives back its cells under one list, the old or the new, never a
//! mixture of the two, and a decision that starts after a replacement returned (in the
//! happens-before sense) sees the new list, on any thread, nested in another decision or not.
//! What a refusal reports of the quotas after the refusing one, and the clamp after a clock
//! step, are read from the list in force when they are made, which a replacement meanwhile
//! may have changed.
//!
//! Each live set holds one of 256 slot numbers, the lowest free one when it is built, given
//! back when it is dropped; a thread keeps its copy of a set's list in that slot of its table
//! (a `thread_local!` of this module, as long as its highest slot used), freed when the thread
//! exits. Finding a copy is one load and two comparisons (the set's id, the version), however
//! many sets the thread decides on, and up to 256 live sets never share a slot. Beyond 256,
//! a set shares the slot its id names: two sets sharing one evict each other's copy, and a
//! thread deciding on both in turn takes the lock and copies on every decision that misses,
//! several times the cost of a hit. A copy of a dropped set stays in its slot until another
//! set's copy takes it, or the thread exits. A thread that is exiting (a decision made from a
//! thread-local destructor) reads under the lock and copies every time.
//!
//! Built with `--cfg flowgate_loom`, the version, the lock and the threads' tables are loom's,
//! so that the models explore this protocol itself: a copy kept across a replacement, the
//! version published after the list.

use alloc::rc::Rc;
use alloc::sync::Arc;
use core::ops::Deref;

use crossbeam_utils::CachePadded;

use crate::algorithm::AnyAlgorithm;
use crate::primitive::{lock, AtomicU64, Mutex, Ordering};

/// How many slots a thread's table of copies has at most (a multiple of 64).
const SLOTS: usize = 256;

/// A thread's copy of a list, counted by the decisions that hold it: on a cache line of its
/// own, since each decision writes its count (another thread's copy next to it would make
/// the two threads take the line from each other).
type Shared = Rc<CachePadded<Box<[AnyAlgorithm]>>>;

/// A thread's copy of a set's list.
struct Copy {
    /// The set's [`Rules::id`].
    set: u64,
    version: u64,
    list: Shared,
}

/// This thread's copies, a set's in its slot (as long as the highest slot copied to).
type Copies = core::cell::RefCell<alloc::vec::Vec<Option<Copy>>>;

#[cfg(not(flowgate_loom))]
std::thread_local! {
    static COPIES: Copies = const { core::cell::RefCell::new(alloc::vec::Vec::new()) };
}

#[cfg(flowgate_loom)]
crate::primitive::thread_local! {
    static COPIES: Copies = core::cell::RefCell::new(alloc::vec::Vec::new());
}

/// The list in force as a decision reads it: its thread's copy, held for the decision (a
/// replacement or another decision meanwhile changes nothing of it).
pub(crate) struct Held(Shared);

impl Deref for Held {
    type Target = [AnyAlgorithm];

    #[inline(always)]
    fn deref(&self) -> &[AnyAlgorithm] {
        &self.0[..]
    }
}

/// The algorithms of a set's quotas (every policy's, in order), replaced whole.
pub(crate) struct Rules {
    /// Which set's rules these are, among every set of the process (a thread's copies are
    /// found by it).
    id: u64,
    /// The list in force, with its version: what a replacement swaps, under the lock.
    now: Mutex<(u64, Arc<[AnyAlgorithm]>)>,
    /// The version of the list in `now`, once it is there.
    version: AtomicU64,
    /// Where threads keep their copies of the list.
    slot: Slot,
}

/// The slot numbers live sets hold, one bit each. Not the loom shim's atomics: a slot only
/// spreads the copies (a copy is used only by the set whose id it carries), and a loom atomic
/// cannot live in a static.
static TAKEN: [core::sync::atomic::AtomicU64; SLOTS / 64] =
    [const { core::sync::atomic::AtomicU64::new(0) }; SLOTS / 64];

/// A set's slot in every thread's table of copies: held (given back when the set is dropped),
/// or shared with other sets when all 256 are held.
struct Slot {
    index: usize,
    held: bool,
}

impl Slot {
    /// The lowest free slot, or the one `id` names when none is free.
    fn take(id: u64) -> Self {
        use core::sync::atomic::Ordering::Relaxed;
        for (w, word) in TAKEN.iter().enumerate() {
            // Relaxed: which slot a set holds only spreads the copies; a copy is used only by
            // the set whose id it carries.
            let mut bits = word.load(Relaxed);
            while bits != u64::MAX {
                let bit = (!bits).trailing_zeros();
                // Relaxed, as above. A bit set meanwhile by another set: look again.
                bits = word.fetch_or(1 << bit, Relaxed);
                if bits & 1 << bit == 0 {
                    let index = w * 64 + bit as usize;
                    return Self { index, held: true };
                }
            }
        }
        // The low bits of the id: the cast keeps them.
        let index = id as usize % SLOTS;
        Self { index, held: false }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if self.held {
            let (word, bit) = (self.index / 64, self.index % 64);
            // Relaxed: see `take`.
            TAKEN[word].fetch_and(!(1 << bit), core::sync::atomic::Ordering::Relaxed);
        }
    }
}

impl Rules {
    /// Rules starting with `list`.
    pub(crate) fn new(list: Vec<AnyAlgorithm>) -> Self {
        // Ids only need to differ; no model explores them, so not the loom shim's atomic.
        static NEXT: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);
        // Relaxed: nothing is ordered by an id.
        let id = NEXT.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
        Self {
            id,
            now: Mutex::new((0, list.into())),
            version: AtomicU64::new(0),
            slot: Slot::take(id),
        }
    }

    /// Runs `read` on the list in force (see the module docs for what "in force" means to a
    /// decision).
    #[inline(always)]
    pub(crate) fn with<T>(&self, read: impl FnOnce(&[AnyAlgorithm]) -> T) -> T {
        read(&self.read())
    }

    /// The list in force (see the module docs for what "in force" means to a decision).
    #[inline(always)]
    pub(crate) fn read(&self) -> Held {
        // Acquire: pairs with `replace`'s Release store; a version seen here is in `now`.
        let version = self.version.load(Ordering::Acquire);
        let copy = COPIES.try_with(|copies| {
            let copies = copies.try_borrow().ok()?;
            let copy = copies.get(self.slot())?.as_ref()?;
            (copy.set == self.id && copy.version == version).then(|| Held(Rc::clone(&copy.list)))
        });
        match copy {
            Ok(Some(held)) => held,
            _ => self.refresh(),
        }
    }

    /// [`read`](Self::read) of the list under the lock, copied for this thread (unless it is
    /// exiting).
    #[cold]
    #[inline(never)]
    fn refresh(&self) -> Held {
        #[cfg(all(test, not(flowgate_loom)))]
        tests::REFRESHES.with(|n| n.set(n.get() + 1));
        let (version, list) = lock(&self.now).clone();
        let list = Rc::new(CachePadded::new(Box::from(&list[..])));
        // An exiting thread keeps no copy; the copies are never borrowed while user code runs,
        // so the borrow is free unless the thread is exiting.
        let _ = COPIES.try_with(|copies| {
            if let Ok(mut copies) = copies.try_borrow_mut() {
                let slot = self.slot();
                if copies.len() <= slot {
                    copies.resize_with(slot + 1, || None);
                }
                let set = self.id;
                let list = Rc::clone(&list);
                copies[slot] = Some(Copy { set, version, list });
            }
        });
        Held(list)
    }

    /// The slot of this thread's table of copies that holds this set's copy.
    #[inline(always)]
    fn slot(&self) -> usize {
        self.slot.index
    }

    /// Replaces the list with what `change` makes of the one in force (nothing if it fails).
    /// Replacements are serialized: none is lost.
    pub(crate) fn replace<E>(
        &self,
        change: impl FnOnce(&[AnyAlgorithm]) -> Result<Vec<AnyAlgorithm>, E>,
    ) -> Result<(), E> {
        let mut now = lock(&self.now);
        let list = change(&now.1)?;
        *now = (now.0 + 1, list.into());
        // Release: a decision that loads this version (Acquire) then finds the list in `now`.
        self.version.store(now.0, Ordering::Release);
        Ok(())
    }
}

#[cfg(all(test, not(flowgate_loom)))]
mod tests {
    use std::cell::Cell;
    use std::sync::OnceLock;

    use super::*;
    use crate::clock::ManualClock;
    use crate::policy::{Policies, Policy};
    use crate::Algorithm;

    fn any(text: &str) -> AnyAlgorithm {
        text.parse().unwrap()
    }

    std::thread_local! {
        /// How many times this thread copied a list.
        pub(super) static REFRESHES: Cell<usize> = const { Cell::new(0) };
    }

    fn limit(rules: &Rules) -> u32 {
        rules.with(|list| list[0].capacity())
    }

    /// A thread reads its own replacement at once, and another thread's once the replacement
    /// happened before its read, and the replaced list is freed (threads hold copies of it,
    /// not it). Keeping a thread's copy after a replacement (no version check) fails the first
    /// assertion.
    #[test]
    fn a_replacement_is_read_at_once_and_the_old_list_freed() {
        let rules = Rules::new(vec![any("5/s")]);
        assert_eq!(limit(&rules), 5);
        let old = Arc::downgrade(&lock(&rules.now).1);
        rules.replace(|_| Ok::<_, ()>(vec![any("7/s")])).unwrap();
        assert_eq!(limit(&rules), 7);
        std::thread::scope(|s| {
            s.spawn(|| rules.replace(|_| Ok::<_, ()>(vec![any("9/s")])).unwrap())
                .join()
                .unwrap();
        });
        assert_eq!(limit(&rules), 9);
        assert!(
            old.upgrade().is_none(),
            "the first list outlived every reader"
        );
        assert_eq!(rules.replace(|_| Err("no")), Err("no"));
        assert_eq!(limit(&rules), 9, "a failed replacement changes nothing");
    }

    /// A thread deciding on many live sets in turn (more than the 32 it kept copies of before
    /// the table, newest first and evicted oldest first, when every such decision took the
    /// lock and copied again) copies each set's list once and finds it after; each set reads
    /// its own list (a copy found by another set's id, or a version compared without the id,
    /// fails).
    #[test]
    fn many_sets_are_each_copied_once() {
        let sets: Vec<Rules> = (1..=150u32)
            .map(|k| Rules::new(vec![any(&format!("{k}/s"))]))
            .collect();
        for (k, rules) in (1..).zip(&sets) {
            assert_eq!(limit(rules), k);
        }
        let copied = REFRESHES.with(Cell::get);
        for _ in 0..3 {
            for (k, rules) in (1..).zip(&sets) {
                assert_eq!(limit(rules), k);
            }
        }
        assert_eq!(REFRESHES.with(Cell::get), copied, "every copy found again");
    }

    /// Two live sets whose ids are 256 apart (others built and dropped in between) hold slots
    /// of their own, and a thread deciding on both in turn copies each once (with the slot named
    /// by the id, sets 256 apart shared one, and each decision copied again).
    #[test]
    fn live_sets_never_share_a_slot() {
        let a = Rules::new(vec![any("1/s")]);
        // The first set built after `a` whose id is `a`'s plus a multiple of 256.
        let b = loop {
            let b = Rules::new(vec![any("2/s")]);
            if b.id % SLOTS as u64 == a.id % SLOTS as u64 {
                break b;
            }
        };
        assert_ne!(a.slot(), b.slot());
        assert_eq!((limit(&a), limit(&b)), (1, 2));
        let copied = REFRESHES.with(Cell::get);
        for _ in 0..100 {
            assert_eq!((limit(&a), limit(&b)), (1, 2));
        }
        assert_eq!(REFRESHES.with(Cell::get), copied, "no copy made again");
    }

    /// Two sets sharing a slot (all 256 held) evict each other's copy, and each still reads
    /// its own list.
    #[test]
    fn sets_that_share_a_slot_read_their_own_lists() {
        let a = Rules::new(vec![any("1/s")]);
        let b = Rules {
            slot: Slot {
                index: a.slot(),
                held: false,
            },
            ..Rules::new(vec![any("2/s")])
        };
        for _ in 0..3 {
            assert_eq!((limit(&a), limit(&b)), (1, 2));
        }
    }

    static NESTED: OnceLock<Policies<u64, ManualClock>> = OnceLock::new();

    /// A key extractor that replaces the quotas and then decides on the same set, while the
    /// outer decision reads the set: the inner decision reads the new list (the outer one holds
    /// its own, which the replacement leaves as it is), the outer one decides under the list
    /// it read, and the next decision reads the new one.
    #[test]
    fn a_decision_inside_a_decision_reads_the_new_list() {
        fn extract(user: &u64) -> &u64 {
            if *user == 1 {
                let set = NESTED.get().unwrap();
                set.replace_quotas("p", &["1/h".parse().unwrap()]).unwrap();
                let inner = set.check(&2).unwrap();
                assert_eq!(inner.limit(), 1, "the new list");
            }
            user
        }
        let set = Policies::builder()
            .clock(ManualClock::new())
            .policy(Policy::keyed("p", extract).quota("3/h".parse().unwrap()))
            .build()
            .unwrap();
        let set = NESTED.get_or_init(|| set);
        assert_eq!(
            set.check(&1).unwrap().limit(),
            3,
            "the list the outer decision read"
        );
        assert_eq!(set.check(&3).unwrap().limit(), 1, "the new list");
    }

    static EXITING: OnceLock<Policies<u64, ManualClock>> = OnceLock::new();

    /// A decision made from a thread-local destructor, while the thread exits (its copies may
    /// be gone already), decides under the lock instead of panicking.
    #[test]
    fn a_thread_exiting_decides_under_the_lock() {
        struct DecidesOnDrop(std::sync::mpsc::Sender<bool>);
        impl Drop for DecidesOnDrop {
            fn drop(&mut self) {
                let _ = self.0.send(EXITING.get().unwrap().check(&7).is_ok());
            }
        }
        std::thread_local!(static LAST: core::cell::RefCell<Option<DecidesOnDrop>> =
            const { core::cell::RefCell::new(None) });
        let set = Policies::builder()
            .clock(ManualClock::new())
            .policy(Policy::keyed("p", |u: &u64| u).quota("2/h".parse().unwrap()))
            .build()
            .unwrap();
        let set = EXITING.get_or_init(|| set);
        let (sender, decided) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            // Touched before the copies, so destroyed after them (Linux runs thread-local
            // destructors newest first): the decision finds the copies gone.
            LAST.with(|_| {});
            assert!(set.check(&7).is_ok(), "a copy made while the thread runs");
            LAST.with(|last| *last.borrow_mut() = Some(DecidesOnDrop(sender)));
        })
        .join()
        .unwrap();
        assert_eq!(decided.recv(), Ok(true));
        assert!(set.check(&7).is_err(), "both cells taken");
    }
}
