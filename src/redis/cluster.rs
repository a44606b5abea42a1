//! Redis Cluster (feature `redis-cluster`): flowgate's own routing over one connection manager
//! per master, which follows `MOVED` and `ASK` without ever sending a call again that may have
//! run. Decisions over several slots: `across`.
//!
//! # Why its own routing
//! The `redis` crate's cluster client passes every command through a task of its own and, to
//! follow redirects, retries commands after a lost connection too (a script that may have run
//! must not run twice). Here a call goes straight to the connection manager of the master its
//! slot maps to, as a call to one server does: the slot (CRC16 of the hash tag) and one read of
//! the slot map are all it adds.
//!
//! # Redirects, never replays
//! Only answers that say the command did not run are followed: `MOVED` (the slot map learns
//! the new owner and the call goes there), `ASK` (`ASKING` and the call, in one pipeline, to
//! the node named), and `TRYAGAIN`, `CLUSTERDOWN`, `MASTERDOWN`, `LOADING` and `READONLY`
//! (again by slot after a short pause and a fresh map), at most [`MAX_REDIRECTS`] times and
//! within the decision's deadline. A timeout or a lost connection is returned as it is, and
//! the map is asked for again in the background (`CLUSTER SLOTS`, at most every 50 ms): after
//! a failover, the promoted replica takes its master's slots.

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use core::time::Duration;
use std::sync::{Arc, PoisonError, RwLock};

use ::redis::aio::{ConnectionManager, ConnectionManagerConfig};
use ::redis::{
    Arg, Cmd, ConnectionAddr, ConnectionInfo, ErrorKind, RedisResult, ServerErrorKind, Value,
};
use tokio::time::Instant;

use super::script::Sender;
use super::slots::{cluster_slots, key_slot, SLOTS};

/// The most redirects (and pauses) one command follows.
pub(crate) const MAX_REDIRECTS: usize = 8;

/// A slot no known node serves.
const NOWHERE: u16 = u16::MAX;

/// How long a refresh waits for one node before it asks the next.
const ASK_EACH: Duration = Duration::from_millis(250);

/// The least time between two refreshes of the slot map, in ms.
const REFRESH_EVERY_MS: u64 = 50;

/// A connection to a Redis Cluster: cheap to clone (the clones share the slot map and the
/// connections).
#[derive(Clone)]
pub(crate) struct Cluster {
    inner: Arc<Inner>,
}

struct Inner {
    seeds: Vec<ConnectionInfo>,
    config: ConnectionManagerConfig,
    // Not crate::primitive's: read once per call and written on a refresh, a map no loom model
    // needs to explore (the breaker and the leases are the modelled state).
    routes: RwLock<Routes>,
    /// Whether a background refresh is running.
    refreshing: AtomicBool,
    /// No background refresh before this time (ms since `origin`).
    not_before: AtomicU64,
    origin: Instant,
}

/// The slot map: each slot's master, as an index into `nodes`.
#[derive(Default)]
struct Routes {
    slots: Vec<u16>,
    nodes: Vec<Node>,
}

#[derive(Clone)]
struct Node {
    host: String,
    port: u16,
    connection: ConnectionManager,
}

/// Where to send a command next.
enum Target {
    /// To the master of the command's slot.
    Slot,
    /// To the node named, after `ASKING` if `ask`.
    Node { host: String, port: u16, ask: bool },
}

impl Cluster {
    /// A cluster found from `seeds`, each node's connection manager made with `config`. Nothing
    /// connects until the first call.
    pub(crate) fn new(seeds: Vec<ConnectionInfo>, config: ConnectionManagerConfig) -> Self {
        Self {
            inner: Arc::new(Inner {
                seeds,
                config,
                routes: RwLock::default(),
                refreshing: AtomicBool::new(false),
                not_before: AtomicU64::new(0),
                origin: Instant::now(),
            }),
        }
    }

    /// Whether some node answers `CLUSTER SLOTS` (the map is refreshed on the way).
    pub(crate) async fn ping(&self) -> bool {
        self.refresh().await
    }

