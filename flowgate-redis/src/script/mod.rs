//! The scripts as the client sees them: the decision script (`gcra.lua`) and the others (the
//! give-back, the take across cluster slots, the reset, the sliding log), each sent with
//! `EVALSHA` (and `EVAL` only after `NOSCRIPT`); the arguments of a decision ([`Plan`], made
//! from the policies as the script runs them, [`Prepared`]) and the check of its reply.
//!
//! Nothing here decides anything: the script does, atomically on the server. This module turns
//! a call into bytes and the reply back into numbers, and checks the reply's shape so that a
//! reply the script could not have sent is a [`Failure::Reply`], never a panic.

use core::cell::Cell;
use core::future::Future;

use ::redis::aio::ConnectionManager;
use ::redis::{Cmd, ErrorKind, RedisResult, ServerErrorKind, Value};

mod plan;
mod quota;

pub(crate) use self::plan::{Plan, Prepared, Tag};
pub(crate) use self::quota::Bucket;
#[cfg(fuzzing)]
pub(crate) use self::quota::Micros;
pub use self::quota::MAX_WINDOW_MICROS;
use crate::stats::Counters;
use flowgate::backend::Failure;

/// The script's source.
pub(crate) const SOURCE: &str = include_str!("gcra.lua");

/// A script made once, the first time it is asked for.
macro_rules! script {
    ($(#[$doc:meta])* $name:ident, $source:expr) => {
        $(#[$doc])*
        pub(crate) fn $name() -> &'static Script {
            static SCRIPT: std::sync::OnceLock<Script> = std::sync::OnceLock::new();
            SCRIPT.get_or_init(|| Script::of($source))
        }
    };
}

script!(
    /// The decision script (`gcra.lua`).
    decide,
    SOURCE
);
script!(
    /// The give-back script (`undo.lua`): puts back the value a take replaced, or moves a
    /// lease's TAT back over its unused cells, only where a bucket still holds the value
    /// written.
    undo,
    include_str!("undo.lua")
);
script!(
    /// The reset script: deletes its key (a script, not a `DEL`, so that a cluster routes it
    /// by its key like every other call).
    delete,
    "return redis.call('DEL', KEYS[1])"
);
script!(
    /// The sliding log's script (`log.lua`).
    log,
    include_str!("log.lua")
);
script!(
    #[cfg(feature = "cluster")]
    /// The decision script wrapped to also answer each bucket's value before and after, for a
    /// decision across cluster slots: `{answer, before, after}`, `false` for a missing key.
    take,
    {
        let source = [
            include_str!("take_before.lua"),
            "\nlocal function decide()\n",
            SOURCE,
            "\nend\n",
            include_str!("take_after.lua"),
        ];
        Box::leak(source.concat().into_boxed_str())
    }
);

/// The largest `now` a test may pass, in µs: with windows below 2^51 µs, `now + τ` stays below
/// 2^53, where Lua's doubles are exact.
const MAX_NOW_MICROS: u64 = 1 << 52;

/// The reading of a clock at `now` ns as a call passes it: whole µs, at most 2^52.
pub(crate) fn micros(now: u64) -> u64 {
    (now / 1_000).min(MAX_NOW_MICROS)
}

/// Where a command goes: one server, through its connection manager, or a cluster (feature
/// `cluster`), which follows redirects but never sends a command again after a failure
/// that may have let it run.
pub(crate) trait Sender {
    /// Sends `command` and reads its one reply (a server's error reply as a value).
    fn send<'a>(
        &'a mut self,
        command: &'a Cmd,
    ) -> impl Future<Output = RedisResult<Value>> + Send + 'a;
}

impl Sender for ConnectionManager {
    #[inline]
    fn send<'a>(
        &'a mut self,
        command: &'a Cmd,
    ) -> impl Future<Output = RedisResult<Value>> + Send + 'a {
        self.send_packed_command(command)
    }
}

/// A script and its SHA-1, computed once.
#[derive(Debug)]
pub(crate) struct Script {
    source: &'static str,
    sha: String,
}

impl Script {
    /// The script `source`.
    pub(crate) fn of(source: &'static str) -> Self {
        Self {
            source,
            sha: ::redis::Script::new(source).get_hash().to_owned(),
        }
    }

