//! [`AnyAlgorithm`]: one of flowgate's one-word algorithms, chosen at run time: a policy's quota,
//! a line of a configuration file.

use core::fmt;
use core::str::FromStr;
use core::time::Duration;

use super::{
    Algorithm, Credit, FixedWindow, Gcra, IntervalRefill, LeakyBucket, SlidingWindow, Step,
};
use crate::outcome::{Allowed, Refused};
use crate::quota::{
    parse_spec, write_duration, write_utc_offset, Named, ParseQuotaError, ParseQuotaErrorKind,
    Quota, QuotaError,
};

/// One of flowgate's one-word algorithms, chosen at run time: what a policy's quota is (see
/// [`Policy::quota_with`](crate::Policy::quota_with)), and what a quota string with an algorithm
/// name parses into.
///
/// ```
/// use flowgate::algorithm::{AnyAlgorithm, FixedWindow};
/// use flowgate::Algorithm;
///
/// let daily: AnyAlgorithm = "20000/day fixed".parse()?;
/// assert_eq!(daily, AnyAlgorithm::from(FixedWindow::new(&"20000/day".parse()?)?));
/// assert_eq!(daily.to_string(), "20000/d fixed");
/// let gcra: AnyAlgorithm = "200/10s".parse()?; // no name: GCRA
/// assert_eq!(gcra.name(), "gcra");
/// assert_eq!(gcra.capacity(), 200);
///
/// let err = "100/min burst 20 fixed".parse::<AnyAlgorithm>().unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "algorithm `fixed`: invalid quota for this algorithm: a window counter has no separate \
///      burst (burst must equal the count)"
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AnyAlgorithm {
    /// [`Gcra`], the default.
    Gcra(Gcra),
    /// A [`LeakyBucket`], meter or shaper.
    LeakyBucket(LeakyBucket),
    /// [`Credit`].
    Credit(Credit),
    /// [`IntervalRefill`].
    IntervalRefill(IntervalRefill),
    /// [`FixedWindow`].
    FixedWindow(FixedWindow),
    /// [`SlidingWindow`].
    SlidingWindow(SlidingWindow),
}

/// Calls `$f` on the algorithm inside `$any`, whatever its kind: `$f` runs monomorphized for
/// each, the algorithm's own code inlined as in a limiter of that algorithm (what a policy
/// set's decision does with each quota).
macro_rules! each {
    ($any:expr, $a:ident => $f:expr) => {
        match $any {
            $crate::algorithm::AnyAlgorithm::Gcra($a) => $f,
            $crate::algorithm::AnyAlgorithm::LeakyBucket($a) => $f,
            $crate::algorithm::AnyAlgorithm::Credit($a) => $f,
            $crate::algorithm::AnyAlgorithm::IntervalRefill($a) => $f,
            $crate::algorithm::AnyAlgorithm::FixedWindow($a) => $f,
            $crate::algorithm::AnyAlgorithm::SlidingWindow($a) => $f,
        }
    };
}
pub(crate) use each;

