//! One policy set on either backend: built from code ([`AnyPolicies`] from either set) or from a configuration
//! file (`backend = "redis"`), decided through the same [`Backend`] calls, with the same
//! answers; Redis runs on a private `redis-server` on a loopback port.

#[path = "support/redis_server.rs"]
mod redis_server;

use flowgate::backend::Backend;
use flowgate::clock::QuantaClock;
use flowgate::policy::{BuildError, KeyExtractors, Policies, PoliciesConfig, Policy};
use flowgate_redis::AnyPolicies;
use flowgate_redis::BuildRedis as _;
use flowgate_redis::Config;
use flowgate_redis::{BreakerState, RedisBackend, RedisConfigError};
use redis_server::RedisServer;

/// Sends `alice`, `alice`, `bob`, `alice`, `alice`, `bob` and reports what each got: admitted,
/// or the refusing policy.
async fn drive(limits: &AnyPolicies<str>) -> Vec<Result<(), String>> {
    let mut seen = Vec::new();
    for user in ["alice", "alice", "bob", "alice", "alice", "bob"] {
        let answer = limits.check_n(user, 1).await.unwrap().outcome();
        seen.push(
            answer
                .map(|_| ())
                .map_err(|r| r.by().map(|by| by.policy()).unwrap().to_owned()),
        );
    }
    seen
}

