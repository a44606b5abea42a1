//! flowgate's integration suites live in `tests/` and the examples that serve HTTP or talk to
//! Redis in `examples/`; this library holds the README's code, compiled and run as doctests
//! with this crate's dependencies (axum, tower, redis, actix-web, futures), so the published
//! crate's own dev-dependencies stay small.

/// The README's examples, compiled and run as doctests.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
