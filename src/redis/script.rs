//! The GCRA script (`gcra.lua`) as the client sees it: its SHA-1, the arguments of one call,
//! sending it with `EVALSHA` (and `EVAL` only after `NOSCRIPT`), and reading its reply.
//!
//! Nothing here decides anything: the script does, atomically on the server. This module turns
//! a call into bytes and the reply back into numbers, and checks the reply's shape so that a
//! reply the script could not have sent is a [`Failure::Reply`], never a panic.

use ::redis::aio::ConnectionManager;
use ::redis::{Cmd, ErrorKind, ServerErrorKind, Value};

use super::stats::{add, Counters};
use super::Failure;

/// The script's source.
pub(crate) const SOURCE: &str = include_str!("gcra.lua");

/// The largest `now` a test may pass, in µs: with windows below 2^51 µs, `now + τ` stays below
/// 2^53, where Lua's doubles are exact.
pub(crate) const MAX_NOW_MICROS: u64 = 1 << 52;

/// The script and its SHA-1, computed once.
#[derive(Debug)]
pub(crate) struct Script {
    sha: String,
}

impl Script {
    pub(crate) fn new() -> Self {
        Self {
            sha: ::redis::Script::new(SOURCE).get_hash().to_owned(),
        }
    }

    /// Sends one call: `EVALSHA`, and `EVAL` with the source only if the server answered
    /// `NOSCRIPT` (a restart, `SCRIPT FLUSH`), counting each command and each reload.
    ///
    /// A call that failed any other way is not sent again: it may have run (a timeout, a
    /// connection dropped after the request was written), and running it twice would take
    /// its cells twice.
    pub(crate) async fn call(
        &self,
        connection: &mut ConnectionManager,
        call: &Call<'_>,
        counters: &Counters,
    ) -> Result<Reply, Failure> {
        add(&counters.round_trips, 1);
        // A server's error reply arrives as a value: `extract_error` makes it an error.
        let evalsha = call.command("EVALSHA", &self.sha);
        let sent = connection.send_packed_command(&evalsha).await;
        let value = match sent.and_then(Value::extract_error) {
            Err(error) if error.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                add(&counters.reloads, 1);
                add(&counters.round_trips, 1);
                connection
                    .send_packed_command(&call.command("EVAL", SOURCE))
                    .await
                    .and_then(Value::extract_error)
            }
            other => other,
        };
        let value = value.map_err(|error| Failure::from_error(&error))?;
        match Reply::parse(&value, call.keys.len()) {
            // The script grants n ≤ granted ≤ want: anything else is not its reply.
            Some(Reply::Admitted { granted, .. }) if granted < call.n || granted > call.want => {
                Err(Failure::Reply)
            }
            Some(reply) => Ok(reply),
            None => Err(Failure::Reply),
        }
    }
}

/// The arguments of one call.
#[derive(Debug)]
pub(crate) struct Call<'a> {
    /// The buckets' keys, which share one hash tag.
    pub(crate) keys: &'a [String],
    /// Each bucket's emission interval and window, in µs.
    pub(crate) quotas: &'a [(u64, u64)],
    /// The reading to decide at, in µs; `None` for the server's `TIME`.
    pub(crate) now: Option<u64>,
    /// The cells to take.
    pub(crate) n: u32,
    /// Take up to this many if every bucket holds them (`≥ n`; a lease).
    pub(crate) want: u32,
    /// Cells given back to every bucket first (an expired lease's unused cells).
    pub(crate) give: u32,
}

impl Call<'_> {
    fn command(&self, verb: &str, script: &str) -> Cmd {
        let mut command = ::redis::cmd(verb);
        command.arg(script).arg(self.keys.len()).arg(self.keys);
        match self.now {
            Some(now) => command.arg(now),
            None => command.arg(""),
        };
        command.arg(self.n).arg(self.want).arg(self.give);
        for &(interval, window) in self.quotas {
            command.arg(interval).arg(window);
        }
        command
    }
}

