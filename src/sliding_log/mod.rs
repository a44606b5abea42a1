//! [`SlidingLog`]: the exact sliding window — at most `limit` requests in *any* interval of the
//! window's length — as a lock-free ring of request times.
//!
//! Unlike the one-word algorithms, a log needs one slot per request it remembers, so it is its
//! own limiter type rather than an [`Algorithm`](crate::Algorithm). The decision rule is still
//! pure (`slot`): a request may take the slot holding the `limit`-th most recent request's time
//! only if that time has left the window. Each slot is thus reused at least one window after its
//! last use, so no window can hold more than `limit` requests: the bound is exact by
//! construction, whatever the interleaving.
//!
//! # The ring
//! `limit` slots (one `AtomicU64` each, see `slot` for the encoding) and a `cursor`, the
//! sequence number of the next request; request `s` uses slot `s mod limit`, which holds
//! request `s − limit`. A request is recorded in three steps, none of which waits for another
//! thread:
//! 1. **claim**: read the cursor `c`, read slot `c`, check that the cursor still reads `c` (so the
//!    slot holds request `c − limit`), check that its time has left the window, and swap in
//!    "pending `c`";
//! 2. **advance** the cursor from `c` to `c + 1` (any thread that finds slot `c` pending while
//!    the cursor reads `c` does this for the claimer, so a preempted claimer blocks nobody);
//! 3. **record**: store the request's time in the slot.
//!
//! A slot still pending from the *previous* lap (its claimer preempted between steps 1 and 3
//! for a whole lap of the ring) is treated as a request made now: the caller is refused with a
//! retry of one window. That is a brief under-admission, never an over-admission. A request for
//! `n` cells claims `n` consecutive slots; if another thread takes one of them first, the ones
//! it took are freed again and it starts over. So single-cell requests are lock-free, while
//! multi-cell requests racing each other can retry repeatedly (obstruction-free; a backoff after
//! each lost race breaks the symmetry in practice).

mod slot;

use core::time::Duration;

use crossbeam_utils::Backoff;

use crate::cell::contended;
use crate::clock::{Clock, QuantaClock};
use crate::outcome::{Allowed, Gauge, InsufficientCapacity, Refused};
use crate::primitive::{compare_exchange_weak, AtomicU64, Ordering};
use crate::quota::{Quota, QuotaError};
use slot::Slot;

/// The sliding window log: **exactly** at most `limit` requests in any interval of one window's
/// length, measured to the nanosecond (times are rounded up to 4 ns, which can only delay a
/// request by 3 ns, never admit one early).
///
/// The fixed and sliding *counters* approximate this in 8 bytes; the log pays one 8-byte slot
/// per request it remembers. Choose it where the bound is a contract (a partner's API terms, a
/// billing limit) and limits are modest.
///
/// | | |
/// |---|---|
/// | burst | the whole limit at once |
/// | boundary effect | none: any window-length interval holds at most `limit` |
/// | precision | exact (times rounded up to 4 ns) |
/// | bytes per bucket | `8 × limit + 32` (the ring, its cursor, its length, the pointer) |
/// | cost per decision | two loads and two CASes per cell, then one store per cell; `O(log limit)` loads for `remaining` |
///
/// # Limits
/// At most 65 536 per window ([`QuotaError::LimitTooLarge`]: 512 KiB per bucket), windows of at
/// least 1 µs ([`QuotaError::WindowTooShort`]), no burst separate from the count
/// ([`QuotaError::BurstNotSupported`]).
///
/// # Time
/// As for the other limiters, a stale reading can admit up to its age early. A recorded time
/// after the reading (a stale reading, or a clock that stepped back) refuses; the limiter then
/// takes a fresh reading and, if the clock really is behind by more than its skew, moves every
/// such time back to the fresh reading: the lockout after a backward step is at most one window.
///
/// `remaining` is found by binary search over the ring's times, exact when requests are recorded
/// in time order (one thread, or readings taken in order) and otherwise an estimate;
/// `reset_after` is exact. Refunds are not offered: a log cannot tell which recorded request a
/// refund would cancel.
///
/// ```
/// use std::time::Duration;
/// use flowgate::{clock::ManualClock, SlidingLog};
///
/// let clock = ManualClock::new();
/// let log = SlidingLog::with_clock("3/s".parse()?, clock.clone())?;
/// clock.set(Duration::from_millis(900).as_nanos() as u64);
/// assert!(log.try_consume(3));
/// clock.set(Duration::from_millis(1_500).as_nanos() as u64);
/// // A fixed window would have reset at 1 s; the log still holds the three from 0.9 s.
/// let refused = log.check().unwrap_err();
/// assert_eq!(refused.retry_after(), Duration::from_millis(400));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct SlidingLog<C: Clock = QuantaClock> {
    cursor: AtomicU64,
    slots: Box<[AtomicU64]>,
    window: u64,
    limit: u32,
    quota: Quota,
    clock: C,
}

/// A request's place in the ring: its sequence number, lap (`seq / limit`) and slot
/// (`seq mod limit`), found with one division and then stepped without any.
#[derive(Debug, Clone, Copy)]
struct Place {
    seq: u64,
    lap: u64,
    index: usize,
}

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

