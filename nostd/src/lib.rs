//! flowgate without `std`: every part the core and `alloc` offer, used as a firmware or a
//! kernel module would use them, with a clock of the caller's ([`FnClock`] over a counter this
//! crate moves) and a hash seed of the caller's.
//!
//! [`run`] makes the decisions and checks each answer against the one worked out by hand. The
//! bare binary (`src/bin/bare.rs`) runs it with no `std` anywhere in the program, and the tests
//! (`tests/core.rs`) run it and the keyed table's spin lock under threads, on flowgate built
//! without `std` (`cargo test -p flowgate-nostd`, alone, so that no other member's features
//! turn `std` on).

#![no_std]

use core::sync::atomic::{AtomicU64, Ordering};
use core::time::Duration;

use flowgate::algorithm::{
    AnyAlgorithm, Credit, FixedWindow, IntervalRefill, LeakyBucket, SlidingWindow,
};
use flowgate::clock::{FnClock, ManualClock};
use flowgate::{Algorithm, Gcra, KeyedError, KeyedRateLimiter, Quota, RateLimiter, SlidingLog};

/// The time this crate's clock reads, in nanoseconds: what a timer interrupt would keep.
static NOW: AtomicU64 = AtomicU64::new(0);

/// The clock: a read of [`NOW`].
fn now() -> u64 {
    // Acquire: pairs with `advance`'s Release, so a decision never reads an older time than
    // one it was told of.
    NOW.load(Ordering::Acquire)
}

/// Moves the clock on by `by`.
fn advance(by: Duration) {
    // Release: see `now`.
    NOW.fetch_add(by.as_nanos() as u64, Ordering::Release);
}

/// Whether the flowgate this crate got was built without `std`: its default clock says. (In a
/// workspace-wide build another member turns `std` on; `scripts/nostd` builds this crate alone,
/// where it is off.)
pub fn without_std() -> bool {
    core::any::type_name::<flowgate::clock::DefaultClock>().contains("FnClock")
}

/// What went wrong: the first answer that differed from the expected one.
pub type Failure = &'static str;

fn expect(ok: bool, what: Failure) -> Result<(), Failure> {
    if ok {
        Ok(())
    } else {
        Err(what)
    }
}

/// How many of `n` single-cell checks `limiter` admits now.
fn admitted<C: flowgate::clock::Clock, A: Algorithm>(limiter: &RateLimiter<C, A>, n: u32) -> u32 {
    (0..n).map(|_| u32::from(limiter.check().is_ok())).sum()
}

