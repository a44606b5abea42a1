//! A traffic simulator: replays requests through any algorithm or policy at the trace's own
//! times, faster than real time, and reports and draws what each one admitted.
//!
//! This module owns the replay and its results. Where the traffic comes from is a
//! [`Scenario`] (built-in patterns: steady, bursts, the fixed-window boundary attack, many keys
//! with a Zipf distribution) or a [`trace`] (a CSV file of `time,key,cost`); how the result is
//! drawn is [`Replay::svg`] (an SVG of offered against admitted cells over time, one small
//! panel per subject, all on the same scales, in a [`Style`]).
//!
//! Every built-in subject decides on a manual clock of its own, set to each request's time (a
//! `from_fn` subject is given that time), so no clock runs: a request at trace time `t` is
//! decided one day past the epoch, plus `t` (so that fixed windows of any length dividing a
//! day start with the trace). A shaper's admitted request proceeds after its delay, and is
//! drawn when it proceeds.
//!
//! ```
//! use std::time::Duration;
//! use flowgate::algorithm::FixedWindow;
//! use flowgate::simulate::{self, Scenario, Subject};
//! use flowgate::{Gcra, Quota};
//!
//! let quota = Quota::per_minute(120)?;
//! // 120 requests in the last 10 s of a minute and 120 in the first 10 s of the next.
//! let window = Duration::from_secs(60);
//! let trace = Scenario::Boundary { limit: 120, window }.requests();
//! let mut subjects: Vec<Box<dyn Subject>> = vec![
//!     simulate::algorithm("GCRA", Gcra::new(&quota)),
//!     simulate::algorithm("fixed window", FixedWindow::new(&quota)?),
//! ];
//! let replay = simulate::replay(&trace, &mut subjects, Duration::from_secs(1));
//! // The fixed window lets twice its limit through in 20 s; GCRA its burst, then its rate.
//! assert_eq!(replay.outcomes[1].peak(Duration::from_secs(60)), 240);
//! assert_eq!(replay.outcomes[0].admitted, 159);
//! print!("{}", replay.table(Duration::from_secs(60)));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod chart;
mod panel;
mod scenario;
mod subject;
pub mod trace;

use std::fmt;
use std::time::Duration;

pub use panel::Style;
pub use scenario::Scenario;
pub use subject::{algorithm, every_algorithm, from_fn, sliding_log, Subject};

/// The reading (ns) at which trace time zero is decided: one day, so that fixed windows of any
/// length dividing a day (a second, a minute, an hour) start with the trace.
const ORIGIN: u64 = 86_400 * 1_000_000_000;

/// Keys a built-in algorithm subject tracks at most (its keyed table's size, about 1.4 MB).
/// Past it, a new key is refused unless an idle one can be forgotten, as in a real table.
pub(crate) const MAX_KEYS: usize = 1 << 16;

/// One request of a trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// When it arrives, from the start of the trace.
    pub at: Duration,
    /// Whose it is (a user, an IP address).
    pub key: String,
    /// The cells it takes.
    pub cost: u32,
}

impl Request {
    /// A request of `cost` cells from `key` at `at`.
    pub fn new(at: Duration, key: impl Into<String>, cost: u32) -> Self {
        Self {
            at,
            key: key.into(),
            cost,
        }
    }
}

/// What a replay saw: the cells offered per bin, and what each subject admitted.
#[derive(Debug, Clone, PartialEq)]
pub struct Replay {
    /// When bin 0 starts: zero, or the first request's time rounded down to a whole bin (see
    /// [`replay`]).
    pub start: Duration,
    /// The width of a bin.
    pub bin: Duration,
    /// Cells offered in each bin (by arrival time).
    pub offered: Vec<u64>,
    /// Requests offered.
    pub requests: u64,
    /// One per subject, in the order given.
    pub outcomes: Vec<Outcome>,
}

/// What one subject admitted.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The subject's name.
    pub name: String,
    /// Requests admitted.
    pub admitted: u64,
    /// Cells admitted.
    pub admitted_cells: u64,
    /// Requests refused.
    pub refused: u64,
    /// Cells admitted in each bin, by the time they proceed (arrival plus delay).
    pub series: Vec<u64>,
    /// The longest delay a request was given (shapers).
    pub max_delay: Duration,
    bin: Duration,
}

impl Outcome {
    /// The most cells admitted in any span of `window`, at the bins' resolution (a span is a
    /// run of whole bins, `window` rounded up to a whole number of them).
    pub fn peak(&self, window: Duration) -> u64 {
        let bins = bins_in(window, self.bin).max(1);
        let mut sum: u64 = self.series.iter().take(bins).sum();
        let mut best = sum;
        for i in bins..self.series.len() {
            sum = sum + self.series[i] - self.series[i - bins];
            best = best.max(sum);
        }
        best
    }
}

/// Whole bins of `bin` covering `span` (at least one when `span` is not zero).
fn bins_in(span: Duration, bin: Duration) -> usize {
    let bin = bin.as_nanos().max(1);
    usize::try_from(span.as_nanos().div_ceil(bin)).unwrap_or(usize::MAX)
}

