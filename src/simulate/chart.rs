//! The replay as an SVG chart of small multiples: one panel per subject, in a grid, each showing
//! the offered traffic as a grey area and what that subject admitted as a line over time, either
//! cells per bin ([`Style::PerBin`]) or cells so far ([`Style::Cumulative`]). Every panel has
//! the same scales, so panels compare at a glance, and no subject's line can hide another's.
//!
//! This module owns the chart's entry point, its shared scales and the text it writes (the
//! heading, the legend, numbers and escaping); `panel` places the panels and draws each one.
//!
//! The SVG is plain and stable (same replay, same bytes): a `<g class="panel" data-name="…"
//! data-total="…">` per subject holding its frame, a `<polygon class="offered">`, one
//! step-shaped `<polyline class="admitted">` and a `<text class="panel-title">` reading
//! `name: total`, where the total is the subject's [`Outcome::admitted_cells`] (the table's
//! `cells`); a `<g class="axis">` per axis with the ticks of every panel and the axis label;
//! and a `<g class="legend">`. `integration/tests/simulate.rs` parses it and checks those.
//!
//! [`Outcome::admitted_cells`]: super::Outcome::admitted_cells

use std::fmt::Write as _;

use super::panel::{self, Grid};
use super::Replay;

/// Line colours, one per subject in order (then again from the start).
const COLOURS: [&str; 10] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf",
    "#bcbd22", "#7f7f7f",
];

/// The offered traffic's fill, in the legend and in every panel.
pub(super) const OFFERED_FILL: &str = "#dddddd";

/// What the y axis shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Cells in each bin.
    PerBin,
    /// Cells from the start of the trace to the end of each bin.
    Cumulative,
}

/// `replay` drawn under `title`: one panel per subject, in the order of `replay.outcomes`.
///
/// ```
/// use std::time::Duration;
/// use flowgate::simulate::{self, chart, scenario};
/// use flowgate::{Gcra, Quota};
///
/// let quota = Quota::per_second(10)?;
/// let trace = scenario::steady("a", 20.0, Duration::from_secs(5));
/// let mut subjects = vec![simulate::algorithm("GCRA", Gcra::new(&quota))];
/// let replay = simulate::replay(&trace, &mut subjects, Duration::from_secs(1));
/// let svg = chart::svg(&replay, "20/s offered to 10/s", chart::Style::PerBin);
/// assert!(svg.starts_with("<svg"));
/// // Its panel, titled with the cells it admitted: its burst of 10, then 10 a second.
/// assert!(svg.contains(r#"data-name="GCRA" data-total="59""#));
/// # Ok::<(), flowgate::QuotaError>(())
/// ```
pub fn svg(replay: &Replay, title: &str, style: Style) -> String {
    let offered = shape(&replay.offered, style);
    let series: Vec<Vec<u64>> = replay
        .outcomes
        .iter()
        .map(|o| shape(&o.series, style))
        .collect();
    let scale = Scale::new(replay, &offered, &series, style);
    let grid = Grid::new(replay.outcomes.len(), title.chars().count());
    let mut out = String::new();
    heading(&mut out, &grid, title);
    legend(&mut out, replay.offered.iter().sum());
    for (i, (outcome, series)) in replay.outcomes.iter().zip(&series).enumerate() {
        let line = panel::Line {
            name: &outcome.name,
            total: outcome.admitted_cells,
            series,
            colour: COLOURS[i % COLOURS.len()],
        };
        panel::draw(&mut out, &grid, &scale, i, &line, &offered);
    }
    panel::x_axis(&mut out, &grid, &scale, &time_label(replay));
    panel::y_axis(&mut out, &grid, &scale);
    out.push_str("</svg>\n");
    out
}

/// `series` as the y axis shows it: as is per bin, or summed so far.
fn shape(series: &[u64], style: Style) -> Vec<u64> {
    match style {
        Style::PerBin => series.to_vec(),
        Style::Cumulative => series
            .iter()
            .scan(0u64, |sum, &v| {
                *sum += v;
                Some(*sum)
            })
            .collect(),
    }
}

/// The scales every panel shares: the bins and time the x axis spans, the value atop the y axis.
pub(super) struct Scale {
    /// The first bin drawn: a round time shortly before anything happens (quiet bins before it
    /// are left out, so that what happens fills the panels' width).
    pub(super) first: usize,
    /// The end of the bins drawn: the longest line's, past `first`.
    pub(super) bins: usize,
    /// A bin's width in seconds.
    pub(super) bin_secs: f64,
    /// Where the x axis starts (bin `first`'s start) and the time it spans, in seconds.
    pub(super) from: f64,
    pub(super) span: f64,
    /// The x axis's step between ticks, in seconds.
    pub(super) step: f64,
    /// The value at the top of the y axis.
    pub(super) y_max: f64,
    /// What the y axis shows.
    pub(super) style: Style,
}

