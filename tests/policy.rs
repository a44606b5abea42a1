//! Policy sets on a manual clock: the users' scenarios (per-user 200/10 s + 5000/h + 20000/day
//! with a server-wide 100 000/10 s; the C# article's three layers with jitter), all-or-nothing
//! undo, the retry-after of several refusing quotas, dry runs, replacement, and bad input.

use core::time::Duration;

use flowgate::algorithm::FixedWindow;
use flowgate::clock::{Clock, ManualClock};
use flowgate::policy::{seed_jitter, BuildError, Policies, Policy};
use flowgate::{Cause, Quota, WhenFull};

mod common;

fn q(s: &str) -> Quota {
    s.parse().unwrap()
}

const MS: u64 = 1_000_000;
const SEC: u64 = 1_000 * MS;

struct User {
    name: String,
}

fn user(name: &str) -> User {
    User { name: name.into() }
}

/// The users' article 004: per user 200/10 s, 5000/h and 20000/day; the server 100 000/10 s.
fn users_limits<C: Clock + Clone>(clock: &C) -> Policies<User, C> {
    Policies::builder()
        .clock(clock.clone())
        .policy(Policy::keyed("per-user", |u: &User| &u.name).quotas([
            q("200/10s"),
            q("5000/h"),
            q("20000/day"),
        ]))
        .policy(Policy::global("server").quota(q("100000/10s")))
        .build()
        .unwrap()
}

/// A user at 25 requests per second for a day meets each of the three limits in turn, and the
/// admissions never exceed any of them over any stretch the test looks at.
#[test]
fn one_user_meets_the_ten_second_then_the_hourly_then_the_daily_limit() {
    let clock = common::Lagging::default();
    let policies = users_limits(&clock);
    let alice = user("alice");
    for _ in 0..200 {
        assert!(policies.check(&alice).is_ok());
    }
    let refused = policies.check(&alice).unwrap_err();
    assert_eq!(
        (
            refused.by().map(|by| by.policy()),
            refused.by().unwrap().quota_index()
        ),
        (Some("per-user"), 0)
    );
    assert_eq!(refused.retry_after(), Duration::from_millis(50));
    assert_eq!(refused.cause(), Cause::Quota);

    // 25 requests per second (every 40 ms) for a day.
    let mut admitted_at = Vec::new();
    let mut refused_by = [0u32; 3];
    let mut first_refusal_by = [None; 3];
    for step in 1..=(24 * 3600 * 25) {
        let now = step * 40 * MS;
        clock.set(now);
        match policies.check(&alice) {
            Ok(_) => admitted_at.push(now),
            Err(refused) => {
                assert_eq!(refused.by().map(|by| by.policy()), Some("per-user"));
                let i = refused.by().unwrap().quota_index();
                refused_by[i] += 1;
                first_refusal_by[i].get_or_insert(now);
                // Still refused a nanosecond before the retry-after (taking nothing).
                let retry = now + u64::try_from(refused.retry_after().as_nanos()).unwrap();
                clock.stale(retry - 1);
                assert!(policies.check(&alice).is_err());
            }
        }
    }
    let total = admitted_at.len() as u64 + 200;
    // Each limit in turn: the 10-second one first, then the hourly one (5000 + refill, reached
    // within minutes), then the daily one (20 000 + refill, reached within hours).
    let [ten_s, hour, day] = first_refusal_by.map(Option::unwrap);
    assert!(ten_s < hour && hour < day, "{ten_s} {hour} {day}");
    assert!(hour < 10 * 60 * SEC && day > 2 * 3600 * SEC && day < 6 * 3600 * SEC);
    // GCRA bounds over the whole day: burst + day / interval for each quota.
    assert!(total <= 20_000 + 20_000);
    assert!(
        total >= 20_000 + 19_990,
        "the daily quota is used in full: {total}"
    );
    // Every 10-second stretch, every hour: within the quota's burst plus its refill.
    let within = |span: u64, burst: u64, interval: u64| {
        let mut j = 0;
        for i in 0..admitted_at.len() {
            while admitted_at[i] - admitted_at[j] >= span {
                j += 1;
            }
            assert!((i - j + 1) as u64 <= burst + span / interval);
        }
    };
    within(10 * SEC, 200, 50 * MS);
    within(3600 * SEC, 5000, 720 * MS);
}