impl AnyAlgorithm {
    /// The algorithm's name in the quota grammar: `gcra`, `leaky`, `shaper`, `credit`,
    /// `interval`, `fixed` or `sliding`.
    pub fn name(&self) -> &'static str {
        self.named().name()
    }

    fn named(&self) -> Named {
        match self {
            Self::Gcra(_) => Named::Gcra,
            Self::LeakyBucket(a) if a.max_delay().is_zero() => Named::Leaky,
            Self::LeakyBucket(a) => Named::Shaper(a.schedule.slack()),
            Self::Credit(a) => Named::Credit(a.schedule.slack()),
            Self::IntervalRefill(a) => Named::Interval(a.utc_offset()),
            Self::FixedWindow(a) => Named::Fixed(a.utc_offset()),
            Self::SlidingWindow(a) => Named::Sliding(a.utc_offset()),
        }
    }

    /// The algorithm `named` enforcing `quota`.
    fn build(named: Named, quota: &Quota) -> Result<Self, QuotaError> {
        let nanos = Duration::from_nanos;
        Ok(match named {
            Named::Gcra => Self::Gcra(Gcra::new(quota)),
            Named::Leaky => Self::LeakyBucket(LeakyBucket::meter(quota)),
            Named::Shaper(delay) => Self::LeakyBucket(LeakyBucket::shaper(quota, nanos(delay))?),
            Named::Credit(debt) => Self::Credit(Credit::new(quota, nanos(debt))?),
            Named::Interval(m) => {
                Self::IntervalRefill(IntervalRefill::new(quota)?.with_utc_offset(m)?)
            }
            Named::Fixed(m) => Self::FixedWindow(FixedWindow::new(quota)?.with_utc_offset(m)?),
            Named::Sliding(m) => {
                Self::SlidingWindow(SlidingWindow::new(quota)?.with_utc_offset(m)?)
            }
        })
    }

    /// The same algorithm, with the same settings (a shaper's delay, a credit's debt, a window
    /// counter's UTC offset), enforcing
    /// `quota` instead.
    ///
    /// # Errors
    /// The [`QuotaError`] of an algorithm that rejects `quota` (a window counter given a
    /// separate burst, …).
    pub fn with_quota(&self, quota: &Quota) -> Result<Self, QuotaError> {
        Self::build(self.named(), quota)
    }

    /// A window counter's window length in ns (0 for the others).
    fn window(&self) -> u64 {
        match self {
            Self::IntervalRefill(a) => a.stepped.window(),
            Self::FixedWindow(a) => a.stepped.window(),
            Self::SlidingWindow(a) => a.window(),
            Self::Gcra(_) | Self::LeakyBucket(_) | Self::Credit(_) => 0,
        }
    }

    /// Whether a bucket written by `self` means the same to `other`, so that `other` can take
    /// over `self`'s buckets: both keep a theoretical arrival time (GCRA, the leaky bucket,
    /// credit), or both count in windows of the same length and UTC offset (the interval refill
    /// and the fixed window; the sliding window with itself). A stored window index means
    /// another window under another offset: taken over, a count could start again early.
    pub fn reads_buckets_of(&self, other: &Self) -> bool {
        use AnyAlgorithm as A;
        match (self, other) {
            (A::Gcra(_) | A::LeakyBucket(_) | A::Credit(_), b) => {
                matches!(b, A::Gcra(_) | A::LeakyBucket(_) | A::Credit(_))
            }
            (
                A::IntervalRefill(_) | A::FixedWindow(_),
                A::IntervalRefill(_) | A::FixedWindow(_),
            )
            | (A::SlidingWindow(_), A::SlidingWindow(_)) => {
                self.window() == other.window()
                    && self.named().utc_offset() == other.named().utc_offset()
            }
            _ => false,
        }
    }
}

impl Algorithm for AnyAlgorithm {
    fn quota(&self) -> &Quota {
        each!(self, a => a.quota())
    }

    #[inline(always)]
    fn capacity(&self) -> u32 {
        each!(self, a => a.capacity())
    }

    fn initial_word(&self, now: u64) -> u64 {
        each!(self, a => a.initial_word(now))
    }

    #[inline(always)]
    fn check(&self, word: u64, now: u64, n: u32) -> Step<Result<Allowed, Refused>> {
        each!(self, a => a.check(word, now, n))
    }

    #[inline(always)]
    fn take(&self, word: u64, now: u64, n: u32) -> Step<Option<u64>> {
        each!(self, a => a.take(word, now, n))
    }

    #[inline]
    fn peek(&self, word: u64, now: u64, n: u32) -> Result<Allowed, Refused> {
        each!(self, a => a.peek(word, now, n))
    }

    #[inline]
    fn state(&self, word: u64, now: u64) -> Allowed {
        each!(self, a => a.state(word, now))
    }

    #[inline]
    fn is_idle(&self, word: u64, now: u64) -> bool {
        each!(self, a => a.is_idle(word, now))
    }

    #[inline]
    fn max_delay_nanos(&self) -> u64 {
        each!(self, a => a.max_delay_nanos())
    }

    #[inline]
    fn catch_up(&self, word: u64, fresh: u64, skew: u64) -> Option<u64> {
        each!(self, a => a.catch_up(word, fresh, skew))
    }
}

macro_rules! from {
    ($($variant:ident),*) => {
        $(impl From<$variant> for AnyAlgorithm {
            fn from(algorithm: $variant) -> Self {
                Self::$variant(algorithm)
            }
        })*
    };
}
from!(
    Gcra,
    LeakyBucket,
    Credit,
    IntervalRefill,
    FixedWindow,
    SlidingWindow
);

/// A quota alone is GCRA.
impl From<Quota> for AnyAlgorithm {
    fn from(quota: Quota) -> Self {
        Self::Gcra(Gcra::new(&quota))
    }
}

impl FromStr for AnyAlgorithm {
    type Err = ParseQuotaError;

    /// Parses a quota and, after it, the algorithm's name (GCRA if none): `"200/10s"`,
    /// `"20000/day fixed"`, `"20000/day fixed utc+02:00"`, `"100/min sliding"`,
    /// `"10/s burst 1 shaper 250ms"`, `"10/s credit 1s"`; see the [`quota` module](crate::quota)
    /// for the grammar.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let spec = parse_spec(s)?;
        let (named, at) = spec.algorithm.unwrap_or((Named::Gcra, 0));
        Self::build(named, &spec.quota).map_err(|error| {
            ParseQuotaError::new(
                ParseQuotaErrorKind::InvalidFor {
                    algorithm: named.name(),
                    error,
                },
                at,
            )
        })
    }
}

