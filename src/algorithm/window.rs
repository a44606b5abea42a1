//! Window arithmetic shared by the window counters: which window a reading falls in, and
//! where a stored window stands relative to it, with window indices kept modulo 2^`bits`.
//!
//! A word has no room for a full 64-bit window index, so counters store the index modulo
//! 2^`bits` and compare indices by their wrapping distance: a stored window 1 to 2^(`bits`−1)−1
//! windows behind the reading's is in the past, one up to 2^(`bits`−1) windows ahead is in the
//! future (the reading is stale, or the clock stepped back). With the minimum window
//! length each counter enforces, the ambiguity needs a bucket left idle for years.

/// Fixed-length windows of `length` ns, counted from the clock's origin, with indices modulo
/// 2^`bits`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Windows {
    length: u64,
    bits: u32,
}

/// Where a stored window stands relative to the window of a reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Position {
    /// The reading's own window.
    Current,
    /// `n ≥ 1` windows before the reading's.
    Past(u64),
    /// `n ≥ 1` windows after the reading's: a stale reading or a clock that stepped back.
    Ahead(u64),
}

impl Windows {
    pub(crate) const fn new(length: u64, bits: u32) -> Self {
        Self { length, bits }
    }

    #[inline(always)]
    fn mask(&self) -> u64 {
        (1 << self.bits) - 1
    }

    /// The index (modulo 2^bits) of the window `now` falls in, and how far into it `now` is.
    #[inline(always)]
    pub(crate) fn locate(&self, now: u64) -> (u64, u64) {
        ((now / self.length) & self.mask(), now % self.length)
    }

    /// Where the stored window `stored` stands relative to the window `index`.
    #[inline(always)]
    pub(crate) fn position(&self, stored: u64, index: u64) -> Position {
        let forward = index.wrapping_sub(stored) & self.mask();
        let half = 1 << (self.bits - 1);
        if forward == 0 {
            Position::Current
        } else if forward < half {
            Position::Past(forward)
        } else {
            Position::Ahead((stored.wrapping_sub(index)) & self.mask())
        }
    }

    /// Nanoseconds from a reading `offset` ns into its window to the end of the window `ahead`
    /// windows later (saturating).
    #[inline(always)]
    pub(crate) fn until_end(&self, offset: u64, ahead: u64) -> u64 {
        (self.length - offset).saturating_add(ahead.saturating_mul(self.length))
    }
}