/// `retry_after` is checked with a reading at `retry - 1` above only for not panicking; this
/// checks exactness: at `retry - 1 ns` still refused (without taking), at `retry` admitted.
#[test]
fn the_retry_after_is_exact_and_covers_every_refusing_quota() {
    let clock = ManualClock::new();
    let policies = Policies::<User, _>::builder()
        .clock(clock.clone())
        .policy(Policy::keyed("fast", |u: &User| &u.name).quota(q("2/100ms")))
        .policy(Policy::global("slow").quota(q("3/s")))
        .build()
        .unwrap();
    let bob = user("bob");
    // Two admitted; both quotas now refuse: "fast" for 50 ms, "slow" for... it has 1 left.
    assert!(policies.check(&bob).is_ok());
    assert!(policies.check(&bob).is_ok());
    let refused = policies.check(&bob).unwrap_err();
    assert_eq!(refused.by().map(|by| by.policy()), Some("fast"));
    assert_eq!(refused.retry_after(), Duration::from_nanos(50 * MS));
    // Take the last "slow" cell through another user: now both refuse, "slow" for longer.
    assert!(policies.check(&user("carol")).is_ok());
    let refused = policies.check(&bob).unwrap_err();
    assert_eq!(refused.by().map(|by| by.policy()), Some("slow"));
    let wait = u64::try_from(refused.retry_after().as_nanos()).unwrap();
    assert_eq!(wait, 1_000 * MS / 3 + 1);
    clock.set(wait - 1);
    assert!(policies.check(&bob).is_err());
    clock.set(wait);
    assert!(policies.check(&bob).is_ok());
}

/// A refusal by a later policy takes nothing from the earlier ones: the user's buckets are as
/// they were, and the server-wide refusal names the server policy.
#[test]
fn a_server_wide_refusal_takes_nothing_from_the_users_quotas() {
    let clock = ManualClock::new();
    let policies = users_limits(&clock);
    // 100 000 requests fill the server's burst: 99 999 from 1000 users (100 each, less one),
    // and the last from dave, who then has a bucket in every quota.
    for i in 0..99_999 {
        assert!(policies.check(&user(&format!("u{}", i % 1000))).is_ok());
    }
    let dave = user("dave");
    assert!(policies.check(&dave).is_ok());
    // Every quota's bucket, each to the nanosecond (a GCRA bucket's gauge is its lead).
    let states = |r: &User| {
        let mut all = Vec::new();
        policies.inspect(r, |state| all.push(state));
        all
    };
    let before = states(&dave);
    assert_eq!(before.len(), 4, "three per-user quotas and the server's");
    let refused = policies.check(&dave).unwrap_err();
    assert_eq!(refused.by().map(|by| by.policy()), Some("server"));
    assert_eq!(refused.retry_after(), Duration::from_secs(10) / 100_000);
    // Nothing stays taken: not from the server's quota, which refused, nor from any of the
    // user's three, which admitted before the server refused and were undone.
    assert_eq!(states(&dave), before);
    // The user's own quotas are untouched: 200 as soon as the server refills (and dave's
    // first cell with it).
    let state = policies.check_n(&dave, 0).unwrap().unwrap();
    assert_eq!(state.by().unwrap().policy(), "server");
    clock.advance(Duration::from_secs(10));
    for _ in 0..200 {
        assert!(policies.check(&dave).is_ok());
    }
    assert_eq!(
        policies
            .check(&dave)
            .unwrap_err()
            .by()
            .map(|by| by.policy()),
        Some("per-user")
    );
    assert_eq!(policies.stats()[1].refused, 1);
}

struct Call {
    user_agent: &'static str,
    endpoint: &'static str,
}

/// The users' C# article (000): per user per endpoint, then per endpoint, then global, each a
/// token bucket with its own retry-after jitter.
fn three_layers(clock: &ManualClock) -> Policies<Call, ManualClock> {
    let ms = Duration::from_millis;
    Policies::builder()
        .clock(clock.clone())
        .policy(
            Policy::keyed_with("PerUserPerApiThrottle", |c: &Call, key| {
                key.add(c.user_agent).add(c.endpoint);
            })
            .quota(q("600/min burst 800"))
            .jitter(ms(1), ms(5)),
        )
        .policy(
            Policy::keyed("PerApiThrottle", |c: &Call| c.endpoint)
                .quota(q("3000/min burst 4000"))
                .jitter(ms(5), ms(10)),
        )
        .policy(
            Policy::global("GlobalThrottle")
                .quota(q("6000/min burst 7000"))
                .jitter(ms(10), ms(20)),
        )
        .build()
        .unwrap()
}

