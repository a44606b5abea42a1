//! The circuit breakers at work ([`Breaker`] is their setting): [`Phase`], the state machine
//! (pure transitions, tested on their own), a `Circuit` (the phase under a mutex, its clock, and
//! the probe it sends when half open), and a limiter's `Breakers`: one circuit per server, so
//! that in a cluster a master that fails stops calls to itself alone, and its probe asks it.
//! Calls whose master is not known yet (no slot map) go through the cluster's own circuit, whose
//! probe learns the map.
//!
//! Failures that happen together are one piece of evidence: a failed call counts only if it was
//! sent after the last failure counted was seen, so the calls in flight through one stall or one
//! dropped connection count once, not once each. Of the callers that find the cool-down over
//! exactly one becomes the probe, and only the current probe's report leaves the half-open phase (a late report of a replaced probe changes
//! nothing). The phase sits under a plain mutex, taken for a few instructions once per call to
//! Redis (itself a round trip of tens of microseconds): the simplest structure that is obviously
//! right.

use core::fmt;
use core::time::Duration;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::runtime::Handle;
use tokio::time::Instant;

use crate::connection::{Connection, Master as Node};
use crate::events::{self, Fallbacks};
use crate::nanos;
use crate::settings::RedisBackend;
use crate::stats::breaker_gauge;
use crate::stats::Gauge;

#[cfg(doc)]
use crate::settings::Breaker;

/// Where a limiter's breaker stands, from
/// [`RedisLimiter::breaker_state`](crate::RedisLimiter::breaker_state).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BreakerState {
    /// Calls go to Redis; the failures counted so far.
    Closed {
        /// Failures counted since the last success (calls that fail together count once).
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
            Self::Closed { failures } => write!(f, "closed, {failures} failures in a row"),
            Self::Open => f.write_str("open"),
            Self::HalfOpen => f.write_str("half open, probing"),
            Self::Off => f.write_str("off"),
        }
    }
}

/// The breaker's state machine; times are ns of the breaker's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Calls go through; the failures counted since the last success, and when the last of
    /// them was seen.
    Closed(u64, u64),
    /// No call goes through until the time given.
    Open(u64),
    /// One probe is out, since the time given.
    HalfOpen(u64),
}

/// What a caller may do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gate {
    Call,
    /// This caller is the one probe, sent at the time given.
    Probe(u64),
    Refuse,
}

impl Phase {
    /// Whether a caller may call at the reading `now()`, read only when the breaker is not
    /// closed: the first to find the cool-down over (or a probe out for `overdue` ns or more,
    /// taken for lost) becomes the probe.
    fn gate(&mut self, now: impl FnOnce() -> u64, overdue: u64) -> Gate {
        let busy_until = match *self {
            Self::Closed(..) => return Gate::Call,
            Self::Open(until) => until,
            Self::HalfOpen(since) => since.saturating_add(overdue),
        };
        let now = now();
        if now < busy_until {
            return Gate::Refuse;
        }
        *self = Self::HalfOpen(now);
        Gate::Probe(now)
    }

    /// A call sent at `sent` failed at `now`: a closed breaker counts it, unless it was in
    /// flight when the last failure counted was seen (the same stall, the same dropped
    /// connection), and opens for `cool_down` at the `limit`-th failure counted (true if this
    /// one opened it). An open or half-open one is left alone: the call was sent before it
    /// opened; only the probe closes it.
    fn failed(&mut self, (sent, now): (u64, u64), limit: u64, cool_down: u64) -> bool {
        let Self::Closed(failures, last) = *self else {
            return false;
        };
        if failures > 0 && sent < last {
            return false;
        }
        let failures = failures.saturating_add(1);
        *self = if failures >= limit {
            Self::Open(now.saturating_add(cool_down))
        } else {
            Self::Closed(failures, now)
        };
        failures >= limit
    }

    /// A call answered: a closed breaker forgets its failures.
    fn succeeded(&mut self) {
        if let Self::Closed(failures, _) = self {
            *failures = 0;
        }
    }

