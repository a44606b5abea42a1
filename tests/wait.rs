//! Blocking waits on a manual clock (its `sleep` moves it: no test sleeps for real): the retry
//! discipline (GCRA), the reservation discipline (a shaper: first come, first served, bounded),
//! bounded waits that fail at once and take nothing, and the rate kept over a long run.

use core::time::Duration;

use flowgate::algorithm::LeakyBucket;
use flowgate::clock::ManualClock;
use flowgate::{Error, Quota, RateLimiter, WaitOptions};

const SECOND: u64 = 1_000_000_000;

fn spent(per_second: u32) -> (ManualClock, RateLimiter<ManualClock>) {
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(Quota::per_second(per_second).unwrap(), clock.clone());
    assert!(matches!(limiter.check_n(per_second), Ok(Ok(_))));
    (clock, limiter)
}

#[test]
fn a_wait_sleeps_exactly_until_the_cell_returns() {
    let (clock, limiter) = spent(1);
    limiter.wait(1, WaitOptions::new()).unwrap();
    assert_eq!(clock.get(), SECOND);
    // The cell it waited for is taken: the next one is another second away.
    limiter.wait(1, WaitOptions::new()).unwrap();
    assert_eq!(clock.get(), 2 * SECOND);
}

#[test]
fn a_bounded_wait_that_would_be_too_long_fails_at_once_and_takes_nothing() {
    let (clock, limiter) = spent(1);
    let Err(Error::Refused(refused)) =
        limiter.wait(1, WaitOptions::new().at_most(Duration::from_millis(999)))
    else {
        panic!("a second's wait does not fit in 999 ms");
    };
    assert_eq!(refused.retry_after(), Duration::from_secs(1));
    assert_eq!(clock.get(), 0, "it did not sleep");
    // Nothing was taken: the cell still comes back after exactly one second.
    limiter
        .wait(1, WaitOptions::new().at_most(Duration::from_secs(1)))
        .unwrap();
    assert_eq!(clock.get(), SECOND);
}

#[test]
fn more_than_the_burst_is_a_capacity_error_without_waiting() {
    let (clock, limiter) = spent(2);
    let Err(Error::Capacity(capacity)) = limiter.wait(3, WaitOptions::new()) else {
        panic!("3 cells never fit a burst of 2");
    };
    assert_eq!((capacity.requested, capacity.burst), (3, 2));
    assert_eq!(clock.get(), 0);
    // Zero cells: the bucket as it is, at once.
    assert_eq!(limiter.wait(0, WaitOptions::new()).unwrap().remaining(), 0);
}

/// 100 waits at 10/s: the burst of 10 at once, then one every 100 ms, so the last is admitted
/// at exactly 9 s: waiting never admits faster than the rate.
#[test]
fn waits_keep_the_rate_over_a_long_run() {
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(Quota::per_second(10).unwrap(), clock.clone());
    let mut admitted_at = Vec::new();
    for _ in 0..100 {
        limiter.wait(1, WaitOptions::new()).unwrap();
        admitted_at.push(clock.get());
    }
    assert_eq!(admitted_at[9], 0);
    assert_eq!(admitted_at[10], SECOND / 10);
    assert_eq!(admitted_at[99], 9 * SECOND);
    // In any one-second window, at most the burst plus the rate: 10 + 10 cells.
    for (i, &t) in admitted_at.iter().enumerate() {
        let in_window = admitted_at[i..]
            .iter()
            .take_while(|&&u| u < t + SECOND)
            .count();
        assert!(
            in_window <= 20,
            "{in_window} admitted in the second from {t}"
        );
    }
}

fn shaper(max_delay: Duration) -> (ManualClock, RateLimiter<ManualClock, LeakyBucket>) {
    let clock = ManualClock::new();
    let quota = Quota::per_second(1).unwrap();
    let algorithm = LeakyBucket::shaper(&quota, max_delay).unwrap();
    (clock.clone(), RateLimiter::with_algorithm(algorithm, clock))
}

