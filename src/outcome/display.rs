//! The outcomes as a person reads them: one line each, without a trailing newline, for logs and
//! error messages ([`Allowed`], [`Refused`], [`Gauge`], [`DryRun`];
//! [`InsufficientCapacity`](super::InsufficientCapacity) and [`Error`](super::Error) have
//! theirs in `error.rs`).
//!
//! Durations are rounded to three significant digits (never fewer than whole seconds) in the
//! unit `Duration`'s `Debug` picks: `1.2s`, `200ms`, `3600s`. The exact figures are the
//! outcomes' accessors.

use core::fmt;

use super::policy::{self, PolicyQuota};
use super::{Allowed, Cause, DryRun, Gauge, Refused};

/// `nanos` rounded to three significant digits (whole seconds at least, so `1234.5s` is
/// `1235s`), in seconds, milliseconds, microseconds or nanoseconds.
#[derive(Clone, Copy)]
pub(crate) struct Readable(pub(crate) u64);

impl Readable {
    /// The unit `nanos` is written in, in nanoseconds, and its name.
    fn unit(nanos: u128) -> (u128, &'static str) {
        match nanos {
            1_000_000_000.. => (1_000_000_000, "s"),
            1_000_000.. => (1_000_000, "ms"),
            1_000.. => (1_000, "µs"),
            _ => (1, "ns"),
        }
    }

    /// The decimals shown of a value whose whole part is `whole`, and one step of the last of
    /// them in nanoseconds.
    fn step(whole: u128, unit: u128) -> (u32, u128) {
        let digits = whole.checked_ilog10().map_or(1, |log| log + 1);
        let decimals = 3u32.saturating_sub(digits).min(unit.ilog10());
        (decimals, unit / 10u128.pow(decimals))
    }
}

impl fmt::Display for Readable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nanos = u128::from(self.0);
        let (unit, _) = Self::unit(nanos);
        let (_, step) = Self::step(nanos / unit, unit);
        // Half up; rounding may carry into the next unit (999.9ms is 1s).
        let rounded = (nanos + step / 2) / step * step;
        let (unit, name) = Self::unit(rounded);
        let (decimals, step) = Self::step(rounded / unit, unit);
        write!(f, "{}", rounded / unit)?;
        let mut fraction = (rounded % unit) / step;
        if fraction != 0 {
            let mut width = decimals as usize;
            while fraction % 10 == 0 {
                fraction /= 10;
                width -= 1;
            }
            write!(f, ".{fraction:0width$}")?;
        }
        f.write_str(name)
    }
}

/// `2 of 3 left, full again in 400ms`; `3 of 3 left` when full; `unlimited` for the gauge of an
/// admission no quota describes.
impl fmt::Display for Gauge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == Gauge::UNLIMITED {
            return f.write_str("unlimited");
        }
        write!(f, "{} of {} left", self.remaining(), self.limit())?;
        match self.reset {
            0 | u64::MAX => Ok(()),
            reset => write!(f, ", full again in {}", Readable(reset)),
        }
    }
}

/// `allowed: 2 of 3 left`; a shaper's `allowed: 2 of 3 left, go ahead in 150ms`.
impl fmt::Display for Allowed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        allowed(f, self, None, None)
    }
}

/// A policy set's `allowed: 2 of 3 left in policy 'per-user', quota #0` (the tightest enforcing
/// quota), with `; dry run: ` and the [`DryRun`] if a dry-run policy would have refused;
/// `allowed: no quota applies` when none did.
impl fmt::Display for policy::Allowed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        allowed(f, &self.bucket, self.by, self.dry_run)
    }
}

