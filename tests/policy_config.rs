//! Policy sets from TOML and JSON: the same file in both formats builds the same set, and a
//! reload keeps every bucket. (Every mistake's message: `integration/tests/config_errors.rs`.)

use core::time::Duration;

use flowgate::clock::ManualClock;
use flowgate::policy::{KeyExtractors, PoliciesConfig};
use flowgate::Quota;

struct Request {
    user: &'static str,
    endpoint: &'static str,
}

const TOML: &str = r#"
[[policies]]
name = "per-user"
key = "user"
quotas = ["200/10s", "5000/h", "20000/day"]
jitter = ["1ms", "5ms"]

[[policies]]
name = "per-endpoint"
key = "endpoint"
quotas = ["3000/min burst 4000"]
dry_run = true
max_keys = 1000
when_full = "admit_untracked"

[[policies]]
name = "server"
quotas = ["100000/10s"]
"#;

const JSON: &str = r#"{ "policies": [
  { "name": "per-user", "key": "user", "quotas": ["200/10s", "5000/h", "20000/day"],
    "jitter": ["1ms", "5ms"] },
  { "name": "per-endpoint", "key": "endpoint", "quotas": ["3000/min burst 4000"],
    "dry_run": true, "max_keys": 1000, "when_full": "admit_untracked" },
  { "name": "server", "quotas": ["100000/10s"] }
] }"#;

fn keys() -> KeyExtractors<Request> {
    KeyExtractors::new()
        .key("user", |r: &Request, k| {
            k.add(r.user);
        })
        .key("endpoint", |r: &Request, k| {
            k.add(r.endpoint);
        })
}

fn toml_config(text: &str) -> PoliciesConfig {
    toml::from_str(text).unwrap()
}

#[test]
fn toml_and_json_describe_the_same_set() {
    let from_toml = toml_config(TOML);
    let from_json: PoliciesConfig = serde_json::from_str(JSON).unwrap();
    assert_eq!(from_toml, from_json);
    let policies = from_toml.build(&keys(), ManualClock::new()).unwrap();
    assert_eq!(
        policies.names().collect::<Vec<_>>(),
        ["per-user", "per-endpoint", "server"]
    );
    assert_eq!(
        policies.quotas("per-user").unwrap(),
        ["200/10s", "5000/h", "20000/day"].map(|s| s.parse::<Quota>().unwrap())
    );
    let request = Request {
        user: "alice",
        endpoint: "/search",
    };
    for _ in 0..200 {
        assert!(policies.check(&request).is_ok());
    }
    let refused = policies.check(&request).unwrap_err();
    assert_eq!(refused.by().map(|by| by.policy()), Some("per-user"));
    assert!(refused.jitter() >= Duration::from_millis(1));
    assert!(refused.jitter() <= Duration::from_millis(5));
    assert!(policies.stats()[1].dry_run);
    // Serializing and reading back gives the same configuration.
    let written = toml::to_string(&from_toml).unwrap();
    assert_eq!(toml_config(&written), from_toml);
}

#[test]
fn a_reload_replaces_quotas_and_keeps_buckets() {
    let clock = ManualClock::new();
    let policies = toml_config(TOML).build(&keys(), clock.clone()).unwrap();
    let request = Request {
        user: "bob",
        endpoint: "/a",
    };
    for _ in 0..200 {
        assert!(policies.check(&request).is_ok());
    }
    // A bad file changes nothing, even when its first policies are fine (a configuration
    // made in code: a file with this quota does not parse).
    let mut bad = toml_config(TOML);
    bad.policies[2].quotas[0] = "100000/10 lightyears".into();
    let e = bad.apply(&policies).unwrap_err();
    assert_eq!(
        (e.policy.as_deref(), e.field.as_str()),
        (Some("'server'"), "quotas[0]")
    );
    assert_eq!(
        policies.quotas("per-user").unwrap()[0],
        "200/10s".parse().unwrap()
    );
    let fewer = toml_config(&TOML.replace(", \"20000/day\"", ""));
    assert_eq!(fewer.apply(&policies).unwrap_err().field, "quotas");
    let renamed = toml_config(&TOML.replace("name = \"server\"", "name = \"global\""));
    assert_eq!(renamed.apply(&policies).unwrap_err().field, "name");

    // Raise the 10-second limit to 400: bob's bucket keeps its theoretical arrival time (booked
    // 10 s ahead, a whole window of either quota), so it is still empty, and now refills at
    // 40 per second instead of 20.
    let raised = toml_config(&TOML.replace("200/10s", "400/10s"));
    raised.apply(&policies).unwrap();
    let refused = policies.check(&request).unwrap_err();
    assert_eq!(
        (refused.by().map(|by| by.policy()), refused.limit()),
        (Some("per-user"), 400)
    );
    assert_eq!(refused.conforms_after(), Duration::from_millis(25));
    clock.advance(Duration::from_secs(1));
    for _ in 0..40 {
        assert!(policies.check(&request).is_ok());
    }
    assert!(policies.check(&request).is_err());
}
