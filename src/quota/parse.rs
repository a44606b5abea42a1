//! The quota string grammar: `"100/s"`, `"5000/h"`, `"10/500ms"`, `"100/s burst 20"`, and, where
//! an algorithm is chosen with the quota (a policy's quotas, configuration files),
//! `"20000/day fixed"` or `"10/s burst 1 shaper 250ms"`.
//!
//! ```text
//! quota     = count "/" period [ option ] [ option ]    ; each option at most once
//! option    = "burst" count | "initial" count
//! spec      = quota [ algorithm ]                     ; a quota and its algorithm
//! algorithm = "gcra" | "leaky" | "shaper" period | "credit" period
//!           | window [ "utc" offset ]
//! window    = "interval" | "fixed" | "sliding"
//! offset    = ( "+" | "-" ) 1*2DIGIT [ ":" 2DIGIT ]  ; hours < 24, minutes < 60
//! period    = [ count ] unit
//! count   = 1*DIGIT                      ; a whole number, 0 ..= 4 294 967 295
//! unit    = "ns" | "us" | "µs" | "μs" | "ms"
//!         | "s" | "sec" | "secs" | "second" | "seconds"
//!         | "m" | "min" | "mins" | "minute" | "minutes"
//!         | "h" | "hr" | "hrs" | "hour" | "hours"
//!         | "d" | "day" | "days"
//! ```
//! Whitespace is allowed between all tokens and around the string; keywords and units are
//! case-insensitive, except that `M`, `Ms` and `MS` are rejected (month? mega?): write `min` or
//! `ms`. A day is 86 400 s. Semantic limits (no zero count, burst or period, at most
//! 10⁹/s, the 292-year window) are those of [`Quota`] and are reported as
//! [`ParseQuotaErrorKind::Invalid`]; an algorithm's own limits (a window counter has no
//! separate burst, …) as [`ParseQuotaErrorKind::InvalidFor`], naming the algorithm.
//!
//! The algorithms are those of [`crate::algorithm`]: `gcra` (the default when none is named),
//! `leaky` ([`LeakyBucket::meter`](crate::algorithm::LeakyBucket::meter)), `shaper` with its
//! maximum queueing delay, `credit` with its maximum debt, `interval`
//! ([`IntervalRefill`](crate::algorithm::IntervalRefill)), `fixed`
//! ([`FixedWindow`](crate::algorithm::FixedWindow)) and `sliding`
//! ([`SlidingWindow`](crate::algorithm::SlidingWindow)). A window counter's windows start at
//! the Unix epoch's boundaries (a daily window at midnight UTC) unless `utc` and an offset
//! follow its name: `"20000/day fixed utc+02:00"` starts each window at midnight in UTC+02:00
//! (see [`FixedWindow::with_utc_offset`](crate::algorithm::FixedWindow::with_utc_offset)).

use core::fmt;
use core::str::FromStr;

use super::error::{ParseQuotaError, ParseQuotaErrorKind};
use super::{Initial, Quota, QuotaError};

const UNITS: &[(&[&str], u64)] = &[
    (&["ns"], 1),
    (&["us", "µs", "μs"], 1_000),
    (&["ms"], 1_000_000),
    (&["s", "sec", "secs", "second", "seconds"], 1_000_000_000),
    (&["m", "min", "mins", "minute", "minutes"], 60_000_000_000),
    (&["h", "hr", "hrs", "hour", "hours"], 3_600_000_000_000),
    (&["d", "day", "days"], 86_400_000_000_000),
];

/// A cursor over the input that reports the byte offset of every error.
struct Cursor<'a> {
    input: &'a str,
    at: usize,
}

