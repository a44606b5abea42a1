//! [`Micros`]: a quota as the script runs it, in integer microseconds (a schedule's emission
//! interval, burst window and slack; a window counter's length, limit, refill and phase), and the
//! in-process algorithm that decides exactly as the script does, which reports every
//! decision: gauges, delays, waits and the next cell are its answers on the script's numbers.

use core::time::Duration;

use crate::error::RedisConfigError;
use crate::nanos;
use flowgate::algorithm::{
    Algorithm, AnyAlgorithm, Credit, FixedWindow, Gcra, LeakyBucket, SlidingWindow, Step,
};
use flowgate::outcome::{Allowed, Gauge, Refused};
use flowgate::quota::Quota;

/// The longest lead (`burst × interval` plus a shaper's delay or credit's debt) a Redis quota
/// may have, in µs: 2^51 µs, about 71 years. With the server's `TIME` (about 2^50.6 µs in
/// 2026), `now + lead` stays below 2^53, where the script's Lua doubles are exact. A sliding
/// window, weighed in nanoseconds, may last at most 2^53 ns (104 days).
pub const MAX_WINDOW_MICROS: u64 = 1 << 51;

/// The reading at which the client replays a schedule's numbers through the in-process
/// algorithm: a schedule's decisions depend on how far its TAT lies ahead of the reading, not
/// on the reading itself, and this one leaves room for any lead in nanoseconds.
const BASE: u64 = 1 << 62;

/// Bits of a counter's state below its windows ahead (see [`Bucket`]).
const STEPPED_AHEAD: u32 = 24;
const SLIDING_AHEAD: u32 = 36;
const COUNT: u64 = (1 << 18) - 1;

/// One bucket as the script runs it (the four numbers of a general call).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bucket {
    /// A schedule (GCRA, the leaky bucket, credit): emission interval, burst window and slack,
    /// in µs. Its state in a reply: how far its TAT lies ahead of the reading, at most
    /// `window + slack`.
    Schedule {
        interval: u64,
        window: u64,
        slack: u64,
    },
    /// A counter refilled at window boundaries (the interval refill, the fixed window): window
    /// length in µs, burst, refill, and the phase (its UTC offset modulo the length, in µs:
    /// windows start where the Unix time plus the phase is a multiple of the length). Its
    /// state: windows ahead of the reading × 2^24 + cells used.
    Stepped {
        length: u64,
        burst: u64,
        refill: u64,
        phase: u64,
    },
    /// The sliding window counter: window length in µs, limit, the weight's scale (a shift of
    /// nanoseconds) and the phase. Its state: windows ahead × 2^36 + previous × 2^18 + current.
    Sliding {
        length: u64,
        limit: u64,
        shift: u64,
        phase: u64,
    },
}

impl Bucket {
    /// The four arguments of a general call: a window counter's phase rides on its kind
    /// (kind + 4 × phase, below 2^53 as the phase is below [`MAX_WINDOW_MICROS`]).
    pub(crate) fn args(self) -> [u64; 4] {
        match self {
            Self::Schedule {
                interval,
                window,
                slack,
            } => [0, interval, window, slack],
            Self::Stepped {
                length,
                burst,
                refill,
                phase,
            } => [1 + 4 * phase, length, burst, refill],
            Self::Sliding {
                length,
                limit,
                shift,
                phase,
            } => [2 + 4 * phase, length, limit, shift],
        }
    }

    /// Whether `value` is a state the script can leave for this bucket.
    pub(crate) fn holds(self, value: u64) -> bool {
        const COUNT: u64 = (1 << 18) - 1;
        match self {
            Self::Schedule { window, slack, .. } => value <= window + slack,
            Self::Stepped { burst, .. } => value & ((1 << 24) - 1) <= burst,
            Self::Sliding { limit, .. } => (value >> 18) & COUNT <= limit && value & COUNT <= limit,
        }
    }
}

