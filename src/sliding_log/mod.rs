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

mod queries;
mod ring;
mod slot;

use alloc::boxed::Box;

#[cfg(feature = "std")]
use crate::clock::QuantaClock;
use crate::clock::{Clock, DefaultClock};
use crate::outcome::{Allowed, InsufficientCapacity, Refused};
use crate::primitive::AtomicU64;
use crate::quota::{Quota, QuotaError};

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
/// assert!(log.check_n(3).is_ok_and(|r| r.is_ok()));
/// clock.set(Duration::from_millis(1_500).as_nanos() as u64);
/// // A fixed window would have reset at 1 s; the log still holds the three from 0.9 s.
/// let refused = log.check().unwrap_err();
/// assert_eq!(refused.retry_after(), Duration::from_millis(400));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct SlidingLog<C: Clock = DefaultClock> {
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

#[cfg(feature = "std")]
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

    /// The log's clock, which its decisions read.
    pub fn clock(&self) -> &C {
        &self.clock
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
    pub(crate) fn check_at(&self, now: u64) -> Result<Allowed, Refused> {
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
    pub(crate) fn check_n_at(
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
}