#[test]
fn the_three_layer_endpoint_example() {
    let clock = ManualClock::new();
    let policies = three_layers(&clock);
    seed_jitter(2026);
    let call = |user_agent, endpoint| Call {
        user_agent,
        endpoint,
    };
    // One user on one endpoint: 800, then the per-user-per-endpoint policy refuses, with a
    // retry-after of one refill interval (100 ms) plus 1–5 ms of jitter.
    for _ in 0..800 {
        assert!(policies.check(&call("curl", "/orders")).is_ok());
    }
    let refused = policies.check(&call("curl", "/orders")).unwrap_err();
    assert_eq!(
        refused.by().map(|by| by.policy()),
        Some("PerUserPerApiThrottle")
    );
    assert_eq!(refused.conforms_after(), Duration::from_millis(100));
    assert!((1..=5).contains(&refused.jitter().as_millis()));
    assert_eq!(
        refused.retry_after(),
        refused.conforms_after() + refused.jitter()
    );
    // Other users on the same endpoint: 3200 more fill the endpoint's 4000.
    let agents = ["a", "b", "c", "d"];
    for i in 0..3200 {
        assert!(policies.check(&call(agents[i % 4], "/orders")).is_ok());
    }
    let refused = policies.check(&call("e", "/orders")).unwrap_err();
    assert_eq!(refused.by().map(|by| by.policy()), Some("PerApiThrottle"));
    assert!((5..=10).contains(&refused.jitter().as_millis()));
    // "e" lost nothing: its own bucket is full; the global one has 3000 left.
    let mut left = Vec::new();
    policies.inspect(&call("e", "/orders"), |s| {
        left.push((s.by().policy(), s.gauge().remaining()))
    });
    assert_eq!(
        left,
        [
            ("PerUserPerApiThrottle", 800),
            ("PerApiThrottle", 0),
            ("GlobalThrottle", 3000)
        ]
    );
    // Other endpoints take the global burst's last 3000.
    for i in 0..3000 {
        let endpoint = ["/users", "/items", "/carts"][i % 3];
        assert!(policies.check(&call(agents[i % 4], endpoint)).is_ok());
    }
    let refused = policies.check(&call("f", "/users")).unwrap_err();
    assert_eq!(refused.by().map(|by| by.policy()), Some("GlobalThrottle"));
    assert!((10..=20).contains(&refused.jitter().as_millis()));
    assert_eq!(refused.conforms_after(), Duration::from_millis(10));
    let stats = policies.stats();
    assert_eq!(
        stats.iter().map(|s| s.refused).collect::<Vec<_>>(),
        [1, 1, 1]
    );
    // curl and a–d on /orders, a–d on three more endpoints, and e and f, whose refused
    // requests left their (undone, full) buckets behind.
    assert_eq!(stats[0].keys, 1 + 4 + 4 * 3 + 2);
    // A minute later everything has refilled by 6000 globally.
    clock.advance(Duration::from_secs(60));
    let mut global = None;
    policies.inspect(&call("g", "/new"), |s| {
        if s.by().policy() == "GlobalThrottle" {
            global = Some(s.gauge().remaining());
        }
    });
    assert_eq!(global, Some(6000));
}

/// The tightest quota is what `X-RateLimit-Remaining` shows: the fewest cells left anywhere.
#[test]
fn admitted_requests_report_the_tightest_quota() {
    let clock = ManualClock::new();
    let policies = users_limits(&clock);
    let erin = user("erin");
    let admitted = policies.check(&erin).unwrap();
    let tightest = admitted.by().unwrap();
    assert_eq!((tightest.policy(), tightest.quota_index()), ("per-user", 0));
    assert_eq!((admitted.remaining(), admitted.limit()), (199, 200));
    assert_eq!(admitted.reset_after(), Duration::from_millis(50));
    assert_eq!(admitted.remaining(), 199);
    assert!(admitted.dry_run().is_none());
}