/// The most bins a replay counts in: a wider span widens its bins (see [`replay`]).
const MAX_BINS: usize = 100_000;

/// Replays `trace` (in any order: it is decided in time order, ties in trace order) through
/// every subject, counting cells in bins of `bin` (at least 1 ms).
///
/// There are at most 100 000 bins. They start at zero when the trace fits in that many,
/// and otherwise at the first request (its time rounded down to a whole bin:
/// [`Replay::start`]), so that a trace stamped with Unix times costs no more than one stamped
/// from zero; a trace whose span is still too long is counted in wider bins ([`Replay::bin`]
/// says which). A shaper's cells that proceed later than
/// the last bin are counted as admitted but not drawn. Requests are decided at
/// one day past the epoch plus their own time, whatever the bins.
pub fn replay(trace: &[Request], subjects: &mut [Box<dyn Subject>], bin: Duration) -> Replay {
    let mut order: Vec<&Request> = trace.iter().collect();
    order.sort_by_key(|r| r.at);
    let first = order.first().map_or(0, |r| r.at.as_nanos());
    let last = order.last().map_or(0, |r| r.at.as_nanos());
    let mut width = bin.max(Duration::from_millis(1)).as_nanos();
    let limit = MAX_BINS as u128 - 1;
    // From zero if that fits in MAX_BINS bins, else from the first request, with bins wide
    // enough for the trace's span.
    let start = if last / width <= limit {
        0
    } else {
        if (last - first) / width > limit {
            width = (last - first).div_ceil(limit);
        }
        first - first % width
    };
    // Bin of a time at or after the start; past MAX_BINS, none.
    let slot = |at: u128| {
        usize::try_from((at - start) / width)
            .ok()
            .filter(|&i| i < MAX_BINS)
    };
    let end = usize::try_from((last - start) / width).map_or(MAX_BINS, |i| i + 1);
    let end = if order.is_empty() {
        0
    } else {
        end.min(MAX_BINS)
    };
    let bin = nanos(width);
    let mut offered = vec![0u64; end];
    let mut outcomes: Vec<Outcome> = subjects
        .iter()
        .map(|s| Outcome {
            name: s.name().to_owned(),
            admitted: 0,
            admitted_cells: 0,
            refused: 0,
            series: vec![0; end],
            max_delay: Duration::ZERO,
            bin,
        })
        .collect();
    for request in &order {
        let at = request.at.as_nanos();
        if let Some(i) = slot(at) {
            offered[i] += u64::from(request.cost);
        }
        let now = ORIGIN.saturating_add(u64::try_from(at).unwrap_or(u64::MAX));
        for (subject, outcome) in subjects.iter_mut().zip(outcomes.iter_mut()) {
            match subject.decide(request, now) {
                Some(delay) => {
                    outcome.admitted += 1;
                    outcome.admitted_cells += u64::from(request.cost);
                    outcome.max_delay = outcome.max_delay.max(delay);
                    if let Some(i) = slot(at.saturating_add(delay.as_nanos())) {
                        if i >= outcome.series.len() {
                            outcome.series.resize(i + 1, 0);
                        }
                        outcome.series[i] += u64::from(request.cost);
                    }
                }
                None => outcome.refused += 1,
            }
        }
    }
    Replay {
        start: nanos(start),
        bin,
        offered,
        requests: order.len() as u64,
        outcomes,
    }
}

/// `n` ns as a `Duration` (saturating: at most `Duration::MAX`).
fn nanos(n: u128) -> Duration {
    let secs = u64::try_from(n / 1_000_000_000).unwrap_or(u64::MAX);
    // Below 10^9: fits.
    Duration::new(secs, (n % 1_000_000_000) as u32)
}

impl Replay {
    /// The summary table: per subject, requests admitted and refused, cells admitted, the most
    /// cells admitted in any span of `window`, and the longest delay.
    pub fn table(&self, window: Duration) -> impl fmt::Display + '_ {
        Table {
            replay: self,
            window,
        }
    }
}

/// [`Replay::table`], printable.
struct Table<'a> {
    replay: &'a Replay,
    window: Duration,
}

impl fmt::Display for Table<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let offered: u64 = self.replay.offered.iter().sum();
        let width = self
            .replay
            .outcomes
            .iter()
            .map(|o| o.name.chars().count())
            .max()
            .unwrap_or(0)
            .max("subject".len());
        let peak = format!("most in {:?}", self.window);
        writeln!(
            f,
            "{:<width$}  {:>9}  {:>9}  {:>9}  {:>14}  {:>10}",
            "subject", "admitted", "refused", "cells", peak, "max delay"
        )?;
        writeln!(
            f,
            "{:<width$}  {:>9}  {:>9}  {:>9}  {:>14}  {:>10}",
            "(offered)", self.replay.requests, "", offered, "", ""
        )?;
        for o in &self.replay.outcomes {
            writeln!(
                f,
                "{:<width$}  {:>9}  {:>9}  {:>9}  {:>14}  {:>10}",
                o.name,
                o.admitted,
                o.refused,
                o.admitted_cells,
                o.peak(self.window),
                format!("{:?}", o.max_delay)
            )?;
        }
        Ok(())
    }
}
