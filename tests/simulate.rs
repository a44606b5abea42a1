//! The simulator: replays that count what the algorithms promise, and charts checked by their
//! structure (they parse as XML; they have the axes, panels and legend they claim, the panels
//! apart and each line inside its panel), including the committed `docs/boundary.svg`.

use std::collections::BTreeSet;
use std::time::Duration;

use flowgate::algorithm::FixedWindow;
use flowgate::simulate::{self, trace, Request, Scenario, Style, Subject};
use flowgate::{Gcra, Quota};

const MINUTE: Duration = Duration::from_secs(60);

fn quota() -> Quota {
    Quota::per_minute(120).unwrap()
}

/// What `examples/simulate.rs` draws with its defaults.
fn boundary_chart() -> String {
    let quota = quota();
    let trace = Scenario::named("boundary", &quota).unwrap().requests();
    let mut subjects = simulate::every_algorithm(&quota);
    let replay = simulate::replay(&trace, &mut subjects, quota.period() / 60);
    replay.svg(
        "scenario boundary: cells admitted at 120/min per key",
        Style::Cumulative,
    )
}

#[test]
fn the_boundary_attack_passes_a_fixed_window_twice_and_a_sliding_log_never() {
    let quota = quota();
    let trace = Scenario::Boundary {
        limit: 120,
        window: MINUTE,
    }
    .requests();
    let mut subjects = simulate::every_algorithm(&quota);
    assert_eq!(subjects.len(), 8, "every algorithm runs 120/min");
    let replay = simulate::replay(&trace, &mut subjects, Duration::from_secs(1));
    let outcome = |name: &str| {
        replay
            .outcomes
            .iter()
            .find(|o| o.name == name)
            .unwrap_or_else(|| panic!("{name}"))
    };
    assert_eq!(replay.requests, 240);
    assert_eq!(replay.offered.iter().sum::<u64>(), 240);
    // 240 cells in 20 s: twice the limit around the edge.
    assert_eq!(outcome("fixed window").peak(MINUTE), 240);
    // Never more than the limit in any minute (at the bins' resolution).
    assert_eq!(outcome("sliding log").peak(MINUTE), 120);
    // The token bucket: its burst, then its rate (2/s) for 20 s.
    let gcra = outcome("GCRA");
    assert_eq!((gcra.admitted, gcra.refused), (159, 81));
    // The shaper admits more, later: cells proceed after their delay.
    let shaper = outcome("leaky bucket (shaper)");
    assert_eq!(shaper.max_delay, Duration::from_secs(10));
    let late = |o: &simulate::Outcome| o.series[70..].iter().sum::<u64>();
    assert!(late(shaper) > late(gcra), "{} {}", late(shaper), late(gcra));
    for o in &replay.outcomes {
        assert_eq!(o.admitted + o.refused, 240, "{}", o.name);
        // The attack spans 20 s: all a subject admits, it admits within a minute.
        assert_eq!(o.admitted_cells, o.peak(MINUTE), "{}", o.name);
    }
}

#[test]
fn a_csv_trace_replays_by_key_and_cost() {
    let text = "time,key,cost\n# two keys, one costly request\n0,a\n0,a\n0.5,b,3\n0.25,a\n";
    let trace = trace::parse(text).unwrap();
    // Burst 2 per key, 1 per second.
    let quota = Quota::per_second(1).unwrap().with_burst(2).unwrap();
    let mut subjects: Vec<Box<dyn Subject>> = vec![simulate::algorithm("GCRA", Gcra::new(&quota))];
    let replay = simulate::replay(&trace, &mut subjects, Duration::from_millis(100));
    let gcra = &replay.outcomes[0];
    // a: two admitted at 0, refused at 0.25; b: 3 cells exceed the burst of 2, never.
    assert_eq!(
        (gcra.admitted, gcra.refused, gcra.admitted_cells),
        (2, 2, 2)
    );
    assert_eq!(replay.offered, vec![2, 0, 1, 0, 0, 3]);
    assert_eq!(gcra.series, vec![2, 0, 0, 0, 0, 0]);
}

