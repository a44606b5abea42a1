//! [`Rules`]: the algorithms of a set's quotas, one immutable list that decisions read as plain
//! data and that a replacement swaps whole.
//!
//! # Protocol
//! The list in force sits behind a lock with its version number. A replacement (rare: a
//! configuration reload) builds the new list, puts it in under the lock with the next version,
//! and then publishes that version. A decision loads the published version and, if the copy
//! of the list its thread holds is of that version, reads that copy: no lock, no
//! read-modify-write, nothing written outside the thread's own cache line. Otherwise it takes
//! the lock once and keeps a copy of the list it finds (an `Arc`, shared with the lock's).
//!
//! A decision reads one list from start to end, so it never sees a mixture of two; a decision
//! that starts after a replacement returned (in the happens-before sense) sees the new list,
//! except one made inside another decision on the same set, on the same thread (a key
//! extractor or a clock that decides on it), which reads the list the outer one read.
//! An old list is freed when the last thread holding it takes the new one (or the set is
//! dropped): a thread that stops deciding keeps at most one list per set.
//!
//! Built with `--cfg flowgate_loom`, threads hold no copy: every read takes the lock, so that
//! the models explore a replacement against decisions through loom's lock (a thread's copy is
//! that thread's alone, and needs no model).

use alloc::sync::Arc;
#[cfg(not(flowgate_loom))]
use core::cell::{Ref, RefCell};
use core::ops::Deref;

use crate::algorithm::AnyAlgorithm;
use crate::primitive::{lock, AtomicU64, Mutex, Ordering};
#[cfg(not(flowgate_loom))]
use crossbeam_utils::CachePadded;
#[cfg(not(flowgate_loom))]
use thread_local::ThreadLocal;

/// A list of algorithms and its version.
type Versioned = (u64, Arc<[AnyAlgorithm]>);

/// The list in force as a decision reads it: its thread's copy, borrowed for the decision.
#[cfg(not(flowgate_loom))]
pub(crate) struct Held<'a>(Ref<'a, Versioned>);

/// The list in force as a decision reads it (a loom build's: taken under the lock).
#[cfg(flowgate_loom)]
pub(crate) struct Held<'a>(Arc<[AnyAlgorithm]>, core::marker::PhantomData<&'a ()>);

impl Deref for Held<'_> {
    type Target = [AnyAlgorithm];

    #[inline(always)]
    fn deref(&self) -> &[AnyAlgorithm] {
        #[cfg(not(flowgate_loom))]
        return &self.0 .1;
        #[cfg(flowgate_loom)]
        return &self.0;
    }
}

/// The algorithms of a set's quotas (every policy's, in order), replaced whole.
pub(crate) struct Rules {
    /// The list in force, with its version: what a replacement swaps, under the lock.
    now: Mutex<Versioned>,
    /// The version of the list in `now`, once it is there.
    version: AtomicU64,
    /// Each thread's copy of the list it last read.
    #[cfg(not(flowgate_loom))]
    held: ThreadLocal<CachePadded<RefCell<Versioned>>>,
}

impl Rules {
    /// Rules starting with `list`.
    pub(crate) fn new(list: Vec<AnyAlgorithm>) -> Self {
        Self {
            now: Mutex::new((0, list.into())),
            version: AtomicU64::new(0),
            #[cfg(not(flowgate_loom))]
            held: ThreadLocal::new(),
        }
    }

    /// Runs `read` on the list in force (see the module docs for what "in force" means to a
    /// decision).
    #[inline(always)]
    pub(crate) fn with<T>(&self, read: impl FnOnce(&[AnyAlgorithm]) -> T) -> T {
        read(&self.read())
    }

    /// The list in force (see the module docs for what "in force" means to a decision).
    #[cfg(not(flowgate_loom))]
    #[inline(always)]
    pub(crate) fn read(&self) -> Held<'_> {
        // Acquire: pairs with `replace`'s Release store; a version seen here is in `now`.
        let version = self.version.load(Ordering::Acquire);
        if let Some(held) = self.held.get() {
            if let Ok(held) = held.try_borrow() {
                if held.0 == version {
                    return Held(held);
                }
            }
        }
        self.refresh()
    }

    /// [`read`](Self::read) after this thread's copy is made the list under the lock. A read
    /// under way further up this thread's stack (a key extractor or a clock deciding on the
    /// same set) keeps the copy as it is: a decision made inside another decision on the same
    /// set reads the list the outer one read.
    #[cfg(not(flowgate_loom))]
    #[cold]
    #[inline(never)]
    fn refresh(&self) -> Held<'_> {
        let now = || lock(&self.now).clone();
        let held = (self.held).get_or(|| CachePadded::new(RefCell::new(now())));
        if let Ok(mut copy) = held.try_borrow_mut() {
            *copy = now();
        }
        // Only `refresh` borrows the copy mutably, and not across this line.
        Held(held.borrow())
    }

    /// The list under the lock (a loom build keeps no copies).
    #[cfg(flowgate_loom)]
    pub(crate) fn read(&self) -> Held<'_> {
        Held(lock(&self.now).1.clone(), core::marker::PhantomData)
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
    use std::sync::OnceLock;

    use super::*;
    use crate::clock::ManualClock;
    use crate::policy::{Policies, Policy};
    use crate::Algorithm;

    fn any(text: &str) -> AnyAlgorithm {
        text.parse().unwrap()
    }

    fn limit(rules: &Rules) -> u32 {
        rules.with(|list| list[0].capacity())
    }

    /// A thread reads its own replacement at once, and another thread's once the replacement
    /// happened before its read; the list a thread held before is freed when it reads the new
    /// one (a thread keeps at most one). Keeping the old copy after a replacement fails the
    /// first assertion; keeping it alive beside the new one fails the last.
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

    static NESTED: OnceLock<Policies<u64, ManualClock>> = OnceLock::new();

    /// A key extractor that replaces the quotas and then decides on the same set, while the
    /// outer decision reads the set: the inner decision reads the outer one's list (this
    /// thread's copy cannot change under the outer read: replacing it then panics on the
    /// `RefCell`), and the next decision reads the new one.
    #[test]
    fn a_decision_inside_a_decision_reads_the_outer_list() {
        fn extract(user: &u64) -> &u64 {
            if *user == 1 {
                let set = NESTED.get().unwrap();
                set.replace_quotas("p", &["1/h".parse().unwrap()]).unwrap();
                let inner = set.check(&2).unwrap();
                assert_eq!(inner.limit(), 3, "the outer decision's list");
            }
            user
        }
        let set = Policies::builder()
            .clock(ManualClock::new())
            .policy(Policy::keyed("p", extract).quota("3/h".parse().unwrap()))
            .build()
            .unwrap();
        let set = NESTED.get_or_init(|| set);
        assert_eq!(set.check(&1).unwrap().limit(), 3);
        assert_eq!(set.check(&3).unwrap().limit(), 1, "the new list");
    }
}
