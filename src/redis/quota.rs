//! [`Micros`]: a quota as the script runs it, in integer microseconds (the emission interval,
//! the burst window and the slack a shaping algorithm admits beyond it), and the in-process
//! algorithm that decides exactly as the script does, which reports every decision: gauges,
//! delays, waits and the next cell are its answers on the script's numbers.

use core::time::Duration;

use crate::algorithm::{Algorithm, AnyAlgorithm, Credit, Gcra, LeakyBucket};
use crate::outcome::{Allowed, Gauge, Refused};
use crate::quota::Quota;

use super::RedisConfigError;

/// The longest lead (`burst × interval` plus a shaper's delay or credit's debt) a Redis quota
/// may have, in µs: 2^51 µs, about 71 years. With the server's `TIME` (about 2^50.6 µs in
/// 2026), `now + lead` stays below 2^53, where the script's Lua doubles are exact.
pub const MAX_WINDOW_MICROS: u64 = 1 << 51;

/// The reading at which the client replays the script's numbers through the in-process
/// algorithm: a schedule's decisions depend on how far its TAT lies ahead of the reading, not
/// on the reading itself, and this one leaves room for any lead in nanoseconds.
const BASE: u64 = 1 << 62;

/// A quota as the script runs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Micros {
    /// `T`, rounded up to a whole µs (never a faster rate than asked for).
    pub(crate) interval: u64,
    /// `τ = burst × T`.
    pub(crate) window: u64,
    /// The debt admitted beyond `τ`, with a delay (a shaper's queue, credit's debt), rounded
    /// down to a whole µs (never a longer queue than asked for); 0 for GCRA.
    pub(crate) slack: u64,
    pub(crate) burst: u32,
    /// The quota the script enforces: `burst` cells, one per `interval` µs.
    pub(crate) quota: Quota,
    /// The in-process algorithm that decides as the script does (the quota above, the slack
    /// above).
    pub(crate) algorithm: AnyAlgorithm,
}

impl Micros {
    /// The gauge of a bucket of this quota whose TAT lies `debt` µs ahead of now, in the
    /// in-process unit (ns; `debt` ≤ 2^53 µs, so × 1000 fits).
    pub(crate) fn gauge(&self, debt: u64) -> Gauge {
        self.algorithm.state(self.word(debt), BASE).gauge()
    }

    /// The in-process word of a bucket whose TAT lies `debt` µs ahead of [`BASE`].
    fn word(&self, debt: u64) -> u64 {
        BASE + debt.saturating_mul(1_000)
    }

    /// The admission the script made of `n` cells, leaving the TAT `debt` µs ahead: the
    /// in-process algorithm's own answer (gauge and delay) on the TAT the script found.
    pub(crate) fn admitted(&self, debt: u64, n: u32) -> Allowed {
        // The TAT before was max(TAT, now) = the new one less n·T: deciding there gives the
        // same answer, delay included.
        let before = debt.saturating_sub(u64::from(n) * self.interval);
        match self.algorithm.check(self.word(before), BASE, n) {
            crate::algorithm::Step::Write(_, Ok(allowed)) => allowed,
            // The script admitted what the algorithm would not: report the state as it is.
            _ => Allowed::new(self.gauge(debt)),
        }
    }

    /// The refusal of `n` cells by a bucket whose TAT lies `debt` µs ahead, as the in-process
    /// algorithm makes it; `None` if it would admit (the reply was not the script's).
    pub(crate) fn refused(&self, debt: u64, n: u32) -> Option<Refused> {
        self.algorithm.peek(self.word(debt), BASE, n).err()
    }

    /// Nanoseconds until a bucket whose TAT lies `debt` µs ahead holds one more cell.
    #[cfg_attr(not(feature = "tower"), allow(dead_code))]
    pub(crate) fn next_cell(&self, debt: u64) -> u64 {
        crate::algorithm::next_cell(&self.algorithm, self.word(debt), BASE)
    }

