//! The single-bucket limiter at its edges: slow and fast quotas, the largest bursts, `n = 0`,
//! a clock near its horizon or stepping back, initial fills, give-backs, and threads racing on one
//! bucket. Time is a `ManualClock` throughout.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use flowgate::clock::{Clock, CoarseClock, ManualClock, QuantaClock, StdClock};
use flowgate::{Initial, Quota, RateLimiter};

mod common;

const DAY: u64 = 86_400_000_000_000;

fn limiter(quota: &str, start: u64) -> (RateLimiter<ManualClock>, ManualClock) {
    let clock = ManualClock::starting_at(start);
    (
        RateLimiter::with_clock(quota.parse().unwrap(), clock.clone()),
        clock,
    )
}

#[test]
fn one_per_day_never_wraps() {
    let (l, clock) = limiter("1/day", 5);
    assert!(l.check().is_ok());
    let refused = l.check().unwrap_err();
    assert_eq!(refused.retry_after(), Duration::from_nanos(DAY));
    // n × interval would wrap 64 bits for n ≥ 213 504: every such n is "never", not admitted.
    for n in [2, 213_504, 1 << 31, u32::MAX] {
        let never = l.check_n(n).unwrap_err();
        assert_eq!((never.requested, never.burst), (n, 1));
    }
    clock.advance(Duration::from_nanos(DAY - 1));
    assert!(l.check().is_err());
    clock.advance(Duration::from_nanos(1));
    assert!(l.check().is_ok());
}

#[test]
fn largest_burst_of_a_slow_quota() {
    let max = (flowgate::Quota::MAX_WINDOW_NANOS / DAY) as u32;
    let (l, clock) = limiter(&format!("1/day burst {max}"), 0);
    let never = l.check_n(max + 1).unwrap_err();
    assert_eq!((never.requested, never.burst), (max + 1, max));
    let all = l.check_n(max).unwrap().unwrap();
    assert_eq!(all.remaining(), 0);
    assert_eq!(
        all.reset_after(),
        Duration::from_nanos(u64::from(max) * DAY)
    );
    let refused = l.check().unwrap_err();
    assert_eq!(refused.retry_after(), Duration::from_nanos(DAY));
    assert_eq!(
        refused.reset_after(),
        Duration::from_nanos(u64::from(max) * DAY)
    );
    clock.advance(Duration::from_nanos(DAY));
    assert_eq!(l.check().unwrap().remaining(), 0);
}

#[test]
fn largest_burst_of_all() {
    let (l, _) = limiter(&format!("1000000000/s burst {}", u32::MAX), 0);
    assert_eq!(l.check_n(u32::MAX).unwrap().unwrap().remaining(), 0);
    assert_eq!(
        l.check().unwrap_err().retry_after(),
        Duration::from_nanos(1)
    );
}

#[test]
fn burst_of_one() {
    let (l, clock) = limiter("10/s burst 1", 0);
    assert_eq!(l.check().unwrap().remaining(), 0);
    assert_eq!(
        l.check().unwrap_err().retry_after(),
        Duration::from_millis(100)
    );
    assert!(l.check_n(2).is_err());
    clock.advance(Duration::from_millis(100));
    assert!(l.check().is_ok());
}

#[test]
fn zero_cells_are_always_allowed_and_take_nothing() {
    let (l, clock) = limiter("2/s", 0);
    assert_eq!(l.check_n(0).unwrap().unwrap().remaining(), 2);
    l.check_n(2).unwrap().unwrap();
    assert_eq!(l.check_n(0).unwrap().unwrap().remaining(), 0);
    // Even after the clock steps far back.
    clock.set(0);
    clock.advance(Duration::from_secs(100));
    l.check_n(2).unwrap().unwrap();
    clock.rewind(Duration::from_secs(50));
    assert_eq!(l.check_n(0).unwrap().unwrap().remaining(), 0);
    assert!(l.peek(0).unwrap().is_ok());
}

