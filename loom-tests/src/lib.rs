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