#[test]
fn a_dry_run_policy_counts_but_never_refuses() {
    let clock = ManualClock::new();
    let policies = Policies::<User, _>::builder()
        .clock(clock.clone())
        .policy(
            Policy::keyed("candidate", |u: &User| &u.name)
                .quota(q("2/min"))
                .dry_run(true),
        )
        .policy(Policy::global("live").quota(q("5/min")))
        .build()
        .unwrap();
    let frank = user("frank");
    for i in 0..5 {
        let admitted = policies.check(&frank).unwrap();
        // The dry-run policy is never the tightest: only enforcing ones are.
        assert_eq!(admitted.by().unwrap().policy(), "live");
        match admitted.dry_run() {
            None => assert!(i < 2),
            Some(dry) => {
                assert!(i >= 2);
                assert_eq!(dry.by().policy(), "candidate");
                // It took nothing when it would refuse, so the wait stays one interval.
                assert_eq!(dry.retry_after(), Duration::from_secs(30));
            }
        }
    }
    let refused = policies.check(&frank).unwrap_err();
    assert_eq!(refused.by().map(|by| by.policy()), Some("live"));
    assert_eq!(refused.dry_run().unwrap().by().policy(), "candidate");
    let stats = policies.stats();
    assert!(stats[0].dry_run && !stats[1].dry_run);
    assert_eq!((stats[0].refused, stats[1].refused), (4, 1));
    // A dry-run policy is not checked for size either: it would refuse, and it is counted.
    let admitted = policies.check_n(&user("gina"), 3);
    assert!(matches!(admitted, Ok(Err(_))));
}

#[test]
fn a_request_above_a_burst_is_oversized_and_takes_nothing() {
    let clock = ManualClock::new();
    let policies = users_limits(&clock);
    let hal = user("hal");
    let oversized = policies.check_n(&hal, 201).unwrap_err();
    assert_eq!(
        (
            oversized.by().map(|by| by.policy()),
            oversized.by().map(|by| by.quota_index())
        ),
        (Some("per-user"), Some(0))
    );
    assert_eq!(oversized.burst, 200);
    assert_eq!(policies.check_n(&hal, 0).unwrap().unwrap().remaining(), 200);
    assert!(policies.check_n(&hal, 200).unwrap().is_ok());
}

#[test]
fn replacing_quotas_keeps_every_bucket() {
    let clock = ManualClock::new();
    let policies = Policies::<User, _>::builder()
        .clock(clock.clone())
        .policy(Policy::keyed("per-user", |u: &User| &u.name).quota(q("10/s")))
        .policy(Policy::global("server").quota(q("1000/s")))
        .build()
        .unwrap();
    let ivy = user("ivy");
    for _ in 0..10 {
        assert!(policies.check(&ivy).is_ok());
    }
    // Twice the rate and burst: the bucket is booked 1 s ahead, which is the new burst window
    // too (20 × 50 ms): still empty, then one cell per 50 ms.
    policies.replace_quotas("per-user", &[q("20/s")]).unwrap();
    assert_eq!(policies.quotas("per-user").unwrap(), [q("20/s")]);
    let refused = policies.check(&ivy).unwrap_err();
    assert_eq!(refused.retry_after(), Duration::from_millis(50));
    assert_eq!(refused.limit(), 20);
    clock.advance(Duration::from_millis(50));
    assert!(policies.check(&ivy).is_ok());
    // Lowering it: still empty, and refilling at the new rate.
    policies.replace_quotas("per-user", &[q("2/s")]).unwrap();
    let refused = policies.check(&ivy).unwrap_err();
    assert_eq!(refused.limit(), 2);
    clock.advance(refused.retry_after());
    assert!(policies.check(&ivy).is_ok());
    assert!(policies.check(&ivy).is_err());
    assert_eq!(
        policies.replace_quotas("per-user", &[q("1/s"), q("2/s")]),
        Err(BuildError::QuotaCount {
            policy: "per-user".into(),
            expected: 1,
            found: 2
        })
    );
    assert!(matches!(
        policies.replace_quotas("nobody", &[q("1/s")]),
        Err(BuildError::UnknownPolicy { .. })
    ));
}

#[test]
fn a_skipped_key_means_the_policy_does_not_apply() {
    struct Req {
        user: Option<&'static str>,
    }
    let policies = Policies::<Req, _>::builder()
        .clock(ManualClock::new())
        .policy(
            Policy::keyed_with("per-user", |r: &Req, key| {
                match r.user {
                    Some(user) => key.add(user),
                    None => key.skip(),
                };
            })
            .quota(q("1/h")),
        )
        .build()
        .unwrap();
    let anonymous = Req { user: None };
    for _ in 0..10 {
        let admitted = policies.check(&anonymous).unwrap();
        assert!(admitted.by().is_none());
    }
    assert!(policies.check(&Req { user: Some("jo") }).is_ok());
    assert!(policies.check(&Req { user: Some("jo") }).is_err());
}