/// A quota as the script runs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Micros {
    /// What the script is told.
    pub(crate) bucket: Bucket,
    pub(crate) burst: u32,
    /// The most cells one request may take (the algorithm's capacity).
    pub(crate) capacity: u32,
    /// The quota the script enforces (its interval, or window, in whole µs).
    pub(crate) quota: Quota,
    /// The in-process algorithm that decides as the script does.
    pub(crate) algorithm: AnyAlgorithm,
}

impl Micros {
    /// The in-process word and reading of a bucket in the script's `state` at its reading
    /// `now` (µs; a schedule's state needs none).
    fn word(&self, state: u64, now: Option<u64>) -> (u64, u64) {
        let now = now.unwrap_or(0);
        match self.bucket {
            Bucket::Schedule { .. } => (BASE + state.saturating_mul(1_000), BASE),
            Bucket::Stepped { length, phase, .. } => {
                let index = (now + phase) / length + (state >> STEPPED_AHEAD);
                let used = (state & ((1 << STEPPED_AHEAD) - 1)) as u32;
                (FixedWindow::word_at(index, used), now * 1_000)
            }
            Bucket::Sliding { length, phase, .. } => {
                let index = (now + phase) / length + (state >> SLIDING_AHEAD);
                let previous = ((state >> 18) & COUNT) as u32;
                let current = (state & COUNT) as u32;
                (
                    SlidingWindow::word_at(index, previous, current),
                    now * 1_000,
                )
            }
        }
    }

    /// The gauge of a bucket in the script's `state` at `now`.
    pub(crate) fn gauge(&self, state: u64, now: Option<u64>) -> Gauge {
        let (word, now) = self.word(state, now);
        self.algorithm.state(word, now).gauge()
    }

    /// The admission the script made of `n` cells, leaving the bucket in `state` at `now`:
    /// the in-process algorithm's own answer (gauge and delay) on the state the script found.
    pub(crate) fn admitted(&self, state: u64, n: u32, now: Option<u64>) -> Allowed {
        // The state before: a schedule's TAT was max(TAT, now) = the new one less n·T, and
        // deciding there gives the same answer, delay included; a counter's had n fewer.
        let taken = match self.bucket {
            Bucket::Schedule { interval, .. } => u64::from(n) * interval,
            Bucket::Stepped { .. } | Bucket::Sliding { .. } => u64::from(n),
        };
        let (before, at) = self.word(state.saturating_sub(taken), now);
        match self.algorithm.check(before, at, n) {
            Step::Write(_, Ok(allowed)) => allowed,
            // The script admitted what the algorithm would not: report the state as it is.
            _ => Allowed::new(self.gauge(state, now)),
        }
    }

    /// The refusal of `n` cells by a bucket in `state` at `now`, as the in-process algorithm
    /// makes it; `None` if it would admit.
    pub(crate) fn refused(&self, state: u64, n: u32, now: Option<u64>) -> Option<Refused> {
        let (word, now) = self.word(state, now);
        self.algorithm.peek(word, now, n).err()
    }

    /// The most cells, up to `k`, that a bucket in `state` at `now` admits (a shaper's queued
    /// ones included): the in-process count of `check_up_to`.
    #[cfg(feature = "cluster")]
    pub(crate) fn most(&self, state: u64, now: Option<u64>, k: u32) -> u32 {
        let (word, now) = self.word(state, now);
        let counted = flowgate::algorithm::up_to(&self.algorithm, word, now, k.max(1)).answer();
        counted.map_or(0, |(most, _)| most.min(k))
    }

    /// Nanoseconds until a bucket in `state` at `now` holds one more cell.
    pub(crate) fn next_cell(&self, state: u64, now: Option<u64>) -> u64 {
        let (word, now) = self.word(state, now);
        flowgate::algorithm::next_cell(&self.algorithm, word, now)
    }

    /// Whether leases may spend this bucket's cells: a schedule that never delays.
    pub(crate) fn leasable(&self) -> bool {
        matches!(self.bucket, Bucket::Schedule { slack: 0, .. })
    }

