use core::time::Duration;

use super::*;

#[test]
fn constructors_round_the_interval_up() {
    assert_eq!(Quota::per_second(100).unwrap().interval_nanos(), 10_000_000);
    assert_eq!(
        Quota::per_minute(60).unwrap().interval(),
        Duration::from_secs(1)
    );
    assert_eq!(Quota::per_hour(5000).unwrap().interval_nanos(), 720_000_000);
    assert_eq!(
        Quota::per_day(1).unwrap().interval(),
        Duration::from_secs(86_400)
    );
    // 3·10⁸/s is 3.33 ns: rounded up to 4 ns, never down to 3.
    assert_eq!(Quota::per_second(300_000_000).unwrap().interval_nanos(), 4);
    assert_eq!(
        Quota::per_second(1_000_000_000).unwrap().interval_nanos(),
        1
    );
    let q = Quota::new(3, Duration::from_nanos(10)).unwrap();
    assert_eq!(
        (q.interval_nanos(), q.burst(), q.window_nanos()),
        (4, 3, 12)
    );
}

#[test]
fn invalid_rates_are_typed_errors() {
    assert_eq!(Quota::per_second(0), Err(QuotaError::ZeroCount));
    assert_eq!(Quota::new(1, Duration::ZERO), Err(QuotaError::ZeroPeriod));
    assert_eq!(
        Quota::per_second(1_000_000_001),
        Err(QuotaError::IntervalBelowOneNanosecond)
    );
    assert_eq!(
        Quota::per_second(u32::MAX),
        Err(QuotaError::IntervalBelowOneNanosecond)
    );
    assert_eq!(Quota::new(1, Duration::MAX), Err(QuotaError::PeriodTooLong));
    assert_eq!(Quota::from_rate(f64::NAN), Err(QuotaError::NotFinite));
    assert_eq!(Quota::from_rate(f64::INFINITY), Err(QuotaError::NotFinite));
    assert_eq!(
        Quota::from_rate(f64::NEG_INFINITY),
        Err(QuotaError::NotFinite)
    );
    assert_eq!(Quota::from_rate(-1.0), Err(QuotaError::NotPositive));
    assert_eq!(Quota::from_rate(0.0), Err(QuotaError::NotPositive));
    assert_eq!(Quota::from_rate(-0.0), Err(QuotaError::NotPositive));
    assert_eq!(Quota::from_rate(1e-300), Err(QuotaError::PeriodTooLong));
    assert_eq!(
        Quota::from_rate(f64::MIN_POSITIVE),
        Err(QuotaError::PeriodTooLong)
    );
    assert_eq!(
        Quota::from_rate(2e9),
        Err(QuotaError::IntervalBelowOneNanosecond)
    );
    assert_eq!(
        Quota::from_rate(0.5).unwrap().interval(),
        Duration::from_secs(2)
    );
    assert_eq!(Quota::from_rate(3.0).unwrap().interval_nanos(), 333_333_334);
    // 10⁹ / 3.03030303030303e7 is 33.0000000000000033: the f64 quotient rounds to 33.0.
    assert_eq!(
        Quota::from_rate(3.03030303030303e7)
            .unwrap()
            .interval_nanos(),
        34
    );
    // Whatever the rate, interval × rate ≥ 10⁹ (the effective rate is never above the asked).
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..200_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let rate = 1.0 + (x >> 11) as f64 / (1u64 << 53) as f64 * 1e8;
        let t = Quota::from_rate(rate).unwrap().interval_nanos() as f64;
        assert!(t.mul_add(rate, -1e9) >= 0.0, "rate {rate:e}: interval {t}");
    }
}

