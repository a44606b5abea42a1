//! The check of the Redis script's replies (`redis/script.rs`, reached through
//! `flowgate_redis::fuzzing`, which exists only in fuzz builds): calls built from real algorithms
//! (as `Micros` turns them into the script's buckets), and replies that are RESP bytes, arbitrary
//! value trees, arrays of integers, or replies the script can send (`gcra.lua`, "Replies"), some
//! with one number changed.
//!
//! Asserts: the check never panics; it accepts every reply the script can send, and reads it as
//! sent; whatever it accepts is a reply the script can send for that call: an integer only for
//! the common call (one schedule without slack, no lease, no dry run), a
//! table only of integers laid out as documented, `n ≤ granted ≤ want`, the refusing bucket's
//! state where the states say, a refusal's wait positive or "never", dry-run refusals rising
//! and starting with the first one named, every state one its bucket can be in.
#![no_main]

use arbitrary::Arbitrary;
use flowgate::algorithm::{
    AnyAlgorithm, Credit, FixedWindow, Gcra, IntervalRefill, LeakyBucket, SlidingWindow,
};
use flowgate::Quota;
use flowgate_redis::fuzzing::{Buckets, ParsedReply};
use libfuzzer_sys::fuzz_target;
use redis::Value;

#[derive(Arbitrary, Debug)]
struct Spec {
    kind: u8,
    count: u32,
    period: u64,
    burst: u32,
    slack: u64,
}

#[derive(Arbitrary, Debug)]
enum Tree {
    Nil,
    Okay,
    Int(i64),
    Bulk(Vec<u8>),
    Simple(String),
    Double(f64),
    Boolean(bool),
    Array(Vec<Tree>),
    Set(Vec<Tree>),
    Map(Vec<(Tree, Tree)>),
}

/// A reply the script can send, from numbers cut to fit the call.
#[derive(Arbitrary, Debug)]
struct Sent {
    admitted: bool,
    /// As one integer, if the call is the common one.
    integer: bool,
    repaired: u32,
    granted: u32,
    index: u8,
    wait: i64,
    dry: Vec<u8>,
    dry_wait: i64,
    now: u64,
    states: Vec<u64>,
}

#[derive(Arbitrary, Debug)]
enum Reply {
    Resp(Vec<u8>),
    Tree(Tree),
    Integers(Vec<i64>),
    /// A reply the script can send, and maybe one of its numbers replaced.
    Sent(Sent, Option<(u8, i64)>),
}

#[derive(Arbitrary, Debug)]
struct Input {
    buckets: Vec<Spec>,
    n: u32,
    want: u32,
    lease: bool,
    dry_run: bool,
    reply: Reply,
}

/// One call's numbers.
struct Call {
    buckets: Buckets,
    args: Vec<[u64; 4]>,
    dry: &'static str,
    n: u32,
    want: u32,
}

impl Call {
    /// One schedule without slack, no lease, no dry run: answered with one
    /// integer when the script needed no repair.
    fn is_common(&self) -> bool {
        matches!(self.args[..], [[0, _, _, 0]]) && self.want == self.n && self.dry.is_empty()
    }

    fn parse(&self, value: &Value) -> Option<ParsedReply> {
        self.buckets.parse(value, self.dry, self.n, self.want)
    }

    /// Whether `state` is one bucket `i` can be in.
    fn holds(&self, i: usize, state: u64) -> bool {
        const COUNT: u64 = (1 << 18) - 1;
        match self.args[i] {
            [0, _, window, slack] => state <= window + slack,
            [1, _, burst, _] => state & ((1 << 24) - 1) <= burst,
            [_, _, limit, _] => (state >> 18) & COUNT <= limit && state & COUNT <= limit,
        }
    }
}

fuzz_target!(|input: Input| {
    let Some(call) = call(&input) else {
        return;
    };
    match &input.reply {
        Reply::Resp(bytes) => {
            if let Ok(value) = redis::parse_redis_value(bytes) {
                check(&call, &value);
            }
        }
        Reply::Tree(tree) => check(&call, &tree.value()),
        Reply::Integers(numbers) => check(&call, &integers(numbers)),
        Reply::Sent(sent, change) => {
            let (value, read) = sent.reply(&call);
            match change {
                None => assert_eq!(
                    call.parse(&value),
                    Some(read),
                    "a reply the script sends is refused: {value:?}"
                ),
                Some((at, number)) => {
                    let mut value = value;
                    match &mut value {
                        Value::Int(code) => *code = *number,
                        Value::Array(items) => {
                            let at = usize::from(*at) % items.len();
                            items[at] = Value::Int(*number);
                        }
                        _ => unreachable!(),
                    }
                    check(&call, &value);
                }
            }
        }
    }
});