impl Scale {
    /// The scales that fit `replay`'s lines, `offered` and `series` as shaped for `style`.
    fn new(replay: &Replay, offered: &[u64], series: &[Vec<u64>], style: Style) -> Self {
        let lines = || replay.outcomes.iter().map(|o| &o.series[..]);
        let bins = lines()
            .chain([&replay.offered[..]])
            .map(<[u64]>::len)
            .max()
            .unwrap_or(0)
            .max(1);
        let active = lines()
            .chain([&replay.offered[..]])
            .filter_map(|s| s.iter().position(|&v| v > 0))
            .min();
        let top = series
            .iter()
            .flatten()
            .chain(offered.iter())
            .copied()
            .max()
            .unwrap_or(0);
        let bin_secs = replay.bin.as_secs_f64();
        let first = lead_in(active, bins, bin_secs);
        let span = (bins - first) as f64 * bin_secs;
        Self {
            first,
            bins,
            bin_secs,
            from: first as f64 * bin_secs,
            span,
            // About five ticks, at a round step.
            step: nice(span / 4.0),
            y_max: nice(top.max(1) as f64),
            style,
        }
    }

    /// The y axis's label.
    pub(super) fn y_label(&self) -> String {
        match self.style {
            Style::PerBin => format!("cells per {} s", number(self.bin_secs)),
            Style::Cumulative => "cells so far".to_owned(),
        }
    }
}

/// The first bin to draw when bin `active` is the first with anything in it, of `bins`: the
/// bin at the last round time before it (on the scale of the time from it to the end), so
/// that a quiet start is cut but some of it shows.
fn lead_in(active: Option<usize>, bins: usize, bin_secs: f64) -> usize {
    let Some(active) = active.filter(|&a| a < bins) else {
        return 0;
    };
    let start = active as f64 * bin_secs;
    let step = nice((bins - active) as f64 * bin_secs / 4.0);
    let from = ((start / step).ceil() - 1.0).max(0.0) * step;
    // The bin that time falls in.
    ((from / bin_secs + 1e-9).floor().max(0.0) as usize).min(active)
}

/// The x axis's label: seconds, from the replay's start when that is not zero.
fn time_label(replay: &Replay) -> String {
    if replay.start.is_zero() {
        "time (s)".to_owned()
    } else {
        format!("time (s) from {}", number(replay.start.as_secs_f64()))
    }
}

/// Draws the opening of the picture: the `<svg>` element, its title, background and heading.
fn heading(out: &mut String, grid: &Grid, title: &str) {
    let (width, height) = (grid.width, grid.height);
    // Writing to a String cannot fail.
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" style="max-width: 100%; height: auto" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(out, "<title>{}</title>", escape(title));
    let _ = writeln!(
        out,
        r#"<rect width="{width}" height="{height}" fill="white"/>"#
    );
    let _ = writeln!(
        out,
        r#"<text class="title" x="{}" y="26" font-size="15">{}</text>"#,
        panel::LEFT,
        escape(title)
    );
}

/// Draws the legend under the heading: the offered traffic's swatch and total, and the line's.
fn legend(out: &mut String, offered: u64) {
    let (x, y) = (panel::LEFT, 50.0);
    let _ = writeln!(out, r#"<g class="legend">"#);
    let _ = writeln!(
        out,
        r#"<rect x="{x}" y="{:.1}" width="20" height="10" fill="{OFFERED_FILL}"/><text x="{}" y="{:.1}">offered: {offered}</text>"#,
        y - 9.0,
        x + 26.0,
        y
    );
    let lx = x + 150.0;
    let _ = writeln!(
        out,
        r##"<line x1="{lx}" y1="{:.1}" x2="{}" y2="{:.1}" stroke="#333333" stroke-width="2"/><text x="{}" y="{y:.1}">admitted (the total follows each name)</text>"##,
        y - 4.0,
        lx + 20.0,
        y - 4.0,
        lx + 26.0
    );
    let _ = writeln!(out, "</g>");
}

/// The smallest of 1, 2, 2.5 or 5 × 10^k at or above `x` (`x` > 0).
pub(super) fn nice(x: f64) -> f64 {
    let x = if x.is_finite() && x > 0.0 { x } else { 1.0 };
    let mut unit = 10f64.powf(x.log10().floor());
    while unit * 5.0 < x {
        unit *= 10.0;
    }
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if unit * m >= x * (1.0 - 1e-12) {
            return unit * m;
        }
    }
    unit * 10.0
}