impl<'a> Cursor<'a> {
    fn rest(&self) -> &'a str {
        &self.input[self.at..]
    }

    fn skip_ws(&mut self) {
        let rest = self.rest();
        self.at += rest.len() - rest.trim_start().len();
    }

    fn error(&self, kind: ParseQuotaErrorKind) -> ParseQuotaError {
        ParseQuotaError::new(kind, self.at)
    }

    /// Takes the longest run of characters matching `pred`.
    fn take_while(&mut self, pred: impl Fn(char) -> bool) -> &'a str {
        let rest = self.rest();
        let len = rest.find(|c| !pred(c)).unwrap_or(rest.len());
        self.at += len;
        &rest[..len]
    }

    fn count(&mut self) -> Result<u32, ParseQuotaError> {
        self.skip_ws();
        let start = self.at;
        let digits = self.take_while(|c| c.is_ascii_digit());
        if digits.is_empty() {
            return Err(self.error(ParseQuotaErrorKind::ExpectedCount));
        }
        // Digits only, so the one possible failure is overflow.
        if self.rest().starts_with('.') {
            return Err(self.error(ParseQuotaErrorKind::Fraction));
        }
        digits
            .parse::<u32>()
            .map_err(|_| ParseQuotaError::new(ParseQuotaErrorKind::CountTooLarge, start))
    }

    fn keyword(&mut self, word: &str) -> bool {
        self.skip_ws();
        let rest = self.rest();
        let matches = rest
            .get(..word.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(word))
            && !rest[word.len()..].starts_with(|c: char| c.is_alphanumeric());
        if matches {
            self.at += word.len();
        }
        matches
    }

    fn period(&mut self) -> Result<u64, ParseQuotaError> {
        self.skip_ws();
        let start = self.at;
        let multiplier = if self.rest().starts_with(|c: char| c.is_ascii_digit()) {
            u64::from(self.count()?)
        } else {
            1
        };
        self.skip_ws();
        let unit_at = self.at;
        let word = self.take_while(char::is_alphabetic);
        let unit = UNITS
            .iter()
            // `M`, `Ms`, `MS`: month? mega? Only a lowercase `m` starts minutes or milliseconds.
            .filter(|_| !(word.starts_with('M') && word.len() <= 2))
            .find(|(names, _)| names.iter().any(|n| n.eq_ignore_ascii_case(word)))
            .map(|&(_, nanos)| nanos)
            .ok_or(ParseQuotaError::new(
                ParseQuotaErrorKind::UnknownUnit,
                unit_at,
            ))?;
        multiplier.checked_mul(unit).ok_or(ParseQuotaError::new(
            ParseQuotaErrorKind::PeriodTooLong,
            start,
        ))
    }
}

/// A duration in the period grammar (`"5ms"`, `"1 s"`, `"0ms"`), in nanoseconds: for settings
/// written beside quotas, such as a policy's jitter or a backend's timeout.
///
/// # Errors
/// A [`ParseQuotaError`] naming what is wrong and where.
pub fn parse_duration(s: &str) -> Result<u64, ParseQuotaError> {
    duration(s).map_err(ParseQuotaError::in_duration)
}

/// [`parse_duration`], its errors worded for quotas.
fn duration(s: &str) -> Result<u64, ParseQuotaError> {
    let mut cur = Cursor { input: s, at: 0 };
    cur.skip_ws();
    if cur.rest().is_empty() {
        return Err(cur.error(ParseQuotaErrorKind::Empty));
    }
    let nanos = cur.period()?;
    cur.skip_ws();
    if !cur.rest().is_empty() {
        return Err(cur.error(ParseQuotaErrorKind::TrailingInput));
    }
    Ok(nanos)
}

/// The algorithm a quota string names after its quota (see the grammar above), with its
/// setting in nanoseconds where it has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Named {
    Gcra,
    Leaky,
    Shaper(u64),
    Credit(u64),
    /// A window counter, with its UTC offset in minutes.
    Interval(i16),
    Fixed(i16),
    Sliding(i16),
}

impl Named {
    /// The algorithms' names, as written in the grammar.
    const NAMES: [&'static str; 7] = [
        "gcra", "leaky", "shaper", "credit", "interval", "fixed", "sliding",
    ];