    /// The connection to `slot`'s master, refreshing the map first if it has none.
    async fn to_slot(&self, slot: u16) -> RedisResult<ConnectionManager> {
        if let Some(connection) = self.known(slot) {
            return Ok(connection);
        }
        self.refresh().await;
        self.known(slot).ok_or_else(|| {
            ::redis::RedisError::from((ErrorKind::Io, "no node of the cluster serves the slot"))
        })
    }

    fn known(&self, slot: u16) -> Option<ConnectionManager> {
        let routes = self
            .inner
            .routes
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        let node = *routes.slots.get(usize::from(slot))?;
        Some(routes.nodes.get(usize::from(node))?.connection.clone())
    }

    /// The connection to `host:port`: a known node's, or a new one (added to the nodes).
    fn to_node(&self, host: &str, port: u16) -> RedisResult<ConnectionManager> {
        let mut routes = self
            .inner
            .routes
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        Ok(self.node_in(&mut routes, host, port)?.1)
    }

    /// The index and connection of `host:port` in `routes`, added if it is new.
    fn node_in(
        &self,
        routes: &mut Routes,
        host: &str,
        port: u16,
    ) -> RedisResult<(u16, ConnectionManager)> {
        if let Some(i) = routes
            .nodes
            .iter()
            .position(|n| n.host == host && n.port == port)
        {
            return Ok((i as u16, routes.nodes[i].connection.clone()));
        }
        let seed = self.inner.seeds.first().cloned();
        let seed = seed.ok_or_else(|| ::redis::RedisError::from((ErrorKind::Client, "no seed")))?;
        let info = seed.set_addr(ConnectionAddr::Tcp(host.to_owned(), port));
        let client = ::redis::Client::open(info)?;
        let config = self.inner.config.clone();
        let connection = ConnectionManager::new_lazy_with_config(client, config)?;
        routes.nodes.push(Node {
            host: host.to_owned(),
            port,
            connection: connection.clone(),
        });
        Ok((routes.nodes.len() as u16 - 1, connection))
    }

    /// `MOVED`: `slot` is served by `host:port` now.
    fn moved(&self, slot: u16, host: &str, port: u16) {
        let mut routes = self
            .inner
            .routes
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        if let Ok((node, _)) = self.node_in(&mut routes, host, port) {
            if routes.slots.len() == SLOTS {
                routes.slots[usize::from(slot)] = node;
            }
        }
    }

    /// Asks the known nodes, then the seeds, for the slot map (`CLUSTER SLOTS`) until one
    /// answers, and takes its answer; whether one did.
    async fn refresh(&self) -> bool {
        let known: Vec<(String, u16, ConnectionManager)> = {
            let routes = self
                .inner
                .routes
                .read()
                .unwrap_or_else(PoisonError::into_inner);
            (routes.nodes.iter())
                .map(|n| (n.host.clone(), n.port, n.connection.clone()))
                .collect()
        };
        let mut asked = Vec::new();
        // Each node gets a moment: a hung one must not keep the others from being asked.
        for (host, port, mut connection) in known {
            let asking = cluster_slots(&mut connection, &host);
            if let Ok(Ok(slots)) = tokio::time::timeout(ASK_EACH, asking).await {
                return self.take(slots);
            }
            asked.push((host, port));
        }
        for seed in &self.inner.seeds {
            let ConnectionAddr::Tcp(host, port) = seed.addr() else {
                continue;
            };
            if asked.iter().any(|(h, p)| h == host && p == port) {
                continue;
            }
            let Ok(client) = ::redis::Client::open(seed.clone()) else {
                continue;
            };
            let connecting = client.get_multiplexed_async_connection();
            let Ok(Ok(mut connection)) = tokio::time::timeout(ASK_EACH, connecting).await else {
                continue;
            };
            let asking = cluster_slots(&mut connection, host);
            if let Ok(Ok(slots)) = tokio::time::timeout(ASK_EACH, asking).await {
                return self.take(slots);
            }
        }
        false
    }

    /// Takes `ranges` (first slot, last slot, master) as the slot map.
    fn take(&self, ranges: Vec<(u16, u16, String, u16)>) -> bool {
        let mut routes = self
            .inner
            .routes
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let mut slots = vec![NOWHERE; SLOTS];
        for (first, last, host, port) in ranges {
            let Ok((node, _)) = self.node_in(&mut routes, &host, port) else {
                continue;
            };
            slots[usize::from(first)..=usize::from(last)].fill(node);
        }
        routes.slots = slots;
        true
    }