/// A tick label: whole numbers without a point, others with up to three decimals.
pub(super) fn number(x: f64) -> String {
    if (x - x.round()).abs() < 1e-9 {
        format!("{}", x.round() as i64)
    } else {
        let text = format!("{x:.3}");
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

/// A tick label: [`number`], counted in thousands (`k`), millions (`M`), billions (`G`) or
/// trillions (`T`) from 10 000 on, so that labels stay short.
pub(super) fn tick(x: f64) -> String {
    let units = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")];
    match units.iter().find(|(unit, _)| x.abs() >= 1e4_f64.max(*unit)) {
        Some((unit, suffix)) => format!("{}{suffix}", number(x / unit)),
        None => number(x),
    }
}

/// `text` with XML's special characters escaped, and the characters XML 1.0 does not allow at
/// all (control characters other than tab and line breaks, U+FFFE and U+FFFF) replaced by U+FFFD.
pub(super) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if c < ' ' || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simulate::{every_algorithm, replay, scenario};
    use crate::Quota;

    #[test]
    fn round_steps_and_labels() {
        assert_eq!(nice(7.0), 10.0);
        assert_eq!(nice(10.0), 10.0);
        assert_eq!(nice(11.0), 20.0);
        assert_eq!(nice(240.0), 250.0);
        assert_eq!(nice(251.0), 500.0);
        assert_eq!(nice(0.3), 0.5);
        assert_eq!(nice(0.0), 1.0);
        assert_eq!(number(15.0), "15");
        assert_eq!(number(0.25), "0.25");
        assert_eq!(tick(2500.0), "2500");
        assert_eq!(tick(10_000.0), "10k");
        assert_eq!(tick(400_000.0), "400k");
        assert_eq!(tick(1_600_000.0), "1.6M");
        assert_eq!(tick(2.5e10), "25G");
        assert_eq!(escape(r#"a<b & "c""#), "a&lt;b &amp; &quot;c&quot;");
        // The boundary attack starts at 50 s of 80: drawn from 40 s; an early start from 0.
        assert_eq!(lead_in(Some(50), 80, 1.0), 40);
        assert_eq!(lead_in(Some(53), 80, 1.0), 50);
        assert_eq!(lead_in(Some(2), 100, 1.0), 0);
        assert_eq!(lead_in(Some(7), 10, 0.3), 6);
        assert_eq!((lead_in(None, 10, 1.0), lead_in(Some(10), 10, 1.0)), (0, 0));
        assert_eq!(
            escape("a\0b\x1b\tc\u{FFFF}"),
            "a\u{FFFD}b\u{FFFD}\tc\u{FFFD}"
        );
    }

    /// `text` without its XML tags.
    fn untagged(text: &str) -> String {
        let mut out = String::new();
        let mut inside = false;
        for c in text.chars() {
            match c {
                '<' => inside = true,
                '>' => inside = false,
                c if !inside => out.push(c),
                _ => {}
            }
        }
        out
    }

    /// The panels' titles, `(name, total)`, in the order drawn.
    fn titles(svg: &str) -> Vec<(String, u64)> {
        svg.lines()
            .filter(|l| l.contains(r#"class="panel-title""#))
            .map(|l| {
                let text = untagged(l);
                let (name, total) = text.rsplit_once(": ").expect("name: total");
                (name.to_owned(), total.parse().expect("a whole number"))
            })
            .collect()
    }

    #[test]
    fn the_panels_totals_are_the_tables_figures() {
        let quota = Quota::per_minute(120).unwrap();
        let trace = scenario::named("boundary", &quota).unwrap();
        let mut subjects = every_algorithm(&quota);
        let replay = replay(&trace, &mut subjects, quota.period() / 60);
        let svg = svg(&replay, "boundary", Style::Cumulative);
        let table = replay.table(quota.period()).to_string();
        let drawn = titles(&svg);
        assert_eq!(drawn.len(), replay.outcomes.len());
        for ((name, total), outcome) in drawn.iter().zip(&replay.outcomes) {
            assert_eq!(name, &outcome.name);
            // The table's row: admitted, refused, cells, most in a window, max delay.
            let row = table
                .lines()
                .find(|l| {
                    l.strip_prefix(name.as_str())
                        .is_some_and(|r| r.starts_with("  "))
                })
                .unwrap_or_else(|| panic!("no row for {name} in\n{table}"));
            let figures: Vec<&str> = row[name.len()..].split_whitespace().collect();
            assert_eq!(figures[2], total.to_string(), "{name}: the table's cells");
            assert!(svg.contains(&format!(r#"data-total="{total}""#)));
            // The attack spans a third of a window: all a subject admits, it admits in its
            // busiest window, so the table's two figures and the panel's agree.
            assert_eq!(
                figures[3],
                total.to_string(),
                "{name}: the table's most in 60 s"
            );
        }
        let totals: Vec<u64> = drawn.iter().map(|(_, t)| *t).collect();
        assert_eq!(totals, [159, 159, 179, 179, 240, 240, 139, 120]);
        assert_eq!(svg, self::svg(&replay, "boundary", Style::Cumulative));
    }
}