impl SlidingLog<QuantaClock> {
    /// A log for `quota` on the default clock.
    ///
    /// # Errors
    /// As [`with_clock`](Self::with_clock).
    pub fn new(quota: Quota) -> Result<Self, QuotaError> {
        Self::with_clock(quota, QuantaClock::new())
    }
}

impl<C: Clock> SlidingLog<C> {
    /// The most requests one log remembers.
    pub const MAX_LIMIT: u32 = 1 << 16;
    /// The shortest window: 1 µs.
    pub const MIN_WINDOW_NANOS: u64 = 1_000;

    /// A log for `quota` (`count` per `period`, no separate burst) on `clock`, starting as
    /// [`Quota::initial`] says.
    ///
    /// # Errors
    /// [`QuotaError::BurstNotSupported`], [`QuotaError::LimitTooLarge`] or
    /// [`QuotaError::WindowTooShort`].
    pub fn with_clock(quota: Quota, clock: C) -> Result<Self, QuotaError> {
        crate::algorithm::window::no_burst(&quota)?;
        let window = crate::algorithm::window::window_length(
            &quota,
            Self::MAX_LIMIT,
            Self::MIN_WINDOW_NANOS,
        )?;
        let limit = quota.count();
        let log = Self {
            // Request `limit` is the first: the ring holds "lap 0" as its previous lap.
            cursor: AtomicU64::new(u64::from(limit)),
            slots: (0..limit).map(|_| AtomicU64::new(0)).collect(),
            window,
            limit,
            quota,
            clock,
        };
        log.reset();
        Ok(log)
    }

    /// The quota this log enforces.
    pub fn quota(&self) -> &Quota {
        &self.quota
    }

    /// The log's clock, whose readings the `*_at` methods expect.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// The most requests the log admits in one window: the largest `n` that can succeed.
    pub fn capacity(&self) -> u32 {
        self.limit
    }

    /// Bytes this log occupies, its ring included.
    pub fn memory_bytes(&self) -> usize {
        core::mem::size_of::<Self>() + self.slots.len() * core::mem::size_of::<AtomicU64>()
    }

    /// The place of request `seq`.
    #[inline(always)]
    fn place(&self, seq: u64) -> Place {
        let limit = u64::from(self.limit);
        Place {
            seq,
            lap: seq / limit,
            index: (seq % limit) as usize,
        }
    }

    /// The place `k ≤ limit` requests after `p`.
    #[inline(always)]
    fn after(&self, p: Place, k: u32) -> Place {
        let index = p.index + k as usize;
        let limit = self.limit as usize;
        let seq = p.seq + u64::from(k);
        if index >= limit {
            Place {
                seq,
                lap: p.lap + 1,
                index: index - limit,
            }
        } else {
            Place {
                seq,
                lap: p.lap,
                index,
            }
        }
    }

    #[inline(always)]
    fn slot(&self, p: Place) -> &AtomicU64 {
        &self.slots[p.index]
    }

    /// Takes one cell if the window has room now.
    #[inline]
    pub fn check(&self) -> Result<Allowed, Refused> {
        self.check_at(self.clock.now())
    }

    /// Takes one cell if the window has room at `now` (a reading of this log's clock).
    #[inline]
    pub fn check_at(&self, now: u64) -> Result<Allowed, Refused> {
        self.take(1, now)
    }

    /// Takes `n` cells if the window has room for all of them now; otherwise takes nothing.
    /// `n = 0` is always allowed and takes nothing.
    ///
    /// # Errors
    /// The outer `Err` when `n` exceeds the limit (it can never succeed); the inner `Err` says
    /// when it can.
    pub fn check_n(&self, n: u32) -> Result<Result<Allowed, Refused>, InsufficientCapacity> {
        self.check_n_at(n, self.clock.now())
    }

    /// [`check_n`](Self::check_n) at `now` (a reading of this log's clock).
    ///
    /// # Errors
    /// As [`check_n`](Self::check_n).
    pub fn check_n_at(
        &self,
        n: u32,
        now: u64,
    ) -> Result<Result<Allowed, Refused>, InsufficientCapacity> {
        InsufficientCapacity::check(n, self.limit)?;
        if n == 0 {
            return Ok(Ok(Allowed::new(self.gauge(self.place(self.head()), now))));
        }
        Ok(self.take(n, now))
    }

    /// Takes `n` tokens if there is room; otherwise takes nothing and returns `false`.
    pub fn try_consume(&self, n: u32) -> bool {
        matches!(self.check_n(n), Ok(Ok(_)))
    }

    /// Cells available now.
    pub fn available(&self) -> u32 {
        self.gauge(self.place(self.head()), self.clock.now())
            .remaining()
    }

    /// Forgets past requests: the log starts over as [`Quota::initial`] says, as of now.
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

    /// The cursor: the sequence number of the next request.
    #[inline(always)]
    fn head(&self) -> u64 {
        // Acquire: pairs with the AcqRel advance, so the slots of every request before the
        // cursor read at least "pending" (their claim happened before the advance).
        self.cursor.load(Ordering::Acquire)
    }

    fn take(&self, n: u32, now: u64) -> Result<Allowed, Refused> {
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
    fn gauge(&self, head: Place, now: u64) -> Gauge {
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

    /// The window length.
    pub fn window(&self) -> Duration {
        Duration::from_nanos(self.window)
    }
}