    /// The report at `now` of the probe sent at `sent`: closed if it succeeded, open for
    /// `cool_down` if not; nothing if it is no longer the current probe. Whether it closed.
    fn probed(&mut self, sent: u64, ok: bool, now: u64, cool_down: u64) -> bool {
        if *self != Self::HalfOpen(sent) {
            return false;
        }
        *self = if ok {
            Self::Closed(0, now)
        } else {
            Self::Open(now.saturating_add(cool_down))
        };
        ok
    }
}

/// A limiter's breaker at work.
pub(super) struct Circuit {
    phase: Mutex<Phase>,
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
    /// The server, for the logs, and the fallbacks logged until it answers again.
    server: Arc<str>,
    fallbacks: Arc<Fallbacks>,
    /// The master of a cluster this circuit stands for (`None`: the one server, or the
    /// cluster's calls to no known master).
    node: Option<Node>,
}

/// A limiter's circuits, made as calls find their servers; none when the breaker is off.
pub(super) struct Breakers {
    /// The one server's, or a cluster's for calls to no known master.
    first: Option<Arc<Circuit>>,
    /// A cluster's masters', by their numbers in the slot map (locked for a lookup per call,
    /// beside a round trip).
    nodes: Mutex<HashMap<u16, Arc<Circuit>>>,
    prefix: String,
}

impl Breakers {
    /// The breakers `backend` asks for in front of `connection` (none when off), told to the
    /// logs as `server` with `fallbacks`.
    pub(super) fn new(
        backend: &RedisBackend,
        connection: &Connection,
        (server, fallbacks): (Arc<str>, Arc<Fallbacks>),
    ) -> Self {
        let state = breaker_gauge(&backend.prefix, &server);
        Self {
            first: Circuit::new(backend, connection, (state, server, fallbacks)),
            nodes: Mutex::default(),
            prefix: backend.prefix.clone(),
        }
    }

    /// The circuit of a call whose first key is `key` (none when off).
    pub(super) fn of(&self, connection: &Connection, key: Option<&[u8]>) -> Option<Arc<Circuit>> {
        let first = self.first.as_ref()?;
        let Some(node) = key.and_then(|key| connection.node_of(key)) else {
            return Some(Arc::clone(first));
        };
        let mut nodes = self.nodes.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(circuit) = nodes.get(&node) {
            return Some(Arc::clone(circuit));
        }
        // A new master (a failover, a slot moved): the circuits of servers that serve no slot
        // any more are dropped, so that none stays open for good, unasked.
        nodes.retain(|&node, circuit| connection.serves(node) || circuit.retire());
        let Some(address) = connection.address(node) else {
            return Some(Arc::clone(first));
        };
        let server: Arc<str> = format!("{}:{}", address.0, address.1).into();
        let state = breaker_gauge(&self.prefix, &server);
        let circuit = Arc::new(first.sibling(address, server, state));
        nodes.insert(node, Arc::clone(&circuit));
        Some(circuit)
    }

    /// Where the breakers stand: open if one is, else half open if one is, else closed with
    /// the most failures any counts ([`BreakerState::Off`] without breakers). In a cluster
    /// whose slots all have a master, only the masters' count.
    pub(super) fn state(&self, connection: &Connection) -> BreakerState {
        let Some(first) = &self.first else {
            return BreakerState::Off;
        };
        let mut nodes = self.nodes.lock().unwrap_or_else(PoisonError::into_inner);
        nodes.retain(|&node, circuit| connection.serves(node) || circuit.retire());
        let first = (!connection.mapped()).then_some(first);
        let states = first.into_iter().chain(nodes.values()).map(|c| c.state());
        states.fold(
            BreakerState::Closed { failures: 0 },
            |worst, state| match (worst, state) {
                (BreakerState::Open, _) | (_, BreakerState::Open) => BreakerState::Open,
                (BreakerState::HalfOpen, _) | (_, BreakerState::HalfOpen) => BreakerState::HalfOpen,
                (BreakerState::Closed { failures: a }, BreakerState::Closed { failures: b }) => {
                    BreakerState::Closed { failures: a.max(b) }
                }
                (other, _) => other,
            },
        )
    }
}