    /// The name as written in the grammar.
    pub(crate) fn name(self) -> &'static str {
        let i = match self {
            Named::Gcra => 0,
            Named::Leaky => 1,
            Named::Shaper(_) => 2,
            Named::Credit(_) => 3,
            Named::Interval(_) => 4,
            Named::Fixed(_) => 5,
            Named::Sliding(_) => 6,
        };
        Self::NAMES[i]
    }

    /// A window counter's UTC offset in minutes (0 for the others).
    pub(crate) fn utc_offset(self) -> i16 {
        match self {
            Named::Interval(m) | Named::Fixed(m) | Named::Sliding(m) => m,
            _ => 0,
        }
    }
}

/// Writes a UTC offset of `minutes` as the grammar reads it (`utc+02:00`).
pub(crate) fn write_utc_offset(f: &mut fmt::Formatter<'_>, minutes: i16) -> fmt::Result {
    let sign = if minutes < 0 { '-' } else { '+' };
    let (hours, minutes) = (minutes.unsigned_abs() / 60, minutes.unsigned_abs() % 60);
    write!(f, "utc{sign}{hours:02}:{minutes:02}")
}

/// A parsed `spec`: the quota, and the algorithm named after it (if any) with its position.
pub(crate) struct Spec {
    pub(crate) quota: Quota,
    pub(crate) algorithm: Option<(Named, usize)>,
}

/// Parses the `spec` rule of the grammar.
pub(crate) fn parse_spec(s: &str) -> Result<Spec, ParseQuotaError> {
    let mut cur = Cursor { input: s, at: 0 };
    let quota = cur.quota()?;
    cur.skip_ws();
    let at = cur.at;
    let algorithm = if cur.rest().is_empty() {
        None
    } else {
        Some((cur.algorithm()?, at))
    };
    cur.skip_ws();
    if !cur.rest().is_empty() {
        return Err(cur.error(ParseQuotaErrorKind::TrailingInput));
    }
    Ok(Spec { quota, algorithm })
}

impl<'a> Cursor<'a> {
    /// The `quota` rule, up to whatever follows it.
    fn quota(&mut self) -> Result<Quota, ParseQuotaError> {
        self.skip_ws();
        if self.rest().is_empty() {
            return Err(self.error(ParseQuotaErrorKind::Empty));
        }
        let count = self.count()?;
        self.skip_ws();
        if !self.rest().starts_with('/') {
            return Err(self.error(ParseQuotaErrorKind::ExpectedSlash));
        }
        self.at += 1;
        let period = self.period()?;
        let invalid = |position: usize| {
            move |e: QuotaError| ParseQuotaError::new(ParseQuotaErrorKind::Invalid(e), position)
        };
        let mut quota = Quota::from_nanos(count, period).map_err(invalid(0))?;
        let (mut burst, mut initial) = (None, None);
        loop {
            let slot = if burst.is_none() && self.keyword("burst") {
                &mut burst
            } else if initial.is_none() && self.keyword("initial") {
                &mut initial
            } else {
                break;
            };
            self.skip_ws();
            *slot = Some((self.at, self.count()?));
        }
        if let Some((at, burst)) = burst {
            quota = quota.with_burst(burst).map_err(invalid(at))?;
        }
        if let Some((at, cells)) = initial {
            quota = quota
                .with_initial(Initial::Cells(cells))
                .map_err(invalid(at))?;
        }
        Ok(quota)
    }

    /// The `algorithm` rule.
    fn algorithm(&mut self) -> Result<Named, ParseQuotaError> {
        let at = self.at;
        let word = self.take_while(char::is_alphabetic);
        let Some(i) = Named::NAMES
            .iter()
            .position(|name| name.eq_ignore_ascii_case(word))
        else {
            self.at = at;
            // `burst` or `initial` again: the quota's own words, said twice.
            let again = ["burst", "initial"]
                .iter()
                .any(|w| w.eq_ignore_ascii_case(word));
            let kind = if again {
                ParseQuotaErrorKind::TrailingInput
            } else {
                ParseQuotaErrorKind::UnknownAlgorithm
            };
            return Err(self.error(kind));
        };
        Ok(match i {
            0 => Named::Gcra,
            1 => Named::Leaky,
            2 => Named::Shaper(self.period()?),
            3 => Named::Credit(self.period()?),
            4 => Named::Interval(self.utc_offset()?),
            5 => Named::Fixed(self.utc_offset()?),
            _ => Named::Sliding(self.utc_offset()?),
        })
    }

