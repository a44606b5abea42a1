//! The circuit breaker in front of Redis: [`Breaker`], its settings, and the `Circuit` a
//! limiter holds (the breaker's word, its clock, and the probe it sends when half open).
//!
//! After `failures` consecutive failed calls the limiter stops calling Redis and decides every
//! call by its failure policy at once, for `cool_down`. Then one probe (a `PING`, sent by a task
//! of its own, so no decision waits for it) asks whether Redis answers again: if it does, calls
//! go through again; if not, another cool-down starts. The state machine is
//! [`BreakerWord`].

use core::fmt;
use core::time::Duration;
use std::sync::Arc;

use tokio::runtime::Handle;
use tokio::time::Instant;

use super::connection::Connection;
use crate::breaker_word::{BreakerWord, Gate, Phase};
use crate::metrics::Gauge;

/// When a [`RedisLimiter`](super::RedisLimiter) stops calling Redis, and for how long: its
/// circuit breaker. Give it to [`RedisBackend::breaker`](super::RedisBackend::breaker).
///
/// After `failures` consecutive failed calls (timeouts, lost connections, error replies) the
/// limiter stops calling Redis and decides by its failure policy at once, for `cool_down`.
/// Then one `PING`, sent by a task of its own so that no decision waits for it, asks whether
/// Redis answers again: if it does, calls go through again; if not, another cool-down starts.
/// With a breaker the connection manager tries each reconnection once, without sleeping: the
/// cool-down is the backoff.
///
/// The default opens after 3 failures and probes every 100 ms: during an outage a decision
/// costs the failure policy alone, not a timeout, and decisions come from Redis again about a
/// cool-down after it answers (`integration/tests/redis_outage.rs` measures both through a `kill
/// -9` and a
/// restart).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Breaker {
    /// Consecutive failures that open it; 0 for no breaker.
    failures: u32,
    cool_down: Duration,
}

impl Default for Breaker {
    fn default() -> Self {
        Self::new(3, Duration::from_millis(100))
    }
}

impl Breaker {
    /// A breaker that opens after `failures` consecutive failed calls and stays open for
    /// `cool_down` before each probe. A cool-down too long to add to the clock keeps the
    /// breaker open for as long as the clock runs (about 146 years).
    ///
    /// [`PoliciesBuilder::build_redis`](flowgate::policy::PoliciesBuilder::build_redis) refuses a
    /// breaker with no failure or no cool-down ([`RedisConfigError::Breaker`](super::RedisConfigError::Breaker)):
    /// [`Breaker::off`] is the way to have none.
    pub const fn new(failures: u32, cool_down: Duration) -> Self {
        Self {
            failures,
            cool_down,
        }
    }

    /// No breaker: every decision calls Redis and waits for its answer or the timeout, and
    /// the connection manager reconnects with its own backoff (up to 1 s between attempts).
    pub const fn off() -> Self {
        Self {
            failures: 0,
            cool_down: Duration::ZERO,
        }
    }

    /// Whether this is [`Breaker::off`].
    pub const fn is_off(&self) -> bool {
        self.failures == 0 && self.cool_down.is_zero()
    }

    /// The consecutive failures that open it.
    pub const fn failures(&self) -> u32 {
        self.failures
    }

    /// How long it stays open before a probe.
    pub const fn cool_down(&self) -> Duration {
        self.cool_down
    }

    /// Whether a breaker that is not [`off`](Self::off) can work.
    pub(super) fn is_valid(&self) -> bool {
        self.is_off() || (self.failures > 0 && !self.cool_down.is_zero())
    }
}

/// Where a limiter's breaker stands, from
/// [`RedisLimiter::breaker_state`](super::RedisLimiter::breaker_state).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BreakerState {
    /// Calls go to Redis; the consecutive failures so far.
    Closed {
        /// Failed calls since the last success.
        failures: u64,
    },
    /// No call goes to Redis until the cool-down ends.
    Open,
    /// The cool-down is over and one probe is out.
    HalfOpen,
    /// The limiter has no breaker ([`Breaker::off`]).
    Off,
}

