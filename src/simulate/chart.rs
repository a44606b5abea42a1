//! The replay as an SVG chart: the offered traffic and one line per subject over time, either
//! cells per bin ([`Style::PerBin`]) or cells so far ([`Style::Cumulative`], where lines that
//! would overlap bin by bin part as soon as one subject lets through more than another), so
//! that what each algorithm lets through, and when, can be seen at a glance.
//!
//! The SVG is plain and stable (same replay, same bytes): a `<g class="axis">` per axis with
//! its ticks and label, a `<g class="series" data-name="…">` per line holding one step-shaped
//! `<polyline>`, and a `<g class="legend">`. `tests/simulate.rs` parses it and checks those.

use std::fmt::Write as _;

use super::Replay;

const WIDTH: f64 = 900.0;
const HEIGHT: f64 = 420.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 230.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;

/// Line colours, one per subject in order (then again from the start).
const COLOURS: [&str; 10] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf",
    "#bcbd22", "#7f7f7f",
];

/// What the y axis shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Cells in each bin.
    PerBin,
    /// Cells from the start of the trace to the end of each bin.
    Cumulative,
}

/// `replay` drawn under `title`.
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
/// assert!(svg.contains(r#"data-name="GCRA""#));
/// # Ok::<(), flowgate::QuotaError>(())
/// ```
pub fn svg(replay: &Replay, title: &str, style: Style) -> String {
    let offered = shape(&replay.offered, style);
    let series: Vec<Vec<u64>> = replay
        .outcomes
        .iter()
        .map(|o| shape(&o.series, style))
        .collect();
    let frame = Frame::new(replay, &offered, &series, style);
    let mut out = String::new();
    heading(&mut out, title);
    x_axis(&mut out, replay, &frame);
    y_axis(&mut out, &frame);
    let legend = lines(&mut out, replay, &offered, &series, &frame);
    legend_box(&mut out, &legend);
    out.push_str("</svg>\n");
    out
}

/// The plot's width, between the y axis and the legend.
const PLOT_W: f64 = WIDTH - LEFT - RIGHT;

/// The plot's height, between the title and the x axis.
const PLOT_H: f64 = HEIGHT - TOP - BOTTOM;

/// A line's entry in the legend: its label, its colour and its extra stroke attributes.
type Entry = (String, String, String);

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

/// The scales of the picture: the bins and time the x axis spans, the value atop the y axis.
struct Frame {
    /// Bins drawn: the longest line's, at least one.
    bins: usize,
    /// A bin's width in seconds.
    bin_secs: f64,
    /// The time the x axis spans, in seconds.
    span: f64,
    /// The value at the top of the y axis.
    y_max: f64,
    /// What the y axis shows.
    style: Style,
}

impl Frame {
    /// The scales that fit `replay`'s lines, `offered` and `series` as shaped for `style`.
    fn new(replay: &Replay, offered: &[u64], series: &[Vec<u64>], style: Style) -> Self {
        let bins = replay
            .outcomes
            .iter()
            .map(|o| o.series.len())
            .chain([replay.offered.len()])
            .max()
            .unwrap_or(0)
            .max(1);
        let top = series
            .iter()
            .flatten()
            .chain(offered.iter())
            .copied()
            .max()
            .unwrap_or(0);
        let bin_secs = replay.bin.as_secs_f64();
        Self {
            bins,
            bin_secs,
            span: bins as f64 * bin_secs,
            y_max: nice(top.max(1) as f64),
            style,
        }
    }

    /// Where `secs` from the start falls across the picture.
    fn x(&self, secs: f64) -> f64 {
        LEFT + secs / self.span * PLOT_W
    }

    /// Where `value` falls down the picture.
    fn y(&self, value: f64) -> f64 {
        TOP + PLOT_H - value / self.y_max * PLOT_H
    }
}

/// Draws the opening of the picture: the `<svg>` element, its title, background and heading.
fn heading(out: &mut String, title: &str) {
    // Writing to a String cannot fail.
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(out, "<title>{}</title>", escape(title));
    let _ = writeln!(
        out,
        r#"<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>"#
    );
    let _ = writeln!(
        out,
        r#"<text class="title" x="{LEFT}" y="24" font-size="15">{}</text>"#,
        escape(title)
    );
}