#[test]
fn a_custom_subject_sees_every_request_in_time_order_at_its_reading() {
    use std::cell::RefCell;
    use std::rc::Rc;
    let trace = vec![
        Request::new(Duration::from_secs(2), "b", 1),
        Request::new(Duration::from_secs(1), "a", 4),
        Request::new(Duration::from_secs(1), "c", 1),
    ];
    let seen = Rc::new(RefCell::new(Vec::new()));
    let log = Rc::clone(&seen);
    let mut subjects = vec![simulate::from_fn(
        "even seconds",
        move |r: &Request, now| {
            log.borrow_mut().push((r.key.clone(), now));
            (r.at.as_secs() % 2 == 0).then_some(Duration::ZERO)
        },
    )];
    let replay = simulate::replay(&trace, &mut subjects, Duration::from_secs(1));
    // Trace time zero is decided one day past the epoch.
    let (second, day) = (1_000_000_000, 86_400 * 1_000_000_000);
    assert_eq!(
        *seen.borrow(),
        [
            ("a".to_owned(), day + second),
            ("c".to_owned(), day + second),
            ("b".to_owned(), day + 2 * second),
        ]
    );
    assert_eq!(
        (replay.outcomes[0].admitted, replay.outcomes[0].refused),
        (1, 2)
    );
    assert_eq!(replay.offered, vec![0, 5, 1]);
    assert_eq!(replay.outcomes[0].series, vec![0, 0, 1]);
}

/// A rectangle: left, top, width, height.
type Rect = (f64, f64, f64, f64);

/// `node`'s attribute `name` as a number.
fn number(node: roxmltree::Node<'_, '_>, name: &str) -> f64 {
    node.attribute(name)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{name} of {node:?}"))
}

/// The `x,y` points of a polyline or polygon.
fn points(node: roxmltree::Node<'_, '_>) -> Vec<(f64, f64)> {
    node.attribute("points")
        .unwrap()
        .split(' ')
        .map(|p| {
            let (x, y) = p.split_once(',').unwrap();
            (x.parse().unwrap(), y.parse().unwrap())
        })
        .collect()
}

/// Checks that the axes have numeric ticks (`12`, `0.5`, `400k`, `1.6M`) and a label.
fn check_axes(doc: &roxmltree::Document<'_>) {
    for id in ["x-axis", "y-axis"] {
        let axis = doc
            .descendants()
            .find(|n| n.attribute("id") == Some(id))
            .unwrap_or_else(|| panic!("no {id}"));
        assert_eq!(axis.attribute("class"), Some("axis"));
        let ticks: Vec<&str> = axis
            .children()
            .filter(|n| n.has_tag_name("text") && n.attribute("class") == Some("tick"))
            .filter_map(|n| n.text())
            .collect();
        assert!(ticks.len() >= 3, "{id}: {ticks:?}");
        let numeric = |t: &&str| {
            t.trim_end_matches(['k', 'M', 'G', 'T'])
                .parse::<f64>()
                .is_ok()
        };
        assert!(ticks.iter().all(numeric), "{id}: {ticks:?}");
        let label = axis
            .children()
            .find(|n| n.attribute("class") == Some("label"))
            .and_then(|n| n.text());
        assert!(label.is_some(), "{id} has a label");
    }
}