/// Makes every kind of decision the core and `alloc` offer and checks each answer; returns
/// how many checks passed, or the first that did not.
///
/// # Errors
/// The expectation that failed, in words.
pub fn run() -> Result<u32, Failure> {
    let mut checks = 0;
    let mut check = |ok: bool, what: Failure| {
        checks += 1;
        expect(ok, what)
    };

    // Quotas: written, parsed and from a fractional rate.
    let quota = Quota::per_second(10).map_err(|_| "10/s is a quota")?;
    check(quota.burst() == 10, "10/s has burst 10")?;
    let parsed: Quota = "100/s burst 5".parse().map_err(|_| "the grammar parses")?;
    check(parsed.burst() == 5, "burst 5 parsed")?;
    check(
        Quota::from_rate(0.5).map(|q| q.interval()) == Ok(Duration::from_secs(2)),
        "0.5/s is one cell every 2 s",
    )?;
    check(Quota::per_second(0).is_err(), "0/s is refused")?;
    check(Quota::from_rate(f64::NAN).is_err(), "a NaN rate is refused")?;

    // GCRA on a clock of the caller's.
    let clock = FnClock::new(now as fn() -> u64);
    let gcra: RateLimiter<FnClock> = RateLimiter::with_clock(parsed, clock);
    check(admitted(&gcra, 8) == 5, "GCRA admits its burst of 5")?;
    let refused = gcra.check().err().ok_or("GCRA refuses past its burst")?;
    check(
        refused.retry_after() == Duration::from_millis(10),
        "GCRA says retry after one interval",
    )?;
    check(
        gcra.check_n(6).is_err(),
        "6 cells can never fit a burst of 5",
    )?;
    advance(Duration::from_millis(20));
    check(admitted(&gcra, 8) == 2, "two intervals give back two cells")?;

    // Every other one-word algorithm, on the same clock.
    let per_second = Quota::per_second(4).map_err(|_| "4/s")?;
    let leaky = RateLimiter::with_algorithm(LeakyBucket::meter(&per_second), clock);
    check(admitted(&leaky, 6) == 4, "leaky bucket meter: 4")?;
    let shaper = LeakyBucket::shaper(&per_second, Duration::from_secs(1)).map_err(|_| "shaper")?;
    let shaper = RateLimiter::with_algorithm(shaper, clock);
    check(
        admitted(&shaper, 12) == 8,
        "shaper: 4 now and 4 queued for up to 1 s",
    )?;
    let credit = Credit::new(&per_second, Duration::from_millis(500)).map_err(|_| "credit")?;
    let credit = RateLimiter::with_algorithm(credit, clock);
    check(
        admitted(&credit, 12) == 6,
        "credit: 4 and 2 borrowed over 500 ms",
    )?;
    let refill = IntervalRefill::new(&per_second).map_err(|_| "interval refill")?;
    let refill = RateLimiter::with_algorithm(refill, clock);
    check(admitted(&refill, 6) == 4, "interval refill: 4")?;
    let fixed = FixedWindow::new(&per_second).map_err(|_| "fixed window")?;
    let fixed = RateLimiter::with_algorithm(fixed, clock);
    check(admitted(&fixed, 6) == 4, "fixed window: 4")?;
    let sliding = SlidingWindow::new(&per_second).map_err(|_| "sliding window")?;
    let sliding = RateLimiter::with_algorithm(sliding, clock);
    check(admitted(&sliding, 6) == 4, "sliding window: 4")?;
    let any: AnyAlgorithm = "4/s fixed".parse().map_err(|_| "an algorithm by name")?;
    let any = RateLimiter::with_algorithm(any, clock);
    check(admitted(&any, 6) == 4, "an algorithm by name: 4")?;
    advance(Duration::from_secs(1));
    for (limiter, name) in [
        (admitted(&leaky, 6), "leaky bucket refills"),
        (admitted(&refill, 6), "interval refill refills"),
        (admitted(&fixed, 6), "fixed window opens the next window"),
        (admitted(&any, 6), "the named algorithm refills"),
    ] {
        check(limiter == 4, name)?;
    }

    // `alloc`: the exact sliding log, and a manual clock.
    let manual = ManualClock::new();
    let log = SlidingLog::with_clock(per_second, manual.clone()).map_err(|_| "sliding log")?;
    check(
        (0..6).filter(|_| log.check().is_ok()).count() == 4,
        "log: 4 in a second",
    )?;
    manual.advance(Duration::from_millis(999));
    let wait = log
        .check()
        .err()
        .ok_or("log: still full 999 ms on")?
        .retry_after();
    check(
        wait >= Duration::from_millis(1) && wait < Duration::from_micros(1_001),
        "log: room again once the first request is a second old",
    )?;
    manual.advance(wait);
    check(log.check().is_ok(), "log: room after the wait it gave")?;

    // `alloc`: the keyed table, which has no random seed without std.
    let unseeded = KeyedRateLimiter::<u32, _>::builder_with_clock(Gcra::new(&quota), clock)
        .max_keys(64)
        .build();
    check(
        if without_std() {
            matches!(unseeded, Err(KeyedError::NoHashSeed))
        } else {
            unseeded.is_ok()
        },
        "a keyed limiter needs a seed without std, and only there",
    )?;
    let keyed = KeyedRateLimiter::<u32, _>::builder_with_clock(Gcra::new(&parsed), clock)
        .max_keys(64)
        .hash_seed(0x0123_4567_89ab_cdef)
        .build()
        .map_err(|_| "a seeded keyed limiter builds")?;
    for key in 0..32u32 {
        let taken = (0..8).filter(|_| keyed.check_key(&key).is_ok()).count();
        check(taken == 5, "every key gets its own burst of 5")?;
    }
    check(keyed.len() == 32, "the table holds the 32 keys")?;
    advance(Duration::from_secs(1));
    check(
        keyed.sweep(1 << 10) == 32,
        "a second on, every bucket is idle and swept",
    )?;
    check(keyed.is_empty(), "the swept table is empty")?;

    Ok(checks)
}