/// Draws the x axis: its line, its ticks and the time label.
fn x_axis(out: &mut String, replay: &Replay, frame: &Frame) {
    // The x axis: time in seconds, about eight ticks at a round step.
    let _ = writeln!(out, r#"<g class="axis" id="x-axis">"#);
    let _ = writeln!(
        out,
        r#"<line x1="{LEFT}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="black"/>"#,
        TOP + PLOT_H,
        LEFT + PLOT_W,
        TOP + PLOT_H
    );
    let step = nice(frame.span / 8.0);
    let mut tick = 0.0;
    while tick <= frame.span + 1e-9 {
        let tx = frame.x(tick);
        let _ = writeln!(
            out,
            r#"<line class="tick" x1="{tx:.1}" y1="{:.1}" x2="{tx:.1}" y2="{:.1}" stroke="black"/><text class="tick" x="{tx:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            TOP + PLOT_H,
            TOP + PLOT_H + 5.0,
            TOP + PLOT_H + 18.0,
            number(tick)
        );
        tick += step;
    }
    let time = if replay.start.is_zero() {
        "time (s)".to_owned()
    } else {
        format!("time (s) from {}", number(replay.start.as_secs_f64()))
    };
    let _ = writeln!(
        out,
        r#"<text class="label" x="{:.1}" y="{:.1}" text-anchor="middle">{time}</text>"#,
        LEFT + PLOT_W / 2.0,
        HEIGHT - 12.0
    );
    let _ = writeln!(out, "</g>");
}

/// Draws the y axis: its line, its ticks with their grid lines, and the label.
fn y_axis(out: &mut String, frame: &Frame) {
    // The y axis: cells per bin, five ticks.
    let _ = writeln!(out, r#"<g class="axis" id="y-axis">"#);
    let _ = writeln!(
        out,
        r#"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{:.1}" stroke="black"/>"#,
        TOP + PLOT_H
    );
    for i in 0..=5 {
        let value = frame.y_max * f64::from(i) / 5.0;
        let ty = frame.y(value);
        let _ = writeln!(
            out,
            r##"<line class="tick" x1="{:.1}" y1="{ty:.1}" x2="{:.1}" y2="{ty:.1}" stroke="#ddd"/><text class="tick" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT - 5.0,
            LEFT + PLOT_W,
            LEFT - 8.0,
            ty + 4.0,
            number(value)
        );
    }
    let label = match frame.style {
        Style::PerBin => format!("cells per {} s", number(frame.bin_secs)),
        Style::Cumulative => "cells so far".to_owned(),
    };
    let _ = writeln!(
        out,
        r#"<text class="label" transform="translate(16 {:.1}) rotate(-90)" text-anchor="middle">{label}</text>"#,
        TOP + PLOT_H / 2.0,
    );
    let _ = writeln!(out, "</g>");
}

/// Draws the series: a line per subject, then the offered traffic; returns their legend entries.
fn lines(
    out: &mut String,
    replay: &Replay,
    offered: &[u64],
    series: &[Vec<u64>],
    frame: &Frame,
) -> Vec<Entry> {
    // The lines: each subject, the first widest, so that a line another one covers (two
    // algorithms admitting alike) still shows at its edges; then the offered traffic, dashed,
    // on top. The legend gives each line's total.
    let mut legend = Vec::new();
    let subjects = replay.outcomes.len();
    for (i, (outcome, series)) in replay.outcomes.iter().zip(series).enumerate() {
        let width = 1.5 + 3.0 * (subjects - 1 - i) as f64 / (subjects.max(2) - 1) as f64;
        legend.push(line(
            out,
            frame,
            (&outcome.name, outcome.admitted_cells),
            series,
            COLOURS[i % COLOURS.len()],
            &format!(r#" stroke-width="{width:.1}""#),
        ));
    }
    legend.push(line(
        out,
        frame,
        ("offered", replay.offered.iter().sum()),
        offered,
        "#555555",
        r#" stroke-width="1.2" stroke-dasharray="4 3""#,
    ));
    // The legend lists the offered traffic first.
    legend.rotate_right(1);
    legend
}

/// Draws one series, `(name, total)`, as a step-shaped line; returns its legend entry.
fn line(
    out: &mut String,
    frame: &Frame,
    (name, total): (&str, u64),
    series: &[u64],
    colour: &str,
    extra: &str,
) -> Entry {
    let mut points = String::new();
    for i in 0..frame.bins {
        // Past its end a per-bin series is 0 and a cumulative one stays at its total.
        let last = match frame.style {
            Style::PerBin => 0,
            Style::Cumulative => series.last().copied().unwrap_or(0),
        };
        let value = series.get(i).copied().unwrap_or(last) as f64;
        let (x0, x1) = (
            frame.x(i as f64 * frame.bin_secs),
            frame.x((i + 1) as f64 * frame.bin_secs),
        );
        let _ = write!(
            points,
            "{x0:.1},{:.1} {x1:.1},{:.1} ",
            frame.y(value),
            frame.y(value)
        );
    }
    let _ = writeln!(
        out,
        r#"<g class="series" data-name="{}"><polyline fill="none" stroke="{colour}"{extra} points="{}"/></g>"#,
        escape(name),
        points.trim_end()
    );
    (
        format!("{name}: {total}"),
        colour.to_owned(),
        extra.to_owned(),
    )
}

/// Draws the legend: a sample of each line's stroke and its label, down the right margin.
fn legend_box(out: &mut String, legend: &[Entry]) {
    let _ = writeln!(out, r#"<g class="legend">"#);
    for (i, (name, colour, extra)) in legend.iter().enumerate() {
        let ly = TOP + 10.0 + i as f64 * 20.0;
        let lx = WIDTH - RIGHT + 15.0;
        let _ = writeln!(
            out,
            r#"<line x1="{lx:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{colour}"{extra}/><text x="{:.1}" y="{:.1}">{}</text>"#,
            lx + 20.0,
            lx + 26.0,
            ly + 4.0,
            escape(name)
        );
    }
    let _ = writeln!(out, "</g>");
}

/// The smallest of 1, 2 or 5 × 10^k at or above `x` (`x` > 0).
fn nice(x: f64) -> f64 {
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
fn number(x: f64) -> String {
    if (x - x.round()).abs() < 1e-9 {
        format!("{}", x.round() as i64)
    } else {
        let text = format!("{x:.3}");
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

/// `text` with XML's special characters escaped, and the characters XML 1.0 does not allow at
/// all (control characters other than tab and line breaks, U+FFFE and U+FFFF) replaced by U+FFFD.
fn escape(text: &str) -> String {
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
        assert_eq!(escape(r#"a<b & "c""#), "a&lt;b &amp; &quot;c&quot;");
        assert_eq!(
            escape("a\0b\x1b\tc\u{FFFF}"),
            "a\u{FFFD}b\u{FFFD}\tc\u{FFFD}"
        );
    }
}