fn call(input: &Input) -> Option<Call> {
    if input.buckets.is_empty() || input.buckets.len() > 4 {
        return None;
    }
    let algorithms = (input.buckets.iter())
        .map(algorithm)
        .collect::<Option<Vec<_>>>()?;
    let buckets = Buckets::new(&algorithms)?;
    let n = 1 + input.n % buckets.capacity();
    let want = n.saturating_add(input.want % (flowgate_redis::MAX_LEASE_CELLS + 1));
    let want = if input.lease { want } else { n };
    Some(Call {
        args: buckets.args(),
        buckets,
        dry: if input.dry_run { "1" } else { "" },
        n,
        want,
    })
}

fn algorithm(spec: &Spec) -> Option<AnyAlgorithm> {
    let count = match spec.count >> 30 {
        0 => 1 + spec.count % 10,
        1 => 1 + spec.count % 100_000,
        _ => spec.count,
    };
    let period = match spec.period >> 62 {
        0 => (1 + spec.period % 10_000) * 1_000_000,
        1 => 1 + spec.period % 1_000_000_000_000,
        _ => spec.period,
    };
    let burst = match spec.burst >> 30 {
        0 => count,
        1 => 1 + spec.burst % 100,
        _ => spec.burst,
    };
    let quota = Quota::new(count, core::time::Duration::from_nanos(period))
        .ok()?
        .with_burst(burst)
        .ok()?;
    let slack = std::time::Duration::from_nanos(spec.slack % 1_000_000_000_000);
    Some(match spec.kind % 7 {
        0 => Gcra::new(&quota).into(),
        1 => LeakyBucket::meter(&quota).into(),
        2 => LeakyBucket::shaper(&quota, slack).ok()?.into(),
        3 => Credit::new(&quota, slack).ok()?.into(),
        4 => IntervalRefill::new(&quota).ok()?.into(),
        5 => FixedWindow::new(&quota).ok()?.into(),
        _ => SlidingWindow::new(&quota).ok()?.into(),
    })
}

fn integers(numbers: &[i64]) -> Value {
    Value::Array(numbers.iter().map(|&n| Value::Int(n)).collect())
}

impl Tree {
    fn value(&self) -> Value {
        let all = |trees: &[Tree]| trees.iter().map(Tree::value).collect();
        match self {
            Self::Nil => Value::Nil,
            Self::Okay => Value::Okay,
            Self::Int(n) => Value::Int(*n),
            Self::Bulk(bytes) => Value::BulkString(bytes.clone()),
            Self::Simple(text) => Value::SimpleString(text.clone()),
            Self::Double(x) => Value::Double(*x),
            Self::Boolean(b) => Value::Boolean(*b),
            Self::Array(trees) => Value::Array(all(trees)),
            Self::Set(trees) => Value::Set(all(trees)),
            Self::Map(pairs) => {
                Value::Map(pairs.iter().map(|(k, v)| (k.value(), v.value())).collect())
            }
        }
    }
}

impl Sent {
    /// The reply, as a value and as the check should read it.
    fn reply(&self, call: &Call) -> (Value, ParsedReply) {
        let m = call.args.len();
        let states: Vec<u64> = (0..m)
            .map(|i| state(call.args[i], self.states.get(i).copied().unwrap_or(0)))
            .collect();
        if self.integer && call.is_common() {
            let [_, interval, window, _] = call.args[0];
            let (code, state) = if self.admitted {
                let state = states[0];
                (state as i64, state)
            } else {
                // Refused: debt ≤ τ and debt + n·T > τ.
                let lowest = (window + 1).saturating_sub(u64::from(call.n) * interval);
                let debt = lowest + states[0] % (window - lowest + 1);
                (-(debt as i64) - 1, debt)
            };
            let read = ParsedReply {
                admitted: self.admitted,
                repaired: 0,
                granted: if self.admitted { call.n } else { 0 },
                index: 0,
                state: if self.admitted { 0 } else { state },
                dry: Vec::new(),
                now: None,
                states: vec![state],
            };
            return (Value::Int(code), read);
        }
        let mut dry: Vec<usize> = self.dry.iter().map(|&b| usize::from(b) % m).collect();
        dry.sort_unstable();
        dry.dedup();
        let positive_or_never = |w: i64| if w < 0 { -1 } else { w.max(1) };
        let (first, dry_wait) = match dry.first() {
            None => (0, 0),
            Some(&first) => (first as i64 + 1, positive_or_never(self.dry_wait)),
        };
        let now = self.now >> 1;
        let as_int = |x: u64| x as i64;
        let mut numbers: Vec<i64>;
        let read = if self.admitted {
            let granted = call.n + self.granted % (call.want - call.n + 1);
            numbers = vec![
                1,
                self.repaired.into(),
                granted.into(),
                first,
                dry_wait,
                as_int(now),
            ];
            ParsedReply {
                admitted: true,
                repaired: self.repaired,
                granted,
                index: 0,
                state: 0,
                dry: dry.clone(),
                now: Some(now),
                states: states.clone(),
            }
        } else {
            let index = usize::from(self.index) % m;
            numbers = vec![
                0,
                self.repaired.into(),
                index as i64 + 1,
                as_int(states[index]),
                positive_or_never(self.wait),
                first,
                dry_wait,
                as_int(now),
            ];
            ParsedReply {
                admitted: false,
                repaired: self.repaired,
                granted: 0,
                index,
                state: states[index],
                dry: dry.clone(),
                now: Some(now),
                states: states.clone(),
            }
        };
        numbers.extend(states.iter().map(|&s| as_int(s)));
        numbers.extend(dry.iter().map(|&d| d as i64 + 1));
        (integers(&numbers), read)
    }
}