/// Rates of 10⁸–10⁹/s, where intervals are fractions of a nanosecond away from whole ones:
/// over 10⁶ random steps, admitted cells never exceed burst + elapsed × configured rate.
#[test]
fn fast_rates_never_exceed_the_configured_rate() {
    for rate in [
        100_000_000u32,
        300_000_000,
        333_333_334,
        700_000_000,
        999_999_999,
        1_000_000_000,
    ] {
        let (l, clock) = limiter(&format!("{rate}/s burst 10"), 0);
        let mut admitted: u64 = 0;
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..1_000_000 {
            // xorshift: steps of 0..=3 ns and requests of 1..=4 cells, more than 10⁹/s offered.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            clock.advance(Duration::from_nanos(x & 3));
            let n = ((x >> 8) & 3) as u32 + 1;
            if let Ok(Ok(_)) = l.check_n(n) {
                admitted += u64::from(n);
            }
            let allowed = 10 + u128::from(clock.get()) * u128::from(rate) / 1_000_000_000;
            assert!(
                u128::from(admitted) <= allowed,
                "rate {rate}: {admitted} > {allowed}"
            );
        }
        // And not absurdly below it either: the interval is rounded up by less than 1 ns.
        let elapsed = u128::from(clock.get());
        let effective = elapsed / l.quota().interval().as_nanos();
        assert!(
            u128::from(admitted) + 10 >= effective * 9 / 10,
            "rate {rate}: only {admitted}"
        );
    }
}

#[test]
fn clock_near_the_horizon_refuses_and_never_panics() {
    let (l, clock) = limiter("1/s burst 3", u64::MAX - 2_500_000_000);
    assert!(l.check().is_ok());
    assert!(l.check().is_ok());
    // The third cell would be booked past u64::MAX: refused, never conforming.
    let r = l.check().unwrap_err();
    assert_eq!(r.retry_after(), Duration::from_nanos(u64::MAX));
    clock.set(u64::MAX);
    for n in 1..=3 {
        assert_eq!(
            l.check_n(n).unwrap().unwrap_err().retry_after(),
            Duration::from_nanos(u64::MAX)
        );
    }
    assert!(l.check_n(0).unwrap().is_ok());
    assert!(!l.give_back(flowgate::Receipt::default()));
    l.reset();
    assert!(
        l.check().is_err(),
        "no cell can be booked at the horizon itself"
    );
}

#[test]
fn a_clock_step_back_locks_out_for_at_most_one_window() {
    let (l, clock) = limiter("10/s", 1_000 * DAY);
    l.check_n(10).unwrap().unwrap();
    clock.rewind(Duration::from_secs(3 * 86_400));
    // Empty as of the new reading: refused for exactly one interval, full after one window.
    let r = l.check().unwrap_err();
    assert_eq!(r.retry_after(), Duration::from_millis(100));
    assert_eq!(r.reset_after(), Duration::from_secs(1));
    clock.advance(Duration::from_millis(100));
    assert!(l.check().is_ok());
    assert!(l.check().is_err());
    clock.advance(Duration::from_secs(1));
    assert_eq!(l.available(), 10);
}

#[test]
fn a_clock_step_back_never_over_admits() {
    // A clock that jitters backwards and forwards admits no more than one that stands still.
    let (l, clock) = limiter("100/s burst 5", DAY);
    let mut admitted = 0;
    for i in 0..10_000u64 {
        clock.set(DAY + (i % 7) * 1_000 - (i % 3) * 2_000);
        admitted += u32::from(l.check().is_ok());
    }
    // At most 13 µs of real progress: only the burst.
    assert_eq!(admitted, 5);
}

#[test]
fn initial_fills() {
    let (l, clock) = limiter("10/s initial 0", 0);
    assert_eq!(l.available(), 0);
    assert_eq!(
        l.check().unwrap_err().retry_after(),
        Duration::from_millis(100)
    );
    clock.advance(Duration::from_millis(100));
    assert!(l.check().is_ok());

    let (l, _) = limiter("10/s initial 3", 77);
    assert_eq!(l.available(), 3);
    assert_eq!((0..20).filter(|_| l.check().is_ok()).count(), 3);

    let clock = ManualClock::new();
    let q = Quota::per_second(10)
        .unwrap()
        .with_initial(Initial::Empty)
        .unwrap();
    let l = RateLimiter::with_clock(q, clock.clone());
    // No initial spike: in the first second, only the refill (10 cells), not burst + refill.
    let mut admitted = 0;
    for _ in 0..1_000 {
        clock.advance(Duration::from_millis(1));
        admitted += u32::from(l.check().is_ok());
    }
    assert_eq!(admitted, 10);
}

/// A give-back never frees a cell another request was admitted against: at 1/s, cells taken at
/// 0 s and at 1 s, and the first given back at 1.5 s, a request at 1.5 s is refused (an
/// arithmetic refund admitted it: two admissions half a second apart). On a single limiter and
/// on a keyed one.
/// A keyed GCRA limiter for `quota` on `clock`, with room for a few keys.
fn keyed(quota: &str, clock: &ManualClock) -> flowgate::KeyedRateLimiter<u8, ManualClock> {
    let gcra = flowgate::Gcra::new(&quota.parse().unwrap());
    flowgate::KeyedRateLimiter::builder_with_clock(gcra, clock.clone())
        .max_keys(16)
        .build()
        .unwrap()
}

