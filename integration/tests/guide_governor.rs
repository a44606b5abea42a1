//! The guide's "Coming from governor" block (src/guide.rs), run: the same limit on governor and
//! on flowgate, decided alike on fake clocks. It lives here because governor is a dependency of
//! this crate and not of flowgate; `guide_block_is_this_test` keeps the two copies equal.

#[test]
fn governor_and_flowgate_decide_alike() -> Result<(), Box<dyn std::error::Error>> {
    use std::num::NonZeroU32;
    use std::time::Duration;

    // governor
    let clock = governor::clock::FakeRelativeClock::default();
    let quota = governor::Quota::per_second(NonZeroU32::new(10).unwrap())
        .allow_burst(NonZeroU32::new(3).unwrap());
    let theirs = governor::RateLimiter::direct_with_clock(quota, clock.clone());

    // flowgate
    let manual = flowgate::clock::ManualClock::new();
    let ours = flowgate::RateLimiter::with_clock("10/s burst 3".parse()?, manual.clone());

    for step in 0..20 {
        assert_eq!(theirs.check().is_ok(), ours.check().is_ok(), "step {step}");
        clock.advance(Duration::from_millis(35));
        manual.advance(Duration::from_millis(35));
    }
    Ok(())
}

/// The block in the guide is the body above, line for line (hidden `#` lines aside).
#[test]
fn guide_block_is_this_test() {
    let guide = include_str!("../../src/guide.rs");
    let this = include_str!("guide_governor.rs");
    let start = guide
        .find("//! ```ignore\n//! use std::num::NonZeroU32;")
        .expect("the guide's block");
    let block: Vec<&str> = guide[start..]
        .lines()
        .skip(1)
        .take_while(|l| *l != "//! ```")
        .map(|l| l.strip_prefix("//!").unwrap_or(l).trim())
        .filter(|l| !l.starts_with('#'))
        .collect();
    let body_start = this
        .find("-> Result<(), Box<dyn std::error::Error>> {\n")
        .expect("the test");
    let body: Vec<&str> = this[body_start..]
        .lines()
        .skip(1)
        .take(block.len())
        .map(str::trim)
        .collect();
    assert_eq!(block, body);
}