fn file(backend: &str, url: &str) -> Config {
    toml::from_str(&format!(
        r#"
        backend = "{backend}"
        [redis]
        url = "{url}"
        prefix = "backends-{backend}"
        timeout = "2s"
        on_failure = "closed"
        retry_after = "3s"

        [[policies]]
        name = "per-user"
        key = "user"
        quotas = ["3/hour"]

        [[policies]]
        name = "everyone"
        quotas = ["5/hour"]
        "#
    ))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_backend_is_chosen_in_the_file_and_nothing_else_changes() {
    let server = RedisServer::start();
    let keys = KeyExtractors::new().key("user", |user: &str, k| {
        k.add(user);
    });
    let mut answers = Vec::new();
    for backend in ["in_process", "redis"] {
        let limits = file(backend, &server.url())
            .build(&keys, QuantaClock::new())
            .unwrap();
        assert_eq!(limits.backend_name(), backend);
        let names: Vec<_> = limits.policies().into_iter().map(|p| p.name).collect();
        assert_eq!(names, ["per-user", "everyone"]);
        answers.push(drive(&limits).await);
    }
    let expected: Vec<Result<(), String>> = vec![
        Ok(()),
        Ok(()),
        Ok(()),
        Ok(()),
        Err("per-user".into()),
        Ok(()),
    ];
    assert_eq!(answers[0], expected);
    assert_eq!(
        answers[1], expected,
        "Redis answers as the in-process set does"
    );
    // Two instances built from the same file share the Redis limit: the global 5 is spent.
    let other = file("redis", &server.url())
        .build(&keys, QuantaClock::new())
        .unwrap();
    let refused = other
        .check_n("carol", 1)
        .await
        .unwrap()
        .outcome()
        .unwrap_err();
    assert_eq!(refused.by().map(|by| by.policy()), Some("everyone"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_backend_is_chosen_in_code_and_nothing_else_changes() {
    let server = RedisServer::start();
    let set = || {
        Policies::<str>::builder()
            .policy(Policy::keyed("per-user", |u: &str| u).quota("3/hour".parse().unwrap()))
            .policy(Policy::global("everyone").quota("5/hour".parse().unwrap()))
    };
    let in_process = AnyPolicies::from(set().build().unwrap());
    let backend = server.backend().prefix("backends-code");
    let redis = AnyPolicies::from(set().build_redis(backend).unwrap());
    assert!(matches!(in_process, AnyPolicies::InProcess(_)));
    assert!(matches!(redis, AnyPolicies::Redis(_)));
    assert_eq!(drive(&in_process).await, drive(&redis).await);
    // A look (n = 0) takes nothing on either, and reports the tightest quota: the spent
    // global one.
    for limits in [&in_process, &redis] {
        for _ in 0..2 {
            let state = limits.check_n("dave", 0).await.unwrap().outcome().unwrap();
            let seen = (state.remaining(), state.by().map(|by| by.policy()));
            assert_eq!(seen, (0, Some("everyone")), "{}", limits.backend_name());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_backends_are_errors_naming_the_setting() {
    let keys = KeyExtractors::<str>::new().key("user", |user: &str, k| {
        k.add(user);
    });
    let clock = QuantaClock::new;
    let error = |text: &str| {
        let config: Config = toml::from_str(text).unwrap();
        config.build(&keys, clock()).unwrap_err()
    };
    let policies = "[[policies]]\nname = \"p\"\nkey = \"user\"\nquotas = [\"1/s\"]\n";
    let unknown = error(&format!("backend = \"memcached\"\n{policies}"));
    assert_eq!(unknown.field, "backend");
    let no_table = error(&format!("backend = \"redis\"\n{policies}"));
    assert_eq!(no_table.field, "redis");
    let bad_url = error(&format!(
        "backend = \"redis\"\n[redis]\nurl = \"nonsense\"\n{policies}"
    ));
    assert_eq!(bad_url.field, "redis.url");
    // A timeout that is no duration is refused as the file is read, at its line.
    let bad_timeout = toml::from_str::<Config>(&format!(
        "backend = \"redis\"\n[redis]\nurl = \"redis://127.0.0.1:1/\"\ntimeout = \"soon\"\n{policies}"
    ));
    let bad_timeout = bad_timeout.unwrap_err().to_string();
    assert!(
        bad_timeout.starts_with("TOML parse error at line 4"),
        "{bad_timeout}"
    );
    assert!(
        bad_timeout.contains("\"soon\": invalid duration"),
        "{bad_timeout}"
    );
    let no_share = error(&format!(
        "backend = \"redis\"\n[redis]\nurl = \"redis://127.0.0.1:1/\"\non_failure = \"local\"\n{policies}"
    ));
    assert_eq!(no_share.field, "redis.local_share");
    let zero = error(&format!(
        "backend = \"redis\"\n[redis]\nurl = \"redis://127.0.0.1:1/\"\ntimeout = \"0s\"\n{policies}"
    ));
    assert_eq!(
        (zero.field.as_str(), zero.message.as_str()),
        ("redis.timeout", "the timeout is zero")
    );
    // A breaker is `[failures, "cool-down"]` with both above zero, or `true` / `false`.
    for breaker in ["[0, \"1s\"]", "[3, \"0s\"]", "[3, \"soon\"]"] {
        let bad = error(&format!(
            "backend = \"redis\"\n[redis]\nurl = \"redis://127.0.0.1:1/\"\nbreaker = {breaker}\n{policies}"
        ));
        assert_eq!(bad.field, "redis.breaker", "{breaker}");
    }
    for (breaker, state) in [
        ("[2, \"50ms\"]", BreakerState::Closed { failures: 0 }),
        ("true", BreakerState::Closed { failures: 0 }),
        ("false", BreakerState::Off),
    ] {
        let config: Config = toml::from_str(&format!(
            "backend = \"redis\"\n[redis]\nurl = \"redis://127.0.0.1:1/\"\nbreaker = {breaker}\n{policies}"
        ))
        .unwrap();
        let AnyPolicies::Redis(set) = config.build(&keys, clock()).unwrap() else {
            panic!("a Redis set");
        };
        assert_eq!(set.breaker_state(), state, "{breaker}");
    }
    // A policy's own mistake is blamed on the policy, whatever the backend.
    let empty = error(
        "backend = \"redis\"\n[redis]\nurl = \"redis://127.0.0.1:1/\"\n[[policies]]\nname = \"p\"\nquotas = []\n",
    );
    assert_eq!(
        (empty.policy.as_deref(), empty.field.as_str()),
        (Some("'p'"), "quotas")
    );
    // flowgate alone builds in process only, and says so rather than ignoring the file's
    // backend; its own reader has no `[redis]` table.
    let config: PoliciesConfig =
        toml::from_str(&format!("backend = \"redis\"\n{policies}")).unwrap();
    assert_eq!(config.build(&keys, clock()).unwrap_err().field, "backend");
    let table = format!("backend = \"redis\"\n[redis]\nurl = \"redis://127.0.0.1:1/\"\n{policies}");
    let unknown = toml::from_str::<PoliciesConfig>(&table).unwrap_err();
    assert!(unknown.to_string().contains("redis"), "{unknown}");
    // In code: the set's mistakes are `Policy`, Redis's own are named.
    let none = Policies::<str>::builder().build_redis(RedisBackend::new(redis_server::nobody()));
    assert_eq!(
        none.unwrap_err(),
        RedisConfigError::Policy(BuildError::NoPolicies)
    );
    let backend = RedisBackend::new(redis_server::nobody()).prefix("a:b");
    let set = Policies::<str>::builder().policy(Policy::global("g").quota("1/s".parse().unwrap()));
    assert!(matches!(
        set.build_redis(backend).unwrap_err(),
        RedisConfigError::BadName { what: "prefix", .. }
    ));
}

/// A wait on either backend sleeps exactly as long as the refusal says, through the sleep it
/// is given (here: the test's clock, moved forwards), and a bounded wait that cannot succeed in
/// time ends at once; Redis decides at the clock's readings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waits_sleep_alike_on_either_backend() {
    use flowgate::clock::ManualClock;
    use flowgate::wait::until_ready;
    use flowgate::{policy::Error, WaitOptions};
    use std::sync::Mutex;
    use std::time::Duration;

    let server = RedisServer::start();
    let clock = ManualClock::starting_at(1_000_000_000_000);
    let set = || {
        Policies::<str>::builder()
            .clock(clock.clone())
            .policy(Policy::keyed("per-user", |u: &str| u).quota("2/s".parse().unwrap()))
    };
    let backend = server.backend().prefix("waits").client_time(true);
    let sets = [
        AnyPolicies::from(set().build().unwrap()),
        AnyPolicies::from(set().build_redis(backend).unwrap()),
    ];
    let mut slept_by = Vec::new();
    for limits in &sets {
        let slept = Mutex::new(Vec::new());
        let sleep = |d: Duration| {
            slept.lock().unwrap().push(d);
            clock.advance(d);
            core::future::ready(())
        };
        assert!(limits.check_n("erin", 2).await.unwrap().is_allowed());
        let options = WaitOptions::new();
        let allowed = until_ready(limits, "erin", 1, options, sleep).await;
        assert_eq!(allowed.unwrap().remaining(), 0, "{}", limits.backend_name());
        // Within 100 ms the next cell (500 ms away) cannot come: refused without sleeping.
        let before = slept.lock().unwrap().len();
        let bounded = WaitOptions::new().at_most(Duration::from_millis(100));
        let refused = until_ready(limits, "erin", 1, bounded, sleep).await;
        assert!(matches!(refused, Err(Error::Refused(_))), "{refused:?}");
        assert_eq!(slept.lock().unwrap().len(), before);
        let never = until_ready(limits, "erin", 3, options, sleep).await;
        assert!(matches!(never, Err(Error::Capacity(_))), "{never:?}");
        clock.advance(Duration::from_secs(5));
        slept_by.push(slept.into_inner().unwrap());
    }
    assert_eq!(slept_by[0], [Duration::from_millis(500)]);
    assert_eq!(
        slept_by[0], slept_by[1],
        "Redis waits as the in-process set does"
    );
}

/// `look` takes nothing and `reset` forgets what one request's key used, alike on either
/// backend; other keys, and the global policy (every client's), keep theirs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn looks_and_resets_alike_on_either_backend() {
    let server = RedisServer::start();
    let set = || {
        Policies::<str>::builder()
            .policy(Policy::keyed("per-user", |u: &str| u).quota("3/hour".parse().unwrap()))
            .policy(Policy::global("everyone").quota("5/hour".parse().unwrap()))
    };
    let backend = server.backend().prefix("backends-reset");
    let sets = [
        AnyPolicies::from(set().build().unwrap()),
        AnyPolicies::from(set().build_redis(backend).unwrap()),
    ];
    let left = |states: Vec<flowgate::policy::QuotaState>| -> Vec<u32> {
        states.iter().map(|s| s.gauge().remaining()).collect()
    };
    for limits in &sets {
        let name = limits.backend_name();
        for user in ["alice", "alice", "bob"] {
            let verdict = limits.check_n(user, 1).await.unwrap();
            assert!(verdict.is_allowed(), "{name}: {verdict}");
        }
        for _ in 0..2 {
            assert_eq!(left(limits.look("alice").await.unwrap()), [1, 2], "{name}");
        }
        limits.reset("alice").await.unwrap();
        assert_eq!(left(limits.look("alice").await.unwrap()), [3, 2], "{name}");
        assert_eq!(left(limits.look("bob").await.unwrap()), [2, 2], "{name}");
    }
}

/// A key extractor's rejection is answered alike on either backend: refused for good with its
/// status and message, nothing taken from the global policy before it, at once for a wait and
/// for up to n cells. Redis is never asked: with the server gone, a rejection is still one
/// (not a failure).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejections_answer_alike_on_either_backend() {
    use flowgate::outcome::Rejection;
    use flowgate::wait::until_ready;
    use flowgate::{Cause, WaitOptions};
    static NO_USER: Rejection = Rejection::new(401, "no user");

    let mut server = RedisServer::start();
    let set = || {
        Policies::<str>::builder()
            .policy(Policy::global("everyone").quota("5/hour".parse().unwrap()))
            .policy(
                Policy::keyed_with("per-user", |u: &str, key| {
                    match u {
                        "" => key.reject(&NO_USER),
                        user => key.add(user),
                    };
                })
                .quota("3/hour".parse().unwrap()),
            )
    };
    let backend = server.backend().prefix("backends-reject");
    let sets = [
        AnyPolicies::from(set().build().unwrap()),
        AnyPolicies::from(set().build_redis(backend).unwrap()),
    ];
    let left = |states: Vec<flowgate::policy::QuotaState>| -> Vec<u32> {
        states.iter().map(|s| s.gauge().remaining()).collect()
    };
    let rejected = |outcome: Result<_, flowgate::policy::Refused>, what: &str| {
        let refused = outcome.expect_err(what);
        assert_eq!(refused.cause(), Cause::Rejected, "{what}");
        assert_eq!(refused.rejection(), Some(&NO_USER), "{what}");
        assert_eq!(refused.by().map(|by| by.policy()), Some("per-user"));
        let never = std::time::Duration::from_nanos(u64::MAX);
        assert_eq!(refused.retry_after(), never, "{what}");
    };
    for limits in &sets {
        let name = limits.backend_name();
        assert!(limits.check_n("alice", 1).await.unwrap().is_allowed());
        rejected(limits.check_n("", 1).await.unwrap().outcome(), name);
        // Zero cells take nothing, and are rejected all the same.
        rejected(limits.check_n("", 0).await.unwrap().outcome(), name);
        let (taken, verdict) = limits.check_up_to("", 2).await;
        assert_eq!(taken, 0, "{name}");
        rejected(verdict.outcome(), name);
        let sleep = |_| async { panic!("{name}: a rejection is never waited out") };
        match until_ready(limits, "", 1, WaitOptions::new(), sleep).await {
            Err(flowgate::policy::Error::Refused(refused)) => rejected(Err(refused), name),
            other => panic!("{name}: {other:?}"),
        }
        // The rejecting policy is passed by; the global one lost alice's cell alone.
        assert_eq!(left(limits.look("").await.unwrap()), [4], "{name}");
        assert_eq!(left(limits.look("alice").await.unwrap()), [4, 2], "{name}");
    }
    server.kill();
    rejected(
        sets[1].check_n("", 1).await.unwrap().outcome(),
        "Redis gone",
    );
}
