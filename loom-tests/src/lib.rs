//! Shared helpers of the loom models in `tests/` (built only with `--cfg flowgate_loom`).

#[cfg(flowgate_loom)]
use std::sync::atomic::{AtomicUsize, Ordering};

/// Runs `f` under loom with a bounded number of preemptions (`LOOM_MAX_PREEMPTIONS`, default 3);
/// see [`model_with_preemptions`].
#[cfg(flowgate_loom)]
pub fn model(f: impl Fn() + Sync + Send + 'static) {
    model_with_preemptions(3, f);
}

/// Runs `f` under loom with at most `preemptions` preemptions (fewer if `LOOM_MAX_PREEMPTIONS`
/// says so), and fails if loom explored a single interleaving: every model here races threads,
/// so one interleaving means loom could not see the race (its last-access tracking loses a
/// conflict when, for example, a thread loads a word it then stores), and the model proves
/// nothing. Prints how many interleavings it explored.
#[cfg(flowgate_loom)]
pub fn model_with_preemptions(preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
    // One counter per model: a static shared by the tests of one binary, which cargo runs on
    // parallel threads, let one test's reset land in another's count (a model seen at one
    // interleaving in CI, where it explores many).
    let runs = std::sync::Arc::new(AtomicUsize::new(0));
    let mut builder = loom::model::Builder::new();
    let bound = builder
        .preemption_bound
        .map_or(preemptions, |b| b.min(preemptions));
    builder.preemption_bound = Some(bound);
    let counter = runs.clone();
    builder.check(move || {
        // Relaxed: a count read after the model, on this thread (loom runs iterations in turn).
        counter.fetch_add(1, Ordering::Relaxed);
        f();
    });
    // Relaxed: the model's iterations all ran on this thread before `check` returned.
    let runs = runs.load(Ordering::Relaxed);
    eprintln!("loom: {runs} interleavings, at most {bound} preemptions");
    assert!(
        runs > 1,
        "loom explored one interleaving: the model races nothing it can see"
    );
}

/// Threads each making one `check()` on a shared limiter; thread `i` first has its next `i`
/// CAS attempts fail spuriously, so the retry path is covered too.
#[cfg(flowgate_loom)]
pub struct Checks(Vec<loom::thread::JoinHandle<bool>>);

#[cfg(flowgate_loom)]
impl Checks {
    /// Spawns `threads` checking threads on `limiter`.
    pub fn spawn<C, A>(limiter: &loom::sync::Arc<flowgate::RateLimiter<C, A>>, threads: u32) -> Self
    where
        C: flowgate::clock::Clock + Send + Sync + 'static,
        A: flowgate::Algorithm + Send + Sync + 'static,
    {
        Self(
            (0..threads)
                .map(|i| {
                    let limiter = limiter.clone();
                    loom::thread::spawn(move || {
                        flowgate::loom::fail_next_cas(i);
                        limiter.check().is_ok()
                    })
                })
                .collect(),
        )
    }

    /// Joins the threads; how many were admitted.
    pub fn admitted(self) -> usize {
        self.0
            .into_iter()
            .map(|h| h.join().unwrap())
            .filter(|&ok| ok)
            .count()
    }
}

/// A GCRA limiter of `burst` cells per hour on a manual clock that no model moves: nothing
/// refills during a model.
#[cfg(flowgate_loom)]
pub fn frozen(burst: u32) -> loom::sync::Arc<flowgate::RateLimiter<flowgate::clock::ManualClock>> {
    let quota = flowgate::Quota::per_hour(burst).unwrap();
    loom::sync::Arc::new(flowgate::RateLimiter::with_clock(
        quota,
        flowgate::clock::ManualClock::starting_at(1_000),
    ))
}
