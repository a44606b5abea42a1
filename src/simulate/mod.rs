//! A traffic simulator: replays requests through any algorithm or policy at the trace's own
//! times, faster than real time, and reports and draws what each one admitted.
//!
//! This module owns the replay and its results. Where the traffic comes from is
//! [`scenario`] (built-in patterns: steady, bursts, the fixed-window boundary attack, many keys
//! with a Zipf distribution) and [`trace`] (a CSV file of `time,key,cost`); how the result is
//! drawn is [`chart`] (an SVG of offered against admitted cells over time, one line per subject).
//!
//! Every subject decides at explicit readings (`check_key_n_at` and friends), so no clock runs:
//! a request at trace time `t` is decided at [`ORIGIN`] + `t`. A shaper's admitted request
//! proceeds after its delay, and is drawn when it proceeds.
//!
//! ```
//! use std::time::Duration;
//! use flowgate::algorithm::FixedWindow;
//! use flowgate::simulate::{self, scenario, Subject};
//! use flowgate::{Gcra, Quota};
//!
//! let quota = Quota::per_minute(120)?;
//! // 120 requests in the last 10 s of a minute and 120 in the first 10 s of the next.
//! let trace = scenario::boundary(120, Duration::from_secs(60));
//! let mut subjects: Vec<Box<dyn Subject>> = vec![
//!     simulate::algorithm("GCRA", Gcra::new(&quota)),
//!     simulate::algorithm("fixed window", FixedWindow::new(&quota)?),
//! ];
//! let replay = simulate::replay(&trace, &mut subjects, Duration::from_secs(1));
//! // The fixed window lets twice its limit through in 20 s; GCRA its burst, then its rate.
//! assert_eq!(replay.outcomes[1].peak(Duration::from_secs(60)), 240);
//! assert_eq!(replay.outcomes[0].admitted, 160);
//! print!("{}", replay.table(Duration::from_secs(60)));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod chart;
pub mod scenario;
pub mod trace;

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use crate::clock::ManualClock;
use crate::{Algorithm, KeyedRateLimiter, Quota, QuotaError, SlidingLog};

/// The reading (ns) at which trace time zero is decided: one day, so that fixed windows of any
/// length dividing a day (a second, a minute, an hour) start with the trace.
pub const ORIGIN: u64 = 86_400 * 1_000_000_000;

/// Keys a built-in algorithm subject tracks at most (its keyed table's size, about 1.4 MB).
/// Past it, a new key is refused unless an idle one can be forgotten, as in a real table.
pub const MAX_KEYS: usize = 1 << 16;

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

/// Something that decides requests: an algorithm, a policy set, anything.
pub trait Subject {
    /// Its name in tables and charts.
    fn name(&self) -> &str;

    /// Decides `request` at reading `now` (ns; [`ORIGIN`] + the request's time): the delay
    /// after which it proceeds if admitted (zero unless the subject shapes), `None` if refused.
    fn decide(&mut self, request: &Request, now: u64) -> Option<Duration>;
}

/// A subject deciding with `algorithm`, one bucket per key (a [`KeyedRateLimiter`] of
/// [`MAX_KEYS`] keys). A request above the algorithm's capacity is refused.
pub fn algorithm<A: Algorithm + 'static>(
    name: impl Into<String>,
    algorithm: A,
) -> Box<dyn Subject> {
    let clock = ManualClock::new();
    // Only a zero-sized table fails to build, and MAX_KEYS is not zero.
    let limiter = KeyedRateLimiter::<str, _, A>::builder(algorithm)
        .clock(clock.clone())
        .max_keys(MAX_KEYS)
        .build()
        .ok();
    Box::new(Keyed {
        name: name.into(),
        clock,
        limiter,
    })
}

struct Keyed<A: Algorithm> {
    name: String,
    /// Set to each request's reading, so that whatever the table reads agrees with it.
    clock: ManualClock,
    limiter: Option<KeyedRateLimiter<str, ManualClock, A>>,
}

impl<A: Algorithm> Subject for Keyed<A> {
    fn name(&self) -> &str {
        &self.name
    }

    fn decide(&mut self, request: &Request, now: u64) -> Option<Duration> {
        let limiter = self.limiter.as_ref()?;
        self.clock.set(now);
        match limiter.check_key_n_at(&request.key, request.cost, now) {
            Ok(Ok(allowed)) => Some(allowed.delay()),
            _ => None,
        }
    }
}

