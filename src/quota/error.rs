//! [`QuotaError`] (a quota that cannot be) and [`ParseQuotaError`] (a quota string that cannot be
//! read), with what each says of the mistake.

use core::fmt;

/// Why a quota is invalid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum QuotaError {
    /// The rate's count is 0: nothing could ever be admitted.
    ZeroCount,
    /// The period is zero.
    ZeroPeriod,
    /// The burst is 0: nothing could ever be admitted.
    ZeroBurst,
    /// The rate is above one cell per nanosecond (10⁹/s), the finest interval a bucket holds.
    IntervalBelowOneNanosecond,
    /// The period (or the interval of a fractional rate) does not fit in 584 years of
    /// nanoseconds.
    PeriodTooLong,
    /// `burst × interval` exceeds [`MAX_WINDOW_NANOS`](super::Quota::MAX_WINDOW_NANOS) (about 292 years); `max_burst` is the
    /// largest burst this rate accepts.
    WindowTooLong {
        /// The largest burst the quota's interval allows.
        max_burst: u64,
    },
    /// The initial number of cells exceeds the burst.
    InitialAboveBurst {
        /// The requested initial cells.
        initial: u32,
        /// The quota's burst.
        burst: u32,
    },
    /// A fractional rate is NaN or infinite.
    NotFinite,
    /// A fractional rate is negative or zero.
    NotPositive,
    /// The algorithm counts requests in a packed field that holds at most `max` per window.
    LimitTooLarge {
        /// The largest count the algorithm's word holds.
        max: u32,
    },
    /// The algorithm's window is shorter than it supports (`min_nanos`).
    WindowTooShort {
        /// The shortest window the algorithm accepts, in nanoseconds.
        min_nanos: u64,
    },
    /// The algorithm has no burst separate from its count per window: the quota's burst must
    /// equal its count (write `"100/min"`, not `"100/min burst 20"`).
    BurstNotSupported,
    /// A shaper's maximum queueing delay (or a credit's maximum debt) exceeds `max_nanos`
    /// ([`MAX_WINDOW_NANOS`](super::Quota::MAX_WINDOW_NANOS)).
    DelayTooLong {
        /// The longest delay accepted, in nanoseconds.
        max_nanos: u64,
    },
    /// A window counter's UTC offset is a day or more either side of UTC.
    UtcOffsetOutOfRange,
}

impl fmt::Display for QuotaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ZeroCount => f.write_str("invalid quota: the rate's count is 0 (it must be at least 1)"),
            Self::ZeroPeriod => f.write_str("invalid quota: the period is zero"),
            Self::ZeroBurst => f.write_str("invalid quota: the burst is 0 (it must be at least 1)"),
            Self::IntervalBelowOneNanosecond => f.write_str(
                "invalid quota: the rate is above 10^9 per second (an emission interval below 1 ns)",
            ),
            Self::PeriodTooLong => f.write_str("invalid quota: the period is longer than 584 years"),
            Self::WindowTooLong { max_burst: 0 } => f.write_str(
                "invalid quota: the emission interval alone exceeds 292 years",
            ),
            Self::WindowTooLong { max_burst } => write!(
                f,
                "invalid quota: burst x interval exceeds 292 years; at this rate the burst can be at most {max_burst}"
            ),
            Self::InitialAboveBurst { initial, burst } => write!(
                f,
                "invalid quota: {initial} initial cells exceed the burst of {burst}"
            ),
            Self::NotFinite => f.write_str("invalid quota: the rate is NaN or infinite"),
            Self::NotPositive => f.write_str("invalid quota: the rate is zero or negative"),
            Self::LimitTooLarge { max } => write!(
                f,
                "invalid quota for this algorithm: at most {max} requests per window"
            ),
            Self::WindowTooShort { min_nanos } => write!(
                f,
                "invalid quota for this algorithm: the window must be at least {min_nanos} ns"
            ),
            Self::BurstNotSupported => f.write_str(
                "invalid quota for this algorithm: a window counter has no separate burst (burst must equal the count)",
            ),
            Self::DelayTooLong { max_nanos } => write!(
                f,
                "invalid limiter: the maximum delay must be at most {max_nanos} ns (292 years)"
            ),
            Self::UtcOffsetOutOfRange => f.write_str(
                "invalid limiter: a UTC offset must be less than a day either side of UTC",
            ),
        }
    }
}

impl core::error::Error for QuotaError {}

/// Why a quota string was rejected, and where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseQuotaError {
    kind: ParseQuotaErrorKind,
    position: usize,
    /// Whether the string was read as a duration ([`parse_duration`](super::parse_duration)),
    /// not a quota: the message says so.
    duration: bool,
}

