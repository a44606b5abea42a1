//! The policy configuration loader (`flowgate::policy::PoliciesConfig`, feature `serde`): any
//! text, read as TOML or JSON (the first byte chooses), as a policy set's file and as a service's
//! file with a `[client_ip]` table beside the policies (`flowgate::http`'s configuration).
//!
//! Asserts: reading, building (`build`, and flowgate-redis's `Config::build`, which stops a
//! Redis backend for want of its table or a tokio runtime) and deciding never panic; a file that
//! builds holds its policies in the file's order with the algorithms its quota strings name, and
//! reloading it into the set it built (`apply`) succeeds; `Config::build` builds in process
//! exactly what `build` does; a file read back from its own JSON is the same file.
#![no_main]

use flowgate::algorithm::AnyAlgorithm;
use flowgate::clock::ManualClock;
use flowgate::http::ClientIp;
use flowgate::policy::{KeyExtractors, PoliciesConfig};
use libfuzzer_sys::fuzz_target;

/// Keyed tables are allocated whole when a set is built, so a file's `max_keys` is its memory:
/// a file asking for more than this many keys per table is built with this many instead, which
/// changes no decision a fuzz run makes (it sees a few keys).
const MAX_KEYS: usize = 1 << 10;

struct Request {
    user: &'static str,
    endpoint: &'static str,
}

/// The service file of `flowgate::http`'s configuration docs.
#[derive(serde::Deserialize)]
struct Service {
    client_ip: ClientIp,
    #[serde(flatten)]
    limits: PoliciesConfig,
}

fuzz_target!(|data: &[u8]| {
    let Some((&format, text)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    let (config, service, redis) = if format % 2 == 0 {
        (
            toml::from_str::<PoliciesConfig>(text).ok(),
            toml::from_str::<Service>(text).ok(),
            toml::from_str::<flowgate_redis::Config>(text).ok(),
        )
    } else {
        (
            serde_json::from_str::<PoliciesConfig>(text).ok(),
            serde_json::from_str::<Service>(text).ok(),
            serde_json::from_str::<flowgate_redis::Config>(text).ok(),
        )
    };
    // A file with a `[redis]` table: its checks run, then building stops for want of a tokio
    // runtime; never a panic.
    if let Some(file) = redis {
        let _ = file.build(&keys(), ManualClock::new());
    }
    if let Some(config) = config {
        check(config);
    }
    if let Some(service) = service {
        let peer = "10.1.2.3".parse().ok();
        let _ = service.client_ip.resolve(peer, &http::HeaderMap::new());
        check(service.limits);
    }
});

fn keys() -> KeyExtractors<Request> {
    KeyExtractors::new()
        .key("user", |r: &Request, k| {
            k.add(r.user);
        })
        .key("endpoint", |r: &Request, k| {
            k.add(r.endpoint);
        })
}

fn check(mut config: PoliciesConfig) {
    json_round_trip(&config);
    for policy in &mut config.policies {
        policy.max_keys = Some(policy.max_keys.map_or(MAX_KEYS, |n| n.min(MAX_KEYS)));
    }
    let keys = keys();
    let built = config.build(&keys, ManualClock::new());
    // The same file read by flowgate-redis's loader (no `[redis]` table: flowgate's own
    // reader has none).
    let file = flowgate_redis::Config {
        backend: config.backend.clone(),
        redis: None,
        policies: config.policies.clone(),
    };
    let any = file.build(&keys, ManualClock::new());
    match config.backend.as_deref() {
        None | Some("in_process") => assert_eq!(
            built.is_ok(),
            any.is_ok(),
            "build: {:?}, flowgate_redis::Config::build: {:?}",
            built.as_ref().err(),
            any.as_ref().err()
        ),
        // Not in process: `build` refuses, and a Redis set needs a runtime this target has not.
        _ => assert!(built.is_err() && any.is_err()),
    }
    let Ok(set) = built else {
        return;
    };
    let names: Vec<&str> = config.policies.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(set.names().collect::<Vec<_>>(), names);
    for policy in &config.policies {
        let written: Vec<AnyAlgorithm> = policy
            .quotas
            .iter()
            .map(|q| q.parse().expect("a set that built has quotas that read"))
            .collect();
        assert_eq!(
            set.algorithms(&policy.name).unwrap(),
            written,
            "{}",
            policy.name
        );
    }
    if let Err(error) = config.apply(&set) {
        panic!("reloading the file that built the set: {error}");
    }
    for (user, endpoint) in [("alice", "/a"), ("bob", "/b"), ("alice", "/b")] {
        let _ = set.check(&Request { user, endpoint });
    }
}

/// The file written as JSON and read back is the same file.
fn json_round_trip(config: &PoliciesConfig) {
    let written = serde_json::to_string(config).expect("a config writes as JSON");
    match serde_json::from_str::<PoliciesConfig>(&written) {
        Ok(again) => assert_eq!(&again, config, "written as {written}"),
        Err(error) => panic!("{config:?} was written as {written}, which does not read: {error}"),
    }
}
