//! Policy quotas on every one-word algorithm: the exact undo of each (a later refusal leaves
//! every bucket as it was, to the gauge), a window counter beside GCRA in one policy, the
//! configuration grammar with algorithm names, replacements that keep or refuse a bucket's
//! meaning, and shaping quotas whose delay a wait sleeps and gives back whole.

use core::time::Duration;

use flowgate::algorithm::{AnyAlgorithm, FixedWindow};
use flowgate::clock::ManualClock;
use flowgate::policy::{BuildError, Policies, Policy, QuotaState};
use flowgate::{Quota, WaitOptions};

const SEC: u64 = 1_000_000_000;

fn any(text: &str) -> AnyAlgorithm {
    text.parse().unwrap()
}

/// Every quota's state for `user`, in evaluation order.
fn states(policies: &Policies<u64, ManualClock>, user: u64) -> Vec<QuotaState> {
    let mut all = Vec::new();
    policies.inspect(&user, |state| all.push(state));
    all
}

/// Per user, `algorithm`; then a global quota of two cells an hour, spent by the first request.
fn with_global_after(algorithm: &str, clock: &ManualClock) -> Policies<u64, ManualClock> {
    Policies::builder()
        .clock(clock.clone())
        .policy(Policy::keyed("per-user", |u: &u64| u).quota_with(any(algorithm)))
        .policy(Policy::global("global").quota(Quota::per_hour(2).unwrap()))
        .build()
        .unwrap()
}

/// A refusal by a later policy undoes what an earlier quota of `algorithm` took, exactly:
/// every bucket is as it was before the refused request, to the gauge.
fn a_later_refusal_leaves_the_bucket_as_it_was(algorithm: &str) {
    let clock = ManualClock::starting_at(SEC);
    let policies = with_global_after(algorithm, &clock);
    assert!(policies.check_n(&7, 2).unwrap().is_ok());
    clock.advance(Duration::from_millis(1));
    let before = states(&policies, 7);
    let refused = policies.check(&7).unwrap_err();
    assert_eq!(refused.by().map(|by| by.policy()), Some("global"));
    assert_eq!(states(&policies, 7), before, "the undo left a cell taken");
    // And again at once, on the restored word.
    assert!(policies.check(&7).is_err());
    assert_eq!(states(&policies, 7), before);
}

/// One test per one-word algorithm, each roomy enough to admit the first requests at once.
mod undo {
    use super::a_later_refusal_leaves_the_bucket_as_it_was as undone;

    #[test]
    fn gcra() {
        undone("100/h");
    }

    #[test]
    fn leaky_bucket_meter() {
        undone("100/h leaky");
    }

    #[test]
    fn leaky_bucket_shaper() {
        undone("10/h burst 10 shaper 1h");
    }

    #[test]
    fn credit() {
        undone("10/h credit 1h");
    }

    #[test]
    fn interval_refill() {
        undone("10/h burst 20 interval");
    }

    #[test]
    fn fixed_window() {
        undone("100/h fixed");
    }

    #[test]
    fn sliding_window() {
        undone("100/h sliding");
    }
}

/// A window counter's refusal by a later quota of the same policy undoes the earlier quota's
/// count, and a GCRA quota after a window counter is undone too.
#[test]
fn quotas_of_one_policy_undo_each_other_across_algorithms() {
    let clock = ManualClock::starting_at(SEC);
    let policies = Policies::<u64, _>::builder()
        .clock(clock.clone())
        .policy(
            Policy::keyed("per-user", |u: &u64| u)
                .quota_with(any("10/h sliding"))
                .quota("3/h".parse().unwrap())
                .quota_with(any("2/h fixed")),
        )
        .build()
        .unwrap();
    assert!(policies.check(&1).is_ok());
    assert!(policies.check(&1).is_ok());
    let before = states(&policies, 1);
    let refused = policies.check(&1).unwrap_err();
    assert_eq!(
        refused.by().unwrap().quota_index(),
        2,
        "the fixed window refuses"
    );
    assert_eq!(states(&policies, 1), before);
}