fn allowed(
    f: &mut fmt::Formatter<'_>,
    bucket: &Allowed,
    by: Option<&PolicyQuota>,
    dry_run: Option<DryRun>,
) -> fmt::Result {
    let gauge = bucket.gauge;
    match by {
        None if gauge == Gauge::UNLIMITED => f.write_str("allowed: no quota applies")?,
        by => {
            write!(
                f,
                "allowed: {} of {} left",
                gauge.remaining(),
                gauge.limit()
            )?;
            if let Some(by) = by {
                write!(f, " in {by}")?;
            }
        }
    }
    if bucket.delay > 0 {
        write!(f, ", go ahead in {}", Readable(bucket.delay))?;
    }
    if let Some(dry_run) = dry_run {
        write!(f, "; dry run: {dry_run}")?;
    }
    Ok(())
}

/// `rate limited: retry after 1.2s`; `...: the request can never conform` for a refusal that
/// never conforms, and `rate limited: no room for another key now` for a keyed table that is
/// full.
impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        refused(f, self, None, self.wait)
    }
}

/// A policy set's `rate limited by policy 'per-user', quota #0: retry after 1.2s` (the
/// retry-after includes the policy's jitter).
impl fmt::Display for policy::Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.rejection, self.by) {
            (Some(rejection), Some(by)) => write!(
                f,
                "rejected by policy '{}': {}",
                by.policy(),
                rejection.message()
            ),
            (Some(rejection), None) => write!(f, "rejected: {}", rejection.message()),
            (None, _) => refused(f, &self.bucket, self.by, self.retry_after_nanos()),
        }
    }
}

fn refused(
    f: &mut fmt::Formatter<'_>,
    bucket: &Refused,
    by: Option<&PolicyQuota>,
    retry: u64,
) -> fmt::Result {
    match (by, bucket.cause()) {
        (Some(by), Cause::TableFull) => {
            let policy = by.policy();
            write!(
                f,
                "rate limited: policy '{policy}' has no room for another key now"
            )
        }
        (None, Cause::TableFull) => f.write_str("rate limited: no room for another key now"),
        (_, Cause::Unavailable) => write!(
            f,
            "refused: the rate limiter is unavailable; retry after {}",
            Readable(retry)
        ),
        (by, _) => {
            f.write_str("rate limited")?;
            if let Some(by) = by {
                write!(f, " by {by}")?;
            }
            match bucket.wait {
                u64::MAX => f.write_str(": the request can never conform"),
                _ => write!(f, ": retry after {}", Readable(retry)),
            }
        }
    }
}

/// `policy 'audit', quota #0 would have refused (conforms in 2s)`; `(above its capacity)` for a
/// request that quota could never admit.
impl fmt::Display for DryRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} would have refused ", self.by)?;
        match self.wait {
            u64::MAX => f.write_str("(above its capacity)"),
            wait => write!(f, "(conforms in {})", Readable(wait)),
        }
    }
}

#[cfg(all(test, not(flowgate_loom)))]
mod tests {
    use super::Readable;
    use crate::outcome::{Allowed, Cause, Error, Gauge, InsufficientCapacity, Refused};

    /// Three significant digits in `Duration`'s units, whole seconds at least, trailing zeros
    /// dropped, and a carry into the next unit.
    #[test]
    fn durations_read_as_three_digits() {
        let cases = [
            (0, "0ns"),
            (1, "1ns"),
            (999, "999ns"),
            (1_000, "1µs"),
            (1_500, "1.5µs"),
            (12_345, "12.3µs"),
            (199_999_910, "200ms"),
            (1_234_567, "1.23ms"),
            (999_999_999, "1s"),
            (999_400_000, "999ms"),
            (1_200_000_000, "1.2s"),
            (1_005_000_000, "1.01s"),
            (59_990_000_000, "60s"),
            (1_234_500_000_000, "1235s"),
            (3_600_000_000_000, "3600s"),
            (u64::MAX, "18446744074s"),
        ];
        for (nanos, text) in cases {
            assert_eq!(Readable(nanos).to_string(), text, "{nanos} ns");
        }
    }