/// A global "front" policy of 100/h, then a "per-key" policy whose table holds one key
/// (`per_key` per key, `when_full` beyond), then a global "back" policy if `back` is given.
fn small_table(
    clock: &ManualClock,
    per_key: &str,
    when_full: WhenFull,
    back: Option<&str>,
) -> Policies<u64, ManualClock> {
    let mut builder = Policies::<u64, _>::builder()
        .clock(clock.clone())
        .policy(Policy::global("front").quota(q("100/h")))
        .policy(
            Policy::keyed("per-key", |k: &u64| k)
                .quota(q(per_key))
                .max_keys(1)
                .when_full(when_full),
        );
    if let Some(back) = back {
        builder = builder.policy(Policy::global("back").quota(q(back)));
    }
    builder.build().unwrap()
}

/// Cells left in each enforcing quota that applies to `key`, with its policy's name.
fn left(policies: &Policies<u64, ManualClock>, key: u64) -> Vec<(&str, u32)> {
    let mut left = Vec::new();
    policies.inspect(&key, |s| {
        left.push((s.by().policy(), s.gauge().remaining()))
    });
    left
}

/// Each of a keyed policy's buckets is judged idle by its own quota, by an insert that looks
/// for room and by a sweep: a daily window counter with a cell used stays, however idle the
/// same key's per-second bucket is. (A layout that put a key's buckets of every quota in one
/// table and judged them by one quota failed here.)
#[test]
fn each_bucket_is_judged_idle_by_its_own_quota() {
    const DAY: u64 = 86_400 * SEC;
    let clock = ManualClock::starting_at(10 * DAY);
    let daily = FixedWindow::new(&q("2/day")).unwrap();
    let policies = Policies::<u64, _>::builder()
        .clock(clock.clone())
        .policy(
            Policy::keyed("per-key", |k: &u64| k)
                .quota(q("5/s"))
                .quota_with(daily)
                .max_keys(1)
                .when_full(WhenFull::Refuse),
        )
        .build()
        .unwrap();
    assert!(policies.check(&7).is_ok());
    clock.advance(Duration::from_secs(2));
    // Key 8 finds the tables full (key 7's buckets): its per-second bucket takes the place of
    // key 7's, which is idle; its daily one finds no idle bucket and is refused.
    let refused = policies.check(&8).unwrap_err();
    assert_eq!(refused.cause(), Cause::TableFull);
    assert_eq!(left(&policies, 7), [("per-key", 5), ("per-key", 1)]);
    assert!(
        policies.check_n(&7, 2).unwrap().is_err(),
        "one cell of the day is left"
    );
    // The sweep forgets the idle per-second bucket and keeps key 7's day.
    clock.advance(Duration::from_secs(2));
    assert_eq!(policies.sweep(policies.slots()), 1);
    assert_eq!(policies.stats()[0].keys, 1);
    assert!(
        policies.check_n(&7, 2).unwrap().is_err(),
        "one cell of the day is left"
    );
    assert!(policies.check(&7).is_ok());
}

/// A keyed policy whose table is full refuses a new key (cause `TableFull`), and what an
/// earlier policy took for the request is undone.
#[test]
fn a_full_table_refuses_and_undoes_the_earlier_policies() {
    let policies = small_table(&ManualClock::new(), "1000/h", WhenFull::Refuse, None);
    assert!(policies.check(&1).is_ok());
    let refused = policies.check(&2).unwrap_err();
    assert_eq!(refused.cause(), Cause::TableFull);
    assert_eq!(refused.by().map(|by| by.policy()), Some("per-key"));
    // The front quota lost only key 1's cell.
    assert_eq!(left(&policies, 1), [("front", 99), ("per-key", 999)]);
    assert_eq!(policies.stats()[1].refused, 1);
}

