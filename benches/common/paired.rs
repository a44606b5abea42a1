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

    /// [`run`](Self::run) of `sides` on `threads` = 1 or 2 threads, each decision on a key the
    /// side derives from a fresh random number (see [`below`]): what a server that takes its
    /// key from a request gets, where `walking` ("key in hand") reads pre-drawn keys in order
    /// and all sides share one sequence. Every side and thread draws from a stream of its own,
    /// so that no side decides on the keys another just brought into cache.
    pub fn drawing(rounds: usize, sides: &[&(dyn Fn(u64) -> bool + Sync)], threads: usize) -> Self {
        // Each side's position in its stream (the high bits keep the streams apart).
        let at: Vec<Cell<u64>> = (0..sides.len())
            .map(|i| Cell::new((i as u64) << 48))
            .collect();
        Self::run(rounds, sides.len(), |i| {
            let start = at[i].get();
            at[i].set(start + BATCH as u64);
            match threads {
                1 => {
                    let begin = Instant::now();
                    for n in start..start + BATCH as u64 {
                        assert!(black_box(sides[i](random(n))));
                    }
                    begin.elapsed().as_nanos() as f64 / BATCH as f64
                }
                _ => {
                    let half = (BATCH / 2) as u64;
                    let elapsed = two_threads_walking(half, &|t, n| {
                        sides[i](random(start + ((t as u64) << 40) + n))
                    });
                    elapsed.as_nanos() as f64 / BATCH as f64
                }
            }
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

/// The `n`-th number of a random stream (splitmix64's finalizer: a bijection, so distinct `n`
/// give distinct numbers).
#[inline(always)]
pub fn random(n: u64) -> u64 {
    let mut z = n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// An index below `n` from a random number `x` (its high half scaled: uniform, no division).
#[inline(always)]
pub fn below(x: u64, n: usize) -> usize {
    (((x >> 32) * n as u64) >> 32) as usize
}

/// Rounds of a direct (single-bucket) case: 400 under `cargo bench`, a smoke run of 4 under
/// `cargo test`, none for `--list`.
pub fn direct_rounds() -> Option<usize> {
    mode().map(|bench| if bench { 400 } else { 4 })
}

/// One direct case: flowgate and governor in both conventions, and the floor, in one set of
/// rounds; and where the target for it (0.85x governor, whole) lies against the floor: below
/// 1.00, no limiter that does the floor's work can meet it.
pub fn report_direct(rounds: usize, name: &str, sides: [&dyn Fn() -> bool; 5]) {
    let r = Rounds::run(rounds, sides.len(), |i| batch(sides[i]));
    print_direct(name, &r);
    println!(
        "{:<22} target 0.85x governor (whole) = {:.2}x the floor",
        "",
        0.85 * r.ratio(1, 4)
    );
}

/// Prints one direct case's figures: contenders 0–1 flowgate and governor with the whole
/// result, 2–3 with `is_ok()`, 4 the floor.
pub fn print_direct(name: &str, r: &Rounds) {
    println!(
        "{name:<22} whole:  flowgate {:6.2} ns  governor {:6.2} ns  ratio {:.3}  flowgate/floor {:.2}  governor/floor {:.2}",
        r.median(0), r.median(1), r.ratio(0, 1), r.ratio(0, 4), r.ratio(1, 4)
    );
    println!(
        "{:<22} is_ok:  flowgate {:6.2} ns  governor {:6.2} ns  ratio {:.3}  flowgate/floor {:.2}  (floor {:.2} ns)",
        "", r.median(2), r.median(3), r.ratio(2, 3), r.ratio(2, 4), r.median(4)
    );
}