/// Reservations made at one instant are served in the order they were made, one interval
/// apart, and the queue is bounded by the shaper's maximum delay: beyond it a caller is
/// refused at once and books nothing.
#[test]
fn reservations_are_first_come_first_served_and_bounded() {
    let (_clock, limiter) = shaper(Duration::from_secs(3));
    let delays: Vec<Duration> = (0..4)
        .map(|_| limiter.reserve(1).unwrap().unwrap().0.delay())
        .collect();
    assert_eq!(
        delays,
        [0, 1, 2, 3].map(Duration::from_secs),
        "one interval apart, in arrival order"
    );
    let refused = limiter.reserve(1).unwrap().unwrap_err();
    assert_eq!(refused.retry_after(), Duration::from_secs(1));
    // The refusal booked nothing: the queue is still four long.
    let Err(Error::Refused(_)) =
        limiter.wait(1, WaitOptions::new().at_most(Duration::from_secs(10)))
    else {
        panic!("the queue is full");
    };
}

/// A reservation that would wait longer than `max_wait` is given back at once: the next
/// caller gets the same slot.
#[test]
fn a_reservation_beyond_the_budget_is_given_back() {
    let (clock, limiter) = shaper(Duration::from_secs(10));
    assert_eq!(
        limiter.wait(1, WaitOptions::new()).unwrap().delay(),
        Duration::ZERO
    );
    assert_eq!(
        limiter.reserve(1).unwrap().unwrap().0.delay(),
        Duration::from_secs(1)
    );
    // The next slot is 2 s away: more than 1.5 s.
    let Err(Error::Refused(refused)) =
        limiter.wait(1, WaitOptions::new().at_most(Duration::from_millis(1500)))
    else {
        panic!("a 2 s reservation does not fit in 1.5 s");
    };
    assert_eq!(refused.retry_after(), Duration::from_secs(2));
    assert_eq!(clock.get(), 0, "it did not sleep");
    // Given back: the same 2 s slot is the next caller's, who sleeps for it.
    assert_eq!(
        limiter.wait(1, WaitOptions::new()).unwrap().delay(),
        Duration::from_secs(2)
    );
    assert_eq!(clock.get(), 2 * SECOND);
}

/// A keyed limiter's waits are per key: a spent key waits, another key does not.
#[test]
fn keyed_waits_are_per_key() {
    let clock = ManualClock::new();
    let limiter = flowgate::KeyedRateLimiter::<str, _, _>::builder(flowgate::Gcra::new(
        &Quota::per_second(1).unwrap(),
    ))
    .clock(clock.clone())
    .max_keys(16)
    .build()
    .unwrap();
    limiter.wait_key("alice", 1, WaitOptions::new()).unwrap();
    limiter.wait_key("bob", 1, WaitOptions::new()).unwrap();
    assert_eq!(clock.get(), 0, "two keys, one cell each: no wait");
    let Err(Error::Refused(_)) = limiter.wait_key(
        "alice",
        1,
        WaitOptions::new().at_most(Duration::from_millis(10)),
    ) else {
        panic!("alice's next cell is a second away");
    };
    limiter.wait_key("alice", 1, WaitOptions::new()).unwrap();
    assert_eq!(clock.get(), SECOND);
}

/// A policy set's wait covers every layer: the request waits for the quota that conforms last.
#[test]
fn policy_waits_wait_for_the_last_quota() {
    use flowgate::policy::{self, Policies, Policy};
    let clock = ManualClock::new();
    let policies = Policies::<u32, _>::builder()
        .clock(clock.clone())
        .policy(Policy::keyed("per-user", |u: &u32| u).quota(Quota::per_second(1).unwrap()))
        .policy(Policy::global("global").quota(Quota::per_minute(2).unwrap()))
        .build()
        .unwrap();
    policies.wait(&1, 1, WaitOptions::new()).unwrap();
    policies.wait(&2, 1, WaitOptions::new()).unwrap();
    assert_eq!(clock.get(), 0);
    // User 1's own cell is back after 1 s, the global one after 30 s: it waits 30 s.
    let Err(policy::Error::Refused(rejected)) =
        policies.wait(&1, 1, WaitOptions::new().at_most(Duration::from_secs(29)))
    else {
        panic!("the global quota is 30 s away");
    };
    assert_eq!(rejected.by().map(|by| by.policy()), Some("global"));
    policies.wait(&1, 1, WaitOptions::new()).unwrap();
    assert_eq!(clock.get(), 30 * SECOND);
    let Err(policy::Error::Capacity(oversized)) = policies.wait(&1, 3, WaitOptions::new()) else {
        panic!("3 cells never fit a burst of 1");
    };
    assert_eq!(oversized.by().map(|by| by.policy()), Some("per-user"));
}

