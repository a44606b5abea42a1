//! Replays traffic through every algorithm at the trace's own times (read from a manual clock:
//! nothing waits), prints what each admitted, and draws it as an SVG: one small panel per
//! algorithm, all on the same scales.
//!
//! ```text
//! cargo run --release --features simulate --example simulate -- [--scenario NAME | --trace FILE.csv]
//!     [--quota "120/min"] [--bin SECONDS] [--svg FILE] [--per-bin]
//! ```
//!
//! * `--scenario`: `boundary` (the default: the fixed-window boundary attack, a window's limit
//!   at the end of one window and again at the start of the next), `steady`, `bursts` or
//!   `zipf`, each sized to the quota (`flowgate::simulate::Scenario::named`);
//! * `--trace`: a CSV of `time,key,cost` lines instead (`flowgate::simulate::trace`);
//! * `--quota`: the quota every algorithm runs, per key (default `120/min`);
//! * `--bin`: the chart's bin in seconds (default: a sixtieth of the quota's period);
//! * `--svg`: where to write the chart (cells so far; `--per-bin` for cells per bin);
//! * `-h`, `--help`: prints this usage and exits.
//!
//! `docs/boundary.svg` is `--scenario boundary --svg docs/boundary.svg` with the defaults
//! (`tests/simulate.rs` checks that it still is).

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

use flowgate::simulate::{self, trace, Scenario, Style};
use flowgate::Quota;

/// What `--help` prints, and what follows an argument's error.
const USAGE: &str = "\
usage: simulate [--scenario NAME | --trace FILE.csv] [--quota QUOTA] [--bin SECONDS]
                [--svg FILE] [--per-bin]

Replays traffic through every algorithm at the trace's own times, prints what each
admitted, and draws it as an SVG (one panel per algorithm).

  --scenario NAME   boundary (the default), steady, bursts or zipf, sized to the quota
  --trace FILE.csv  replay a CSV of time,key,cost lines instead of a scenario
  --quota QUOTA     the quota every algorithm runs, per key (default 120/min)
  --bin SECONDS     the chart's bin (default: a sixtieth of the quota's period)
  --svg FILE        write the chart to FILE (cells so far)
  --per-bin         chart cells per bin instead of cells so far
  -h, --help        print this and exit
";

struct Options {
    scenario: String,
    trace: Option<String>,
    quota: Quota,
    bin: Option<Duration>,
    svg: Option<String>,
    style: Style,
}

/// The options in `args`, or `None` when they ask for the usage.
fn options(args: impl Iterator<Item = OsString>) -> Result<Option<Options>, String> {
    let mut options = Options {
        scenario: "boundary".to_owned(),
        trace: None,
        quota: "120/min".parse().map_err(|e| format!("{e}"))?,
        bin: None,
        svg: None,
        style: Style::Cumulative,
    };
    let mut args = args.map(|a| a.into_string().map_err(|a| format!("{a:?} is not UTF-8")));
    while let Some(flag) = args.next().transpose()? {
        let mut value = || args.next().unwrap_or(Err(format!("{flag} needs a value")));
        match flag.as_str() {
            "-h" | "--help" => return Ok(None),
            "--scenario" => {
                options.scenario = value()?;
                if !Scenario::NAMES.contains(&options.scenario.as_str()) {
                    return Err(format!(
                        "unknown scenario {}; one of {}",
                        options.scenario,
                        Scenario::NAMES.join(", ")
                    ));
                }
            }
            "--trace" => options.trace = Some(value()?),
            "--quota" => {
                let text = value()?;
                options.quota = text.parse().map_err(|e| format!("--quota {text}: {e}"))?;
            }
            "--bin" => {
                let text = value()?;
                let bin = text
                    .parse::<f64>()
                    .ok()
                    .and_then(|s| Duration::try_from_secs_f64(s).ok())
                    .filter(|b| *b >= Duration::from_millis(1))
                    .ok_or(format!("--bin {text}: a number of seconds, at least 0.001"))?;
                options.bin = Some(bin);
            }
            "--svg" => options.svg = Some(value()?),
            "--per-bin" => options.style = Style::PerBin,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(Some(options))
}

fn run(options: Options) -> Result<(), String> {
    let quota = options.quota;
    let (trace, what) = match &options.trace {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
            (
                trace::parse(&text).map_err(|e| format!("{path}: {e}"))?,
                path.clone(),
            )
        }
        None => {
            let scenario = Scenario::named(&options.scenario, &quota).ok_or(format!(
                "unknown scenario {}; one of {:?}",
                options.scenario,
                Scenario::NAMES
            ))?;
            (
                scenario.requests(),
                format!("scenario {}", options.scenario),
            )
        }
    };
    let bin = options.bin.unwrap_or(quota.period() / 60);
    let mut subjects = simulate::every_algorithm(&quota);
    let replay = simulate::replay(&trace, &mut subjects, bin);
    println!(
        "{what}, {} requests; every algorithm at {quota} per key",
        replay.requests
    );
    if options.trace.is_none() && replay.requests >= Scenario::MAX_REQUESTS {
        println!(
            "(cut at {} requests: the pattern asked for more)",
            Scenario::MAX_REQUESTS
        );
    }
    if replay.bin != bin.max(std::time::Duration::from_millis(1)) {
        println!("(bins widened to {:?} to fit the trace)", replay.bin);
    }
    println!();
    print!("{}", replay.table(quota.period()));
    if let Some(path) = &options.svg {
        let title = format!("{what}: cells admitted at {quota} per key");
        std::fs::write(path, replay.svg(&title, options.style))
            .map_err(|e| format!("{path}: {e}"))?;
        println!("\nchart: {path}");
    }
    Ok(())
}

fn main() -> ExitCode {
    let options = match options(std::env::args_os().skip(1)) {
        Ok(Some(options)) => options,
        Ok(None) => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(error) => {
            eprint!("simulate: {error}\n\n{USAGE}");
            return ExitCode::FAILURE;
        }
    };
    match run(options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("simulate: {error}");
            ExitCode::FAILURE
        }
    }
}