    /// Sends the command `command(verb, script)` makes, with `EVALSHA` and the SHA-1, and
    /// again with `EVAL` and the source only after `NOSCRIPT`; the server's answer.
    pub(crate) async fn eval(
        &self,
        connection: &mut impl Sender,
        command: impl Fn(&str, &str) -> Cmd,
        counters: &Counters,
    ) -> Result<Value, Failure> {
        counters.round_trips.add(1);
        let evalsha = command("EVALSHA", &self.sha);
        let sent = connection.send(&evalsha).await;
        Spare::keep(evalsha);
        // A server's error reply arrives as a value: `extract_error` makes it an error.
        let value = match sent.and_then(Value::extract_error) {
            Err(error) if error.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                counters.reloads.add(1);
                counters.round_trips.add(1);
                connection
                    .send(&command("EVAL", self.source))
                    .await
                    .and_then(Value::extract_error)
            }
            other => other,
        };
        value.map_err(|error| failure_of(&error))
    }
}

/// The failure behind a `redis` error.
fn failure_of(error: &::redis::RedisError) -> Failure {
    if error.is_timeout() {
        Failure::Timeout
    } else if error.is_io_error() || error.is_connection_dropped() || error.is_connection_refusal()
    {
        Failure::Connection
    } else {
        Failure::Reply
    }
}

/// The arguments of one call of the give-back script (`undo.lua`): each key to put back, the
/// value written to it, and the value it replaced (`None`: the key was missing). Made from a
/// take's reply across cluster slots, or from a lease's TATs.
#[derive(Debug, Default)]
pub(crate) struct Undo {
    keys: Vec<Vec<u8>>,
    values: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

impl Undo {
    /// The keys of `call` whose value `before` differs from `after`, from a take's reply.
    #[cfg(feature = "cluster")]
    pub(crate) fn of(keys: &[Vec<u8>], before: &Value, after: &Value) -> Option<Self> {
        let (Value::Array(before), Value::Array(after)) = (before, after) else {
            return None;
        };
        if before.len() != keys.len() || after.len() != keys.len() {
            return None;
        }
        let bytes = |value: &Value| match value {
            Value::Nil => Some(None),
            Value::BulkString(bytes) => Some(Some(bytes.clone())),
            _ => None,
        };
        let mut written = Self::default();
        for ((key, before), after) in keys.iter().zip(before).zip(after) {
            let (before, after) = (bytes(before)?, bytes(after)?);
            if before != after {
                // A take writes every bucket it changes; it never deletes one.
                written.push(key, after?, before);
            }
        }
        Some(written)
    }

    /// Puts `key` back to `replaced` (`None`: deletes it) where it still holds `written`.
    pub(crate) fn push(&mut self, key: &[u8], written: Vec<u8>, replaced: Option<Vec<u8>>) {
        self.keys.push(key.to_vec());
        self.values.push((written, replaced));
    }

    /// How many keys it puts back.
    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether it puts nothing back.
    pub(crate) fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The call: `KEYS` the keys, `ARGV` each value written and `0` or `1` followed by the
    /// value replaced.
    pub(crate) fn command(&self, verb: &str, script: &str) -> Cmd {
        let mut command = Cmd::new();
        command.arg(verb).arg(script).arg(self.keys.len());
        for key in &self.keys {
            command.arg(key);
        }
        for (after, before) in &self.values {
            command.arg(after);
            match before {
                None => command.arg("0"),
                Some(before) => command.arg([b"1".as_slice(), before].concat()),
            };
        }
        command
    }
}

/// A command whose buffers the next call on the same thread reuses: taking a new one cost two
/// allocations and two frees per decision (callgrind: `scripts/redis-instructions`).
struct Spare;

thread_local! {
    static SPARE: Cell<Option<Cmd>> = const { Cell::new(None) };
}

impl Spare {
    /// An empty command: this thread's spare if it has one (its buffers grow as needed), or a
    /// new one sized for `args` arguments of `bytes` bytes in all.
    fn take(args: usize, bytes: usize) -> Cmd {
        match SPARE.with(Cell::take) {
            Some(mut spare) => {
                spare.clear();
                spare
            }
            None => Cmd::with_capacity(args, bytes),
        }
    }