/// A keyed policy whose table is full and admits new keys untracked: the untracked key is
/// reported as the tightest quota (a fresh bucket less this request), and when a later policy
/// refuses, nothing of the untracked admission needs undoing and the earlier policy's cell is
/// back.
#[test]
fn an_untracked_key_is_reported_and_a_later_refusal_undoes_the_rest() {
    let clock = ManualClock::new();
    let policies = small_table(&clock, "3/h", WhenFull::AdmitUntracked, Some("2/h"));
    assert!(policies.check(&1).is_ok());
    // Key 2 finds no room: admitted as a fresh 3/h bucket would be, 2 cells left.
    let admitted = policies.check(&2).unwrap();
    assert_eq!(
        (admitted.by().map(|by| by.policy()), admitted.remaining()),
        (Some("back"), 0)
    );
    assert_eq!(
        left(&policies, 2),
        [("front", 98), ("per-key", 3), ("back", 0)]
    );
    // The back quota is spent: key 3 is refused there, and the front cell comes back.
    let refused = policies.check(&3).unwrap_err();
    assert_eq!(refused.by().map(|by| by.policy()), Some("back"));
    assert_eq!(
        left(&policies, 3),
        [("front", 98), ("per-key", 3), ("back", 0)]
    );

    // Without the back policy, the untracked bucket is the tightest: 2 cells left, full again
    // in one emission interval of 3/h (20 minutes).
    let policies = small_table(&clock, "3/h", WhenFull::AdmitUntracked, None);
    assert!(policies.check(&1).is_ok());
    let tightest = policies.check(&2).unwrap();
    assert_eq!(
        (tightest.by().map(|by| by.policy()), tightest.remaining()),
        (Some("per-key"), 2)
    );
    assert_eq!(tightest.reset_after(), Duration::from_secs(20 * 60));
}

/// A clock that steps back an hour locks a global and a keyed bucket out for at most one burst
/// window, as a single limiter does, never longer.
#[test]
fn a_clock_step_back_locks_out_for_at_most_one_window() {
    let clock = ManualClock::starting_at(10 * 3600 * SEC);
    let policies = Policies::<u64, _>::builder()
        .clock(clock.clone())
        .policy(Policy::global("server").quota(q("10/s")))
        .policy(Policy::keyed("per-key", |k: &u64| k).quota(q("5/s")))
        .build()
        .unwrap();
    for _ in 0..5 {
        assert!(policies.check(&1).is_ok());
    }
    clock.rewind(Duration::from_secs(3600));
    assert!(policies.check(&1).is_err());
    clock.advance(Duration::from_secs(1));
    assert!(policies.check(&1).is_ok());
}

#[test]
fn bad_sets_are_errors_not_panics() {
    let build = |policies: Vec<Policy<u64>>| {
        let mut builder = Policies::<u64>::builder().clock(ManualClock::new());
        for p in policies {
            builder = builder.policy(p);
        }
        builder.build().map(|_| ())
    };
    assert_eq!(build(vec![]), Err(BuildError::NoPolicies));
    assert_eq!(
        build(vec![Policy::global("")]).unwrap_err(),
        BuildError::NoName { index: 0 }
    );
    assert_eq!(
        build(vec![Policy::global("a")]).unwrap_err(),
        BuildError::NoQuotas { policy: "a".into() }
    );
    assert_eq!(
        build(vec![
            Policy::global("a").quota(q("1/s")),
            Policy::keyed("a", |k: &u64| k).quota(q("1/s")),
        ])
        .unwrap_err(),
        BuildError::DuplicateName { policy: "a".into() }
    );
    assert_eq!(
        build(vec![Policy::global("a").quotas(vec![q("1/s"); 33])]).unwrap_err(),
        BuildError::TooManyQuotas { quotas: 33 }
    );
    let s = Duration::from_secs;
    assert_eq!(
        build(vec![Policy::global("a").quota(q("1/s")).jitter(s(2), s(1))]).unwrap_err(),
        BuildError::Jitter { policy: "a".into() }
    );
    assert_eq!(
        build(vec![Policy::global("a")
            .quota(q("1/s"))
            .jitter(s(0), Duration::MAX)])
        .unwrap_err(),
        BuildError::Jitter { policy: "a".into() }
    );
    assert!(matches!(
        build(vec![Policy::keyed("a", |k: &u64| k)
            .quota(q("1/s"))
            .max_keys(0)]),
        Err(BuildError::Keyed { .. })
    ));
    let error = build(vec![Policy::global("a")]).unwrap_err();
    assert_eq!(error.to_string(), "policy 'a' has no quota");
}