    /// `algorithm` in µs, or why the script cannot run it.
    pub(crate) fn new(
        algorithm: &AnyAlgorithm,
        policy: &str,
        index: usize,
    ) -> Result<Self, RedisConfigError> {
        let at = || (policy.to_owned(), index);
        let quota = algorithm.quota();
        if quota.initial_cells() != quota.burst() {
            let (policy, quota) = at();
            return Err(RedisConfigError::InitialNotFull { policy, quota });
        }
        let too_long = || {
            let (policy, quota) = at();
            RedisConfigError::WindowTooLong { policy, quota }
        };
        let made = match algorithm {
            AnyAlgorithm::Gcra(_) | AnyAlgorithm::LeakyBucket(_) | AnyAlgorithm::Credit(_) => {
                schedule(algorithm)
            }
            _ => counter(algorithm),
        };
        let (bucket, enforced, algorithm) = made.ok_or_else(too_long)?;
        Ok(Self {
            bucket,
            burst: quota.burst(),
            capacity: algorithm.capacity(),
            quota: enforced,
            algorithm,
        })
    }
}

/// A schedule (GCRA, the leaky bucket, credit) as the script runs it, its quota and its
/// in-process twin; `None` past the script's horizon. The interval is rounded up to a whole
/// µs (never a faster rate), the slack down (never a longer queue).
fn schedule(algorithm: &AnyAlgorithm) -> Option<(Bucket, Quota, AnyAlgorithm)> {
    let quota = algorithm.quota();
    // A shaper's queue or credit's debt: the delay its admissions may carry (0 for GCRA).
    let slack = algorithm.max_delay_nanos() / 1_000;
    let interval = nanos(quota.interval()).div_ceil(1_000);
    let window = interval.checked_mul(u64::from(quota.burst()))?;
    if window.saturating_add(slack) > MAX_WINDOW_MICROS {
        return None;
    }
    // The quota as written when its interval is whole µs (headers then advertise it as
    // written); otherwise the same count over a period stretched to the rounded interval.
    let enforced = if quota.interval() == Duration::from_micros(interval) {
        *quota
    } else {
        let period = interval * 1_000 * u64::from(quota.count());
        Quota::new(quota.count(), core::time::Duration::from_nanos(period))
            .and_then(|q| q.with_burst(quota.burst()))
            .ok()?
    };
    let delay = Duration::from_micros(slack);
    let twin = match algorithm {
        AnyAlgorithm::Gcra(_) => AnyAlgorithm::Gcra(Gcra::new(&enforced)),
        AnyAlgorithm::LeakyBucket(bucket) if bucket.max_delay().is_zero() => {
            AnyAlgorithm::LeakyBucket(LeakyBucket::meter(&enforced))
        }
        AnyAlgorithm::LeakyBucket(_) => {
            AnyAlgorithm::LeakyBucket(LeakyBucket::shaper(&enforced, delay).ok()?)
        }
        _ => AnyAlgorithm::Credit(Credit::new(&enforced, delay).ok()?),
    };
    let bucket = Bucket::Schedule {
        interval,
        window,
        slack,
    };
    Some((bucket, enforced, twin))
}