    /// Keeps `command` (an `EVALSHA`: `EVAL`'s, which holds the script's source, is dropped)
    /// as this thread's spare.
    fn keep(command: Cmd) {
        // Fails only while the thread is being torn down: the command is then dropped.
        let _ = SPARE.try_with(|spare| spare.set(Some(command)));
    }
}

/// The arguments of one call.
#[derive(Debug)]
pub(crate) struct Call<'a> {
    /// The buckets' keys, which share one hash tag.
    pub(crate) keys: &'a [Vec<u8>],
    /// Each bucket's kind and numbers, as the script reads them (see [`Bucket`]).
    pub(crate) quotas: &'a [Bucket],
    /// The dry-run policies' buckets (see `plan::Plan::dry`).
    pub(crate) dry: &'a str,
    /// The reading to decide at, in µs; `None` for the server's `TIME`.
    pub(crate) now: Option<u64>,
    /// The cells to take.
    pub(crate) n: u32,
    /// Take up to this many if every bucket holds them (`≥ n`; a lease).
    pub(crate) want: u32,
}

impl Call<'_> {
    /// One bucket, no lease and no dry run: the call sent with four
    /// arguments (three at the server's time), which the script answers with one integer.
    fn is_common(&self) -> bool {
        self.keys.len() == 1
            && self.quotas.len() == 1
            && matches!(self.quotas[0], Bucket::Schedule { slack: 0, .. })
            && self.want == self.n
            && self.dry.is_empty()
    }

    pub(crate) fn command(&self, verb: &str, script: &str) -> Cmd {
        // Sized up front: growing the command argument by argument cost more than the rest of
        // a decision's client side (callgrind: `scripts/redis-instructions`). Numbers take 20 bytes
        // at most.
        let args = 7 + self.keys.len() + 4 * self.quotas.len();
        let bytes = verb.len() + script.len() + self.dry.len();
        let bytes = bytes + self.keys.iter().map(Vec::len).sum::<usize>();
        let mut command = Spare::take(args, bytes + 20 * (args - 2 - self.keys.len()));
        command
            .arg(verb)
            .arg(script)
            .arg(self.keys.len())
            .arg(self.keys);
        let common = self.is_common();
        match self.now {
            Some(now) => command.arg(now),
            // The common call at the server's time leaves the reading out (gcra.lua).
            None if common => &mut command,
            None => command.arg(""),
        };
        command.arg(self.n);
        // The common call leaves out want and the dry runs (gcra.lua): two arguments fewer to
        // send and for the server to make into Lua strings.
        if !common {
            command.arg(self.want).arg(self.dry);
        }
        if common {
            // The common call's one schedule: T and tau alone.
            if let Bucket::Schedule {
                interval, window, ..
            } = self.quotas[0]
            {
                command.arg(interval).arg(window);
            }
            return command;
        }
        for bucket in self.quotas {
            let [kind, a, b, c] = bucket.args();
            command.arg(kind).arg(a).arg(b).arg(c);
        }
        command
    }
}

/// What a reply says of dry-run policies: the first refusing bucket of every dry-run policy
/// that would have refused, in order. (The reply also names the first with its wait, which
/// is checked against this list and not kept: the client works waits out from the states.)
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Dry {
    pub(crate) all: Vec<usize>,
}

/// What the script answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reply {
    /// Every bucket of every enforcing policy admitted: `granted` cells were taken from each
    /// bucket (but those of dry-run policies that would refuse), leaving bucket `i` in the
    /// state `states[i]` at the script's reading `now` (µs; `None` for the common call, whose
    /// one schedule needs none).
    Admitted {
        repaired: u32,
        granted: u32,
        dry: Dry,
        now: Option<u64>,
        states: States,
    },
    /// Bucket `index` refused (with the longest wait among schedules), in the state `state`.
    /// Nothing was taken; bucket `i` stands in the state `states[i]`.
    Refused {
        repaired: u32,
        index: usize,
        state: u64,
        dry: Dry,
        now: Option<u64>,
        states: States,
    },
}

/// The buckets' states in a reply: the common call's one held inline, without an allocation.
#[derive(Debug, Clone, Eq)]
pub(crate) enum States {
    One([u64; 1]),
    Many(Vec<u64>),
}

impl core::ops::Deref for States {
    type Target = [u64];