    /// A window counter's optional `"utc" offset`, in minutes (0 without one).
    fn utc_offset(&mut self) -> Result<i16, ParseQuotaError> {
        if !self.keyword("utc") {
            return Ok(0);
        }
        self.skip_ws();
        let at = self.at;
        let sign = match self.rest().chars().next() {
            Some('+') => 1,
            Some('-') => -1,
            _ => return Err(self.error(ParseQuotaErrorKind::ExpectedUtcOffset)),
        };
        self.at += 1;
        let number = |cur: &mut Self| {
            let digits = cur.take_while(|c| c.is_ascii_digit());
            // At most two digits: the parse cannot fail.
            (1..=2)
                .contains(&digits.len())
                .then(|| digits.parse::<i16>().unwrap_or(0))
        };
        let hours = number(self);
        let minutes = if self.rest().starts_with(':') {
            self.at += 1;
            number(self)
        } else {
            Some(0)
        };
        match (hours, minutes) {
            (Some(h @ 0..=23), Some(m @ 0..=59)) => Ok(sign * (h * 60 + m)),
            _ => Err(ParseQuotaError::new(
                ParseQuotaErrorKind::ExpectedUtcOffset,
                at,
            )),
        }
    }
}

impl FromStr for Quota {
    type Err = ParseQuotaError;

    /// Parses the grammar of the [`quota` module](crate::quota):
    /// `"100/s"`, `"5000/h"`, `"20000/day"`, `"10/500ms"`, `"100/s burst 20"`,
    /// `"60/min burst 10 initial 0"`. An algorithm's name after the quota is an error
    /// ([`ParseQuotaErrorKind::AlgorithmNotExpected`]): see
    /// [`AnyAlgorithm`](crate::algorithm::AnyAlgorithm), which reads one.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut cur = Cursor { input: s, at: 0 };
        let quota = cur.quota()?;
        cur.skip_ws();
        if cur.rest().is_empty() {
            return Ok(quota);
        }
        let at = cur.at;
        let kind = match cur.algorithm() {
            Ok(_) => ParseQuotaErrorKind::AlgorithmNotExpected,
            Err(_) => ParseQuotaErrorKind::TrailingInput,
        };
        Err(ParseQuotaError::new(kind, at))
    }
}

/// Writes `nanos` as `[multiplier]unit` with the largest unit that divides it exactly (a period:
/// `s` for one second).
pub(crate) fn write_period(f: &mut fmt::Formatter<'_>, nanos: u64) -> fmt::Result {
    match unit_of(nanos) {
        (name, 1) => f.write_str(name),
        (name, n) => write!(f, "{n}{name}"),
    }
}

/// Writes `nanos` as `count unit` with the largest unit that divides it exactly (a duration:
/// `1s`, `250ms`, `0ns`).
pub(crate) fn write_duration(f: &mut fmt::Formatter<'_>, nanos: u64) -> fmt::Result {
    let (name, n) = unit_of(nanos);
    write!(f, "{n}{name}")
}

/// The largest unit that divides `nanos` exactly, and how many of it.
fn unit_of(nanos: u64) -> (&'static str, u64) {
    let (name, unit) = [
        ("d", 86_400_000_000_000),
        ("h", 3_600_000_000_000),
        ("min", 60_000_000_000),
        ("s", 1_000_000_000),
        ("ms", 1_000_000),
        ("us", 1_000),
        ("ns", 1),
    ]
    .into_iter()
    .find(|&(_, unit)| nanos % unit == 0)
    .unwrap_or(("ns", 1));
    (name, nanos / unit)
}
