//! The reference model of the stepwise-refill algorithms (the fixed window counter, and the
//! token bucket with interval refill): absolute window numbers in 128-bit arithmetic.

use flowgate::Quota;

use super::{Answer, WindowModel};

/// The documented rules, written plainly: windows numbered from the clock's 0 (the Unix epoch); `refill`
/// cells come back at each boundary, up to `burst`; a bucket counts in the latest window it has
/// seen; a reading in an earlier window (stale, or a clock that stepped back) counts against
/// that latest window, and when it is refused there, a fresh reading that is still earlier
/// moves the count to the fresh reading's window.
#[derive(Clone, PartialEq)]
pub struct Model {
    window: u128,
    burst: u128,
    refill: u128,
    stored: u128,
    used: u128,
}

impl Model {
    /// A bucket of quota `q` created at `now`, filled as `q` says.
    pub fn new(q: &Quota, now: u128) -> Self {
        let window = q.period().as_nanos();
        Self {
            window,
            burst: q.burst().into(),
            refill: q.count().into(),
            stored: now / window,
            used: u128::from(q.burst() - q.initial_cells()),
        }
    }

    /// (window counted in, cells used there)
    fn counted(&self, now: u128) -> (u128, u128) {
        let index = now / self.window;
        if self.stored < index {
            let back = (index - self.stored) * self.refill;
            (index, self.used.saturating_sub(back))
        } else {
            (self.stored, self.used)
        }
    }

    /// ns from `now` until `cells` have come back, counting in window `index`.
    fn until(&self, index: u128, now: u128, cells: u128) -> u128 {
        if cells == 0 {
            return 0;
        }
        (index + cells.div_ceil(self.refill)) * self.window - now
    }
}

impl WindowModel for Model {
    fn check(&mut self, now: u128, fresh: u128, n: u128) -> Answer {
        if n > self.burst {
            return Answer::Never(n, self.burst);
        }
        let (index, used) = self.counted(now);
        let reset = self.until(index, now, used);
        if n == 0 {
            return Answer::Allowed(self.burst - used, self.burst, reset, 0);
        }
        if used + n <= self.burst {
            (self.stored, self.used) = (index, used + n);
            return Answer::Allowed(
                self.burst - used - n,
                self.burst,
                self.until(index, now, used + n),
                0,
            );
        }
        if self.stored > fresh / self.window {
            self.stored = fresh / self.window;
        }
        let retry = self.until(index, now, used + n - self.burst);
        Answer::Refused(self.burst - used, self.burst, retry, reset)
    }
}
