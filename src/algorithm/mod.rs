//! The decision math, one file per algorithm: pure functions from (state word, now, n) to a
//! [`Step`](crate::cell::Step), with no atomics and no clock inside.
//!
//! Keeping the math pure lets the same function run inside the lock-free [`Cell`](crate::cell)
//! loop, inside a reference model in the tests, and (mirrored in Lua) on a Redis server.

pub mod gcra;
