//! Every way a configuration file can be wrong, each with its whole message pinned: a value that
//! is wrong in itself is refused by the format's parser at its line and column (TOML quotes the
//! line, JSON ends with it); what only the whole set shows names the policy and field, or the
//! setting of the file. flowgate's own `PoliciesConfig` and flowgate-redis's `Config` alike.

use flowgate::clock::ManualClock;
use flowgate::policy::{ConfigError, KeyExtractors, PoliciesConfig};

/// How a broken file is read.
#[derive(Clone, Copy)]
enum Read {
    /// TOML, as flowgate reads it.
    Toml,
    /// JSON, as flowgate reads it.
    Json,
    /// TOML, as flowgate-redis reads it (`backend` and `[redis]` included).
    Redis,
}

fn keys() -> KeyExtractors<str> {
    KeyExtractors::new().key("user", |user: &str, k| {
        k.add(user);
    })
}

/// The message a file gets: the parser's error, or else the build's; a file that builds fails
/// the test.
fn message(read: Read, text: &str) -> String {
    fn outcome<C, E: ToString>(
        parsed: Result<C, E>,
        build: impl FnOnce(C) -> Result<(), ConfigError>,
    ) -> Result<(), String> {
        build(parsed.map_err(|e| e.to_string())?).map_err(|e| e.to_string())
    }
    let flowgate = |c: PoliciesConfig| c.build(&keys(), ManualClock::new()).map(drop);
    let redis = |c: flowgate_redis::Config| c.build(&keys(), ManualClock::new()).map(drop);
    let built = match read {
        Read::Toml => outcome(toml::from_str(text), flowgate),
        Read::Json => outcome(serde_json::from_str(text), flowgate),
        Read::Redis => outcome(toml::from_str(text), redis),
    };
    match built {
        Err(message) => message,
        Ok(()) => panic!("built:\n{text}"),
    }
}

/// A file of one policy named "api" keyed by user, with `quotas` and then `more` lines.
fn policy(quotas: &str, more: &str) -> String {
    format!("[[policies]]\nname = \"api\"\nkey = \"user\"\nquotas = {quotas}\n{more}")
}