/// A subject deciding with an exact [`SlidingLog`] per key (one slot per cell of the limit
/// each, so keep the keys few).
///
/// # Errors
/// As [`SlidingLog::with_clock`].
pub fn sliding_log(name: impl Into<String>, quota: Quota) -> Result<Box<dyn Subject>, QuotaError> {
    let clock = ManualClock::new();
    // Checked once here, so that every key's log builds.
    SlidingLog::with_clock(quota, clock.clone())?;
    Ok(Box::new(Logs {
        name: name.into(),
        quota,
        clock,
        logs: HashMap::new(),
    }))
}

struct Logs {
    name: String,
    quota: Quota,
    clock: ManualClock,
    logs: HashMap<String, SlidingLog<ManualClock>>,
}

impl Subject for Logs {
    fn name(&self) -> &str {
        &self.name
    }

    fn decide(&mut self, request: &Request, now: u64) -> Option<Duration> {
        if !self.logs.contains_key(&request.key) {
            let log = SlidingLog::with_clock(self.quota, self.clock.clone()).ok()?;
            self.logs.insert(request.key.clone(), log);
        }
        let log = self.logs.get(&request.key)?;
        self.clock.set(now);
        match log.check_n_at(request.cost, now) {
            Ok(Ok(allowed)) => Some(allowed.delay()),
            _ => None,
        }
    }
}

/// A subject deciding with `decide` (a policy set, a limiter of your own): see [`Subject::decide`].
pub fn from_fn<F>(name: impl Into<String>, decide: F) -> Box<dyn Subject>
where
    F: FnMut(&Request, u64) -> Option<Duration> + 'static,
{
    Box::new(FromFn {
        name: name.into(),
        decide,
    })
}

struct FromFn<F> {
    name: String,
    decide: F,
}

impl<F: FnMut(&Request, u64) -> Option<Duration>> Subject for FromFn<F> {
    fn name(&self) -> &str {
        &self.name
    }

    fn decide(&mut self, request: &Request, now: u64) -> Option<Duration> {
        (self.decide)(request, now)
    }
}

/// Every algorithm of the crate on `quota`, one bucket per key, as
/// `examples/algorithms.rs` and `examples/simulate.rs` compare them: GCRA, the leaky bucket as
/// a meter and as a shaper (queueing up to a sixth of the quota's period), credit (the same
/// debt), interval refill, the fixed and sliding window counters, and the exact sliding log.
/// An algorithm that cannot run `quota` (a window counter given a burst of its own) is left
/// out, and so is the sliding log above 10 000 cells per window (it holds 8 bytes per cell per
/// key).
pub fn every_algorithm(quota: &Quota) -> Vec<Box<dyn Subject>> {
    use crate::algorithm::{Credit, FixedWindow, IntervalRefill, LeakyBucket, SlidingWindow};
    let queue = quota.period() / 6;
    let mut subjects = vec![
        algorithm("GCRA", crate::Gcra::new(quota)),
        algorithm("leaky bucket (meter)", LeakyBucket::meter(quota)),
    ];
    let fallible = [
        LeakyBucket::shaper(quota, queue).map(|a| algorithm("leaky bucket (shaper)", a)),
        Credit::new(quota, queue).map(|a| algorithm("credit", a)),
        IntervalRefill::new(quota).map(|a| algorithm("interval refill", a)),
        FixedWindow::new(quota).map(|a| algorithm("fixed window", a)),
        SlidingWindow::new(quota).map(|a| algorithm("sliding window counter", a)),
        match quota.count() {
            0..=10_000 => sliding_log("sliding log", *quota),
            _ => Err(QuotaError::LimitTooLarge { max: 10_000 }),
        },
    ];
    subjects.extend(fallible.into_iter().flatten());
    subjects
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
pub const MAX_BINS: usize = 100_000;

/// Replays `trace` (in any order: it is decided in time order, ties in trace order) through
/// every subject, counting cells in bins of `bin` (at least 1 ms).
///
/// There are at most [`MAX_BINS`] bins. They start at zero when the trace fits in that many,
/// and otherwise at the first request (its time rounded down to a whole bin:
/// [`Replay::start`]), so that a trace stamped with Unix times costs no more than one stamped
/// from zero; a trace whose span is still too long is counted in wider bins ([`Replay::bin`]
/// says which). A shaper's cells that proceed later than
/// the last of `MAX_BINS` bins are counted as admitted but not drawn. Requests are decided at
/// [`ORIGIN`] plus their own time, whatever the bins.
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
    pub fn table(&self, window: Duration) -> Table<'_> {
        Table {
            replay: self,
            window,
        }
    }
}

/// [`Replay::table`], printable.
#[derive(Debug)]
pub struct Table<'a> {
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