/// Checks `svg`'s structure and returns its panels' `(name, total)`s, in the order drawn.
fn check_structure(svg: &str) -> Vec<(String, u64)> {
    let doc = roxmltree::Document::parse(svg).expect("the chart is well-formed XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    assert_eq!(
        root.tag_name().namespace(),
        Some("http://www.w3.org/2000/svg")
    );
    let (width, height) = (number(root, "width"), number(root, "height"));
    assert_eq!(
        root.attribute("viewBox"),
        Some(format!("0 0 {width} {height}").as_str())
    );
    check_axes(&doc);
    let mut panels = Vec::new();
    let mut frames: Vec<Rect> = Vec::new();
    let mut lengths = BTreeSet::new();
    for panel in doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("panel"))
    {
        let name = panel.attribute("data-name").expect("a named panel");
        let total: u64 = number(panel, "data-total") as u64;
        let child = |class: &str| {
            panel
                .children()
                .find(|n| n.attribute("class") == Some(class))
                .unwrap_or_else(|| panic!("{name}: no {class}"))
        };
        let frame = child("frame");
        let (x, y, w, h) = (
            number(frame, "x"),
            number(frame, "y"),
            number(frame, "width"),
            number(frame, "height"),
        );
        assert!(
            x >= 0.0 && y >= 0.0 && x + w <= width && y + h <= height,
            "{name}"
        );
        // Its title, `name: total`, just above its frame.
        let title = child("panel-title");
        let text: String = title
            .descendants()
            .filter(|n| n.is_text())
            .filter_map(|n| n.text())
            .collect();
        assert!(text.ends_with(&format!(": {total}")), "{name}: {text}");
        assert!(name.starts_with(text.rsplit_once(": ").unwrap().0.trim_end_matches('…')));
        assert!((y - 24.0..y).contains(&number(title, "y")), "{name}");
        // The offered area and the admitted line stay inside the frame, left to right, one
        // step (two points) per bin.
        for line in [child("offered"), child("admitted")] {
            let points = points(line);
            for &(px, py) in &points {
                let inside = (x - 0.05..=x + w + 0.05).contains(&px)
                    && (y - 0.05..=y + h + 0.05).contains(&py);
                assert!(inside, "{name}: ({px}, {py}) outside {x} {y} {w} {h}");
            }
            assert!(points.windows(2).all(|p| p[0].0 <= p[1].0), "{name}");
        }
        lengths.insert(points(child("admitted")).len());
        // No panel overlaps another, with its title and ticks.
        for (fx, fy, fw, fh) in &frames {
            let apart_x = x >= fx + fw || fx >= &(x + w);
            let apart_y = y - 24.0 >= fy + fh + 16.0 || fy - 24.0 >= y + h + 16.0;
            assert!(apart_x || apart_y, "{name} overlaps a panel");
        }
        frames.push((x, y, w, h));
        assert!(panels.iter().all(|(n, _)| n != name), "{name} twice");
        panels.push((name.to_owned(), total));
    }
    assert!(lengths.len() <= 1, "every line spans every bin drawn");
    let legend = doc
        .descendants()
        .find(|n| n.attribute("class") == Some("legend"))
        .expect("a legend");
    assert!(legend
        .children()
        .filter_map(|n| n.text())
        .any(|t| t.starts_with("offered: ")));
    panels
}

#[test]
fn the_chart_has_the_axes_panels_and_legend_it_claims() {
    let svg = boundary_chart();
    let panels = check_structure(&svg);
    // A panel per algorithm, in order, each titled with the cells it admitted.
    let quota = quota();
    let mut subjects = simulate::every_algorithm(&quota);
    let replay = simulate::replay(
        &Scenario::named("boundary", &quota).unwrap().requests(),
        &mut subjects,
        quota.period() / 60,
    );
    let expected: Vec<(String, u64)> = replay
        .outcomes
        .iter()
        .map(|o| (o.name.clone(), o.admitted_cells))
        .collect();
    assert_eq!(panels, expected);
    // Names are escaped; a per-bin chart of a custom subject has the same structure.
    let mut subjects = vec![simulate::algorithm(
        "<fixed & \"window\">",
        FixedWindow::new(&quota).unwrap(),
    )];
    let replay = simulate::replay(
        &Scenario::Steady {
            key: "a".into(),
            rate: 3.0,
            duration: MINUTE,
        }
        .requests(),
        &mut subjects,
        Duration::from_secs(5),
    );
    let panels = check_structure(&replay.svg("a & b", Style::PerBin));
    assert_eq!(panels, [("<fixed & \"window\">".to_owned(), 120)]);
}

