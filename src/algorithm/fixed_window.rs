//! [`FixedWindow`]: at most `limit` cells per window of fixed length, counted from the clock's
//! origin.

use super::stepped::Stepped;
use super::window::no_burst;
use crate::quota::{Quota, QuotaError};

/// A fixed window counter: at most `count` cells in each window of `period`, the windows
/// aligned on the clock's origin.
///
/// The simplest limiter, and the one with a known weakness: a client can spend one
/// window's limit at its end and the next window's at its start, so up to **2 × limit** pass in
/// a span just over one window long (see the boundary tests in `integration/tests/boundary.rs`).
///
/// | | |
/// |---|---|
/// | burst | the whole limit at once, at any point of a window |
/// | boundary effect | up to 2 × limit around a window edge |
/// | precision | exact count per window |
/// | bytes per bucket | 8 |
/// | cost per decision | one load, one CAS, one 64-bit division |
///
/// # Word layout
/// `index << 24 | count`: bits 63–24 hold the window's index (nanoseconds since the clock's
/// origin divided by the window length, modulo 2^40), bits 23–0 how many cells it has counted;
/// a word whose index is of an earlier window counts 0. A new bucket holds the index of its
/// creation window. With windows of at least 1 ms, a stored window is mistaken for the current
/// one only after 2^39 ms (17 years) of idleness, and then only conservatively (old cells still
/// counted). This is the layout of [`IntervalRefill`](super::IntervalRefill) with the whole
/// limit coming back at each boundary.
///
/// # Limits
/// At most 16 777 215 cells per window ([`QuotaError::LimitTooLarge`]), windows of at least
/// 1 ms ([`QuotaError::WindowTooShort`]), and no burst separate from the count
/// ([`QuotaError::BurstNotSupported`]).
///
/// # Stale readings and clock steps
/// A reading whose window is before the stored one (a stale reading, or a clock that stepped
/// back) is counted against the stored window: conservative, never an extra cell. If it is
/// refused there, the limiter re-checks with a fresh reading and, if the clock really is
/// behind, moves the count to the fresh reading's window: the lockout after a backward step is
/// at most one window. As for GCRA, a clock that then returns gives back at most one limit per
/// round trip.
///
/// ```
/// use flowgate::{algorithm::FixedWindow, clock::ManualClock, RateLimiter};
///
/// let clock = ManualClock::new();
/// let limiter = RateLimiter::with_algorithm(FixedWindow::new(&"3/s".parse()?)?, clock.clone());
/// assert_eq!((0..5).filter(|_| limiter.check().is_ok()).count(), 3);
/// clock.advance(std::time::Duration::from_secs(1)); // next window
/// assert!(limiter.check().is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedWindow {
    pub(super) stepped: Stepped,
}

impl FixedWindow {
    /// The most cells one window can count.
    pub const MAX_LIMIT: u32 = Stepped::MAX_BURST;
    /// The shortest window: 1 ms.
    pub const MIN_WINDOW_NANOS: u64 = Stepped::MIN_WINDOW_NANOS;

    /// `quota.count()` cells per `quota.period()`.
    ///
    /// # Errors
    /// [`QuotaError::BurstNotSupported`], [`QuotaError::LimitTooLarge`] or
    /// [`QuotaError::WindowTooShort`].
    pub fn new(quota: &Quota) -> Result<Self, QuotaError> {
        no_burst(quota)?;
        Ok(Self {
            stepped: Stepped::new(quota, quota.count())?,
        })
    }
}

super::delegate_algorithm!(FixedWindow, stepped);