    fn deref(&self) -> &[u64] {
        match self {
            Self::One(one) => one,
            Self::Many(many) => many,
        }
    }
}

impl PartialEq for States {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

#[cfg(test)]
impl From<Vec<u64>> for States {
    fn from(states: Vec<u64>) -> Self {
        Self::Many(states)
    }
}

impl Reply {
    /// The reply to `call`, or `None` if it is not one the script sends for it.
    ///
    /// Beyond its shape, a reply must be possible: the script grants `n ≤ granted ≤ want`, and
    /// every state is one the bucket can be in (a schedule at most its lead ahead, counts
    /// within their limits).
    pub(crate) fn parse(value: &Value, call: &Call<'_>) -> Option<Self> {
        let reply = match value {
            // The common call's one integer (gcra.lua, "Replies").
            &Value::Int(code) if call.is_common() => {
                let Bucket::Schedule {
                    interval, window, ..
                } = call.quotas[0]
                else {
                    return None;
                };
                if code >= 0 {
                    Self::Admitted {
                        repaired: 0,
                        granted: call.n,
                        dry: Dry::default(),
                        now: None,
                        states: States::One([code.unsigned_abs()]),
                    }
                } else {
                    // Refused: the wait is the debt less the room left, debt + n·T − τ (every
                    // term below 2^53), which must be positive.
                    let debt = (code + 1).unsigned_abs();
                    (debt + u64::from(call.n) * interval).checked_sub(window + 1)?;
                    Self::Refused {
                        repaired: 0,
                        index: 0,
                        state: debt,
                        dry: Dry::default(),
                        now: None,
                        states: States::One([debt]),
                    }
                }
            }
            Value::Array(items) => Self::parse_table(items, call.keys.len())?,
            _ => return None,
        };
        let valid = |states: &[u64]| {
            (states.iter().zip(call.quotas)).all(|(&value, bucket)| bucket.holds(value))
        };
        let possible = match &reply {
            Self::Admitted {
                granted, states, ..
            } => (call.n..=call.want).contains(granted) && valid(states),
            Self::Refused {
                index,
                state,
                states,
                ..
            } => valid(states) && states.get(*index) == Some(state),
        };
        possible.then_some(reply)
    }

    /// The table every other call is answered with.
    fn parse_table(items: &[Value], buckets: usize) -> Option<Self> {
        let mut numbers = Vec::with_capacity(items.len());
        for item in items {
            match item {
                Value::Int(number) => numbers.push(*number),
                _ => return None,
            }
        }
        let unsigned = |x: i64| u64::try_from(x).ok();
        let repaired = |x: i64| u32::try_from(x).ok();
        let states = |values: &[i64]| {
            values
                .iter()
                .map(|&d| unsigned(d))
                .collect::<Option<Vec<_>>>()
                .map(States::Many)
        };
        match *numbers.as_slice() {
            [1, fixed, granted, dry, dry_wait, now, ref rest @ ..] if rest.len() >= buckets => {
                let (values, dries) = rest.split_at(buckets);
                Some(Self::Admitted {
                    repaired: repaired(fixed)?,
                    granted: u32::try_from(granted).ok()?,
                    dry: Dry::parse((dry, dry_wait), dries, buckets)?,
                    now: Some(unsigned(now)?),
                    states: states(values)?,
                })
            }
            [0, fixed, index, state, wait, dry, dry_wait, now, ref rest @ ..]
                if rest.len() >= buckets =>
            {
                let (values, dries) = rest.split_at(buckets);
                // The script's wait only ordered schedules' refusals: checked, not kept (the
                // client works waits out from the states).
                wait_of(wait)?;
                Some(Self::Refused {
                    repaired: repaired(fixed)?,
                    index: bucket(index, buckets)?,
                    state: unsigned(state)?,
                    dry: Dry::parse((dry, dry_wait), dries, buckets)?,
                    now: Some(unsigned(now)?),
                    states: states(values)?,
                })
            }
            _ => None,
        }
    }

    /// Buckets whose value was not a TAT.
    pub(crate) fn repaired(&self) -> u32 {
        match self {
            Self::Admitted { repaired, .. } | Self::Refused { repaired, .. } => *repaired,
        }
    }