#[test]
fn a_give_back_never_frees_a_cell_others_were_admitted_against() {
    let (l, clock) = limiter("1/s", 0);
    let keyed = keyed("1/s", &clock);
    let (_, first) = l.reserve(1).unwrap().unwrap();
    let (_, keyed_first) = keyed.reserve_key(&7, 1).unwrap().unwrap();
    clock.advance(Duration::from_secs(1));
    assert!(l.check().is_ok() && keyed.check_key(&7).is_ok());
    clock.advance(Duration::from_millis(500));
    assert!(!l.give_back(first) && !keyed.give_back(keyed_first));
    assert!(l.check().is_err() && keyed.check_key(&7).is_err());
    // Given back before anything else happened, the cell does come back.
    clock.advance(Duration::from_millis(500));
    let (_, second) = keyed.reserve_key(&7, 1).unwrap().unwrap();
    assert!(keyed.give_back(second) && keyed.check_key(&7).is_ok());
}

#[test]
fn give_back_peek_reset() {
    let (l, clock) = limiter("4/s", 0);
    let (_, two) = l.reserve(2).unwrap().unwrap();
    let (_, one) = l.reserve(1).unwrap().unwrap();
    assert_eq!(l.available(), 1);
    assert_eq!(
        l.peek(2).unwrap().unwrap_err().retry_after(),
        Duration::from_millis(250)
    );
    assert_eq!(l.peek(1).unwrap().unwrap().remaining(), 0);
    assert_eq!(l.available(), 1, "peek takes nothing");
    assert!(!l.give_back(two), "the later reservation was built on it");
    assert_eq!(l.available(), 1);
    assert!(l.give_back(one));
    assert_eq!(l.available(), 2);
    // Two steps, one receipt: given back whole while nothing was built on them.
    let (_, both) = l.reserve(1).unwrap().unwrap();
    let (_, next) = l.reserve(1).unwrap().unwrap();
    assert!(l.give_back(both.then(next)));
    assert_eq!(l.available(), 2);
    let (_, first) = l.reserve(1).unwrap().unwrap();
    assert_eq!(l.check().unwrap().remaining(), 0);
    assert!(!l.give_back(first), "an old receipt frees nothing");
    assert_eq!(l.available(), 0);
    // A keyed limiter's receipt is not a single limiter's.
    let keyed = keyed("4/s", &clock);
    let (_, foreign) = keyed.reserve_key(&1, 1).unwrap().unwrap();
    assert!(!l.give_back(foreign));
    clock.advance(Duration::from_secs(1));
    assert_eq!(l.available(), 4);
    assert_eq!(l.check_n(4).unwrap().unwrap().remaining(), 0);
    clock.advance(Duration::from_millis(10));
    l.reset();
    assert_eq!(l.available(), 4);
    assert!(!l.check_n(5).is_ok_and(|r| r.is_ok()));
    assert!(l.check_n(4).is_ok_and(|r| r.is_ok()));
    assert!(!l.check_n(1).is_ok_and(|r| r.is_ok()));
}

#[test]
fn decisions_report_headers_numbers() {
    let (l, clock) = limiter("10/s burst 5", 0);
    let a = l.check_n(2).unwrap().unwrap();
    assert_eq!((a.remaining(), a.limit()), (3, 5));
    assert_eq!(a.reset_after(), Duration::from_millis(200));
    clock.advance(Duration::from_millis(50));
    let a = l.check().unwrap();
    // 150 ms booked − 50 ms elapsed + 100 ms = 250 ms: 2.5 cells used, so 2 whole cells remain.
    assert_eq!(
        (a.remaining(), a.reset_after()),
        (2, Duration::from_millis(250))
    );
    let r = l.check_n(4).unwrap().unwrap_err();
    assert_eq!(r.remaining(), 2);
    assert_eq!(r.retry_after(), Duration::from_millis(150));
    assert_eq!(r.reset_after(), Duration::from_millis(250));
    assert!(r.to_string().contains("150ms"), "{r}");
}

