//! The read side of the log: the cells available now, the gauge (how many slots from the
//! cursor on are free and when the newest request leaves the window), and `reset`, which
//! rewrites every slot without taking part in the claim protocol.

use super::slot::{self, Slot};
use super::{Place, SlidingLog};
use crate::clock::Clock;
use crate::outcome::Gauge;
use crate::primitive::Ordering;

impl<C: Clock> SlidingLog<C> {
    /// Cells available now.
    pub fn available(&self) -> u32 {
        self.gauge(self.place(self.head()), self.clock.now())
            .remaining()
    }

    /// Forgets past requests: the log starts over as [`Quota::initial`](crate::Quota::initial) says, as of now.
    ///
    /// Not atomic with checks running at the same time: a request recorded concurrently may be
    /// forgotten too.
    pub fn reset(&self) {
        let now = self.clock.now();
        let head = self.place(self.head());
        let free = self.quota.initial_cells();
        for i in 0..self.limit {
            let p = self.after(head, i);
            // Slot `seq` holds request `seq − limit`, of the lap before seq's (the cursor
            // starts at `limit`, so lap ≥ 1).
            let lap = p.lap - 1;
            let value = if i < free {
                slot::free(lap)
            } else {
                slot::done(now, lap)
            };
            // Release: publishes the recorded time with the slot (see `take`).
            self.slot(p).store(value, Ordering::Release);
        }
    }

    /// Whether the slot of request `p` is busy at `now`.
    #[inline]
    fn busy(&self, p: Place, now: u64) -> bool {
        // Acquire: as in `claim`.
        match slot::decode(self.slot(p).load(Ordering::Acquire), self.window) {
            Slot::Pending(_) => true,
            Slot::Done { free_at } => free_at > now,
        }
    }

    /// The log as seen at `now` from the cursor `head`: how many of the slots from `head` on are
    /// free (binary search: in time order, free slots come first) and when the newest request
    /// leaves the window.
    pub(super) fn gauge(&self, head: Place, now: u64) -> Gauge {
        // Free slots come first: indices below `lo` are free, from `hi` on busy. A busy oldest
        // slot means none is free (the refused case, one probe); otherwise gallop back from the
        // newest, so a mostly free log costs a few probes rather than log2(limit).
        let (mut lo, mut hi) = (0u32, self.limit);
        if !self.busy(head, now) {
            lo = 1;
            let mut step = 1;
            while hi - lo >= step {
                let probe = hi - step;
                if self.busy(self.after(head, probe), now) {
                    hi = probe;
                    step *= 2;
                } else {
                    lo = probe + 1;
                    break;
                }
            }
        } else {
            hi = 0;
        }
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.busy(self.after(head, mid), now) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        let free = lo;
        let newest = self.after(head, self.limit - 1);
        // Acquire: as in `claim`.
        let reset = match slot::decode(self.slot(newest).load(Ordering::Acquire), self.window) {
            Slot::Pending(_) => self.window,
            Slot::Done { free_at } => free_at.saturating_sub(now),
        };
        Gauge::new(u64::from(self.limit - free), 1, self.limit, reset)
    }
}
