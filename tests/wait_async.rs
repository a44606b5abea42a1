//! Asynchronous waits on tokio's paused clock (no test sleeps for real): arrival order is
//! admission order under reservation, the queue bound, cancellation in the middle of a wait
//! (a reservation given back; a retry holding nothing), many waiters on one key within the
//! quota, and a policy set.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use flowgate::algorithm::LeakyBucket;
use flowgate::clock::TokioClock;
use flowgate::policy::{Policies, Policy};
use flowgate::{Error, KeyedRateLimiter, Quota, RateLimiter, WaitOptions};
use tokio::time::Instant;

const MS: u64 = 1_000_000;

/// 10/s with no burst beyond one cell, queueing up to `max_delay`.
fn shaper(max_delay: Duration) -> Arc<RateLimiter<TokioClock, LeakyBucket>> {
    let quota = Quota::per_second(10).unwrap().with_burst(1).unwrap();
    let algorithm = LeakyBucket::shaper(&quota, max_delay).unwrap();
    Arc::new(RateLimiter::with_algorithm(algorithm, TokioClock::new()))
}

/// Twenty waiters arriving in order go ahead in that order, 100 ms apart.
#[tokio::test(start_paused = true)]
async fn reservations_go_ahead_in_arrival_order() {
    let limiter = shaper(Duration::from_secs(10));
    let start = Instant::now();
    let order = Arc::new(Mutex::new(Vec::new()));
    let tasks: Vec<_> = (0..20)
        .map(|i| {
            let (limiter, order) = (limiter.clone(), order.clone());
            tokio::spawn(async move {
                limiter
                    .until_ready(1, WaitOptions::new(), tokio::time::sleep)
                    .await
                    .unwrap();
                order.lock().unwrap().push((i, start.elapsed()));
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let order = order.lock().unwrap();
    for (k, &(i, at)) in order.iter().enumerate() {
        assert_eq!(i, k, "admitted out of arrival order: {order:?}");
        assert_eq!(at, Duration::from_millis(100 * k as u64));
    }
    // Completed reservations are kept, not given back: the next slot follows the last one.
    assert_eq!(
        limiter.reserve(1).unwrap().unwrap().0.delay(),
        Duration::from_millis(100)
    );
}

/// The queue holds what fits in the shaper's maximum delay; the next caller is refused at
/// once, books nothing, and did not wait.
#[tokio::test(start_paused = true)]
async fn a_full_queue_refuses_at_once() {
    let limiter = shaper(Duration::from_secs(1));
    // Delays 0, 100 ms, …, 1 s: eleven reservations fit.
    for k in 0..11u64 {
        let allowed = limiter.reserve(1).unwrap().unwrap();
        assert_eq!(allowed.0.delay(), Duration::from_millis(100 * k));
    }
    let start = Instant::now();
    let Err(Error::Refused(refused)) = limiter
        .until_ready(1, WaitOptions::new(), tokio::time::sleep)
        .await
    else {
        panic!("the queue is full");
    };
    assert_eq!(start.elapsed(), Duration::ZERO, "refused at once");
    assert_eq!(refused.retry_after(), Duration::from_millis(100));
}

/// A waiter dropped while it sleeps on its reservation gives the reservation back: the next
/// caller gets its slot.
#[tokio::test(start_paused = true)]
async fn a_cancelled_reservation_is_given_back() {
    let limiter = shaper(Duration::from_secs(10));
    assert_eq!(
        limiter.reserve(1).unwrap().unwrap().0.delay(),
        Duration::ZERO
    );
    // This waiter books the slot at 100 ms, and is dropped at 50 ms.
    let cancelled = tokio::time::timeout(
        Duration::from_millis(50),
        limiter.until_ready(1, WaitOptions::new(), tokio::time::sleep),
    )
    .await;
    assert!(cancelled.is_err(), "timed out while waiting");
    // Its slot (at 100 ms, 50 ms from now) is the next caller's, not the one after (200 ms).
    let next = limiter.reserve(1).unwrap().unwrap();
    assert_eq!(next.0.delay(), Duration::from_millis(50));
}

/// The same on a keyed table: a waiter dropped while it sleeps on its key's reservation gives
/// it back to that key's bucket.
#[tokio::test(start_paused = true)]
async fn a_cancelled_keyed_reservation_is_given_back() {
    let quota = Quota::per_second(10).unwrap().with_burst(1).unwrap();
    let algorithm = LeakyBucket::shaper(&quota, Duration::from_secs(10)).unwrap();
    let limiter = KeyedRateLimiter::<str, _, _>::builder(algorithm)
        .clock(TokioClock::new())
        .max_keys(16)
        .build()
        .unwrap();
    assert!(limiter.check_key("k").is_ok());
    let cancelled = tokio::time::timeout(
        Duration::from_millis(50),
        limiter.until_key_ready("k", 1, WaitOptions::new(), tokio::time::sleep),
    )
    .await;
    assert!(cancelled.is_err());
    let next = limiter.check_key_n("k", 1).unwrap().unwrap();
    assert_eq!(
        next.delay(),
        Duration::from_millis(50),
        "the given-back slot, at 100 ms"
    );
}

/// A retrying waiter dropped while asleep holds nothing: the bucket is as if it never came.
#[tokio::test(start_paused = true)]
async fn a_cancelled_retry_takes_nothing() {
    let limiter = RateLimiter::with_clock(Quota::per_second(1).unwrap(), TokioClock::new());
    assert!(limiter.check().is_ok());
    let cancelled = tokio::time::timeout(
        Duration::from_millis(500),
        limiter.until_ready(1, WaitOptions::new(), tokio::time::sleep),
    )
    .await;
    assert!(cancelled.is_err());
    // At 500 ms the cell is still half a second away, as it was before the waiter came.
    assert_eq!(
        limiter.check().unwrap_err().retry_after(),
        Duration::from_millis(500)
    );
}

/// Fifty waiters on one key of a 5/s keyed limiter: all get through, and in no window of a
/// second are more admitted than the burst plus the rate allow.
#[tokio::test(start_paused = true)]
async fn many_waiters_on_one_key_stay_within_the_quota() {
    let limiter = Arc::new(
        KeyedRateLimiter::<str, _, _>::builder(flowgate::Gcra::new(&Quota::per_second(5).unwrap()))
            .clock(TokioClock::new())
            .max_keys(16)
            .build()
            .unwrap(),
    );
    let start = Instant::now();
    let times = Arc::new(Mutex::new(Vec::new()));
    let tasks: Vec<_> = (0..50)
        .map(|_| {
            let (limiter, times) = (limiter.clone(), times.clone());
            tokio::spawn(async move {
                limiter
                    .until_key_ready("k", 1, WaitOptions::new(), tokio::time::sleep)
                    .await
                    .unwrap();
                times
                    .lock()
                    .unwrap()
                    .push(start.elapsed().as_nanos() as u64);
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let mut times = times.lock().unwrap().clone();
    times.sort_unstable();
    assert_eq!(times.len(), 50);
    for (i, &t) in times.iter().enumerate() {
        let in_second = times[i..]
            .iter()
            .take_while(|&&u| u < t + 1_000 * MS)
            .count();
        assert!(
            in_second <= 10,
            "{in_second} admitted in the second from {t} ns"
        );
    }
    // 5 at once, then one every 200 ms: the last at 9 s at the earliest.
    assert!(*times.last().unwrap() >= 9_000 * MS);
}

/// A policy set's waits: two users under a per-user 1/s and a global 1/s; each request waits
/// until every layer has a cell, and both rates hold.
#[tokio::test(start_paused = true)]
async fn policy_waits_respect_every_layer() {
    let policies = Arc::new(
        Policies::<u32, _>::builder()
            .clock(TokioClock::new())
            .policy(Policy::keyed("per-user", |u: &u32| u).quota(Quota::per_second(1).unwrap()))
            .policy(Policy::global("global").quota(Quota::per_second(1).unwrap()))
            .build()
            .unwrap(),
    );
    let start = Instant::now();
    let times = Arc::new(Mutex::new(Vec::new()));
    let tasks: Vec<_> = (0..8u32)
        .map(|i| {
            let (policies, times) = (policies.clone(), times.clone());
            tokio::spawn(async move {
                let user = i % 2;
                policies
                    .until_ready(&user, 1, WaitOptions::new(), tokio::time::sleep)
                    .await
                    .unwrap();
                times.lock().unwrap().push((user, start.elapsed()));
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let times = times.lock().unwrap().clone();
    assert_eq!(times.len(), 8);
    for user in 0..2 {
        let mut mine: Vec<Duration> = times.iter().filter(|t| t.0 == user).map(|t| t.1).collect();
        mine.sort_unstable();
        for pair in mine.windows(2) {
            assert!(
                pair[1] - pair[0] >= Duration::from_secs(1),
                "user {user}: {mine:?}"
            );
        }
    }
    // The global quota (one a second for everybody) spaces all eight: the last at 7 s.
    let mut all: Vec<Duration> = times.iter().map(|t| t.1).collect();
    all.sort_unstable();
    for pair in all.windows(2) {
        assert!(
            pair[1] - pair[0] >= Duration::from_secs(1),
            "global: {all:?}"
        );
    }
    assert_eq!(all[7], Duration::from_secs(7));
}