    /// `algorithm` in µs, or why the script cannot run it.
    pub(crate) fn new(
        algorithm: &AnyAlgorithm,
        policy: &str,
        index: usize,
    ) -> Result<Self, RedisConfigError> {
        let at = || (policy.to_owned(), index);
        let quota = algorithm.quota();
        // The schedule family, each with its slack and how it delays.
        let slack_nanos = match algorithm {
            AnyAlgorithm::Gcra(_) => 0,
            AnyAlgorithm::LeakyBucket(bucket) => nanos(bucket.max_delay()),
            AnyAlgorithm::Credit(credit) => nanos(credit.max_debt()),
            _ => {
                let (policy, quota) = at();
                let algorithm = algorithm.name();
                return Err(RedisConfigError::Algorithm {
                    policy,
                    quota,
                    algorithm,
                });
            }
        };
        if quota.initial_cells() != quota.burst() {
            let (policy, quota) = at();
            return Err(RedisConfigError::InitialNotFull { policy, quota });
        }
        let too_long = || {
            let (policy, quota) = at();
            RedisConfigError::WindowTooLong { policy, quota }
        };
        let interval = quota.interval_nanos().div_ceil(1_000);
        let slack = slack_nanos / 1_000;
        let window = interval.checked_mul(u64::from(quota.burst()));
        let window = window.filter(|&w| w.saturating_add(slack) <= MAX_WINDOW_MICROS);
        let window = window.ok_or_else(too_long)?;
        // The quota as written when its interval is whole µs (headers then advertise it as
        // written); otherwise the same count over a period stretched to the rounded interval.
        // interval ≥ 1 µs and burst·interval ≤ 2^51 µs: a valid in-process quota.
        let enforced = if quota.interval_nanos() == interval * 1_000 {
            Ok(*quota)
        } else {
            let period = interval * 1_000 * u64::from(quota.count());
            Quota::from_nanos(quota.count(), period).and_then(|q| q.with_burst(quota.burst()))
        };
        let enforced = enforced.map_err(|_| too_long())?;
        let slack_duration = Duration::from_micros(slack);
        let algorithm = match algorithm {
            AnyAlgorithm::Gcra(_) => Ok(AnyAlgorithm::Gcra(Gcra::new(&enforced))),
            AnyAlgorithm::LeakyBucket(bucket) if bucket.max_delay().is_zero() => {
                Ok(AnyAlgorithm::LeakyBucket(LeakyBucket::meter(&enforced)))
            }
            AnyAlgorithm::LeakyBucket(_) => {
                LeakyBucket::shaper(&enforced, slack_duration).map(AnyAlgorithm::LeakyBucket)
            }
            _ => Credit::new(&enforced, slack_duration).map(AnyAlgorithm::Credit),
        };
        Ok(Self {
            interval,
            window,
            slack,
            burst: quota.burst(),
            quota: enforced,
            algorithm: algorithm.map_err(|_| too_long())?,
        })
    }
}

/// A duration in whole nanoseconds (saturating).
fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
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
        assert_eq!(
            (gcra.interval, gcra.window, gcra.slack),
            (333_334, 3 * 333_334, 0)
        );
        assert_eq!(gcra.quota.interval_nanos(), 333_334_000);
        assert_eq!(micros("2000000/s").unwrap().interval, 1); // 500 ns
        let shaper = micros("10/s burst 1 shaper 2500500ns").unwrap();
        assert_eq!((shaper.interval, shaper.slack), (100_000, 2_500));
        assert_eq!(shaper.algorithm.max_delay_nanos(), 2_500_000);
        let credit = micros("10/s burst 1 credit 1s").unwrap();
        assert_eq!(credit.slack, 1_000_000);
        assert!(matches!(credit.algorithm, AnyAlgorithm::Credit(_)));
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
            .with_initial(crate::quota::Initial::Empty)
            .unwrap();
        assert!(matches!(
            Micros::new(&empty.into(), "l", 0),
            Err(RedisConfigError::InitialNotFull { .. })
        ));
        assert!(matches!(
            micros("10/s sliding"),
            Err(RedisConfigError::Algorithm {
                algorithm: "sliding",
                ..
            })
        ));
    }
}
