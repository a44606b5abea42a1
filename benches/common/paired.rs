//! Paired timing: contenders take turns in short batches (the order rotated every round), and
//! a figure is the median of the per-round ratios. On a shared, noisy machine this cancels
//! the drift that separates two criterion measurements taken seconds apart.

use std::cell::Cell;
use std::hint::black_box;
use std::time::Instant;

use super::{two_threads_walking, DRAWS};

/// Decisions per batch.
pub const BATCH: usize = 10_000;

/// Whether the bench runs for its figures (`cargo bench` passes `--bench`) rather than as a
/// smoke run under `cargo test`; `--list` asks for nothing to run.
pub fn mode() -> Option<bool> {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list") {
        return None;
    }
    Some(args.iter().any(|a| a == "--bench"))
}

pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The per-round times of several contenders, each timed once per round (one batch, ns per
/// decision), the order rotated every round.
pub struct Rounds {
    /// `times[contender][round]`.
    times: Vec<Vec<f64>>,
}

impl Rounds {
    /// Runs `rounds` rounds of `n` contenders: `time(i)` times one batch of contender `i`.
    pub fn run(rounds: usize, n: usize, mut time: impl FnMut(usize) -> f64) -> Self {
        let mut times = vec![Vec::with_capacity(rounds); n];
        for round in 0..rounds {
            for k in 0..n {
                let i = (round + k) % n;
                times[i].push(time(i));
            }
        }
        Self { times }
    }

    /// [`run`](Self::run) of `sides` walking `draws` on `threads` = 1 or 2 threads, each side
    /// from its own position, the sides spread evenly over the draws. Sides that share a table
    /// (a limiter timed in both conventions, a floor's table timed twice) must not walk the same
    /// keys in one round: the second would find the first one's cache lines still in the caches
    /// and be timed warm.
    pub fn walking<T: Sync>(
        rounds: usize,
        draws: &[T],
        sides: &[&(dyn Fn(&T) -> bool + Sync)],
        threads: usize,
    ) -> Self {
        let at: Vec<Cell<usize>> = (0..sides.len())
            .map(|i| Cell::new(i * DRAWS / sides.len()))
            .collect();
        Self::run(rounds, sides.len(), |i| match threads {
            1 => walk(draws, &at[i], sides[i]),
            _ => walk_two_threads(draws, &at[i], sides[i]),
        })
    }

    /// The median time of contender `i`, ns per decision.
    pub fn median(&self, i: usize) -> f64 {
        median(&mut self.times[i].clone())
    }

    /// The median over rounds of contender `i`'s time divided by contender `j`'s.
    pub fn ratio(&self, i: usize, j: usize) -> f64 {
        let mut r: Vec<f64> = self.times[i]
            .iter()
            .zip(&self.times[j])
            .map(|(a, b)| a / b)
            .collect();
        median(&mut r)
    }
}

/// Times `BATCH` decisions, ns per decision.
pub fn batch(decide: &dyn Fn() -> bool) -> f64 {
    let start = Instant::now();
    for _ in 0..BATCH {
        assert!(black_box(decide()));
    }
    start.elapsed().as_nanos() as f64 / BATCH as f64
}

/// Times the next `BATCH` draws of a walk (continuing where its last batch stopped at `at`),
/// ns per decision.
pub fn walk<T>(draws: &[T], at: &Cell<usize>, decide: &dyn Fn(&T) -> bool) -> f64 {
    let start = Instant::now();
    for _ in 0..BATCH {
        let i = at.get();
        at.set((i + 1) & (DRAWS - 1));
        assert!(black_box(decide(&draws[i])));
    }
    start.elapsed().as_nanos() as f64 / BATCH as f64
}

/// [`walk`] by two threads at once, `BATCH / 2` decisions each, half the draws apart: wall
/// time per decision (the aggregate).
pub fn walk_two_threads<T: Sync>(
    draws: &[T],
    at: &Cell<usize>,
    decide: &(dyn Fn(&T) -> bool + Sync),
) -> f64 {
    let start = at.get();
    let half = (BATCH / 2) as u64;
    at.set((start + BATCH / 2) & (DRAWS - 1));
    let elapsed = two_threads_walking(half, &|t, i| {
        decide(&draws[(start + i as usize + t * DRAWS / 2) & (DRAWS - 1)])
    });
    elapsed.as_nanos() as f64 / BATCH as f64
}
