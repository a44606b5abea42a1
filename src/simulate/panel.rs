//! The panels of a chart ([`Replay::svg`]): where each one sits (a grid of up to four columns,
//! in the subjects' order, sized so that titles, ticks and panels never overlap), how one is
//! drawn (its frame and grid lines, the offered traffic as a grey area, the subject's admitted
//! cells as a line on top, and its title: the subject's name and total), and the tick labels
//! of the axes the panels share.

use std::fmt::Write as _;

use super::Replay;

/// The plot of one panel: its width and height.
const PANEL_W: f64 = 190.0;
const PANEL_H: f64 = 110.0;
/// Panels side by side at most.
const COLUMNS: usize = 4;
/// Left of the first column: its y tick labels and the y axis's label.
pub(super) const LEFT: f64 = 64.0;
/// Above the first row: the heading and the legend.
const TOP: f64 = 62.0;
/// Between two panels side by side.
const GAP_X: f64 = 24.0;
/// Above a panel's plot: its title.
const TITLE_H: f64 = 24.0;
/// Below a panel's plot: its x tick labels.
const TICKS_H: f64 = 22.0;
/// Between a panel's x tick labels and the title of the panel below.
const GAP_Y: f64 = 10.0;
/// Right of the last column and below the last row (where the x axis's label goes).
const RIGHT: f64 = 24.0;
const BOTTOM: f64 = 26.0;
/// The widest a panel's title may be, in characters (a longer name is cut, ending in `…`).
const TITLE_CHARS: usize = 28;
/// Steps of the y axis (grid lines at each).
const Y_STEPS: u32 = 5;

/// Where the panels go, and the picture's size around them.
pub(super) struct Grid {
    panels: usize,
    columns: usize,
    rows: usize,
    /// The picture's width.
    pub(super) width: f64,
    /// The picture's height.
    pub(super) height: f64,
}

impl Grid {
    /// The grid of `panels` panels under a heading of `title_chars` characters.
    pub(super) fn new(panels: usize, title_chars: usize) -> Self {
        let columns = panels.clamp(1, COLUMNS);
        let rows = panels.div_ceil(columns);
        let panels_w = LEFT + columns as f64 * (PANEL_W + GAP_X) - GAP_X + RIGHT;
        // The heading (15 px: about 8.5 px a character) and the legend fit too.
        let heading_w = LEFT + (title_chars as f64 * 8.5).ceil() + RIGHT;
        let height = TOP + rows as f64 * (TITLE_H + PANEL_H + TICKS_H + GAP_Y) - GAP_Y + BOTTOM;
        Self {
            panels,
            columns,
            rows,
            width: panels_w.max(heading_w).max(480.0),
            height,
        }
    }

    /// The top left corner of panel `i`'s plot.
    fn corner(&self, i: usize) -> (f64, f64) {
        let (row, column) = (i / self.columns, i % self.columns);
        (
            LEFT + column as f64 * (PANEL_W + GAP_X),
            TOP + TITLE_H + row as f64 * (TITLE_H + PANEL_H + TICKS_H + GAP_Y),
        )
    }
}

/// One subject's line: its name, its total (cells admitted) and its values as the y axis shows
/// them, in its colour.
pub(super) struct Line<'a> {
    pub(super) name: &'a str,
    pub(super) total: u64,
    pub(super) series: &'a [u64],
    pub(super) colour: &'a str,
}

