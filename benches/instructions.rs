#![allow(missing_docs)]
//! Instruction counts per decision, for `valgrind --tool=callgrind` (see
//! `scripts/instructions.sh`, which runs each case in its own process and divides the
//! instructions collected inside `hot_loop` by the iteration count).
//!
//! Each loop observes what a caller branching on the decision observes (admitted or not), the
//! same for flowgate and governor; reading `remaining()` etc. costs extra and is not counted.
//!
//! Usage: `instructions CASE N`; without a case (as `cargo bench` runs it) every case runs
//! briefly, to show they work.

mod common;

use std::hint::black_box;
use std::num::NonZeroU32;

use common::*;
use flowgate::clock::{Clock, CoarseClock};

const CASES: &[&str] = &[
    "baseline",
    "quanta_now",
    "flowgate_clock_now",
    "flowgate_check",
    "flowgate_check_coarse",
    "flowgate_refused",
    "flowgate_check_n",
    "flowgate_check_whole",
    "flowgate_refused_whole",
    "flowgate_check_n_whole",
    "governor_check",
    "governor_refused",
    "governor_check_n",
    "governor_check_whole",
    "governor_refused_whole",
    "governor_check_n_whole",
];

/// Counts `name`'s decisions, admitted or refused, without a dispatch inside the loop.
fn algorithm_case(name: &str, allowing: bool, n: u64) {
    macro_rules! count {
        ($($variant:ident),*) => {
            match algorithm(name, allowing) {
                $(Any::$variant(l) => hot_loop(n, || {
                    assert_eq!(black_box(l.check().is_ok()), allowing);
                }),)*
            }
        };
    }
    count!(Gcra, Leaky, Credit, Interval, Fixed, Sliding, Log, Governor)
}

fn run(case: &str, n: u64) {
    match case {
        "baseline" => hot_loop(n, || {
            black_box(0u64);
        }),
        "quanta_now" => {
            let clock = quanta::Clock::new();
            hot_loop(n, || {
                black_box(clock.now());
            })
        }
        "flowgate_clock_now" => {
            let clock = flowgate::clock::QuantaClock::new();
            hot_loop(n, || {
                black_box(clock.now());
            })
        }
        "flowgate_check" => {
            let l = flowgate_allowing();
            hot_loop(n, || {
                assert!(black_box(l.check().is_ok()));
            })
        }
        "flowgate_check_coarse" => {
            let clock = CoarseClock::new(std::time::Duration::from_millis(1)).unwrap();
            let l = flowgate::RateLimiter::with_clock(allowing_quota(), clock);
            hot_loop(n, || {
                assert!(black_box(l.check().is_ok()));
            })
        }
        "flowgate_refused" => {
            let l = flowgate_refusing();
            hot_loop(n, || {
                assert!(black_box(l.check().is_err()));
            })
        }
        "flowgate_check_n" => {
            let l = flowgate_allowing();
            hot_loop(n, || {
                assert!(black_box(matches!(l.check_n(black_box(5)), Ok(Ok(_)))));
            })
        }
        // The whole decision kept (governor's own convention: a caller that refuses reads the
        // wait), beside the `is_ok()` cases above.
        "flowgate_check_whole" => {
            let l = flowgate_allowing();
            hot_loop(n, || {
                let _ = black_box(l.check());
            })
        }
        "flowgate_refused_whole" => {
            let l = flowgate_refusing();
            hot_loop(n, || {
                let _ = black_box(l.check());
            })
        }
        "governor_check_whole" => {
            let l = governor_allowing();
            hot_loop(n, || {
                let _ = black_box(l.check());
            })
        }
        "governor_refused_whole" => {
            let l = governor_refusing();
            hot_loop(n, || {
                let _ = black_box(l.check());
            })
        }
        "governor_check" => {
            let l = governor_allowing();
            hot_loop(n, || {
                assert!(black_box(l.check().is_ok()));
            })
        }
        "governor_refused" => {
            let l = governor_refusing();
            hot_loop(n, || {
                assert!(black_box(l.check().is_err()));
            })
        }
        "flowgate_check_n_whole" => {
            let l = flowgate_allowing();
            hot_loop(n, || {
                let _ = black_box(l.check_n(black_box(10)));
            })
        }
        "governor_check_n_whole" => {
            let l = governor_allowing();
            let ten = NonZeroU32::new(10).unwrap();
            hot_loop(n, || {
                let _ = black_box(l.check_n(black_box(ten)));
            })
        }
        "governor_check_n" => {
            let l = governor_allowing();
            let five = NonZeroU32::new(5).unwrap();
            hot_loop(n, || {
                assert!(black_box(matches!(l.check_n(black_box(five)), Ok(Ok(_)))));
            })
        }
        other if other.starts_with("algorithm_") => {
            let (name, outcome) = other["algorithm_".len()..]
                .rsplit_once('_')
                .expect("algorithm_NAME_allowed or algorithm_NAME_refused");
            algorithm_case(name, outcome == "allowed", n);
        }
        other => unknown_case(other, CASES),
    }
}

fn main() {
    match case_from_args() {
        Some((case, n)) => run(&case, n),
        None => {
            for case in CASES {
                run(case, 1_000);
            }
            for name in ALGORITHMS {
                algorithm_case(name, true, 1_000);
                algorithm_case(name, false, 1_000);
            }
            println!(
                "instructions: {} cases ran; count them with scripts/instructions.sh",
                CASES.len()
            );
        }
    }
}