    /// Refreshes the map in the background, unless a refresh runs or ran in the last 50 ms.
    fn refresh_soon(&self) {
        let inner = &self.inner;
        let now = u64::try_from(inner.origin.elapsed().as_millis()).unwrap_or(u64::MAX);
        // Relaxed: a rate limit on refreshes, which are idempotent; a refresh more or less
        // changes nothing but the load.
        if now < inner.not_before.load(Ordering::Relaxed)
            || inner.refreshing.swap(true, Ordering::Relaxed)
        {
            return;
        }
        inner
            .not_before
            .store(now + REFRESH_EVERY_MS, Ordering::Relaxed);
        let this = self.clone();
        tokio::spawn(async move {
            let _ = tokio::time::timeout(Duration::from_secs(1), this.refresh()).await;
            this.inner.refreshing.store(false, Ordering::Relaxed);
        });
    }
}

/// What to do after an error: the target to send to next, or `None` if the command may have
/// run (or was refused for good). A redirect also teaches the map (`MOVED`).
fn after(cluster: &Cluster, slot: u16, error: &::redis::RedisError) -> Option<Target> {
    let node = || {
        let (node, _slot) = error.redirect_node()?;
        let (host, port) = node.rsplit_once(':')?;
        Some((host.to_owned(), port.parse::<u16>().ok()?))
    };
    match error.kind() {
        ErrorKind::Server(ServerErrorKind::Moved) => {
            let (host, port) = node()?;
            cluster.moved(slot, &host, port);
            Some(Target::Slot)
        }
        ErrorKind::Server(ServerErrorKind::Ask) => {
            let (host, port) = node()?;
            Some(Target::Node {
                host,
                port,
                ask: true,
            })
        }
        ErrorKind::Server(
            ServerErrorKind::TryAgain
            | ServerErrorKind::ClusterDown
            | ServerErrorKind::MasterDown
            | ServerErrorKind::BusyLoading
            | ServerErrorKind::ReadOnly,
        ) => {
            cluster.refresh_soon();
            Some(Target::Slot)
        }
        _ => {
            if error.is_io_error() || error.is_connection_dropped() || error.is_timeout() {
                cluster.refresh_soon();
            }
            None
        }
    }
}

impl Sender for Cluster {
    async fn send(&mut self, command: &Cmd) -> RedisResult<Value> {
        // The first key (`EVALSHA sha numkeys key …`); a command without one goes to slot 0's
        // master.
        let slot = match command.args_iter().nth(3) {
            Some(Arg::Simple(key)) => key_slot(key),
            _ => 0,
        };
        let mut target = Target::Slot;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let result = match &target {
                Target::Slot => self.to_slot(slot).await?.send_packed_command(command).await,
                Target::Node { host, port, ask } => {
                    let mut connection = self.to_node(host, *port)?;
                    if *ask {
                        let mut pipeline = ::redis::pipe();
                        pipeline.cmd("ASKING").add_command(command.clone());
                        let mut values = connection.send_packed_commands(&pipeline, 1, 1).await?;
                        values.pop().ok_or_else(|| {
                            ::redis::RedisError::from((ErrorKind::Parse, "no reply after ASKING"))
                        })
                    } else {
                        connection.send_packed_command(command).await
                    }
                }
            };
            // A server's error reply arrives as a value.
            let error = match result.and_then(Value::extract_error) {
                Ok(value) => return Ok(value),
                Err(error) => error,
            };
            let next = match after(self, slot, &error) {
                Some(next) if attempt < MAX_REDIRECTS => next,
                _ => return Err(error),
            };
            if !matches!(
                server_kind(&error),
                Some(ServerErrorKind::Moved | ServerErrorKind::Ask)
            ) {
                // Moving or failing over: give the cluster a moment.
                tokio::time::sleep(Duration::from_millis(5 << attempt.min(4))).await;
            }
            target = next;
        }
    }
}

/// The server error kind of `error`, if it is one.
fn server_kind(error: &::redis::RedisError) -> Option<ServerErrorKind> {
    match error.kind() {
        ErrorKind::Server(kind) => Some(kind),
        _ => None,
    }
}