#[test]
fn the_committed_boundary_picture_is_what_the_simulator_draws() {
    let committed =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/boundary.svg"))
            .expect("docs/boundary.svg");
    assert!(
        committed == boundary_chart(),
        "docs/boundary.svg is stale: cargo run --release --features simulate --example simulate -- --scenario boundary --svg docs/boundary.svg"
    );
}

#[test]
fn a_policy_set_replays_through_a_closure_at_the_trace_readings() {
    use flowgate::clock::ManualClock;
    use flowgate::policy::{Policies, Policy};
    // Per key 2 per second (burst 2), and 3 per second for everyone, on a manual clock that the
    // closure sets to each reading (so that anything the set reads agrees with it).
    let clock = ManualClock::new();
    let policies = Policies::<str>::builder()
        .clock(clock.clone())
        .policy(
            Policy::keyed_with("per key", |r: &str, key| {
                key.add(r);
            })
            .quota(Quota::per_second(2).unwrap()),
        )
        .policy(Policy::global("everyone").quota(Quota::per_second(3).unwrap()))
        .build()
        .unwrap();
    let mut subjects = vec![simulate::from_fn("layers", move |r: &Request, now| {
        clock.set(now);
        // Policies decide with GCRA, which never delays: admitted now, or refused.
        match policies.check_n(&r.key, r.cost) {
            Ok(Ok(_)) => Some(Duration::ZERO),
            _ => None,
        }
    })];
    // Three keys, two requests each, all at once: the global burst of 3 admits three.
    let trace: Vec<Request> = ["a", "a", "b", "b", "c", "c"]
        .into_iter()
        .map(|k| Request::new(Duration::ZERO, k, 1))
        .collect();
    let replay = simulate::replay(&trace, &mut subjects, Duration::from_secs(1));
    assert_eq!(
        (replay.outcomes[0].admitted, replay.outcomes[0].refused),
        (3, 3)
    );
}

#[test]
fn any_trace_replays_in_bounded_memory_without_panicking() {
    let quota = quota();
    // Unix times: the bins start at the first request, not at 1970.
    let trace = trace::parse("1700000000.25,alice\n1700000001.5,alice,2\n").unwrap();
    let mut subjects = simulate::every_algorithm(&quota);
    let replay = simulate::replay(&trace, &mut subjects, Duration::from_secs(1));
    assert_eq!(replay.start, Duration::from_secs(1_700_000_000));
    assert_eq!(replay.offered, vec![1, 2]);
    assert!(replay.outcomes.iter().all(|o| o.admitted == 2));
    check_structure(&replay.svg("epoch", Style::PerBin));
    // A span too long for 100 000 bins of 1 ms is counted in wider bins.
    let long = vec![
        Request::new(Duration::ZERO, "a", 1),
        Request::new(Duration::from_secs(86_400 * 365), "a", 1),
    ];
    let replay = simulate::replay(&long, &mut subjects, Duration::from_millis(1));
    assert!(replay.offered.len() <= 100_000);
    assert!(replay.bin > Duration::from_secs(300));
    assert_eq!(replay.offered.iter().sum::<u64>(), 2);
    // The end of time, and a subject that delays forever: counted, not drawn, no overflow.
    let extreme = vec![
        Request::new(Duration::ZERO, "a", 1),
        Request::new(Duration::MAX, "a", u32::MAX),
    ];
    let mut forever = vec![simulate::from_fn("forever", |_: &Request, _| {
        Some(Duration::MAX)
    })];
    let replay = simulate::replay(&extreme, &mut forever, Duration::from_secs(1));
    assert_eq!(replay.outcomes[0].admitted, 2);
    assert_eq!(replay.outcomes[0].max_delay, Duration::MAX);
    check_structure(&replay.svg("title\0with\x1b controls", Style::Cumulative));
    // Nothing at all.
    let replay = simulate::replay(&[], &mut forever, Duration::from_secs(1));
    assert_eq!((replay.requests, replay.offered.len()), (0, 0));
}