    /// What either answer carries: the dry-run refusals, every bucket's state, the reading.
    #[inline(always)]
    pub(crate) fn parts(&self) -> (&Dry, &States, Option<u64>) {
        match self {
            Self::Admitted {
                dry, states, now, ..
            }
            | Self::Refused {
                dry, states, now, ..
            } => (dry, states, *now),
        }
    }
}

/// Bucket number `number` (from 1) of `buckets`, as an index from 0.
fn bucket(number: i64, buckets: usize) -> Option<usize> {
    let index = usize::try_from(number).ok()?.checked_sub(1)?;
    (index < buckets).then_some(index)
}

/// A refusal's wait: positive, or -1 for never.
fn wait_of(wait: i64) -> Option<Option<u64>> {
    if wait == -1 {
        return Some(None);
    }
    Some(Some(u64::try_from(wait).ok().filter(|&w| w > 0)?))
}

impl Dry {
    /// The dry-run refusals a reply reports: the list of every one, which rises and starts
    /// with the first the reply names (bucket 0: none) with a wait the script can send; or
    /// `None` if it is not what the script sends.
    fn parse((dry, wait): (i64, i64), all: &[i64], buckets: usize) -> Option<Self> {
        let all = (all.iter())
            .map(|&number| bucket(number, buckets))
            .collect::<Option<Vec<_>>>()?;
        let rising = all.windows(2).all(|pair| pair[0] < pair[1]);
        let first = if dry == 0 {
            wait == 0 && all.is_empty()
        } else {
            wait_of(wait).is_some() && all.first() == Some(&bucket(dry, buckets)?)
        };
        (rising && first).then_some(Self { all })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn array(numbers: &[i64]) -> Value {
        Value::Array(numbers.iter().map(|&n| Value::Int(n)).collect())
    }

    static KEYS: [Vec<u8>; 2] = [Vec::new(), Vec::new()];

    const fn schedule(interval: u64, window: u64) -> Bucket {
        Bucket::Schedule {
            interval,
            window,
            slack: 0,
        }
    }

    static PAIR: [Bucket; 2] = [schedule(10, 100), schedule(1, 8)];

    /// Two buckets of T = 10 µs, τ = 100 µs and T = 1 µs, τ = 8 µs; n = 2, up to 3.
    fn pair() -> Call<'static> {
        Call {
            keys: &KEYS,
            quotas: &PAIR,
            dry: "",
            now: None,
            n: 2,
            want: 3,
        }
    }

    /// One bucket of T = 10 µs, τ = 100 µs, n = 3, no lease: the common call.
    fn single() -> Call<'static> {
        Call {
            keys: &KEYS[..1],
            quotas: &PAIR[..1],
            dry: "",
            now: None,
            n: 3,
            want: 3,
        }
    }

