//! [`Why`]: a refusal's cause and its late-clock mark, packed in one word so that a refusal
//! has no invalid value for `Result<Allowed, Refused>` to hide its tag in.

use core::fmt;

use super::Cause;

/// Why a request was refused ([`Cause`]), and whether the bucket was booked more than a window
/// ahead of the reading (the clock stepped back, or the reading was stale: the limiter then
/// re-checks with a fresh reading), in one whole word.
///
/// A word and not a `Cause` and a `bool`: those two bytes would be the only invalid values in a
/// `Refused`, so `Result<Allowed, Refused>` would keep its tag in one of them, and a caller who
/// keeps the result would store it byte by byte, padding and all. With no invalid value the
/// tag is a word of its own, stored whole, which
/// `cargo bench -p flowgate-benches --bench paired_refused` measures (BENCHMARKS.md, "A direct
/// check").
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct Why(u64);

impl Why {
    /// A refusal by the quota, against a bucket the reading explains.
    pub(super) const QUOTA: Why = Why(0);
    /// The bit of a bucket booked further ahead than the reading explains.
    const BEHIND: u64 = 1 << 8;

    pub(super) const fn behind(self) -> Why {
        Why(self.0 | Self::BEHIND)
    }

    pub(super) const fn is_behind(self) -> bool {
        self.0 & Self::BEHIND != 0
    }

    pub(super) const fn because(self, cause: Cause) -> Why {
        let cause = match cause {
            Cause::Quota => 0,
            Cause::TableFull => 1,
            Cause::NewKeys => 2,
            Cause::Unavailable => 3,
            Cause::Rejected => 4,
        };
        Why(self.0 & Self::BEHIND | cause)
    }

    pub(super) const fn cause(self) -> Cause {
        match self.0 & 0xff {
            0 => Cause::Quota,
            1 => Cause::TableFull,
            2 => Cause::NewKeys,
            3 => Cause::Unavailable,
            _ => Cause::Rejected,
        }
    }
}

impl fmt::Debug for Why {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Why")
            .field("cause", &self.cause())
            .field("clock_behind", &self.is_behind())
            .finish()
    }
}