/// Quotas replaced by another thread while a decision is under way (the key extractor here
/// waits for that thread): the decision's refusals clamp a bucket booked further ahead than the
/// decision's quota explains under the quota in force, not the one the decision read, so the
/// cells booked under the raised quota stay booked, both for the refusing quota's own clamp
/// (`gate` admits, `p` refuses) and for the look at a later policy that sets the retry-after
/// (`gate` refuses, `p` is looked at). Clamping with the decision's list admits 4 at one
/// instant under a burst of 3.
#[test]
fn a_quota_raised_during_a_decision_frees_no_cell() {
    use flowgate::clock::Clock;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;

    type Set = Policies<(u64, u64), ManualClock>;
    static SET: OnceLock<Set> = OnceLock::new();
    /// The key of `p` the next extraction books two cells of (0: none).
    static ARMED: AtomicU64 = AtomicU64::new(0);
    const HOUR: u64 = 3_600_000_000_000;

    // Raises `p` to a burst of 3 and books two cells of the armed key under it, from another
    // thread, while the decision that called it is under way.
    fn gate(request: &(u64, u64)) -> &u64 {
        let key = ARMED.swap(0, Ordering::SeqCst);
        if key != 0 {
            let set = SET.get().unwrap();
            std::thread::scope(|s| {
                s.spawn(|| {
                    let three = Quota::per_hour(1).unwrap().with_burst(3).unwrap();
                    set.replace_quotas("p", &[three]).unwrap();
                    let (a, b) = (100 + 2 * key, 101 + 2 * key);
                    assert!(set.check(&(a, key)).is_ok() && set.check(&(b, key)).is_ok());
                });
            });
        }
        &request.0
    }
    let clock = ManualClock::starting_at(10 * HOUR);
    let hourly = || Quota::per_hour(1).unwrap();
    let set = SET.get_or_init(|| {
        Policies::builder()
            .clock(clock.clone())
            .policy(Policy::keyed("gate", gate).quota(hourly()))
            .policy(Policy::keyed("p", |r: &(u64, u64)| &r.1).quota(hourly()))
            .build()
            .unwrap()
    });
    assert!(
        set.check(&(1, 50)).is_ok(),
        "gate's key 1 takes its one cell"
    );
    // Gate key 2 admits and `p` refuses; gate key 1 refuses and `p` is looked at.
    for (gate, key) in [(2, 7), (1, 8)] {
        set.replace_quotas("p", &[hourly()]).unwrap();
        ARMED.store(key, Ordering::SeqCst);
        assert!(set.check(&(gate, key)).is_err());
        let admitted = 2 + (10..20).filter(|g| set.check(&(*g, key)).is_ok()).count();
        assert_eq!(clock.now(), 10 * HOUR);
        assert_eq!(
            admitted, 3,
            "gate key {gate}: admitted at one instant under a burst of 3"
        );
    }
}

/// `check_up_to` whose count is made under a burst that a replacement lowers before the take:
/// it counts again and takes what the new burst holds, instead of a refusal that never
/// conforms.
#[test]
fn check_up_to_counts_again_after_a_lowered_burst() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::OnceLock;

    static SET: OnceLock<Policies<u64, ManualClock>> = OnceLock::new();
    static ARMED: AtomicBool = AtomicBool::new(false);
    fn key(request: &u64) -> &u64 {
        if ARMED.swap(false, Ordering::SeqCst) {
            let three = Quota::per_second(10).unwrap().with_burst(3).unwrap();
            SET.get().unwrap().replace_quotas("p", &[three]).unwrap();
        }
        request
    }
    let set = Policies::builder()
        .clock(ManualClock::starting_at(1_000_000_000))
        .policy(Policy::keyed("p", key).quota(Quota::per_second(10).unwrap()))
        .build()
        .unwrap();
    let set = SET.get_or_init(|| set);
    ARMED.store(true, Ordering::SeqCst);
    assert_eq!(set.check_up_to(&7, 10).unwrap().0, 3);
}

/// A decision that a key extractor's panic ends takes nothing: the first policy's cell, taken
/// before the second policy's extractor panicked, is given back as the decision unwinds
/// (without the give-back it stayed taken, and the next request was refused).
#[test]
fn a_panicking_key_extractor_takes_nothing() {
    fn endpoint(request: &(u64, u64)) -> &u64 {
        assert_ne!(request.1, 0, "no endpoint");
        &request.1
    }
    let set = Policies::builder()
        .clock(ManualClock::new())
        .policy(Policy::keyed("per-user", |r: &(u64, u64)| &r.0).quota(q("1/h")))
        .policy(Policy::keyed("per-endpoint", endpoint).quota(q("10/h")))
        .build()
        .unwrap();
    let check = std::panic::AssertUnwindSafe(|| set.check(&(7, 0)).is_ok());
    let panicked = std::panic::catch_unwind(check);
    assert!(panicked.is_err(), "the extractor panicked");
    assert!(
        set.check(&(7, 1)).is_ok(),
        "user 7's one cell is still there"
    );
    assert!(set.check(&(7, 1)).is_err());
}

