//! The ring's write protocol: reading the cursor, the claim / advance / record steps of a
//! request (and the rollback of a multi-cell claim that lost a race), the refusal path, and the
//! catch-up that moves times recorded after a backward clock step back to a fresh reading.

use crossbeam_utils::Backoff;

use super::slot::{self, Slot};
use super::{Place, SlidingLog};
use crate::cell::contended;
use crate::clock::Clock;
use crate::outcome::{Allowed, Refused};
use crate::primitive::{compare_exchange_weak, Ordering};

/// One claim attempt's outcome.
enum Attempt {
    Claimed,
    /// The cursor moved, or the attempt helped another claimer: read the cursor again.
    Retry,
    /// The slot holds a request that leaves the window at `free_at`; `behind` if it was
    /// recorded after the reading.
    Busy {
        free_at: u64,
        behind: bool,
    },
}

impl<C: Clock> SlidingLog<C> {
    /// The cursor: the sequence number of the next request.
    #[inline(always)]
    pub(super) fn head(&self) -> u64 {
        // Acquire: pairs with the AcqRel advance, so the slots of every request before the
        // cursor read at least "pending" (their claim happened before the advance).
        self.cursor.load(Ordering::Acquire)
    }

    pub(super) fn take(&self, n: u32, now: u64) -> Result<Allowed, Refused> {
        let backoff = Backoff::new();
        'retry: loop {
            let head = self.place(self.head());
            if n > 1 {
                // Refuse at once if any of the n slots is busy, before claiming any.
                match self.busiest(head, n, now) {
                    Attempt::Busy { free_at, behind } => {
                        return Err(self.refused(head, now, free_at, behind));
                    }
                    Attempt::Retry => {
                        contended(&backoff);
                        continue 'retry;
                    }
                    Attempt::Claimed => {}
                }
            }
            for i in 0..n {
                match self.claim(self.after(head, i), now) {
                    Attempt::Claimed => {}
                    Attempt::Busy { free_at, behind } if i == 0 => {
                        return Err(self.refused(head, now, free_at, behind));
                    }
                    Attempt::Busy { .. } | Attempt::Retry => {
                        // Lost a race part way: free what was claimed and start over.
                        for k in 0..i {
                            let p = self.after(head, k);
                            // Release: as the records below.
                            self.slot(p).store(slot::free(p.lap), Ordering::Release);
                        }
                        // Another thread moved first: let its cache lines settle (as the
                        // one-word cell does after a failed CAS).
                        contended(&backoff);
                        continue 'retry;
                    }
                }
            }
            for i in 0..n {
                let p = self.after(head, i);
                // Release: a thread that reads this time (Acquire) also sees the cursor past it.
                self.slot(p)
                    .store(slot::done(now, p.lap), Ordering::Release);
            }
            return Ok(Allowed::new(self.gauge(self.after(head, n), now)));
        }
    }

    /// One attempt to claim the slot of request `p` at `now`.
    #[inline]
    fn claim(&self, p: Place, now: u64) -> Attempt {
        let seq = p.seq;
        let cell = self.slot(p);
        // Acquire: pairs with the Release of the claim or record that wrote the value.
        let value = cell.load(Ordering::Acquire);
        match slot::decode(value, self.window) {
            Slot::Pending(owner) if owner == seq => {
                // Its claimer has not advanced the cursor yet: do it for them.
                self.advance(seq);
                Attempt::Retry
            }
            // Request `seq − limit` is still being recorded: treat it as made now.
            Slot::Pending(owner) if owner < seq => Attempt::Busy {
                free_at: self.pending_free_at(now),
                behind: false,
            },
            Slot::Pending(_) => Attempt::Retry,
            Slot::Done { free_at } => {
                // The value is request `seq − limit`'s only if the cursor still reads `seq`.
                if self.head() != seq {
                    return Attempt::Retry;
                }
                if free_at > now {
                    return Attempt::Busy {
                        free_at,
                        behind: free_at - self.window > now,
                    };
                }
                // AcqRel on success: Release publishes the claim to helpers, Acquire orders
                // it after the value's writer. Relaxed on failure: the caller reloads.
                match compare_exchange_weak(
                    cell,
                    value,
                    slot::pending(seq),
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        self.advance(seq);
                        Attempt::Claimed
                    }
                    Err(_) => Attempt::Retry,
                }
            }
        }
    }

    /// Moves the cursor from `seq` to `seq + 1` unless someone already has.
    #[inline]
    fn advance(&self, seq: u64) {
        loop {
            // AcqRel: Release publishes the claim of `seq` with the cursor (see `head`); Acquire
            // on failure (and success) keeps a helper's view of the cursor current.
            match compare_exchange_weak(
                &self.cursor,
                seq,
                seq + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return,
                Err(actual) if actual != seq => return,
                Err(_) => {} // spurious
            }
        }
    }

    /// Whether the `n` slots from `head` are free at `now` (`Claimed`: go ahead and claim
    /// them), one is busy (the latest `free_at` among the busy ones), or a claim is in flight on
    /// one of them (`Retry`: the cursor is moving).
    fn busiest(&self, head: Place, n: u32, now: u64) -> Attempt {
        let mut busiest: Option<(u64, bool)> = None;
        for i in 0..n {
            let p = self.after(head, i);
            // Acquire: as in `claim`.
            let value = self.slot(p).load(Ordering::Acquire);
            let (free_at, behind) = match slot::decode(value, self.window) {
                Slot::Pending(owner) if owner < p.seq => (self.pending_free_at(now), false),
                Slot::Pending(owner) => {
                    // A claim in flight: help it move the cursor on (as `claim` does), so
                    // that nobody waits for its owner, then look again.
                    self.advance(owner);
                    return Attempt::Retry;
                }
                Slot::Done { free_at } if free_at > now => (free_at, free_at - self.window > now),
                Slot::Done { .. } => continue,
            };
            let (latest, was_behind) = busiest.unwrap_or((0, false));
            busiest = Some((latest.max(free_at), was_behind || behind));
        }
        match busiest {
            Some((free_at, behind)) => Attempt::Busy { free_at, behind },
            None => Attempt::Claimed,
        }
    }

    /// When a slot still pending from the previous lap leaves the window, at the latest: its
    /// owner read the clock before claiming, so before this fresh reading (taken after the
    /// slot was seen pending).
    #[cold]
    fn pending_free_at(&self, now: u64) -> u64 {
        self.clock.now().max(now).saturating_add(self.window)
    }

    #[cold]
    fn refused(&self, head: Place, now: u64, free_at: u64, behind: bool) -> Refused {
        if behind {
            self.catch_up();
        }
        Refused::new(self.gauge(head, now), (free_at - now).max(1))
    }

    /// After a refusal against a time recorded after the reading: with fresh readings taken
    /// after each slot is loaded, moves back to the fresh reading every recorded time more than
    /// the clock's skew after it (the clock stepped back).
    #[cold]
    #[inline(never)]
    fn catch_up(&self) {
        let skew = self.clock.skew_nanos();
        for cell in self.slots.iter() {
            loop {
                // Acquire: the fresh reading below must follow the write of this time.
                let value = cell.load(Ordering::Acquire);
                let fresh = self.clock.now();
                match slot::recorded(value) {
                    Some(at) if at > fresh.saturating_add(skew) => {
                        // Release: as a record. Relaxed on failure: reloaded above.
                        if compare_exchange_weak(
                            cell,
                            value,
                            slot::restamped(value, fresh),
                            Ordering::Release,
                            Ordering::Relaxed,
                        )
                        .is_ok()
                        {
                            break;
                        }
                    }
                    _ => break,
                }
            }
        }
    }
}
