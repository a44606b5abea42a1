//! Traces from CSV: one request per line, `time,key,cost`.
//!
//! * `time`: seconds from the start of the trace, a decimal number (`12`, `12.5`, `0.001`);
//! * `key`: any text without a comma (surrounding spaces are trimmed);
//! * `cost`: the cells the request takes, a whole number from 1 (optional: 1).
//!
//! Blank lines and lines starting with `#` are skipped, and so is a first line that reads
//! `time,key,cost` or `time,key`. Lines need not be in time order. A malformed line is an
//! error naming the line and what is wrong, never a panic.

use std::fmt;
use std::time::Duration;

use super::Request;

/// A line of a trace that is not a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceError {
    /// The line, counted from 1.
    pub line: usize,
    /// What is wrong with it.
    pub problem: &'static str,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "trace line {}: {}", self.line, self.problem)
    }
}

impl core::error::Error for TraceError {}

/// The requests of a CSV trace.
///
/// # Errors
/// The first line that is not a request (see the module docs).
///
/// ```
/// use std::time::Duration;
/// use flowgate::simulate::trace;
///
/// let requests = trace::parse("time,key,cost\n0.5,alice,2\n# a note\n0.25,bob\n")?;
/// assert_eq!(requests.len(), 2);
/// assert_eq!((requests[0].at, requests[0].cost), (Duration::from_millis(500), 2));
/// assert_eq!((requests[1].key.as_str(), requests[1].cost), ("bob", 1));
/// assert_eq!(trace::parse("1,alice,0").unwrap_err().to_string(), "trace line 1: the cost must be a whole number from 1");
/// # Ok::<(), trace::TraceError>(())
/// ```
pub fn parse(text: &str) -> Result<Vec<Request>, TraceError> {
    let mut requests = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let header = line.replace(' ', "");
        if index == 0 && (header == "time,key,cost" || header == "time,key") {
            continue;
        }
        let fail = |problem| TraceError {
            line: index + 1,
            problem,
        };
        let mut fields = line.split(',').map(str::trim);
        let (Some(time), Some(key)) = (fields.next(), fields.next()) else {
            return Err(fail("expected time,key[,cost]"));
        };
        let cost = match fields.next() {
            None => 1,
            Some(cost) => cost
                .parse::<u32>()
                .ok()
                .filter(|&c| c >= 1)
                .ok_or_else(|| fail("the cost must be a whole number from 1"))?,
        };
        if fields.next().is_some() {
            return Err(fail("more than three fields (a key may not hold a comma)"));
        }
        if key.is_empty() {
            return Err(fail("the key is empty"));
        }
        let seconds = time
            .parse::<f64>()
            .map_err(|_| fail("the time is not a number of seconds"))?;
        let at = Duration::try_from_secs_f64(seconds)
            .map_err(|_| fail("the time must be a finite number of seconds from 0"))?;
        requests.push(Request::new(at, key, cost));
    }
    Ok(requests)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_lines_are_errors_naming_the_line() {
        for (text, line, problem) in [
            ("0,a\nx,b", 2, "the time is not a number of seconds"),
            (
                "-1,a",
                1,
                "the time must be a finite number of seconds from 0",
            ),
            (
                "NaN,a",
                1,
                "the time must be a finite number of seconds from 0",
            ),
            (
                "inf,a",
                1,
                "the time must be a finite number of seconds from 0",
            ),
            (
                "1e300,a",
                1,
                "the time must be a finite number of seconds from 0",
            ),
            ("1", 1, "expected time,key[,cost]"),
            ("1, ,2", 1, "the key is empty"),
            (
                "1,a,2,3",
                1,
                "more than three fields (a key may not hold a comma)",
            ),
            ("1,a,-2", 1, "the cost must be a whole number from 1"),
            (
                "1,a,99999999999",
                1,
                "the cost must be a whole number from 1",
            ),
        ] {
            assert_eq!(parse(text), Err(TraceError { line, problem }), "{text}");
        }
    }

    #[test]
    fn a_header_is_only_skipped_on_the_first_line() {
        assert!(parse("time,key\n1,a").is_ok());
        assert_eq!(parse("1,a\ntime,key").unwrap_err().line, 2);
        assert_eq!(parse("").unwrap(), Vec::new());
    }
}