/// T threads × M attempts on a frozen clock admit exactly `burst` cells.
#[test]
fn threads_on_a_frozen_clock_admit_exactly_the_burst() {
    for (threads, attempts, burst) in [(2, 50_000, 1_000u32), (4, 20_000, 7), (8, 5_000, 30_000)] {
        let clock = ManualClock::starting_at(42);
        let q = Quota::per_hour(1).unwrap().with_burst(burst).unwrap();
        let l = Arc::new(RateLimiter::with_clock(q, clock));
        let admitted = Arc::new(AtomicU64::new(0));
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (l, admitted) = (l.clone(), admitted.clone());
                std::thread::spawn(move || {
                    for i in 0..attempts {
                        let n = 1 + ((i + t) % 3) as u32;
                        if let Ok(Ok(_)) = l.check_n(n) {
                            admitted.fetch_add(u64::from(n), Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        handles.into_iter().for_each(|h| h.join().unwrap());
        let total = admitted.load(Ordering::Relaxed);
        // Never more than the burst; and with 1-cell requests in the mix, never fewer.
        assert_eq!(total, u64::from(burst), "{threads} threads");
        assert_eq!(l.available(), 0);
    }
}

/// With a clock advancing under the threads, admitted ≤ burst + elapsed / interval at every
/// observation.
#[test]
fn threads_on_an_advancing_clock_stay_within_the_rate() {
    let clock = ManualClock::starting_at(1_000);
    let q: Quota = "1000/s burst 50".parse().unwrap();
    let interval = u64::try_from(q.interval().as_nanos()).unwrap();
    let l = Arc::new(RateLimiter::with_clock(q, clock.clone()));
    let admitted = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..3)
        .map(|_| {
            let (l, admitted, clock) = (l.clone(), admitted.clone(), clock.clone());
            std::thread::spawn(move || {
                for _ in 0..200_000 {
                    if l.check().is_ok() {
                        let total = admitted.fetch_add(1, Ordering::Relaxed) + 1;
                        // The clock only moves forwards here, so a later reading bounds the
                        // decision's own time from above.
                        let elapsed = clock.get() - 1_000;
                        assert!(total <= 50 + elapsed / interval, "{total} at {elapsed} ns");
                    }
                }
            })
        })
        .collect();
    for _ in 0..20_000 {
        clock.advance(Duration::from_nanos(interval / 4));
        std::thread::yield_now();
    }
    workers.into_iter().for_each(|h| h.join().unwrap());
    let elapsed = clock.get() - 1_000;
    assert!(admitted.load(Ordering::Relaxed) <= 50 + elapsed / interval);
    assert!(
        admitted.load(Ordering::Relaxed) >= 50,
        "the burst itself was admitted"
    );
}

#[test]
fn shipped_clocks_read_sensibly() {
    let q = QuantaClock::new();
    let (a, b) = (q.now(), q.now());
    assert!(b >= a && b - a < 1_000_000_000, "{a} then {b}");
    let c = CoarseClock::new(Duration::from_millis(1)).unwrap();
    // Unix time, whichever clock: windows are counted from the epoch as Redis counts them.
    let unix = || {
        let since = std::time::SystemTime::UNIX_EPOCH.elapsed().unwrap();
        u64::try_from(since.as_nanos()).unwrap()
    };
    for (name, reading) in [
        ("quanta", q.now()),
        ("std", StdClock::new().now()),
        ("coarse", c.now()),
    ] {
        let wall = unix();
        assert!(
            reading.abs_diff(wall) < 1_000_000_000,
            "{name}: {reading} at {wall}"
        );
    }
    assert!(CoarseClock::new(Duration::ZERO).is_err());
    // The coarse clock moves: poll (bounded) until its updater thread has run.
    let first = c.now();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while c.now() == first && std::time::Instant::now() < deadline {
        std::thread::yield_now();
    }
    assert!(c.now() > first, "the coarse clock never advanced");
}

/// A stale reading (a thread preempted between its clock read and its CAS) looks like a clock
/// that stepped back; it must never free cells.
#[test]
fn stale_readings_never_free_cells() {
    let stale = |quota: &str, start| {
        let clock = common::Lagging::starting_at(start);
        (
            RateLimiter::with_clock(quota.parse().unwrap(), clock.clone()),
            clock,
        )
    };
    let (l, clock) = stale("10/s", 10_000_000_000);
    let t = clock.get();
    assert_eq!((0..10).filter(|_| l.check().is_ok()).count(), 10);
    clock.stale(t - 500_000_000);
    assert!(l.check().is_err());
    assert_eq!((0..10).filter(|_| l.check().is_ok()).count(), 0);

    // At 10⁹/s, readings a few hundred ns stale.
    let (l, clock) = stale("1000000000/s burst 1000", 1 << 40);
    let t = clock.get();
    let mut admitted = 0;
    for i in 0..10_000u64 {
        clock.stale(t - (i % 1_000));
        admitted += u32::from(l.check().is_ok());
    }
    assert_eq!(admitted, 1000);
}

#[test]
fn reset_restores_the_initial_fill() {
    let (l, clock) = limiter("5/s initial 0", 0);
    clock.advance(Duration::from_secs(10));
    assert_eq!(l.available(), 5);
    l.reset();
    assert_eq!(l.available(), 0);
    let (l, _) = limiter("5/s initial 2", 0);
    l.check_n(2).unwrap().unwrap();
    l.reset();
    assert_eq!(l.available(), 2);
}

/// A clock that swings back by δ and returns, again and again. The clamp takes each
/// stepped-back reading as the truth (that is what bounds the lockout to one window), so each
/// round trip can give back at most ⌈δ / T⌉ cells, and never more than one burst: admissions
/// stay within burst + forward drift / T + trips × min(burst, ⌈δ / T⌉), for small and large δ.
#[test]
fn each_round_trip_gives_back_at_most_its_amplitude() {
    for (delta_ms, burst) in [(250u64, 10u64), (900, 10), (4_000, 10), (50, 3)] {
        let (l, clock) = limiter(&format!("10/s burst {burst}"), 1_000 * DAY);
        let start = clock.get();
        let trips = 200u64;
        let mut admitted = 0u64;
        for i in 0..trips {
            let high = start + i * 1_000; // drifting forward by 1 µs per trip
            clock.set(high);
            admitted += (0..30).filter(|_| l.check().is_ok()).count() as u64;
            clock.set(high - delta_ms * 1_000_000);
            admitted += (0..30).filter(|_| l.check().is_ok()).count() as u64;
        }
        let per_trip = delta_ms.div_ceil(100).min(burst);
        let bound = burst + 1 + trips * per_trip;
        assert!(admitted <= bound, "δ = {delta_ms} ms: {admitted} > {bound}");
    }
}

/// After the clock steps back by more than a window, the lockout is one window: the bucket is
/// empty as of the new reading and full one window later.
#[test]
fn lockout_after_a_step_back_is_one_window() {
    let (l, clock) = limiter("10/s", 5_000_000_000);
    assert_eq!((0..20).filter(|_| l.check().is_ok()).count(), 10);
    clock.set(1_000_000_000);
    assert!(l.check().is_err());
    clock.set(2_000_000_000);
    assert_eq!(l.available(), 10);
}

/// Threads whose readings of one instant differ by up to 200 ns, on a clock that declares that
/// skew: no clamp ever fires on skew alone, so admissions stay within
/// burst + (highest reading − lowest reading) / T.
#[test]
fn declared_skew_never_frees_cells() {
    struct Skewed {
        base: ManualClock,
    }
    thread_local! {
        static OFFSET: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }
    impl Clock for Skewed {
        fn now(&self) -> u64 {
            self.base.get() + OFFSET.with(|o| o.get())
        }
        fn skew_nanos(&self) -> u64 {
            200
        }
    }
    let q: Quota = "1000000000/s burst 100".parse().unwrap();
    let l = Arc::new(RateLimiter::with_clock(
        q,
        Skewed {
            base: ManualClock::starting_at(1 << 40),
        },
    ));
    let admitted = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = [0u64, 200]
        .into_iter()
        .map(|offset| {
            let (l, admitted) = (l.clone(), admitted.clone());
            std::thread::spawn(move || {
                OFFSET.with(|o| o.set(offset));
                for _ in 0..200_000 {
                    if l.check().is_ok() {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    handles.into_iter().for_each(|h| h.join().unwrap());
    let admitted = admitted.load(Ordering::Relaxed);
    assert!(admitted <= 100 + 200, "{admitted}");
}

/// `retry_after` is exact on a clock that runs forwards: refused one nanosecond before it,
/// admitted at it, for slow, fast and fractional rates and weighted requests.
#[test]
fn retry_after_is_exact() {
    for (quota, n) in [
        ("1/day", 1),
        ("3/10ns burst 5", 4),
        ("7/1s burst 3", 2),
        ("100/s", 100),
    ] {
        let (l, clock) = limiter(quota, 123_456_789);
        while l.check_n(n).unwrap().is_ok() {}
        let wait = l.check_n(n).unwrap().unwrap_err().retry_after();
        assert!(wait > Duration::ZERO);
        clock.advance(wait - Duration::from_nanos(1));
        assert!(
            l.check_n(n).unwrap().is_err(),
            "{quota}: admitted 1 ns early"
        );
        clock.advance(Duration::from_nanos(1));
        assert!(
            l.check_n(n).unwrap().is_ok(),
            "{quota}: refused at retry_after"
        );
    }
}