impl Circuit {
    /// The breaker `backend` asks for in front of `connection` (none when it is off), its
    /// state shown on `state` and told to the logs with `server` and `fallbacks`, its probes
    /// spawned on the current runtime.
    fn new(
        backend: &RedisBackend,
        connection: &Connection,
        (state, server, fallbacks): (Gauge, Arc<str>, Arc<Fallbacks>),
    ) -> Option<Arc<Self>> {
        let settings = backend.breaker;
        (!settings.is_off()).then(|| {
            Arc::new(Self {
                phase: Mutex::new(Phase::Closed(0, 0)),
                failures: u64::from(settings.failures()),
                cool_down: nanos(settings.cool_down()),
                overdue: nanos(backend.timeout.saturating_add(settings.cool_down())),
                origin: Instant::now(),
                connection: connection.clone(),
                timeout: backend.timeout,
                runtime: Handle::current(),
                state,
                server,
                fallbacks,
                node: None,
            })
        })
    }

    /// A closed circuit with this one's settings, for the master `node` (named `server`, its
    /// state shown on `state`).
    fn sibling(&self, node: Node, server: Arc<str>, state: Gauge) -> Self {
        Self {
            phase: Mutex::new(Phase::Closed(0, 0)),
            origin: Instant::now(),
            connection: self.connection.clone(),
            runtime: self.runtime.clone(),
            fallbacks: Arc::clone(&self.fallbacks),
            node: Some(node),
            server,
            state,
            ..*self
        }
    }