/// Draws panel `i` of `grid`: `line` over the `offered` traffic, titled with its name and total.
pub(super) fn draw(
    out: &mut String,
    grid: &Grid,
    scale: &Scale,
    i: usize,
    line: &Line<'_>,
    offered: &[u64],
) {
    let (left, top) = grid.corner(i);
    let (right, bottom) = (left + PANEL_W, top + PANEL_H);
    let (name, total) = (escape(line.name), line.total);
    // Writing to a String cannot fail.
    let _ = writeln!(
        out,
        r#"<g class="panel" data-name="{name}" data-total="{total}"><title>{name}: {total} cells admitted</title>"#
    );
    let _ = writeln!(
        out,
        r##"<rect class="frame" x="{left}" y="{top}" width="{PANEL_W}" height="{PANEL_H}" fill="#fcfcfc" stroke="#bbbbbb"/>"##
    );
    for step in 1..Y_STEPS {
        let ty = y(
            scale,
            top,
            scale.y_max * f64::from(step) / f64::from(Y_STEPS),
        );
        let _ = writeln!(
            out,
            r##"<line class="grid" x1="{left}" y1="{ty:.1}" x2="{right}" y2="{ty:.1}" stroke="#e6e6e6"/>"##
        );
    }
    let _ = writeln!(
        out,
        r#"<polygon class="offered" fill="{OFFERED_FILL}" points="{left},{bottom} {} {right},{bottom}"/>"#,
        steps(scale, (left, top), offered)
    );
    let _ = writeln!(
        out,
        r#"<polyline class="admitted" fill="none" stroke="{}" stroke-width="2" points="{}"/>"#,
        line.colour,
        steps(scale, (left, top), line.series)
    );
    let _ = writeln!(
        out,
        r#"<text class="panel-title" x="{left}" y="{:.1}">{}: <tspan font-weight="bold">{total}</tspan></text>"#,
        top - 8.0,
        escape(&title_name(line.name, total))
    );
    let _ = writeln!(out, "</g>");
}

/// `name` as a panel's title shows it before `: total`: whole, or cut to fit with `…`.
fn title_name(name: &str, total: u64) -> String {
    let room = TITLE_CHARS
        .saturating_sub(total.to_string().len() + 2)
        .max(1);
    if name.chars().count() <= room {
        name.to_owned()
    } else {
        let mut cut: String = name.chars().take(room - 1).collect();
        cut.push('…');
        cut
    }
}

/// `series` as a step per bin across a panel whose plot's top left corner is `corner`: points
/// `x,y` separated by spaces.
fn steps(scale: &Scale, (left, top): (f64, f64), series: &[u64]) -> String {
    // Past its end a per-bin series is 0 and a cumulative one stays at its total.
    let last = match scale.style {
        Style::PerBin => 0,
        Style::Cumulative => series.last().copied().unwrap_or(0),
    };
    let mut points = String::new();
    for i in scale.first..scale.bins {
        let value = y(scale, top, series.get(i).copied().unwrap_or(last) as f64);
        let x0 = x(scale, left, i as f64 * scale.bin_secs);
        let x1 = x(scale, left, (i + 1) as f64 * scale.bin_secs);
        let _ = write!(points, "{x0:.1},{value:.1} {x1:.1},{value:.1} ");
    }
    points.truncate(points.trim_end().len());
    points
}

/// Where `secs` from the start falls across a panel whose plot starts at `left`.
fn x(scale: &Scale, left: f64, secs: f64) -> f64 {
    left + (secs - scale.from) / scale.span * PANEL_W
}

/// Where `value` falls down a panel whose plot starts at `top`.
fn y(scale: &Scale, top: f64, value: f64) -> f64 {
    top + PANEL_H - value / scale.y_max * PANEL_H
}