/// A window counter (the interval refill, the fixed window, the sliding window) as the script
/// runs it, its quota and its in-process twin; `None` past the script's horizon. The window is
/// rounded up to a whole µs (never a faster rate); the windows start where the twin's do.
fn counter(algorithm: &AnyAlgorithm) -> Option<(Bucket, Quota, AnyAlgorithm)> {
    let quota = algorithm.quota();
    let period = u64::try_from(quota.period().as_nanos()).ok()?;
    let length = period.div_ceil(1_000);
    let offset = match algorithm {
        AnyAlgorithm::IntervalRefill(a) => a.utc_offset(),
        AnyAlgorithm::FixedWindow(a) => a.utc_offset(),
        AnyAlgorithm::SlidingWindow(a) => a.utc_offset(),
        _ => 0,
    };
    let phase = flowgate::algorithm::window_phase(offset, length, 60_000_000);
    if phase >= MAX_WINDOW_MICROS {
        return None;
    }
    let enforced = if period == length * 1_000 {
        *quota
    } else {
        Quota::new(
            quota.count(),
            core::time::Duration::from_nanos(length * 1_000),
        )
        .and_then(|q| q.with_burst(quota.burst()))
        .ok()?
    };
    let burst = u64::from(quota.burst());
    let refill = u64::from(quota.count());
    Some(match algorithm {
        // The same counter (its UTC offset kept) on the quota the script enforces.
        AnyAlgorithm::IntervalRefill(_) | AnyAlgorithm::FixedWindow(_) => (
            Bucket::Stepped {
                length,
                burst,
                refill,
                phase,
            },
            enforced,
            algorithm.with_quota(&enforced).ok()?,
        ),
        _ => {
            // Weighed in nanoseconds in the script: exact below 2^53.
            if length * 1_000 >= 1 << 53 {
                return None;
            }
            let AnyAlgorithm::SlidingWindow(twin) = algorithm.with_quota(&enforced).ok()? else {
                return None;
            };
            let shift = u64::from(twin.weight_shift());
            let bucket = Bucket::Sliding {
                length,
                limit: burst,
                shift,
                phase,
            };
            (bucket, enforced, AnyAlgorithm::SlidingWindow(twin))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn micros(text: &str) -> Result<Micros, RedisConfigError> {
        Micros::new(&text.parse().unwrap(), "l", 2)
    }

    #[test]
    fn rounds_the_interval_up_and_the_slack_down_to_whole_microseconds() {
        let gcra = micros("3/s").unwrap(); // 333 333.33… µs
        let third = Bucket::Schedule {
            interval: 333_334,
            window: 3 * 333_334,
            slack: 0,
        };
        assert_eq!(gcra.bucket, third);
        assert_eq!(gcra.quota.interval(), Duration::from_micros(333_334));
        let shaper = micros("10/s burst 1 shaper 2500500ns").unwrap();
        assert!(matches!(
            shaper.bucket,
            Bucket::Schedule { slack: 2_500, .. }
        ));
        assert_eq!(shaper.algorithm.max_delay_nanos(), 2_500_000);
        let credit = micros("10/s burst 1 credit 1s").unwrap();
        assert!(matches!(credit.algorithm, AnyAlgorithm::Credit(_)));
        let fixed = micros("3/1000000500ns fixed").unwrap();
        let stepped = Bucket::Stepped {
            length: 1_000_001,
            burst: 3,
            refill: 3,
            phase: 0,
        };
        assert_eq!(fixed.bucket, stepped);
        assert!(matches!(
            micros("5/min sliding").unwrap().bucket,
            Bucket::Sliding {
                length: 60_000_000,
                limit: 5,
                shift: 0,
                phase: 0,
            }
        ));
        // A UTC offset, as the phase of the windows in µs: 2 h east into a day, 5 h west.
        let day = 86_400_000_000;
        let east = micros("7/day fixed utc+02:00").unwrap();
        assert!(matches!(
            east.bucket,
            Bucket::Stepped {
                phase: 7_200_000_000,
                ..
            }
        ));
        assert_eq!(east.bucket.args()[0], 1 + 4 * 7_200_000_000);
        let west = micros("7/day sliding utc-05:00").unwrap().bucket;
        assert!(matches!(west, Bucket::Sliding { phase, .. } if phase == day - 18_000_000_000));
        assert_eq!(east.algorithm.to_string(), "7/d fixed utc+02:00");
        assert!(micros("20000/day sliding").is_ok());
    }

    #[test]
    fn refuses_what_the_script_cannot_run_exactly() {
        let long = Quota::with_period(Duration::from_secs(3_600 * 24 * 365 * 80)).unwrap();
        assert!(matches!(
            Micros::new(&long.into(), "l", 2),
            Err(RedisConfigError::WindowTooLong { quota: 2, .. })
        ));
        let empty = Quota::per_second(5)
            .unwrap()
            .with_initial(flowgate::quota::Initial::Empty)
            .unwrap();
        assert!(matches!(
            Micros::new(&empty.into(), "l", 0),
            Err(RedisConfigError::InitialNotFull { .. })
        ));
        assert!(matches!(
            micros("10/200day sliding"),
            Err(RedisConfigError::WindowTooLong { .. })
        ));
    }
}
