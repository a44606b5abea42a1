//! Policy sets from TOML and JSON: the same file in both formats builds the same set, every
//! mistake names its policy and field, and a reload keeps every bucket.

use core::time::Duration;

use flowgate::clock::ManualClock;
use flowgate::policy::{ConfigError, KeyExtractors, PoliciesConfig};
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

fn error_of(text: &str) -> ConfigError {
    toml_config(text)
        .build(&keys(), ManualClock::new())
        .unwrap_err()
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
fn mistakes_name_the_policy_and_the_field() {
    let bad_quota = TOML.replace("\"5000/h\"", "\"5000/fortnight\"");
    let e = error_of(&bad_quota);
    assert_eq!(
        (e.policy.as_str(), e.field.as_str()),
        ("'per-user'", "quotas[1]")
    );
    assert!(e.message.contains("5000/fortnight"), "{e}");
    assert_eq!(
        e.to_string(),
        format!("policy 'per-user', field `quotas[1]`: {}", e.message)
    );

    let zero = TOML.replace("\"100000/10s\"", "\"0/10s\"");
    let e = error_of(&zero);
    assert_eq!(
        (e.policy.as_str(), e.field.as_str()),
        ("'server'", "quotas[0]")
    );

    let e = error_of(&TOML.replace("\"5ms\"", "\"5 parsecs\""));
    assert_eq!(
        (e.policy.as_str(), e.field.as_str()),
        ("'per-user'", "jitter[1]")
    );

    let e = error_of(&TOML.replace("[\"1ms\", \"5ms\"]", "[\"5ms\", \"1ms\"]"));
    assert_eq!(
        (e.policy.as_str(), e.field.as_str()),
        ("'per-user'", "jitter")
    );

    let e = error_of(&TOML.replace("key = \"endpoint\"", "key = \"route\""));
    assert_eq!(
        (e.policy.as_str(), e.field.as_str()),
        ("'per-endpoint'", "key")
    );
    assert!(e.message.contains("\"route\""), "{e}");

    let e = error_of(&TOML.replace("admit_untracked", "panic"));
    assert_eq!(
        (e.policy.as_str(), e.field.as_str()),
        ("'per-endpoint'", "when_full")
    );

    let e = error_of(&TOML.replace("max_keys = 1000", "max_keys = 0"));
    assert_eq!(
        (e.policy.as_str(), e.field.as_str()),
        ("'per-endpoint'", "max_keys")
    );

    let e = error_of(&TOML.replace("name = \"server\"", "name = \"per-user\""));
    assert_eq!(
        (e.policy.as_str(), e.field.as_str()),
        ("'per-user'", "name")
    );

    let e = error_of(&TOML.replace("name = \"server\"", "name = \"\""));
    assert_eq!((e.policy.as_str(), e.field.as_str()), ("#2", "name"));

    let e = error_of(&TOML.replace("quotas = [\"100000/10s\"]", "quotas = []"));
    assert_eq!(
        (e.policy.as_str(), e.field.as_str()),
        ("'server'", "quotas")
    );

    // Fields serde rejects itself come with the format's own position.
    let typo = TOML.replace("dry_run = true", "dryrun = true");
    let e = toml::from_str::<PoliciesConfig>(&typo).unwrap_err();
    assert!(e.to_string().contains("dryrun"), "{e}");
    let e = serde_json::from_str::<PoliciesConfig>(
        &JSON.replace("\"quotas\": [\"100000/10s\"]", "\"quotas\": 5"),
    )
    .unwrap_err();
    assert!(e.to_string().contains("line"), "{e}");
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
    // A bad file changes nothing, even when its first policies are fine.
    let bad = toml_config(&TOML.replace("\"100000/10s\"", "\"100000/10 lightyears\""));
    let e = bad.apply(&policies).unwrap_err();
    assert_eq!(
        (e.policy.as_str(), e.field.as_str()),
        ("'server'", "quotas[0]")
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