/// The users' "20000/day" as a fixed window beside a GCRA "200/10s": the day's count runs out
/// first for a steady client, and the refusal names it and waits for the next day's window.
#[test]
fn a_daily_fixed_window_beside_a_ten_second_gcra() {
    let clock = ManualClock::new();
    let policies = Policies::<u64, _>::builder()
        .clock(clock.clone())
        .policy(
            Policy::keyed("per-user", |u: &u64| u)
                .quota("200/10s".parse().unwrap())
                .quota_with(FixedWindow::new(&"500/day".parse().unwrap()).unwrap()),
        )
        .build()
        .unwrap();
    // 20 per second: under the 10-second quota, so the day's 500 go in 25 s.
    let mut admitted = 0;
    for step in 0..1_000u64 {
        clock.set(step * SEC / 20);
        if policies.check(&1).is_ok() {
            admitted += 1;
        }
    }
    assert_eq!(admitted, 500);
    let refused = policies.check(&1).unwrap_err();
    let by = refused.by().unwrap();
    assert_eq!((by.policy(), by.quota_index()), ("per-user", 1));
    let day = 86_400 * SEC;
    assert_eq!(
        refused.retry_after(),
        Duration::from_nanos(day - clock.get())
    );
    clock.set(day);
    assert!(policies.check(&1).is_ok(), "a new day, a new window");
}

/// `replace_quotas` keeps each quota's algorithm (a fixed window stays one, with its count);
/// a window length that changes, or another family of algorithm, is refused whole.
#[test]
fn replacements_keep_the_algorithm_or_are_refused() {
    let clock = ManualClock::starting_at(SEC);
    let policies = Policies::<u64, _>::builder()
        .clock(clock.clone())
        .policy(Policy::keyed("p", |u: &u64| u).quota_with(any("3/h fixed")))
        .build()
        .unwrap();
    assert!(policies.check_n(&1, 3).unwrap().is_ok());
    // Three more per hour: the three counted stay counted.
    policies
        .replace_quotas("p", &["6/h".parse().unwrap()])
        .unwrap();
    assert_eq!(policies.algorithms("p").unwrap(), [any("6/h fixed")]);
    assert_eq!(policies.check_n(&1, 0).unwrap().unwrap().remaining(), 3);
    for refused in [
        policies.replace_quotas("p", &["6/min".parse().unwrap()]),
        policies.replace("p", &[any("6/h")]),
        policies.replace("p", &[any("6/h sliding")]),
    ] {
        assert!(matches!(
            refused,
            Err(BuildError::Incompatible { quota: 0, .. })
        ));
    }
    let bad_burst = policies.replace_quotas("p", &["6/h burst 2".parse().unwrap()]);
    assert!(matches!(bad_burst, Err(BuildError::Quota { quota: 0, .. })));
    assert_eq!(policies.algorithms("p").unwrap(), [any("6/h fixed")]);
    // The GCRA family takes over each other's buckets.
    let gcra = Policies::<u64, _>::builder()
        .clock(clock)
        .policy(Policy::keyed("p", |u: &u64| u).quota_with(any("6/h")))
        .build()
        .unwrap();
    gcra.replace("p", &[any("6/h burst 1 shaper 1h")]).unwrap();
    gcra.replace("p", &[any("6/h credit 1h")]).unwrap();
}

/// A shaping quota admits with a delay, and the policy's admission carries the longest one; a
/// wait sleeps it, and a bounded wait too short for it gives back every quota's cells.
#[test]
fn a_shaping_quota_delays_and_a_short_wait_gives_everything_back() {
    let clock = ManualClock::starting_at(SEC);
    let policies = Policies::<u64, _>::builder()
        .clock(clock.clone())
        .policy(Policy::keyed("queue", |u: &u64| u).quota_with(any("10/s burst 1 shaper 1s")))
        .policy(Policy::global("all").quota("100/s".parse().unwrap()))
        .build()
        .unwrap();
    assert_eq!(policies.check(&1).unwrap().delay(), Duration::ZERO);
    assert_eq!(
        policies.check(&1).unwrap().delay(),
        Duration::from_millis(100)
    );
    let before = states(&policies, 1);
    let short = WaitOptions::new().at_most(Duration::from_millis(150));
    let Err(flowgate::policy::Error::Refused(refused)) = policies.wait(&1, 1, short) else {
        panic!("a 200 ms place in the queue is longer than 150 ms");
    };
    assert_eq!(refused.retry_after(), Duration::from_millis(200));
    assert_eq!(
        states(&policies, 1),
        before,
        "the reservation went back, on both quotas"
    );
    let start = clock.get();
    let allowed = policies.wait(&1, 1, WaitOptions::new()).unwrap();
    assert_eq!(allowed.delay(), Duration::from_millis(200));
    assert_eq!(clock.get() - start, 200_000_000, "the wait slept the delay");
}