/// A retry sleeps the refusal's wait plus a draw from the jitter range, and a draw never makes
/// a bounded wait exceed its bound.
#[test]
fn retries_add_jitter_within_the_bound() {
    use flowgate::policy::seed_jitter;
    seed_jitter(7);
    let jittery = WaitOptions::new().jitter(Duration::from_millis(100), Duration::from_millis(200));
    let (clock, limiter) = spent(1);
    limiter.wait(1, jittery).unwrap();
    let at = clock.get();
    assert!(
        (1_100_000_000..=1_200_000_000).contains(&at),
        "admitted at {at} ns"
    );
    // Bounded at 1.05 s from now: the cell is 1 s away minus what the jitter already waited;
    // whatever the draw, the sleep stops at the bound, where the cell is there.
    let start = clock.get();
    let bounded = jittery.at_most(Duration::from_millis(1_050));
    limiter.wait(1, bounded).unwrap();
    assert!(
        clock.get() - start <= 1_050_000_000,
        "waited {} ns",
        clock.get() - start
    );
}

/// A keyed shaper whose table is full: the refusal is the table's, not the queue's, so the wait
/// retries (after the refusal's hint) instead of ending at once, and gets in when the other
/// key's bucket goes idle and can be evicted.
#[test]
fn a_full_keyed_table_is_waited_out_not_taken_for_a_full_queue() {
    let clock = ManualClock::new();
    let quota = Quota::per_second(1).unwrap();
    let limiter = flowgate::KeyedRateLimiter::<str, _, _>::builder(
        LeakyBucket::shaper(&quota, Duration::from_secs(10)).unwrap(),
    )
    .clock(clock.clone())
    .max_keys(1)
    .when_full(flowgate::WhenFull::Refuse)
    .build()
    .unwrap();
    limiter.wait_key("alice", 1, WaitOptions::new()).unwrap();
    assert_eq!(
        limiter.check_key("bob").unwrap_err().cause(),
        flowgate::Cause::TableFull
    );
    limiter
        .wait_key(
            "bob",
            1,
            WaitOptions::new().at_most(Duration::from_millis(2_500)),
        )
        .unwrap();
    assert_eq!(clock.get(), SECOND, "admitted once alice's bucket was idle");
}

/// A policy's own jitter never makes a bounded wait fail that the request's conformance time
/// fits: the jitter is cut at the bound.
#[test]
fn a_policy_jitter_never_fails_a_wait_that_fits() {
    use flowgate::policy::{seed_jitter, Policies, Policy};
    let clock = ManualClock::new();
    let policies = Policies::<()>::builder()
        .clock(clock.clone())
        .policy(
            Policy::global("g")
                .quota(Quota::per_second(1).unwrap())
                .jitter(Duration::ZERO, Duration::from_secs(1)),
        )
        .build()
        .unwrap();
    for seed in 0..20 {
        seed_jitter(seed);
        policies.wait(&(), 1, WaitOptions::new()).unwrap();
        let start = clock.get();
        // The next cell is at most a second away; jitter up to a second more would not fit.
        policies
            .wait(
                &(),
                1,
                WaitOptions::new().at_most(Duration::from_millis(1_500)),
            )
            .unwrap();
        assert!(clock.get() - start <= 1_500_000_000);
    }
}