/// `from_rate`'s interval is the least that covers a second (`interval × rate ≥ 10⁹`, checked
/// with a fused multiply-add, exact in sign, where the interval is a float without rounding),
/// over rates from subnormal to huge.
#[test]
fn from_rate_takes_the_least_interval_that_covers_a_second() {
    let covers = |interval: u64, rate: f64| (interval as f64).mul_add(rate, -1e9) >= 0.0;
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut checked = 0;
    for _ in 0..300_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // Any finite positive float: a random exponent field and fraction (most are far out of
        // range; every fourth draw is kept near the rates people use).
        let rate = if x % 4 == 0 {
            f64::from_bits(x % 0x7ff0_0000_0000_0000 + 1)
        } else {
            f64::from_bits(0x3e00_0000_0000_0000 + x % 0x0700_0000_0000_0000)
        };
        match Quota::from_rate(rate) {
            Ok(quota) if quota.interval_nanos() < 1 << 53 => {
                let t = quota.interval_nanos();
                assert!(covers(t, rate), "rate {rate:e}: {t}");
                assert!(!covers(t - 1, rate), "rate {rate:e}: {t} is not the least");
                checked += 1;
            }
            Ok(_) => {}
            Err(QuotaError::PeriodTooLong) => assert!(1e9 / rate >= 2f64.powi(63), "{rate:e}"),
            Err(QuotaError::WindowTooLong { max_burst: 0 }) => {
                assert!(1e9 / rate >= Quota::MAX_WINDOW_NANOS as f64, "{rate:e}");
            }
            Err(QuotaError::IntervalBelowOneNanosecond) => assert!(rate > 1e9, "{rate:e}"),
            Err(e) => panic!("rate {rate:e}: {e}"),
        }
    }
    assert!(checked > 100_000, "{checked}");
    // Past 2^53, where a float quotient is rounded: 10⁹ / 2^-30 is 2^30 × 10⁹ exactly, and
    // 10⁹ / 5.379230775614513e-9 is 185 900 185 679 570 857.74…, which the quotient in f64 rounds
    // to …848 (spacing 32): a float ceiling plus one, as this function once took, gives …849.
    assert_eq!(
        Quota::from_rate(2f64.powi(-30)).unwrap().interval_nanos(),
        1_000_000_000 << 30
    );
    assert_eq!(
        Quota::from_rate(5.379_230_775_614_513e-9)
            .unwrap()
            .interval_nanos(),
        185_900_185_679_570_858
    );
}

#[test]
fn burst_is_bounded_by_the_window() {
    let day = Quota::per_day(1).unwrap();
    let max = Quota::MAX_WINDOW_NANOS / 86_400_000_000_000;
    assert_eq!(day.with_burst(max as u32).unwrap().burst() as u64, max);
    assert_eq!(
        day.with_burst(max as u32 + 1),
        Err(QuotaError::WindowTooLong { max_burst: max })
    );
    assert_eq!(
        day.with_burst(u32::MAX),
        Err(QuotaError::WindowTooLong { max_burst: max })
    );
    assert_eq!(day.with_burst(0), Err(QuotaError::ZeroBurst));
    // The largest burst of all: u32::MAX cells at 1 ns.
    let fastest = Quota::per_second(1_000_000_000)
        .unwrap()
        .with_burst(u32::MAX)
        .unwrap();
    assert_eq!(fastest.window_nanos(), u64::from(u32::MAX));
    // A slow period whose count fits but whose window does not.
    let century = Duration::from_secs(100 * 365 * 86_400);
    assert!(Quota::new(1, century).is_ok());
    assert!(matches!(
        Quota::new(1, century * 3),
        Err(QuotaError::WindowTooLong { max_burst: 0 })
    ));
}

#[test]
fn initial_fill_is_validated_and_normalized() {
    let q = Quota::per_second(10).unwrap();
    assert_eq!(q.initial_cells(), 10);
    assert_eq!(q.with_initial(Initial::Empty).unwrap().initial_cells(), 0);
    assert_eq!(
        q.with_initial(Initial::Cells(3)).unwrap().initial_cells(),
        3
    );
    assert_eq!(
        q.with_initial(Initial::Cells(0)).unwrap(),
        q.with_initial(Initial::Empty).unwrap()
    );
    assert_eq!(
        q.with_initial(Initial::Cells(11)),
        Err(QuotaError::InitialAboveBurst {
            initial: 11,
            burst: 10
        })
    );
    // Lowering the burst below a set initial fill is refused too.
    let q = q.with_initial(Initial::Cells(8)).unwrap();
    assert_eq!(
        q.with_burst(5),
        Err(QuotaError::InitialAboveBurst {
            initial: 8,
            burst: 5
        })
    );
}

#[test]
fn parses_the_documented_grammar() {
    let p = |s: &str| s.parse::<Quota>().unwrap();
    assert_eq!(p("100/s"), Quota::per_second(100).unwrap());
    assert_eq!(p("5000/h"), Quota::per_hour(5000).unwrap());
    assert_eq!(p("20000/day"), Quota::per_day(20000).unwrap());
    assert_eq!(
        p("10/500ms"),
        Quota::new(10, Duration::from_millis(500)).unwrap()
    );
    assert_eq!(
        p("200/10s"),
        Quota::new(200, Duration::from_secs(10)).unwrap()
    );
    assert_eq!(
        p("100/s burst 20"),
        Quota::per_second(100).unwrap().with_burst(20).unwrap()
    );
    assert_eq!(p("  60 / MIN  Burst 10 INITIAL 0 "), {
        let q = Quota::per_minute(60).unwrap().with_burst(10).unwrap();
        q.with_initial(Initial::Empty).unwrap()
    });
    assert_eq!(
        p("1/2 hours"),
        Quota::new(1, Duration::from_secs(7200)).unwrap()
    );
    assert_eq!(p("7/3µs").interval_nanos(), 429);
    assert_eq!(p("7/3us"), p("7/3µs"));
    assert_eq!(p("7/3μs"), p("7/3µs"));
    assert_eq!(p("1/m"), p("1/MIN"));
    assert_eq!(p("1/s initial 1 burst 3"), p("1/s burst 3 initial 1"));
    assert_eq!(p("1000000000/s").interval_nanos(), 1);
}