/// A key extractor's rejection refuses for good (`Cause::Rejected`, with its status and message
/// and no retry), gives back what earlier policies took, and wins over an earlier quota's
/// refusal; a dry-run policy's rejection is a skip; a wait ends at once; `inspect` passes the
/// rejecting policy by. (With the undo in `Decision::rejected` removed, the front quota's count
/// after the first rejection was 1, not 2.)
#[test]
fn a_rejection_refuses_for_good_and_gives_back_what_was_taken() {
    use flowgate::outcome::Rejection;
    use flowgate::WaitOptions;
    static NO_KEY: Rejection = Rejection::new(401, "no API key");
    static NOT_IN_TRIAL: Rejection = Rejection::new(403, "not in the trial");
    type Request = (u64, Option<&'static str>);
    let policies = Policies::<Request>::builder()
        .clock(ManualClock::new())
        .policy(Policy::global("front").quota(q("3/h")))
        .policy(
            Policy::keyed_with("trial", |_: &Request, key| {
                key.reject(&NOT_IN_TRIAL);
            })
            .quota(q("1/h"))
            .dry_run(true),
        )
        .policy(
            Policy::keyed_with("per-key", |(_, api_key): &Request, key| {
                match api_key {
                    Some(api_key) => key.add(api_key),
                    None => key.reject(&NO_KEY),
                };
            })
            .quota(q("2/h")),
        )
        .build()
        .unwrap();
    let front = |request: Request| {
        let mut left = Vec::new();
        policies.inspect(&request, |s| {
            left.push((s.by().policy(), s.gauge().remaining()))
        });
        left
    };
    assert!(policies.check(&(1, Some("k"))).is_ok());
    let refused = policies.check(&(1, None)).unwrap_err();
    assert_eq!(refused.cause(), Cause::Rejected);
    assert_eq!(refused.rejection(), Some(&NO_KEY));
    assert_eq!(refused.by().map(|by| by.policy()), Some("per-key"));
    assert_eq!(refused.retry_after(), Duration::from_nanos(u64::MAX));
    assert_eq!(refused.dry_run(), None, "the dry run's rejection is a skip");
    assert_eq!(
        refused.to_string(),
        "rejected by policy 'per-key': no API key"
    );
    assert_eq!(front((1, None)), [("front", 2)], "the front cell came back");
    assert_eq!(front((1, Some("k"))), [("front", 2), ("per-key", 1)]);
    let stats = policies.stats();
    assert_eq!(
        (stats[0].refused, stats[1].refused, stats[2].refused),
        (0, 0, 1)
    );

    // Up to two cells, zero cells, or a wait: refused at once, nothing taken.
    let up_to = policies.check_up_to(&(1, None), 2).unwrap_err();
    assert_eq!(up_to.cause(), Cause::Rejected);
    let zero = policies.check_n(&(1, None), 0).unwrap().unwrap_err();
    assert_eq!(zero.rejection(), Some(&NO_KEY));
    let zero_up_to = policies.check_up_to(&(1, None), 0).unwrap_err();
    assert_eq!(zero_up_to.cause(), Cause::Rejected);
    let waited = policies.wait(&(1, None), 1, WaitOptions::new());
    assert!(
        matches!(waited, Err(flowgate::policy::Error::Refused(r)) if r.cause() == Cause::Rejected)
    );
    assert_eq!(front((1, None)), [("front", 2)]);

    // The front quota spent, its refusal gives way to the later policy's rejection: retrying
    // would not help.
    assert!(policies.check(&(2, Some("j"))).is_ok());
    assert!(policies.check(&(3, Some("i"))).is_ok());
    assert_eq!(
        policies.check(&(4, Some("h"))).unwrap_err().cause(),
        Cause::Quota
    );
    let refused = policies.check(&(4, None)).unwrap_err();
    assert_eq!(refused.rejection(), Some(&NO_KEY));
}