    /// A fixed window of 3 (1 ms) and a sliding window of 5 (1 s); n = 1.
    fn windows() -> Call<'static> {
        Call {
            keys: &KEYS,
            quotas: &[
                Bucket::Stepped {
                    length: 1_000,
                    burst: 3,
                    refill: 3,
                    phase: 0,
                },
                Bucket::Sliding {
                    length: 1_000_000,
                    limit: 5,
                    shift: 0,
                    phase: 0,
                },
            ],
            dry: "",
            now: None,
            n: 1,
            want: 1,
        }
    }

    fn admitted(granted: u32, dry: Dry, now: u64, states: &[u64]) -> Option<Reply> {
        Some(Reply::Admitted {
            repaired: 0,
            granted,
            dry,
            now: Some(now),
            states: states.to_vec().into(),
        })
    }

    #[test]
    fn reads_what_the_script_sends() {
        let none = Dry::default;
        assert_eq!(
            Reply::parse(&array(&[1, 0, 3, 0, 0, 77, 50, 7]), &pair()),
            admitted(3, none(), 77, &[50, 7])
        );
        let first = Dry { all: vec![1] };
        assert_eq!(
            Reply::parse(&array(&[1, 0, 3, 2, 40, 77, 50, 7, 2]), &pair()),
            admitted(3, first, 77, &[50, 7])
        );
        assert_eq!(
            Reply::parse(&array(&[0, 1, 2, 4, 9, 1, -1, 77, 60, 4, 1]), &pair()),
            Some(Reply::Refused {
                repaired: 1,
                index: 1,
                state: 4,
                dry: Dry { all: vec![0] },
                now: Some(77),
                states: vec![60, 4].into(),
            })
        );
        // Window counters: 2 of 3 used, 1 window ahead; 4 and 1 counted.
        let ahead = (1 << 24) + 2;
        let counts = (4 << 18) + 1;
        assert_eq!(
            Reply::parse(&array(&[1, 0, 1, 0, 0, 77, ahead, counts]), &windows()),
            admitted(1, none(), 77, &[ahead as u64, counts as u64])
        );
        // The common call: one integer, or a table when the script repaired or clamped.
        assert_eq!(
            Reply::parse(&Value::Int(60), &single()),
            Some(Reply::Admitted {
                repaired: 0,
                granted: 3,
                dry: none(),
                now: None,
                states: vec![60].into()
            })
        );
        // Refused with the TAT 80 µs ahead: it waits 80 + 3·10 − 100 µs.
        assert_eq!(
            Reply::parse(&Value::Int(-81), &single()),
            Some(Reply::Refused {
                repaired: 0,
                index: 0,
                state: 80,
                dry: none(),
                now: None,
                states: vec![80].into(),
            })
        );
    }

    #[test]
    fn refuses_replies_the_script_cannot_send() {
        for bad in [
            Value::Nil,
            Value::Okay,
            Value::Int(5), // one integer for a call with two buckets
            array(&[]),
            array(&[1, 0, 3, 0, 0, 77, 5]), // one state for two buckets
            array(&[0, 0, 3, 4, 9, 0, 0, 77, 4, 4]), // bucket 3 of 2
            array(&[0, 0, 0, 4, 9, 0, 0, 77, 4, 4]), // bucket 0: the script counts from 1
            array(&[0, 0, 1, 4, 0, 0, 0, 77, 4, 4]), // a refusal that waits for nothing
            array(&[0, 0, 1, 4, 9, 0, 0, 4, 4]), // no reading
            array(&[0, 0, 1, 4, 9, 0, 0, 77, 5, 4]), // the refusing bucket's state twice, differing
            array(&[1, -1, 3, 0, 0, 77, 5, 7]), // a negative count of repairs
            array(&[2, 0, 3, 0, 0, 77, 5, 7]), // neither admitted nor refused
            array(&[1, 0, 1, 0, 0, 77, 5, 7]), // granted fewer than n
            array(&[1, 0, 4, 0, 0, 77, 5, 7]), // granted more than wanted
            array(&[1, 0, 3, 0, 0, 77, 5, 9]), // a TAT past bucket 2's window of 8
            array(&[1, 0, 3, 0, 0, -1, 5, 7]), // a reading before the epoch
            array(&[1, 0, 3, 3, 5, 77, 5, 7]), // a dry-run refusal of bucket 3 of 2
            array(&[1, 0, 3, 1, 0, 77, 5, 7, 1]), // a dry-run refusal that waits for nothing
            array(&[1, 0, 3, 0, 5, 77, 5, 7]), // a wait without a dry-run refusal
            array(&[1, 0, 3, 0, 0, 77, 5, 7, 1]), // a dry-run refusal listed but not first
            array(&[1, 0, 3, 2, 4, 77, 5, 7, 1, 2]), // the first listed is not the first
            array(&[1, 0, 3, 1, 4, 77, 5, 7, 2, 1]), // not in order
            Value::Array(vec![Value::Int(1), Value::Nil, Value::Int(0)]),
        ] {
            assert_eq!(Reply::parse(&bad, &pair()), None, "{bad:?}");
        }
        for bad in [
            Value::Int(101),  // a debt past the window
            Value::Int(-71),  // refused with room for n: 70 + 30 ≤ 100
            Value::Int(-102), // a TAT past the window
            Value::Okay,
        ] {
            assert_eq!(Reply::parse(&bad, &single()), None, "{bad:?}");
        }
        for bad in [
            array(&[1, 0, 1, 0, 0, 77, 4, 0]),       // 4 used of 3
            array(&[1, 0, 1, 0, 0, 77, 0, 6 << 18]), // 6 counted of 5
            array(&[1, 0, 1, 0, 0, 77, 0, 6]),
        ] {
            assert_eq!(Reply::parse(&bad, &windows()), None, "{bad:?}");
        }
    }
}