/// The kinds of [`ParseQuotaError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParseQuotaErrorKind {
    /// The string is empty or only whitespace.
    Empty,
    /// A whole number was expected (a sign, a decimal point or a letter was found).
    ExpectedCount,
    /// A number with a decimal point (`1.5h`, `2.5/s`): counts are whole (`90m`, `5/2s`).
    Fraction,
    /// The number is above 4 294 967 295.
    CountTooLarge,
    /// The `/` between count and period is missing.
    ExpectedSlash,
    /// The period has no unit, or an unknown one.
    UnknownUnit,
    /// The period does not fit in 584 years of nanoseconds.
    PeriodTooLong,
    /// Text after the quota that is not `burst N` or `initial N` (each at most once), or, where
    /// an algorithm may follow, the algorithm and its setting.
    TrailingInput,
    /// The string is well formed but the quota is invalid.
    Invalid(QuotaError),
    /// A word where an algorithm's name was expected that names none.
    UnknownAlgorithm,
    /// `utc` after a window counter's name without a valid offset after it: a sign, hours
    /// below 24 and optionally `:` and minutes below 60 (`utc+02:00`, `utc-5`).
    ExpectedUtcOffset,
    /// An algorithm's name where only a quota is read ([`Quota`](super::Quota)'s own parser: a
    /// quota is a rate and a burst; the algorithm is chosen where the quota is used).
    AlgorithmNotExpected,
    /// The quota is valid, but not for the algorithm named (`"100/min burst 20 fixed"`: a window
    /// counter has no separate burst).
    InvalidFor {
        /// The algorithm's name, as written in the grammar.
        algorithm: &'static str,
        /// What it rejects.
        error: QuotaError,
    },
}

impl ParseQuotaError {
    /// An error of `kind` at byte `position`.
    pub(crate) fn new(kind: ParseQuotaErrorKind, position: usize) -> Self {
        Self {
            kind,
            position,
            duration: false,
        }
    }

    /// The same error, of a string read as a duration.
    pub(super) fn in_duration(self) -> Self {
        Self {
            duration: true,
            ..self
        }
    }

    /// What is wrong.
    pub fn kind(&self) -> ParseQuotaErrorKind {
        self.kind
    }

    /// The byte offset in the input where the problem was found.
    pub fn position(&self) -> usize {
        self.position
    }
}

impl fmt::Display for ParseQuotaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            ParseQuotaErrorKind::Invalid(e) => return write!(f, "{e}"),
            ParseQuotaErrorKind::InvalidFor { algorithm, error } => {
                return write!(f, "algorithm `{algorithm}`: {error}")
            }
            ParseQuotaErrorKind::UnknownAlgorithm => {
                "expected an algorithm: gcra, leaky, shaper DELAY, credit DEBT, interval, fixed or \
                 sliding"
            }
            ParseQuotaErrorKind::ExpectedUtcOffset => {
                "expected a UTC offset after `utc`: a sign, hours below 24 and optionally \
                 minutes (utc+02:00, utc-05:30)"
            }
            ParseQuotaErrorKind::AlgorithmNotExpected => {
                "a quota is a rate and a burst; the algorithm is chosen where the quota is used \
                 (a policy's quota, a configuration file)"
            }
            ParseQuotaErrorKind::Empty => "the string is empty",
            ParseQuotaErrorKind::ExpectedCount if self.duration => "expected a whole number",
            ParseQuotaErrorKind::ExpectedCount => "expected a whole number of cells",
            ParseQuotaErrorKind::Fraction if self.duration => {
                "expected a whole number, not a fraction (a smaller unit: `1500us` for `1.5ms`)"
            }
            ParseQuotaErrorKind::Fraction => {
                "expected a whole number, not a fraction (`90m` for `1.5h`, `5/2s` for `2.5/s`)"
            }
            ParseQuotaErrorKind::CountTooLarge => "the number is above 4294967295",
            ParseQuotaErrorKind::ExpectedSlash => "expected `/` between the count and the period",
            ParseQuotaErrorKind::UnknownUnit => {
                "expected a time unit (ns, us, ms, s, m or min, h, d or day)"
            }
            ParseQuotaErrorKind::PeriodTooLong => "the period is longer than 584 years",
            ParseQuotaErrorKind::TrailingInput if self.duration => {
                "unexpected text after the duration"
            }
            ParseQuotaErrorKind::TrailingInput => {
                "unexpected text (only `burst N` and `initial N` may follow the period, once each)"
            }
        };
        let of = if self.duration {
            "duration"
        } else {
            "quota string"
        };
        write!(f, "invalid {of} at byte {}: {what}", self.position)
    }
}

impl core::error::Error for ParseQuotaError {}

impl From<QuotaError> for ParseQuotaError {
    fn from(e: QuotaError) -> Self {
        Self::new(ParseQuotaErrorKind::Invalid(e), 0)
    }
}