impl fmt::Display for BreakerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Closed { failures: 0 } => f.write_str("closed"),
            Self::Closed { failures } => write!(f, "closed, {failures} consecutive failures"),
            Self::Open => f.write_str("open"),
            Self::HalfOpen => f.write_str("half open, probing"),
            Self::Off => f.write_str("off"),
        }
    }
}

/// A limiter's breaker at work.
pub(super) struct Circuit {
    word: BreakerWord,
    failures: u64,
    cool_down: u64,
    /// A probe out this long (its timeout and a cool-down) is taken for lost (its task dropped
    /// with its runtime) and replaced.
    overdue: u64,
    /// The breaker's clock starts here (tokio's, so a paused test clock pauses it too).
    origin: Instant,
    connection: Connection,
    timeout: Duration,
    runtime: Handle,
    /// `flowgate_redis_breaker_state`: 0 closed, 1 half open, 2 open.
    state: Gauge,
}

impl Circuit {
    /// The breaker in front of `connection` that `backend` asks for (none when it is off).
    pub(super) fn of(
        backend: &super::RedisBackend,
        connection: &Connection,
        metrics: &crate::metrics::RedisMetrics,
    ) -> Option<Arc<Self>> {
        (!backend.breaker.is_off()).then(|| {
            let state = metrics.breaker_state.clone();
            let probing = (connection.clone(), backend.timeout);
            Self::new(backend.breaker, probing, state)
        })
    }

    /// A closed breaker with `settings` (not [`Breaker::off`]), probing through `connection`
    /// within `timeout`, its probes spawned on the current runtime.
    pub(super) fn new(
        settings: Breaker,
        (connection, timeout): (Connection, Duration),
        state: Gauge,
    ) -> Arc<Self> {
        Arc::new(Self {
            word: BreakerWord::new(),
            failures: u64::from(settings.failures),
            cool_down: nanos(settings.cool_down),
            overdue: nanos(timeout.saturating_add(settings.cool_down)),
            origin: Instant::now(),
            connection,
            timeout,
            runtime: Handle::current(),
            state,
        })
    }

    fn now(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Whether a call may go to Redis now. When the cool-down is over, the first caller to
    /// ask starts the probe and is refused like the others.
    #[inline(always)]
    pub(super) fn allows(self: &Arc<Self>) -> bool {
        match self.word.gate(|| self.now(), self.overdue) {
            Gate::Call => true,
            Gate::Refuse => false,
            Gate::Probe(sent) => self.probe_now(sent),
        }
    }

    /// Starts the probe sent at `sent` (see [`allows`](Self::allows)); refuses the caller.
    #[cold]
    #[inline(never)]
    fn probe_now(self: &Arc<Self>, sent: u64) -> bool {
        self.state.set(1.0);
        // On the runtime polling this decision if there is one (the limiter's own may have
        // been shut down, or be idle); a probe lost all the same is replaced once overdue.
        let runtime = Handle::try_current().unwrap_or_else(|_| self.runtime.clone());
        runtime.spawn(Arc::clone(self).probe(sent));
        false
    }

    /// A call answered.
    #[inline(always)]
    pub(super) fn succeeded(&self) {
        self.word.succeeded();
    }

    /// A call failed.
    pub(super) fn failed(&self) {
        if self.word.failed(self.now(), self.failures, self.cool_down) {
            self.state.set(2.0);
        }
    }

    /// The breaker's state now.
    pub(super) fn state(&self) -> BreakerState {
        match self.word.phase() {
            Phase::Closed(failures) => BreakerState::Closed { failures },
            Phase::Open(_) => BreakerState::Open,
            Phase::HalfOpen(_) => BreakerState::HalfOpen,
        }
    }

    /// Asks Redis for a `PONG` within the timeout and reports. Two tries: after an outage the
    /// connection manager answers the first command with the error of its last failed
    /// attempt and starts a new one, which the second awaits.
    async fn probe(self: Arc<Self>, sent: u64) {
        let ping = async {
            for _ in 0..2 {
                if self.connection.ping().await {
                    return true;
                }
            }
            false
        };
        let ok = tokio::time::timeout(self.timeout, ping)
            .await
            .unwrap_or(false);
        self.word.probed(sent, ok, self.now(), self.cool_down);
        self.state.set(if ok { 0.0 } else { 2.0 });
    }
}

fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}