    /// The breaker's clock, in ns: what a call's sending time is read on.
    pub(super) fn now(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// The phase, for a few instructions. Every transition leaves a whole phase, so one that a
    /// panicking thread left is still one.
    fn phase(&self) -> std::sync::MutexGuard<'_, Phase> {
        self.phase.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a call may go to Redis now. When the cool-down is over, the first caller to
    /// ask starts the probe and is refused like the others.
    pub(super) fn allows(self: &Arc<Self>) -> bool {
        let gate = self.phase().gate(|| self.now(), self.overdue);
        match gate {
            Gate::Call => true,
            Gate::Refuse => false,
            Gate::Probe(sent) => {
                self.state.set(1.0);
                // On the runtime polling this decision if there is one (the limiter's own may
                // have been shut down, or be idle); a probe lost all the same is replaced once
                // overdue.
                let runtime = Handle::try_current().unwrap_or_else(|_| self.runtime.clone());
                runtime.spawn(Arc::clone(self).probe(sent));
                false
            }
        }
    }

    /// A call answered: a closed breaker forgets its failures.
    pub(super) fn succeeded(&self) {
        self.phase().succeeded();
    }

    /// A call sent at `sent` (the breaker's [`now`](Self::now)) failed.
    pub(super) fn failed(&self, sent: u64) {
        let now = self.now();
        if self
            .phase()
            .failed((sent, now), self.failures, self.cool_down)
        {
            self.state.set(2.0);
            events::opened(
                &self.server,
                self.failures,
                Duration::from_nanos(self.cool_down),
            );
        }
    }

    /// A circuit whose server serves no slot any more: its gauge says closed, and it goes
    /// (false, for `retain`).
    fn retire(&self) -> bool {
        self.state.set(0.0);
        false
    }

    /// The breaker's state now.
    pub(super) fn state(&self) -> BreakerState {
        match *self.phase() {
            Phase::Closed(failures, _) => BreakerState::Closed { failures },
            Phase::Open(_) => BreakerState::Open,
            Phase::HalfOpen(_) => BreakerState::HalfOpen,
        }
    }

    /// Asks Redis for a `PONG` within the timeout and reports.
    async fn probe(self: Arc<Self>, sent: u64) {
        let ok = (self.connection.ping(self.node.as_ref(), self.timeout).await).is_ok();
        let now = self.now();
        let closed = self.phase().probed(sent, ok, now, self.cool_down);
        self.state.set(if ok { 0.0 } else { 2.0 });
        if closed {
            events::closed(&self.server);
            self.fallbacks.flush(&self.server);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Gate, Phase};

    const COOL: u64 = 100;

    #[test]
    fn opens_at_the_limit_and_a_success_resets_the_count() {
        let mut phase = Phase::Closed(0, 0);
        assert!(!phase.failed((10, 10), 3, COOL));
        assert!(!phase.failed((11, 11), 3, COOL));
        assert_eq!(phase, Phase::Closed(2, 11));
        phase = Phase::Closed(0, 0);
        assert!(!phase.failed((12, 12), 3, COOL));
        assert!(!phase.failed((13, 13), 3, COOL));
        assert!(
            phase.failed((14, 14), 3, COOL),
            "the third failure in a row opens it"
        );
        assert_eq!(phase, Phase::Open(114));
        // A failure of a call sent before it opened changes nothing.
        assert!(!phase.failed((15, 15), 3, COOL));
        assert_eq!(phase, Phase::Open(114));
    }

    #[test]
    fn one_probe_after_the_cool_down_and_its_report_decides() {
        const OVERDUE: u64 = 1_000;
        let mut phase = Phase::Closed(0, 0);
        phase.failed((0, 0), 1, COOL);
        assert_eq!(
            phase.gate(|| 99, OVERDUE),
            Gate::Refuse,
            "still cooling down"
        );
        assert_eq!(phase.gate(|| 100, OVERDUE), Gate::Probe(100));
        assert_eq!(
            phase.gate(|| 500, OVERDUE),
            Gate::Refuse,
            "one probe at a time"
        );
        assert!(
            !phase.failed((500, 500), 1, COOL),
            "a straggler does not reopen it"
        );
        assert_eq!(phase, Phase::HalfOpen(100));
        phase.probed(100, false, 500, COOL);
        assert_eq!(phase, Phase::Open(600));
        assert_eq!(phase.gate(|| 600, OVERDUE), Gate::Probe(600));
        phase.probed(600, true, 601, COOL);
        assert_eq!(phase, Phase::Closed(0, 601));
        let never = || unreachable!("a closed breaker reads no clock");
        assert_eq!(phase.gate(never, OVERDUE), Gate::Call);
    }

    /// Calls in flight together when a failure is seen (one stall, one dropped connection) are
    /// one piece of evidence: only a call sent after the last failure counted counts again.
    #[test]
    fn failures_in_flight_together_count_once() {
        let mut phase = Phase::Closed(0, 0);
        // 500 calls sent from 0 to 499 time out from 1 000 on: the first counts, at 1 000.
        for sent in 0..500 {
            assert!(!phase.failed((sent, 1_000 + sent), 3, COOL));
        }
        assert_eq!(phase, Phase::Closed(1, 1_000));
        // A call sent after that failure was seen fails too: a second piece of evidence.
        assert!(!phase.failed((1_000, 1_100), 3, COOL));
        assert!(!phase.failed((1_050, 1_150), 3, COOL), "in flight at 1 100");
        assert!(phase.failed((1_100, 1_200), 3, COOL), "the third opens it");
        // A success in between starts the count again, wherever the failures were sent.
        let mut phase = Phase::Closed(2, 50);
        phase.succeeded();
        assert!(
            !phase.failed((10, 60), 3, COOL),
            "counted: none since the success"
        );
        assert_eq!(phase, Phase::Closed(1, 60));
    }

    /// A probe that never reports (its task dropped) is replaced once overdue, and its late
    /// report, if it comes, changes nothing; a report from no probe changes nothing.
    #[test]
    fn an_overdue_probe_is_replaced_and_stale_reports_change_nothing() {
        let mut phase = Phase::Closed(0, 0);
        phase.probed(0, true, 0, COOL);
        assert_eq!(phase, Phase::Closed(0, 0));
        phase.failed((0, 0), 1, COOL);
        assert_eq!(phase.gate(|| 100, 50), Gate::Probe(100));
        assert_eq!(phase.gate(|| 149, 50), Gate::Refuse);
        assert_eq!(phase.gate(|| 150, 50), Gate::Probe(150));
        phase.probed(100, true, 160, COOL);
        assert_eq!(phase, Phase::HalfOpen(150), "the lost probe's report");
        phase.probed(150, false, 170, COOL);
        assert_eq!(phase, Phase::Open(170 + COOL));
        // A cool-down past the clock saturates: open for as long as the clock runs.
        let mut forever = Phase::Closed(0, 0);
        forever.failed((u64::MAX - 1, u64::MAX - 1), 1, u64::MAX);
        assert_eq!(forever.gate(|| u64::MAX - 1, 1), Gate::Refuse);
    }
}