/// A state bucket `args` can be in, from any number.
fn state(args: [u64; 4], x: u64) -> u64 {
    match args {
        [0, _, window, slack] => x % (window + slack + 1),
        [1, _, burst, _] => {
            let (ahead, used) = (x >> 40, x % (burst + 1));
            (ahead << 24) | used
        }
        [_, _, limit, _] => {
            let (ahead, previous, current) = (x >> 50, (x >> 18) % (limit + 1), x % (limit + 1));
            (ahead << 36) | (previous << 18) | current
        }
    }
}

/// Whatever the check accepts is a reply the script can send for `call`, read as laid out.
fn check(call: &Call, value: &Value) {
    let Some(read) = call.parse(value) else {
        return;
    };
    let m = call.args.len();
    for (i, &state) in read.states.iter().enumerate() {
        assert!(
            call.holds(i, state),
            "bucket {i} cannot be in state {state}: {value:?}"
        );
    }
    assert_eq!(read.states.len(), m, "{value:?}");
    match value {
        &Value::Int(code) => {
            assert!(
                call.is_common(),
                "one integer answers only the common call: {value:?}"
            );
            assert_eq!((read.repaired, read.now, read.dry.len()), (0, None, 0));
            let [_, interval, window, _] = call.args[0];
            if code >= 0 {
                assert!(read.admitted && read.granted == call.n);
                assert_eq!(read.states, [code as u64]);
            } else {
                let debt = (code + 1).unsigned_abs();
                assert!(!read.admitted && read.state == debt && read.states == [debt]);
                assert!(
                    debt + u64::from(call.n) * interval > window,
                    "a refusal waits: {value:?}"
                );
            }
        }
        Value::Array(items) => {
            let numbers: Vec<i64> = items
                .iter()
                .map(|item| match item {
                    Value::Int(n) => *n,
                    other => panic!("accepted a table holding {other:?}"),
                })
                .collect();
            let tail = if read.admitted {
                assert_eq!(numbers[0], 1);
                assert_eq!(i64::from(read.granted), numbers[2]);
                assert!((call.n..=call.want).contains(&read.granted), "{value:?}");
                6
            } else {
                assert_eq!(numbers[0], 0);
                assert!(read.index < m && numbers[2] == read.index as i64 + 1);
                assert_eq!(read.state as i64, numbers[3]);
                assert_eq!(read.states[read.index], read.state);
                assert!(
                    numbers[4] == -1 || numbers[4] > 0,
                    "a refusal waits: {value:?}"
                );
                8
            };
            assert_eq!(i64::from(read.repaired), numbers[1]);
            assert_eq!(read.now.map(|now| now as i64), Some(numbers[tail - 1]));
            let (first, dry_wait) = (numbers[tail - 3], numbers[tail - 2]);
            let states: Vec<i64> = read.states.iter().map(|&s| s as i64).collect();
            assert_eq!(states, numbers[tail..tail + m]);
            let dry: Vec<i64> = read.dry.iter().map(|&d| d as i64 + 1).collect();
            assert_eq!(dry, numbers[tail + m..]);
            assert!(read.dry.windows(2).all(|w| w[0] < w[1]) && read.dry.iter().all(|&d| d < m));
            if first == 0 {
                assert!(dry.is_empty() && dry_wait == 0, "{value:?}");
            } else {
                assert_eq!(dry.first(), Some(&first));
                assert!(dry_wait == -1 || dry_wait > 0, "{value:?}");
            }
        }
        other => panic!("accepted {other:?}"),
    }
}
