//! [`Gcra`], the generic cell rate algorithm: a token bucket whose whole state is one timestamp.
//!
//! The arithmetic (the word, overflow at the horizon, clock steps) is the TAT schedule's,
//! documented in `algorithm::schedule`; GCRA is that schedule with no slack: a request is
//! admitted at once or refused.

use super::schedule::Schedule;
use crate::quota::Quota;

/// GCRA for one quota: the default algorithm, a token bucket with lazy refill.
///
/// | | |
/// |---|---|
/// | burst | up to `burst` cells at once, then one per interval |
/// | boundary effect | none: no window edges |
/// | precision | exact to the nanosecond (interval rounded up) |
/// | bytes per bucket | 8 (the TAT) |
/// | cost per decision | one load, one CAS, no division |
///
/// # Word layout
/// The whole word is the **theoretical arrival time** (TAT): nanoseconds since the Unix epoch
/// at which the bucket is full again; `0` means full at every reading. The cells
/// available at `now` are `burst − ⌈(TAT − now) / T⌉`.
///
/// # Limits
/// Every valid [`Quota`] is a valid GCRA: `burst × interval ≤ 2⁶³ − 1` ns is checked there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gcra {
    pub(super) schedule: Schedule,
}

impl Gcra {
    /// GCRA for `quota`. Every valid quota is a valid GCRA.
    pub fn new(quota: &Quota) -> Self {
        Self {
            schedule: Schedule::gcra(quota),
        }
    }
}

super::delegate_algorithm!(Gcra, schedule, take_exact, check_exact);
