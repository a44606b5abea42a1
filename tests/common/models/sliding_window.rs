//! The reference model of the sliding window counter: absolute window numbers, 128-bit
//! arithmetic, and `retry_after` found by searching for the first admitting time rather than by
//! the limiter's closed form.

use flowgate::Quota;

use super::{Answer, WindowModel};

/// The documented rule: admitted iff ⌈previous × weight / unit⌉ + current + n ≤ limit, with
/// weight = (W − elapsed) >> shift and unit = W >> shift (shift = 0 for windows up to 2^42 ns).
#[derive(Clone, PartialEq)]
pub struct Model {
    window: u128,
    shift: u32,
    limit: u128,
    stored: u128,
    previous: u128,
    current: u128,
}

/// A stored window up to this many windows after a reading's is "ahead" of it.
const MAX_AHEAD: u128 = 1 << 27;

impl Model {
    /// A bucket of quota `q` created at `now`, filled as `q` says.
    pub fn new(q: &Quota, now: u128) -> Self {
        let window = q.period().as_nanos();
        let bits = 128 - window.leading_zeros();
        Self {
            window,
            shift: bits.saturating_sub(42),
            limit: q.count().into(),
            stored: now / window,
            previous: 0,
            current: u128::from(q.count() - q.initial_cells()),
        }
    }

    /// (window counted in, previous, current, offset judged at, ns until that offset)
    fn counted(&self, now: u128) -> (u128, u128, u128, u128, u128) {
        let index = now / self.window;
        let offset = now % self.window;
        if self.stored > index && self.stored - index <= MAX_AHEAD {
            let lead = self.stored * self.window - now;
            (self.stored, self.previous, self.current, 0, lead)
        } else if self.stored == index {
            (index, self.previous, self.current, offset, 0)
        } else if self.stored + 1 == index {
            (index, self.current, 0, offset, 0)
        } else {
            (index, 0, 0, offset, 0)
        }
    }

    fn weighted(&self, previous: u128, current: u128, offset: u128) -> (u128, u128) {
        let unit = self.window >> self.shift;
        let weight = (self.window - offset) >> self.shift;
        (previous * weight + current * unit, unit)
    }

    fn admits(&self, now: u128, n: u128) -> bool {
        let (_, p, c, o, _) = self.counted(now);
        let (used, unit) = self.weighted(p, c, o);
        used.div_ceil(unit) + n <= self.limit
    }

    fn gauge(&self, now: u128, extra: u128) -> (u128, u128) {
        let (_, p, c, o, lead) = self.counted(now);
        let (used, unit) = self.weighted(p, c + extra, o);
        let end = lead + self.window - o;
        let reset = if c + extra > 0 {
            end + self.window
        } else if p > 0 {
            end
        } else {
            0
        };
        (self.limit.saturating_sub(used.div_ceil(unit)), reset)
    }
}

impl WindowModel for Model {
    fn check(&mut self, now: u128, fresh: u128, n: u128) -> Answer {
        if n > self.limit {
            return Answer::Never(n, self.limit);
        }
        if n == 0 {
            let (remaining, reset) = self.gauge(now, 0);
            return Answer::Allowed(remaining, self.limit, reset, 0);
        }
        if self.admits(now, n) {
            let (remaining, reset) = self.gauge(now, n);
            let (index, p, c, ..) = self.counted(now);
            (self.stored, self.previous, self.current) = (index, p, c + n);
            return Answer::Allowed(remaining, self.limit, reset, 0);
        }
        // The first admitting time, by binary search: admission only gets easier with time.
        let (mut lo, mut hi) = (now, now.max(self.stored * self.window) + 3 * self.window);
        assert!(self.admits(hi, n));
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            if self.admits(mid, n) {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        let (remaining, reset) = self.gauge(now, 0);
        let answer = Answer::Refused(remaining, self.limit, hi - now, reset);
        let fresh_index = fresh / self.window;
        if self.stored > fresh_index && self.stored - fresh_index <= MAX_AHEAD {
            self.stored = fresh_index;
        }
        answer
    }
}