/// Draws the x axis: ticks and their labels (seconds) under every panel, and `label` once,
/// centred under the grid.
pub(super) fn x_axis(out: &mut String, grid: &Grid, scale: &Scale, label: &str) {
    let _ = writeln!(out, r#"<g class="axis" id="x-axis">"#);
    // Every multiple of the step on the axis.
    let (first, last) = (
        (scale.from / scale.step - 1e-9).ceil() as u64,
        ((scale.from + scale.span) / scale.step + 1e-9).floor() as u64,
    );
    for i in 0..grid.panels {
        let (left, top) = grid.corner(i);
        let bottom = top + PANEL_H;
        for at in (first..=last).map(|k| k as f64 * scale.step) {
            let tx = x(scale, left, at);
            // Labels at a panel's edges stay within it, clear of the next panel's.
            let anchor = match tx {
                tx if tx < left + 0.5 => "start",
                tx if tx > left + PANEL_W - 0.5 => "end",
                _ => "middle",
            };
            let _ = writeln!(
                out,
                r##"<line class="tick" x1="{tx:.1}" y1="{bottom}" x2="{tx:.1}" y2="{:.1}" stroke="#555555"/><text class="tick" x="{tx:.1}" y="{:.1}" text-anchor="{anchor}">{}</text>"##,
                bottom + 4.0,
                bottom + 16.0,
                tick(at)
            );
        }
    }
    let middle = LEFT + (grid.columns as f64 * (PANEL_W + GAP_X) - GAP_X) / 2.0;
    let _ = writeln!(
        out,
        r#"<text class="label" x="{middle:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        grid.height - 8.0,
        escape(label)
    );
    let _ = writeln!(out, "</g>");
}

/// Draws the y axis: tick labels left of each row's first panel (every panel has the same
/// scale and grid lines), and the label once, down the left edge.
pub(super) fn y_axis(out: &mut String, grid: &Grid, scale: &Scale) {
    let _ = writeln!(out, r#"<g class="axis" id="y-axis">"#);
    for row in 0..grid.rows {
        let (left, top) = grid.corner(row * grid.columns);
        for step in 0..=Y_STEPS {
            let value = scale.y_max * f64::from(step) / f64::from(Y_STEPS);
            let ty = y(scale, top, value);
            let _ = writeln!(
                out,
                r##"<line class="tick" x1="{:.1}" y1="{ty:.1}" x2="{left}" y2="{ty:.1}" stroke="#555555"/><text class="tick" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                left - 4.0,
                left - 6.0,
                ty + 4.0,
                tick(value)
            );
        }
    }
    let middle = TOP + (grid.height - TOP - BOTTOM) / 2.0;
    let _ = writeln!(
        out,
        r#"<text class="label" transform="translate(16 {middle:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
        scale.y_label()
    );
    let _ = writeln!(out, "</g>");
}

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
    pub(super) fn new(replay: &Replay, offered: &[u64], series: &[Vec<u64>], style: Style) -> Self {
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
pub(super) fn lead_in(active: Option<usize>, bins: usize, bin_secs: f64) -> usize {
    let Some(active) = active.filter(|&a| a < bins) else {
        return 0;
    };
    let start = active as f64 * bin_secs;
    let step = nice((bins - active) as f64 * bin_secs / 4.0);
    let from = ((start / step).ceil() - 1.0).max(0.0) * step;
    // The bin that time falls in.
    ((from / bin_secs + 1e-9).floor().max(0.0) as usize).min(active)
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

    #[test]
    fn panels_fill_rows_of_four_without_overlapping() {
        let grid = Grid::new(8, 20);
        assert_eq!((grid.columns, grid.rows), (4, 2));
        let frames: Vec<(f64, f64)> = (0..8).map(|i| grid.corner(i)).collect();
        for (i, a) in frames.iter().enumerate() {
            // A panel's title above it, its ticks below it, all inside the picture.
            assert!(a.0 + PANEL_W + RIGHT <= grid.width, "{i}");
            assert!(
                a.1 - TITLE_H >= TOP && a.1 + PANEL_H + TICKS_H <= grid.height,
                "{i}"
            );
            for b in &frames[i + 1..] {
                let apart_x = (a.0 - b.0).abs() >= PANEL_W + GAP_X;
                let apart_y = (a.1 - b.1).abs() >= PANEL_H + TITLE_H + TICKS_H;
                assert!(apart_x || apart_y, "{a:?} {b:?}");
            }
        }
        assert_eq!((Grid::new(3, 0).columns, Grid::new(3, 0).rows), (3, 1));
        assert_eq!((Grid::new(0, 0).columns, Grid::new(0, 0).rows), (1, 0));
        // A long heading widens the picture.
        assert!(Grid::new(1, 200).width >= 200.0 * 8.5);
    }

    #[test]
    fn long_names_are_cut_to_fit_their_panel() {
        assert_eq!(title_name("GCRA", 159), "GCRA");
        assert_eq!(
            title_name("sliding window counter", 139),
            "sliding window counter"
        );
        let cut = title_name(&"x".repeat(100), 12);
        assert_eq!(cut.chars().count() + ": 12".len(), TITLE_CHARS);
        assert!(cut.ends_with('…'));
        assert_eq!(title_name("abc", u64::MAX), "abc");
    }
}