impl fmt::Display for AnyAlgorithm {
    /// Writes the algorithm in the grammar [`from_str`](#impl-FromStr-for-AnyAlgorithm) reads
    /// (GCRA without a name).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.quota())?;
        match self.named() {
            Named::Gcra => Ok(()),
            Named::Shaper(nanos) | Named::Credit(nanos) => {
                write!(f, " {} ", self.name())?;
                write_duration(f, nanos)
            }
            Named::Interval(0) | Named::Fixed(0) | Named::Sliding(0) | Named::Leaky => {
                write!(f, " {}", self.name())
            }
            named => {
                write!(f, " {} ", self.name())?;
                write_utc_offset(f, named.utc_offset())
            }
        }
    }
}

#[cfg(all(test, not(flowgate_loom)))]
mod tests {
    use super::*;

    #[test]
    fn every_algorithm_survives_text() {
        for text in [
            "200/10s",
            "5000/h burst 7 initial 3",
            "100/s leaky",
            "10/s burst 1 shaper 250ms",
            "10/s credit 1s",
            "5/s burst 10 interval",
            "5/s burst 10 interval utc-00:30",
            "20000/d fixed",
            "20000/d fixed utc+02:00",
            "100/min sliding",
            "100/min sliding utc-23:59",
        ] {
            let algorithm: AnyAlgorithm = text.parse().unwrap();
            assert_eq!(algorithm.to_string(), text);
            assert_eq!(algorithm.with_quota(algorithm.quota()).unwrap(), algorithm);
        }
    }

    #[test]
    fn bad_algorithms_are_named() {
        let err = "10/s bucket".parse::<AnyAlgorithm>().unwrap_err();
        assert_eq!(err.kind(), ParseQuotaErrorKind::UnknownAlgorithm);
        assert_eq!(err.position(), 5);
        let err = "10/s sliding burst 2".parse::<AnyAlgorithm>().unwrap_err();
        assert_eq!(err.kind(), ParseQuotaErrorKind::TrailingInput);
        let err = "10/s shaper".parse::<AnyAlgorithm>().unwrap_err();
        assert_eq!(err.kind(), ParseQuotaErrorKind::UnknownUnit);
        let err = "10/h fixed".parse::<Quota>().unwrap_err();
        assert_eq!(err.kind(), ParseQuotaErrorKind::AlgorithmNotExpected);
        assert!(err.to_string().contains("where the quota is used"));
        for (text, at) in [
            ("10/s fixed utc", 14),
            ("10/s fixed utc+24", 14),
            ("10/s fixed utc-2:60", 14),
            ("10/s fixed utc+123", 14),
            ("10/s sliding UTC 2", 17),
        ] {
            let err = text.parse::<AnyAlgorithm>().unwrap_err();
            assert_eq!(err.kind(), ParseQuotaErrorKind::ExpectedUtcOffset, "{text}");
            assert_eq!(err.position(), at, "{text}");
        }
        let err = "10/s gcra utc+02:00".parse::<AnyAlgorithm>().unwrap_err();
        assert_eq!(err.kind(), ParseQuotaErrorKind::TrailingInput);
        let any = |s: &str| s.parse::<AnyAlgorithm>().unwrap().to_string();
        assert_eq!(any("1/d fixed UTC -5"), "1/d fixed utc-05:00");
        assert_eq!(any("1/d interval utc+00:00"), "1/d interval");
    }

    #[test]
    fn only_the_same_word_layout_takes_buckets_over() {
        let any = |s: &str| s.parse::<AnyAlgorithm>().unwrap();
        assert!(any("10/s").reads_buckets_of(&any("10/s burst 1 shaper 1s")));
        assert!(any("10/s fixed").reads_buckets_of(&any("20/s burst 30 interval")));
        assert!(!any("10/s fixed").reads_buckets_of(&any("10/min fixed")));
        let daily = any("20000/day fixed");
        assert!(daily.reads_buckets_of(&any("20000/day fixed utc+00:00")));
        assert!(!daily.reads_buckets_of(&any("20000/day fixed utc+02:00")));
        assert!(!any("10/min sliding").reads_buckets_of(&any("10/min sliding utc-01:00")));
        assert!(!any("10/s fixed").reads_buckets_of(&any("10/s sliding")));
        assert!(!any("10/s").reads_buckets_of(&any("10/s fixed")));
    }
}
