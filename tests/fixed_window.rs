//! The fixed window counter against a reference model (absolute window numbers in 128-bit
//! arithmetic), and the users' boundary example.

use flowgate::algorithm::FixedWindow;
use flowgate::clock::ManualClock;
use flowgate::{Initial, Quota, QuotaError, RateLimiter};
use proptest::prelude::*;

mod common;
use common::{answer_of, Answer};

/// The documented rules, written plainly: windows numbered from the clock's origin; a bucket
/// counts in the latest window it has seen; a reading in an earlier window (stale, or a clock
/// that stepped back) counts against that latest window, and when it is refused there, a fresh
/// reading that is still earlier moves the count to the fresh reading's window.
struct Model {
    window: u128,
    limit: u128,
    stored: u128,
    count: u128,
}

impl Model {
    fn new(q: &Quota, now: u128) -> Self {
        let window = q.period().as_nanos();
        Self {
            window,
            limit: q.count().into(),
            stored: now / window,
            count: u128::from(q.count() - q.initial_cells()),
        }
    }

    /// (window counted in, its count, ns to its end)
    fn counted(&self, now: u128) -> (u128, u128, u128) {
        let index = now / self.window;
        if self.stored < index {
            (index, 0, (index + 1) * self.window - now)
        } else {
            (
                self.stored,
                self.count,
                (self.stored + 1) * self.window - now,
            )
        }
    }

    fn check(&mut self, now: u128, fresh: u128, n: u128) -> Answer {
        if n > self.limit {
            return Answer::Never(n, self.limit);
        }
        let (index, count, end) = self.counted(now);
        if n == 0 {
            return Answer::Allowed(self.limit - count, self.limit, end);
        }
        if count + n <= self.limit {
            (self.stored, self.count) = (index, count + n);
            return Answer::Allowed(self.limit - count - n, self.limit, end);
        }
        if self.stored > fresh / self.window {
            self.stored = fresh / self.window;
        }
        Answer::Refused(self.limit - count, self.limit, end, end)
    }

    fn refund(&mut self, now: u128, n: u128) -> Answer {
        if self.stored >= now / self.window {
            self.count -= n.min(self.count);
        }
        Answer::Done
    }
}

#[derive(Debug, Clone)]
enum Op {
    Advance(u64),
    Rewind(u64),
    Check(u32),
    CheckAt(u32, u64),
    Refund(u32),
}

fn scenario() -> impl Strategy<Value = (Quota, u64, Vec<Op>)> {
    let window = prop_oneof![
        Just(1_000_000u64),
        1_000_000u64..=10_000_000_000,
        Just(86_400_000_000_000)
    ];
    (window, 1u32..=20, any::<u32>())
        .prop_filter_map("invalid", |(window, limit, cells)| {
            let q = Quota::from_nanos(limit, window).ok()?;
            q.with_initial(Initial::Cells(cells % (limit + 1))).ok()
        })
        .prop_flat_map(|q| {
            let w = q.period().as_nanos() as u64;
            // Readings stay within 2^38 windows of each other, where window numbers modulo
            // 2^40 are unambiguous (aliasing has its own test below).
            let start = 0u64..(1u64 << 38).saturating_mul(w.min(1 << 20));
            let op = prop_oneof![
                4 => (0..=w.saturating_mul(2)).prop_map(Op::Advance),
                1 => Just(Op::Advance(0)),
                2 => (0..=w.saturating_mul(2)).prop_map(Op::Rewind),
                8 => (0u32..=22).prop_map(Op::Check),
                3 => (0u32..=22, 0..=w.saturating_mul(2)).prop_map(|(n, b)| Op::CheckAt(n, b)),
                2 => (0u32..=25).prop_map(Op::Refund),
            ];
            (Just(q), start, prop::collection::vec(op, 1..60))
        })
}

proptest! {
    #![proptest_config(common::config())]

    #[test]
    fn fixed_window_matches_the_model((quota, start, ops) in scenario()) {
        let clock = ManualClock::starting_at(start);
        let limiter = RateLimiter::with_algorithm(FixedWindow::new(&quota).unwrap(), clock.clone());
        let mut model = Model::new(&quota, start.into());
        for (i, op) in ops.iter().enumerate() {
            match *op {
                Op::Advance(d) => clock.advance_nanos(d),
                Op::Rewind(d) => clock.set(clock.get().saturating_sub(d)),
                _ => {}
            }
            let now = clock.get();
            let (got, want) = match *op {
                Op::Check(n) => (answer_of(limiter.check_n(n)), model.check(now.into(), now.into(), n.into())),
                Op::CheckAt(n, behind) => {
                    let at = now.saturating_sub(behind);
                    (answer_of(limiter.check_n_at(n, at)), model.check(at.into(), now.into(), n.into()))
                }
                Op::Refund(n) => {
                    limiter.refund(n);
                    (Answer::Done, model.refund(now.into(), n.into()))
                }
                _ => continue,
            };
            prop_assert_eq!(got, want, "op #{} {:?} at {}", i, op, now);
        }
    }
}

#[test]
fn limits_are_validated() {
    let q = |s: &str| s.parse::<Quota>().unwrap();
    assert_eq!(
        FixedWindow::new(&q("16777216/s")),
        Err(QuotaError::LimitTooLarge { max: 16_777_215 })
    );
    assert!(FixedWindow::new(&q("16777215/s")).is_ok());
    assert_eq!(
        FixedWindow::new(&q("1/999us")),
        Err(QuotaError::WindowTooShort {
            min_nanos: 1_000_000
        })
    );
    assert!(FixedWindow::new(&q("1/1ms")).is_ok());
    assert_eq!(
        FixedWindow::new(&q("100/min burst 20")),
        Err(QuotaError::BurstNotSupported)
    );
}

/// The seeds' boundary example: 120 per minute; 100 requests evenly over 00:50–00:59 and 100
/// over 01:00–01:09. Aligned minute windows admit all 200 within 20 seconds.
#[test]
fn boundary_example_admits_two_hundred_in_twenty_seconds() {
    let clock = ManualClock::new();
    let fw = FixedWindow::new(&"120/min".parse().unwrap()).unwrap();
    let limiter = RateLimiter::with_algorithm(fw, clock.clone());
    let mut admitted = 0;
    for i in 0..200u64 {
        // 00:50.0, 00:50.1, ... 00:59.9, then 01:00.0 ... 01:09.9
        let at = if i < 100 {
            50_000 + i * 100
        } else {
            60_000 + (i - 100) * 100
        };
        clock.set(at * 1_000_000);
        admitted += u32::from(limiter.check().is_ok());
    }
    assert_eq!(admitted, 200);
}

/// Window numbers are kept modulo 2^40: a bucket idle for 2^39 windows or more is read as a
/// future window, which counts conservatively (its old cells still count) and is repaired on
/// its first refusal.
#[test]
fn aliasing_after_two_to_the_thirty_nine_windows_is_conservative() {
    let ms = 1_000_000u64;
    let clock = ManualClock::new();
    let fw = FixedWindow::new(&"2/1ms".parse().unwrap()).unwrap();
    let limiter = RateLimiter::with_algorithm(fw, clock.clone());
    assert!(limiter.check_n(2).unwrap().is_ok());
    clock.set((1u64 << 39) * ms);
    // Seen as the stored window, still full: refused, never an extra cell.
    assert!(limiter.check().is_err());
    // The refusal moved the count to the current window; the next window is fresh.
    clock.advance_nanos(ms);
    assert!(limiter.check_n(2).unwrap().is_ok());
}
