//! The replay as an SVG chart of small multiples: one panel per subject, in a grid, each showing
//! the offered traffic as a grey area and what that subject admitted as a line over time, either
//! cells per bin ([`Style::PerBin`]) or cells so far ([`Style::Cumulative`]). Every panel has
//! the same scales, so panels compare at a glance, and no subject's line can hide another's.
//!
//! This module owns the chart's entry point ([`Replay::svg`]), its shared scales and the text it writes (the
//! heading, the legend, numbers and escaping); `panel` places the panels and draws each one.
//!
//! The SVG is plain and stable (same replay, same bytes): a `<g class="panel" data-name="…"
//! data-total="…">` per subject holding its frame, a `<polygon class="offered">`, one
//! step-shaped `<polyline class="admitted">` and a `<text class="panel-title">` reading
//! `name: total`, where the total is the subject's [`Outcome::admitted_cells`] (the table's
//! `cells`); a `<g class="axis">` per axis with the ticks of every panel and the axis label;
//! and a `<g class="legend">`. `tests/simulate.rs` parses it and checks those.
//!
//! [`Outcome::admitted_cells`]: super::Outcome::admitted_cells

use std::fmt::Write as _;

use super::panel::{self, escape, number, Grid, Scale, Style, OFFERED_FILL};
use super::Replay;

/// Line colours, one per subject in order (then again from the start).
const COLOURS: [&str; 10] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf",
    "#bcbd22", "#7f7f7f",
];

impl Replay {
    /// The replay drawn under `title` as an SVG chart: one panel per subject, in the order of
    /// [`outcomes`](Self::outcomes); see [`Style`] for what a panel's line shows.
    ///
    /// ```
    /// use std::time::Duration;
    /// use flowgate::simulate::{self, Scenario, Style};
    /// use flowgate::{Gcra, Quota};
    ///
    /// let quota = Quota::per_second(10)?;
    /// let trace = Scenario::Steady { key: "a".into(), rate: 20.0, duration: Duration::from_secs(5) }
    ///     .requests();
    /// let mut subjects = vec![simulate::algorithm("GCRA", Gcra::new(&quota))];
    /// let replay = simulate::replay(&trace, &mut subjects, Duration::from_secs(1));
    /// let svg = replay.svg("20/s offered to 10/s", Style::PerBin);
    /// assert!(svg.starts_with("<svg"));
    /// // Its panel, titled with the cells it admitted: its burst of 10, then 10 a second.
    /// assert!(svg.contains(r#"data-name="GCRA" data-total="59""#));
    /// # Ok::<(), flowgate::QuotaError>(())
    /// ```
    pub fn svg(&self, title: &str, style: Style) -> String {
        let replay = self;
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

#[cfg(test)]
mod tests {
    use super::super::panel::{lead_in, nice, tick};
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
        let trace = scenario::Scenario::named("boundary", &quota)
            .unwrap()
            .requests();
        let mut subjects = every_algorithm(&quota);
        let replay = replay(&trace, &mut subjects, quota.period() / 60);
        let svg = replay.svg("boundary", Style::Cumulative);
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
        assert_eq!(svg, replay.svg("boundary", Style::Cumulative));
    }
}