    #[test]
    fn a_gauge_reads_as_cells_left() {
        // GCRA: 1.5 intervals of 200ms used of a burst of 3: one cell left, full in 300ms.
        let gauge = Gauge::new(300_000_000, 200_000_000, 3, 300_000_000);
        assert_eq!(gauge.to_string(), "1 of 3 left, full again in 300ms");
        assert_eq!(Gauge::new(0, 1, 3, 0).to_string(), "3 of 3 left");
        assert_eq!(Gauge::UNLIMITED.to_string(), "unlimited");
    }

    #[test]
    fn a_limiters_outcomes_read_as_one_line() {
        let gauge = Gauge::new(1, 1, 10, 100_000_000);
        assert_eq!(Allowed::new(gauge).to_string(), "allowed: 9 of 10 left");
        assert_eq!(
            Allowed::delayed(gauge, 150_000_000).to_string(),
            "allowed: 9 of 10 left, go ahead in 150ms"
        );
        let refused = Refused::new(Gauge::new(10, 1, 10, 1_000_000_000), 1_200_000_000);
        assert_eq!(refused.to_string(), "rate limited: retry after 1.2s");
        assert_eq!(
            Refused::new(gauge, u64::MAX).to_string(),
            "rate limited: the request can never conform"
        );
        assert_eq!(
            refused.because(Cause::TableFull).to_string(),
            "rate limited: no room for another key now"
        );
        let capacity = InsufficientCapacity::check(4, 3).unwrap_err();
        let never = "4 cells requested but the capacity is 3: the request can never succeed";
        assert_eq!(capacity.to_string(), never);
        assert_eq!(Error::from(capacity).to_string(), never);
        assert_eq!(
            Error::from(refused).to_string(),
            "rate limited: retry after 1.2s"
        );
    }

    #[cfg(feature = "std")]
    #[test]
    fn a_policy_sets_outcomes_name_the_quota() {
        use crate::outcome::policy;
        use crate::outcome::{DryRun, PolicyQuota};

        let by = PolicyQuota::intern("per-user", 0, 1);
        let audit = PolicyQuota::intern("audit", 1, 0);
        let gauge = Gauge::new(1, 1, 3, 1_000_000_000);
        let dry_run = DryRun {
            by: audit,
            wait: 2_000_000_000,
        };
        let allowed = policy::Allowed::new(Allowed::new(gauge), Some(by), Some(dry_run));
        assert_eq!(
            allowed.to_string(),
            "allowed: 2 of 3 left in policy 'per-user', quota #1; dry run: policy 'audit', \
             quota #0 would have refused (conforms in 2s)"
        );
        let unlimited = policy::Allowed::new(Allowed::new(Gauge::UNLIMITED), None, None);
        assert_eq!(unlimited.to_string(), "allowed: no quota applies");
        let never = DryRun {
            by: audit,
            wait: u64::MAX,
        };
        assert_eq!(
            never.to_string(),
            "policy 'audit', quota #0 would have refused (above its capacity)"
        );

        // The retry-after includes the policy's jitter.
        let bucket = Refused::new(Gauge::new(3, 1, 3, 0), 1_000_000_000);
        let refused = policy::Refused::new(bucket, Some(by), None, 250_000_000);
        let text = "rate limited by policy 'per-user', quota #1: retry after 1.25s";
        assert_eq!(refused.to_string(), text);
        assert_eq!(policy::Error::from(refused).to_string(), text);
        let full = policy::Refused::new(bucket.because(Cause::TableFull), Some(by), None, 0);
        assert_eq!(
            full.to_string(),
            "rate limited: policy 'per-user' has no room for another key now"
        );
        let capacity = InsufficientCapacity {
            requested: 5,
            burst: 3,
            by: Some(by),
        };
        assert_eq!(
            capacity.to_string(),
            "policy 'per-user', quota #1: 5 cells requested but the capacity is 3: the request \
             can never succeed"
        );
        assert_eq!(
            capacity.never().to_string(),
            "rate limited by policy 'per-user', quota #1: the request can never conform"
        );
    }
}