/// The configuration grammar names algorithms after quotas; a quota an algorithm rejects is
/// reported with the algorithm's name, and a reload may not change a quota's algorithm family.
#[cfg(feature = "serde")]
#[test]
fn configurations_name_algorithms() {
    use flowgate::policy::{KeyExtractors, PoliciesConfig};

    let keys = KeyExtractors::new().key("user", |u: &u64, k| {
        k.add(u);
    });
    let parse = |quotas: &str| {
        serde_json::from_str::<PoliciesConfig>(&format!(
            r#"{{ "policies": [ {{ "name": "per-user", "key": "user", "quotas": {quotas} }} ] }}"#
        ))
    };
    let config = |quotas: &str| parse(quotas).unwrap();
    let policies = config(r#"["200/10s", "20000/day fixed", "5/min sliding"]"#)
        .build(&keys, ManualClock::new())
        .unwrap();
    assert_eq!(
        policies.algorithms("per-user").unwrap(),
        [any("200/10s"), any("20000/day fixed"), any("5/min sliding")]
    );
    // Refused as the file is read, at the value's place.
    let error = parse(r#"["100/min burst 20 fixed"]"#)
        .unwrap_err()
        .to_string();
    assert!(error.contains("algorithm `fixed`"), "{error}");
    assert!(error.ends_with("at line 1 column 89"), "{error}");
    let error = parse(r#"["10/min bucket"]"#).unwrap_err().to_string();
    assert!(error.contains("expected an algorithm"), "{error}");
    // Made in code, the same quota is refused by `build`, naming the policy and field.
    let mut made = config(r#"["200/10s"]"#);
    made.policies[0].quotas[0] = "100/min burst 20 fixed".into();
    let error = made.build(&keys, ManualClock::new()).unwrap_err();
    assert_eq!(
        (error.policy.as_deref(), error.field.as_str()),
        (Some("'per-user'"), "quotas[0]")
    );
    assert!(error.message.contains("`fixed`"), "{}", error.message);
    // A reload: new counts are fine, another algorithm family is not, and changes nothing.
    config(r#"["300/10s", "30000/day fixed", "6/min sliding"]"#)
        .apply(&policies)
        .unwrap();
    let error = config(r#"["300/10s", "30000/day", "6/min sliding"]"#)
        .apply(&policies)
        .unwrap_err();
    assert_eq!(error.field, "quotas[1]");
    assert_eq!(
        policies.algorithms("per-user").unwrap()[1],
        any("30000/day fixed")
    );
}

/// Outcomes are owned: a refusal goes into `Box<dyn Error + Send + Sync>` with `?`, and names
/// its policy there.
#[test]
fn a_refusal_returns_with_the_question_mark() {
    fn handle(
        policies: &Policies<u64, ManualClock>,
        user: u64,
    ) -> Result<u32, Box<dyn std::error::Error + Send + Sync>> {
        Ok(policies.check(&user)?.remaining())
    }
    let policies = with_global_after("100/h", &ManualClock::new());
    assert_eq!(handle(&policies, 1).unwrap(), 1);
    assert_eq!(handle(&policies, 2).unwrap(), 0);
    let error = handle(&policies, 3).unwrap_err();
    assert_eq!(
        error.to_string(),
        "rate limited by policy 'global', quota #0: retry after 1800s"
    );
    // A policy set's refusal cites its quota: it is a `policy::Refused`, not a bare `Refused`.
    assert!(error.downcast_ref::<flowgate::Refused>().is_none());
    let refused = error.downcast::<flowgate::policy::Refused>().unwrap();
    assert_eq!(refused.by().map(|by| by.policy()), Some("global"));
}