/// What the script answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reply {
    /// Every bucket admitted: `granted` cells were taken from each, leaving bucket `i`'s TAT
    /// `debts[i]` µs ahead of `now`.
    Admitted {
        now: u64,
        repaired: u32,
        granted: u32,
        debts: Vec<u64>,
    },
    /// Bucket `index` refused with the longest wait (µs; `None`: never), its TAT `debt` µs
    /// ahead of `now`. Nothing was taken.
    Refused {
        now: u64,
        repaired: u32,
        index: usize,
        debt: u64,
        wait: Option<u64>,
    },
}

impl Reply {
    /// The reply of a call on `buckets` buckets, or `None` if it is not one the script sends.
    pub(crate) fn parse(value: &Value, buckets: usize) -> Option<Self> {
        let Value::Array(items) = value else {
            return None;
        };
        let mut numbers = Vec::with_capacity(items.len());
        for item in items {
            match item {
                Value::Int(number) => numbers.push(*number),
                _ => return None,
            }
        }
        let unsigned = |x: i64| u64::try_from(x).ok();
        match numbers.as_slice() {
            [1, now, repaired, granted, debts @ ..] if debts.len() == buckets => {
                Some(Self::Admitted {
                    now: unsigned(*now)?,
                    repaired: u32::try_from(*repaired).ok()?,
                    granted: u32::try_from(*granted).ok()?,
                    debts: debts.iter().map(|&d| unsigned(d)).collect::<Option<_>>()?,
                })
            }
            &[0, now, repaired, index, debt, wait] => {
                let index = usize::try_from(index).ok()?.checked_sub(1)?;
                if index >= buckets {
                    return None;
                }
                Some(Self::Refused {
                    now: unsigned(now)?,
                    repaired: u32::try_from(repaired).ok()?,
                    index,
                    debt: unsigned(debt)?,
                    wait: if wait == -1 {
                        None
                    } else {
                        Some(unsigned(wait).filter(|&w| w > 0)?)
                    },
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn array(numbers: &[i64]) -> Value {
        Value::Array(numbers.iter().map(|&n| Value::Int(n)).collect())
    }

    #[test]
    fn reads_what_the_script_sends() {
        assert_eq!(
            Reply::parse(&array(&[1, 10, 0, 3, 5, 7]), 2),
            Some(Reply::Admitted {
                now: 10,
                repaired: 0,
                granted: 3,
                debts: vec![5, 7]
            })
        );
        assert_eq!(
            Reply::parse(&array(&[0, 10, 1, 2, 4, 9]), 2),
            Some(Reply::Refused {
                now: 10,
                repaired: 1,
                index: 1,
                debt: 4,
                wait: Some(9)
            })
        );
        assert_eq!(
            Reply::parse(&array(&[0, 10, 0, 1, 4, -1]), 1),
            Some(Reply::Refused {
                now: 10,
                repaired: 0,
                index: 0,
                debt: 4,
                wait: None
            })
        );
    }

    #[test]
    fn refuses_replies_the_script_cannot_send() {
        for bad in [
            Value::Nil,
            Value::Okay,
            array(&[]),
            array(&[1, 10, 0, 3, 5]),     // one debt for two buckets
            array(&[0, 10, 0, 3, 4, 9]),  // bucket 3 of 2
            array(&[0, 10, 0, 0, 4, 9]),  // bucket 0: the script counts from 1
            array(&[0, 10, 0, 1, 4, 0]),  // a refusal that waits for nothing
            array(&[1, -10, 0, 3, 5, 7]), // a negative reading
            array(&[2, 10, 0, 3, 5, 7]),  // neither admitted nor refused
            Value::Array(vec![
                Value::Int(1),
                Value::Nil,
                Value::Int(0),
                Value::Int(1),
            ]),
        ] {
            assert_eq!(Reply::parse(&bad, 2), None, "{bad:?}");
        }
    }
}