#[test]
fn display_round_trips() {
    for s in [
        "100/s",
        "5000/h",
        "20000/d",
        "10/500ms",
        "100/s burst 20",
        "60/min burst 10 initial 0",
        "3/10ns initial 2",
        "1/90s",
    ] {
        let q: Quota = s.parse().unwrap();
        assert_eq!(q.to_string(), s);
        assert_eq!(q.to_string().parse::<Quota>().unwrap(), q);
    }
}

#[test]
fn rejects_bad_strings_with_a_position() {
    use ParseQuotaErrorKind::*;
    let e = |s: &str| {
        let e = s.parse::<Quota>().unwrap_err();
        (e.kind(), e.position())
    };
    assert_eq!(e(""), (Empty, 0));
    assert_eq!(e("   "), (Empty, 3));
    assert_eq!(e("-5/s"), (ExpectedCount, 0));
    assert_eq!(e("1.5/s"), (Fraction, 1));
    assert_eq!(e("5000/1.5h"), (Fraction, 6));
    assert_eq!(e("1,000/s"), (ExpectedSlash, 1));
    assert_eq!(e("NaN/s"), (ExpectedCount, 0));
    assert_eq!(e("abc"), (ExpectedCount, 0));
    assert_eq!(e("100"), (ExpectedSlash, 3));
    assert_eq!(e("100/"), (UnknownUnit, 4));
    assert_eq!(e("100/5"), (UnknownUnit, 5));
    assert_eq!(e("100/fortnight"), (UnknownUnit, 4));
    assert_eq!(e("100/-1s"), (UnknownUnit, 4));
    assert_eq!(e("4294967296/s"), (CountTooLarge, 0));
    assert_eq!(e("1/4294967295d"), (PeriodTooLong, 2));
    assert_eq!(
        e("1/200000d"),
        (Invalid(QuotaError::WindowTooLong { max_burst: 0 }), 0)
    );
    assert_eq!(e("1/99999999999999999999d"), (CountTooLarge, 2));
    assert_eq!(e("0/s"), (Invalid(QuotaError::ZeroCount), 0));
    assert_eq!(e("1/0s"), (Invalid(QuotaError::ZeroPeriod), 0));
    assert_eq!(
        e("2/1ns"),
        (Invalid(QuotaError::IntervalBelowOneNanosecond), 0)
    );
    assert_eq!(e("1/s burst"), (ExpectedCount, 9));
    assert_eq!(e("1/s burst 0"), (Invalid(QuotaError::ZeroBurst), 10));
    assert_eq!(
        e("1/s burst 2 initial 3"),
        (
            Invalid(QuotaError::InitialAboveBurst {
                initial: 3,
                burst: 2
            }),
            20
        )
    );
    assert_eq!(
        e("1/s initial 5 burst 3"),
        (
            Invalid(QuotaError::InitialAboveBurst {
                initial: 5,
                burst: 3
            }),
            12
        )
    );
    assert_eq!(e("1/s burst 2 burst 3"), (TrailingInput, 12));
    assert_eq!(e("1/M"), (UnknownUnit, 2));
    assert_eq!(e("1/Ms"), (UnknownUnit, 2));
    assert_eq!(e("1/MS"), (UnknownUnit, 2));
    assert_eq!(e("1/s bursty 3"), (TrailingInput, 4));
    assert_eq!(e("1/s, burst 3"), (TrailingInput, 3));
    assert_eq!(e("1/sµ"), (UnknownUnit, 2));
    assert_eq!(e("1/s ✓"), (TrailingInput, 4));
}

#[test]
fn error_messages_name_the_problem() {
    let msg = |s: &str| s.parse::<Quota>().unwrap_err().to_string();
    assert!(
        msg("1/fortnight").contains("time unit"),
        "{}",
        msg("1/fortnight")
    );
    assert!(msg("-1/s").contains("whole number"));
    assert!(msg("0/s").contains("count is 0"));
    assert!(
        msg("1/d burst 999999").contains("at most 106751"),
        "{}",
        msg("1/d burst 999999")
    );
    assert!(QuotaError::NotFinite.to_string().contains("NaN"));
    assert!(
        msg("1/200000d").contains("interval alone"),
        "{}",
        msg("1/200000d")
    );
}
