//! Shared helpers of the loom models in `tests/` (built only with `--cfg flowgate_loom`).

/// Runs `f` under loom with a bounded number of preemptions (`LOOM_MAX_PREEMPTIONS`, default 3).
#[cfg(flowgate_loom)]
pub fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(3);
    }
    builder.check(f);
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