#[tokio::test]
async fn every_broken_configuration_gets_its_message() {
    let mut failed = Vec::new();
    for (what, read, text, expected) in cases() {
        let got = message(read, &text);
        let got = got.trim_end();
        if got != expected {
            failed.push(format!(
                "{what}:\n--- expected\n{expected}\n--- got\n{got}\n"
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    assert_eq!(cases().len(), 33, "the CHANGELOG counts them");
}

fn cases() -> Vec<(&'static str, Read, String, String)> {
    let p = policy;
    let m = String::from;
    vec![
        ("unknown algorithm", Read::Toml, p(r#"["200/10s", "10/s sloppy"]"#, ""), m(r##"TOML parse error at line 4, column 10
  |
4 | quotas = ["200/10s", "10/s sloppy"]
  |          ^^^^^^^^^^^^^^^^^^^^^^^^^^
"10/s sloppy": invalid quota string at byte 5: expected an algorithm: gcra, leaky, shaper DELAY, credit DEBT, interval, fixed or sliding"##)),
        ("zero rate", Read::Toml, p(r#"["0/10s"]"#, ""), m(r##"TOML parse error at line 4, column 10
  |
4 | quotas = ["0/10s"]
  |          ^^^^^^^^^
"0/10s": invalid quota: the rate's count is 0 (it must be at least 1)"##)),
        ("fraction of a period", Read::Toml, p(r#"["5000/1.5h"]"#, ""), m(r##"TOML parse error at line 4, column 10
  |
4 | quotas = ["5000/1.5h"]
  |          ^^^^^^^^^^^^^
"5000/1.5h": invalid quota string at byte 6: expected a whole number, not a fraction (`90m` for `1.5h`, `5/2s` for `2.5/s`)"##)),
        ("fraction of a count", Read::Toml, p(r#"["2.5/s"]"#, ""), m(r##"TOML parse error at line 4, column 10
  |
4 | quotas = ["2.5/s"]
  |          ^^^^^^^^^
"2.5/s": invalid quota string at byte 1: expected a whole number, not a fraction (`90m` for `1.5h`, `5/2s` for `2.5/s`)"##)),
        ("unknown unit", Read::Toml, p(r#"["5000/fortnight"]"#, ""), m(r##"TOML parse error at line 4, column 10
  |
4 | quotas = ["5000/fortnight"]
  |          ^^^^^^^^^^^^^^^^^^
"5000/fortnight": invalid quota string at byte 5: expected a time unit (ns, us, ms, s, m or min, h, d or day)"##)),
        ("burst on a window counter", Read::Toml, p(r#"["100/min burst 20 fixed"]"#, ""), m(r##"TOML parse error at line 4, column 10
  |
4 | quotas = ["100/min burst 20 fixed"]
  |          ^^^^^^^^^^^^^^^^^^^^^^^^^^
"100/min burst 20 fixed": algorithm `fixed`: invalid quota for this algorithm: a window counter has no separate burst (burst must equal the count)"##)),
        ("text after the quota", Read::Toml, p(r#"["100/s burst 20 burst 30"]"#, ""), m(r##"TOML parse error at line 4, column 10
  |
4 | quotas = ["100/s burst 20 burst 30"]
  |          ^^^^^^^^^^^^^^^^^^^^^^^^^^^
"100/s burst 20 burst 30": invalid quota string at byte 15: unexpected text (only `burst N` and `initial N` may follow the period, once each)"##)),
        ("jitter not a duration", Read::Toml, p(r#"["100/s"]"#, "jitter = [\"1ms\", \"5 parsecs\"]\n"), m(r##"TOML parse error at line 5, column 10
  |
5 | jitter = ["1ms", "5 parsecs"]
  |          ^^^^^^^^^^^^^^^^^^^^
"5 parsecs": invalid duration at byte 2: expected a time unit (ns, us, ms, s, m or min, h, d or day)"##)),
        ("jitter with a fraction", Read::Toml, p(r#"["100/s"]"#, "jitter = [\"1.5ms\", \"5ms\"]\n"), m(r##"TOML parse error at line 5, column 10
  |
5 | jitter = ["1.5ms", "5ms"]
  |          ^^^^^^^^^^^^^^^^
"1.5ms": invalid duration at byte 1: expected a whole number, not a fraction (a smaller unit: `1500us` for `1.5ms`)"##)),
        ("when_full unknown", Read::Toml, p(r#"["100/s"]"#, "when_full = \"panic\"\n"), m(r##"TOML parse error at line 5, column 13
  |
5 | when_full = "panic"
  |             ^^^^^^^
"panic": expected "refuse" or "admit_untracked""##)),
        ("unknown field", Read::Toml, p(r#"["100/s"]"#, "dryrun = true\n"), m(r##"TOML parse error at line 5, column 1
  |
5 | dryrun = true
  | ^^^^^^
unknown field `dryrun`, expected one of `name`, `key`, `quotas`, `dry_run`, `jitter`, `max_keys`, `when_full`"##)),
        ("quotas not a list", Read::Toml, p("5", ""), m(r##"TOML parse error at line 4, column 10
  |
4 | quotas = 5
  |          ^
invalid type: integer `5`, expected a sequence"##)),
        ("unknown key extractor", Read::Toml, p(r#"["100/s"]"#, "").replace("\"user\"", "\"route\""), m(r##"policy 'api', field `key`: no key extractor is named "route" (known: ["user"])"##)),
        ("repeated name", Read::Toml, format!("{}{}", p(r#"["100/s"]"#, ""), p(r#"["5/s"]"#, "")), m(r##"policy 'api', field `name`: two policies are named 'api'"##)),
        ("empty name", Read::Toml, p(r#"["100/s"]"#, "").replace("\"api\"", "\"\""), m(r##"policy #0, field `name`: policy #0 has an empty name"##)),
        ("no quotas", Read::Toml, p("[]", ""), m(r##"policy 'api', field `quotas`: policy 'api' has no quota"##)),
        ("jitter the wrong way round", Read::Toml, p(r#"["100/s"]"#, "jitter = [\"5ms\", \"1ms\"]\n"), m(r##"policy 'api', field `jitter`: policy 'api': the jitter's minimum is above its maximum, or it is longer than 292 years"##)),
        ("no keys", Read::Toml, p(r#"["100/s"]"#, "max_keys = 0\n"), m(r##"policy 'api', field `max_keys`: policy 'api': a keyed limiter needs max_keys of at least 1"##)),
        ("no policies", Read::Toml, "policies = []\n".into(), m(r##"setting `policies`: a policy set needs at least one policy"##)),
        ("a remote backend, read by flowgate alone", Read::Toml, format!("backend = \"redis\"\n{}", p(r#"["100/s"]"#, "")), m(r##"setting `backend`: "redis": `build` builds in process; a remote backend's crate builds the set where the file says (flowgate-redis: `Config::build`)"##)),
        ("zero rate in JSON", Read::Json, r#"{ "policies": [
  { "name": "api", "key": "user",
    "quotas": ["100/s", "0/s"] } ] }"#.into(), m(r##""0/s": invalid quota: the rate's count is 0 (it must be at least 1) at line 3 column 30"##)),
        ("when_full unknown in JSON", Read::Json, r#"{ "policies": [ { "name": "api", "quotas": ["1/s"], "when_full": "drop" } ] }"#.into(), m(r##""drop": expected "refuse" or "admit_untracked" at line 1 column 73"##)),
        ("timeout without a unit", Read::Redis, format!("backend = \"redis\"\n[redis]\nurl = \"redis://127.0.0.1:1/\"\ntimeout = \"50\"\n{}", p(r#"["100/s"]"#, "")), m(r##"TOML parse error at line 4, column 11
  |
4 | timeout = "50"
  |           ^^^^
"50": invalid duration at byte 2: expected a time unit (ns, us, ms, s, m or min, h, d or day)"##)),
        ("unknown failure policy", Read::Redis, format!("backend = \"redis\"\n[redis]\nurl = \"redis://127.0.0.1:1/\"\non_failure = \"sometimes\"\n{}", p(r#"["100/s"]"#, "")), m(r##"TOML parse error at line 4, column 14
  |
4 | on_failure = "sometimes"
  |              ^^^^^^^^^^^
"sometimes": expected "open", "closed" or "local""##)),
        ("share out of range", Read::Redis, format!("backend = \"redis\"\n[redis]\nurl = \"redis://127.0.0.1:1/\"\non_failure = \"local\"\nlocal_share = 1.5\n{}", p(r#"["100/s"]"#, "")), m(r##"TOML parse error at line 5, column 15
  |
5 | local_share = 1.5
  |               ^^^
local share 1.5 is not in (0, 1]"##)),
        ("local without a share", Read::Redis, format!("backend = \"redis\"\n[redis]\nurl = \"redis://127.0.0.1:1/\"\non_failure = \"local\"\n{}", p(r#"["100/s"]"#, "")), m(r##"setting `redis.local_share`: "local" needs a share"##)),
        ("redis without its table", Read::Redis, format!("backend = \"redis\"\n{}", p(r#"["100/s"]"#, "")), m(r##"setting `redis`: backend = "redis" needs a [redis] table"##)),
        ("unknown backend", Read::Redis, format!("backend = \"mongo\"\n{}", p(r#"["100/s"]"#, "")), m(r##"setting `backend`: "mongo": expected "in_process" or "redis""##)),
        ("a breaker that never opens", Read::Redis, format!("backend = \"redis\"\n[redis]\nurl = \"redis://127.0.0.1:1/\"\nbreaker = [0, \"1s\"]\n{}", p(r#"["100/s"]"#, "")), m(r##"setting `redis.breaker`: a breaker needs at least one failure and a cool-down (or `false`)"##)),
        ("a prefix with a colon", Read::Redis, format!("backend = \"redis\"\n[redis]\nurl = \"redis://127.0.0.1:1/\"\nprefix = \"a:b\"\n{}", p(r#"["100/s"]"#, "")), m(r##"setting `redis.prefix`: prefix "a:b" is empty or holds ':', '{' or '}'"##)),
        ("a bad URL", Read::Redis, format!("backend = \"redis\"\n[redis]\nurl = \"mongodb://x\"\n{}", p(r#"["100/s"]"#, "")), m(r##"setting `redis.url`: "mongodb://x": Redis URL did not parse - InvalidClientConfig"##)),
        ("a quota Redis cannot start full", Read::Redis, format!("backend = \"redis\"\n[redis]\nurl = \"redis://127.0.0.1:1/\"\n{}", p(r#"["10/s initial 0"]"#, "")), m(r##"policy 'api', field `quotas[0]`: quota 0 of policy "api": buckets in Redis start full"##)),
        ("a window too long for Redis", Read::Redis, format!("backend = \"redis\"\n[redis]\nurl = \"redis://127.0.0.1:1/\"\n{}", p(r#"["100000000/100000d"]"#, "")), m(r##"policy 'api', field `quotas[0]`: quota 0 of policy "api": the window exceeds 2^51 µs"##)),
    ]
}
