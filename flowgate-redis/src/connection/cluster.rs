//! Redis Cluster (feature `cluster`): flowgate's own routing over one connection manager
//! per master, which follows `MOVED` and `ASK` without ever sending a call again that may have
//! run. Decisions over several slots: `limiter/across.rs`.
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
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use ::redis::aio::{ConnectionManager, ConnectionManagerConfig};
use ::redis::{
    Arg, Cmd, ConnectionAddr, ConnectionInfo, ErrorKind, RedisResult, ServerErrorKind, Value,
};
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::redirect::{after, server_kind, Learn, Target};
use super::slots::{cluster_slots, key_slot, Node, Routes, NOWHERE, SLOTS};
use super::Master;
use crate::script::Sender;

/// The most redirects (and pauses) one command follows.
pub(crate) const MAX_REDIRECTS: usize = 8;

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
    // A lock and std's atomics: the map is read once per call and written on a refresh; the
    // flags only rate-limit refreshes (each ordering says why it suffices).
    routes: RwLock<Routes>,
    /// Whether a background refresh is running.
    refreshing: AtomicBool,
    /// No background refresh before this time (ms since `origin`).
    not_before: AtomicU64,
    origin: Instant,
    /// Told when a refresh ends, whatever it found.
    refreshed: Notify,
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
                refreshed: Notify::new(),
            }),
        }
    }

    /// Whether the master `node` answers a `PING` within `wait` (the map is refreshed in the
    /// background meanwhile: a master that failed over serves its slots no more, and calls
    /// for them go to the new one once the map says so); without one, whether some node
    /// answers `CLUSTER SLOTS` (the map is refreshed on the way).
    pub(crate) async fn ping(&self, node: Option<&Master>, wait: Duration) -> Result<(), String> {
        let Some((host, port)) = node else {
            let refreshed = tokio::time::timeout(wait, self.refresh()).await;
            let why = || format!("no node answered CLUSTER SLOTS within {wait:?}");
            return refreshed.unwrap_or(false).then_some(()).ok_or_else(why);
        };
        self.refresh_soon(false);
        let mut connection = self.to_node(host, *port).map_err(|e| e.to_string())?;
        super::ping(&mut connection, wait).await
    }

    /// The number of the master that serves `slot`, if the map knows one.
    pub(crate) fn master_of(&self, slot: u16) -> Option<u16> {
        let routes = self.routes();
        let node = *routes.slots.get(usize::from(slot))?;
        (usize::from(node) < routes.nodes.len()).then_some(node)
    }

    /// Where the node numbered `node` is.
    pub(crate) fn address(&self, node: u16) -> Option<Master> {
        let routes = self.routes();
        let node = routes.nodes.get(usize::from(node))?;
        Some((node.host.clone(), node.port))
    }

    /// The slot map, to read; a writer that panicked left a whole map.
    fn routes(&self) -> RwLockReadGuard<'_, Routes> {
        self.inner
            .routes
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The slot map, to change.
    fn routes_mut(&self) -> RwLockWriteGuard<'_, Routes> {
        self.inner
            .routes
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the node numbered `node` serves a slot.
    pub(crate) fn serves(&self, node: u16) -> bool {
        self.routes().slots.contains(&node)
    }

    /// Whether every slot has a master.
    pub(crate) fn mapped(&self) -> bool {
        self.routes().mapped()
    }

    /// What `read` reads of `slot`'s master, if the map knows one.
    fn serving<T>(&self, slot: u16, read: impl FnOnce(&Node) -> T) -> Option<T> {
        self.routes().master(slot).map(read)
    }

    /// Whether the slot map can be learned and every master in it answers a `PING`, each within
    /// `wait`: `Err` names one that does not (`host:port`; empty if no node gave the map) and
    /// why.
    pub(crate) async fn ready(&self, wait: Duration) -> Result<(), (String, String)> {
        self.ping(None, wait)
            .await
            .map_err(|why| (String::new(), why))?;
        let masters: Vec<Master> = (self.routes().masters())
            .map(|node| (node.host.clone(), node.port))
            .collect();
        for master in &masters {
            let pinged = self.ping(Some(master), wait).await;
            pinged.map_err(|why| (format!("{}:{}", master.0, master.1), why))?;
        }
        Ok(())
    }

    /// The connection to `slot`'s master, learning the map first if it has none. The map is
    /// learned by a task of its own, which a decision only waits for: a decision whose deadline
    /// ends first leaves it to finish for the next, and concurrent decisions share it.
    async fn to_slot(&self, slot: u16) -> RedisResult<ConnectionManager> {
        if let Some(connection) = self.known(slot) {
            return Ok(connection);
        }
        let refreshed = self.inner.refreshed.notified();
        tokio::pin!(refreshed);
        refreshed.as_mut().enable();
        self.refresh_soon(true);
        if self.known(slot).is_none() {
            refreshed.await;
        }
        self.known(slot).ok_or_else(|| {
            ::redis::RedisError::from((ErrorKind::Io, "no node of the cluster serves the slot"))
        })
    }

    fn known(&self, slot: u16) -> Option<ConnectionManager> {
        self.serving(slot, |node| node.connection.clone())
    }

    /// The connection to `host:port`: a known node's, or a new one (added to the nodes).
    fn to_node(&self, host: &str, port: u16) -> RedisResult<ConnectionManager> {
        let mut routes = self.routes_mut();
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
            // Below NOWHERE: a node is only added while its index fits (below).
            return Ok((i as u16, routes.nodes[i].connection.clone()));
        }
        // Indices stop below NOWHERE (u16::MAX), which marks a slot no node serves.
        let index = u16::try_from(routes.nodes.len())
            .ok()
            .filter(|&i| i < NOWHERE)
            .ok_or_else(|| ::redis::RedisError::from((ErrorKind::Client, "too many nodes")))?;
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
        Ok((index, connection))
    }

    /// `MOVED`: `slot` is served by `host:port` now.
    pub(crate) fn moved(&self, slot: u16, host: &str, port: u16) {
        let mut routes = self.routes_mut();
        if let Ok((node, _)) = self.node_in(&mut routes, host, port) {
            if routes.slots.len() == SLOTS {
                routes.slots[usize::from(slot)] = node;
            }
        }
    }

    /// Asks every known node and every seed at once for the slot map (`CLUSTER SLOTS`, each
    /// for at most 250 ms: a hung node holds up nobody) and takes the first answer that covers
    /// every slot, or else the one that covers most (an empty answer, from a node that left
    /// the cluster, is never taken); whether one was taken.
    async fn refresh(&self) -> bool {
        let mut asks = JoinSet::new();
        let mut asked = Vec::new();
        {
            let routes = self.routes();
            for node in &routes.nodes {
                let (host, mut connection) = (node.host.clone(), node.connection.clone());
                asked.push((node.host.clone(), node.port));
                asks.spawn(async move {
                    let asking = cluster_slots(&mut connection, &host);
                    tokio::time::timeout(ASK_EACH, asking).await.ok()?.ok()
                });
            }
        }
        for seed in &self.inner.seeds {
            let ConnectionAddr::Tcp(host, port) = seed.addr() else {
                continue;
            };
            if asked.iter().any(|(h, p)| h == host && p == port) {
                continue;
            }
            let (seed, host) = (seed.clone(), host.clone());
            asks.spawn(async move {
                let client = ::redis::Client::open(seed).ok()?;
                let connecting = client.get_multiplexed_async_connection();
                let mut connection = tokio::time::timeout(ASK_EACH, connecting)
                    .await
                    .ok()?
                    .ok()?;
                let asking = cluster_slots(&mut connection, &host);
                tokio::time::timeout(ASK_EACH, asking).await.ok()?.ok()
            });
        }
        let covered = |ranges: &[(u16, u16, String, u16)]| -> usize {
            let span = |(first, last, ..): &(u16, u16, String, u16)| usize::from(last - first) + 1;
            ranges.iter().map(span).sum()
        };
        let mut best: Option<Vec<_>> = None;
        while let Some(joined) = asks.join_next().await {
            let Ok(Some(ranges)) = joined else {
                continue;
            };
            if covered(&ranges) >= SLOTS {
                asks.abort_all();
                return self.take(ranges);
            }
            if best.as_ref().is_none_or(|b| covered(&ranges) > covered(b)) {
                best = Some(ranges);
            }
        }
        match best {
            Some(ranges) if !ranges.is_empty() => self.take(ranges),
            _ => false,
        }
    }

    /// Takes `ranges` (first slot, last slot, master) into the slot map; a slot they do not
    /// cover keeps its master.
    fn take(&self, ranges: Vec<(u16, u16, String, u16)>) -> bool {
        let mut routes = self.routes_mut();
        let mut slots = core::mem::take(&mut routes.slots);
        slots.resize(SLOTS, NOWHERE);
        for (first, last, host, port) in ranges {
            let Ok((node, _)) = self.node_in(&mut routes, &host, port) else {
                continue;
            };
            slots[usize::from(first)..=usize::from(last)].fill(node);
        }
        routes.slots = slots;
        true
    }

    /// Refreshes the map in a task of its own, unless one runs, or (unless `now`) one ran in
    /// the last 50 ms. Waiters are told when it ends ([`Inner::refreshed`]).
    pub(crate) fn refresh_soon(&self, now: bool) {
        let inner = &self.inner;
        let ms = u64::try_from(inner.origin.elapsed().as_millis()).unwrap_or(u64::MAX);
        // Relaxed: a rate limit on refreshes, which are idempotent; a refresh more or less
        // changes nothing but the load.
        if (!now && ms < inner.not_before.load(Ordering::Relaxed))
            || inner.refreshing.swap(true, Ordering::Relaxed)
        {
            return;
        }
        // Relaxed: as above, a rate limit.
        inner
            .not_before
            .store(ms.saturating_add(REFRESH_EVERY_MS), Ordering::Relaxed);
        let this = self.clone();
        tokio::spawn(async move {
            let _ = tokio::time::timeout(Duration::from_secs(1), this.refresh()).await;
            // Relaxed: the map itself is published by its RwLock, not by this flag.
            this.inner.refreshing.store(false, Ordering::Relaxed);
            this.inner.refreshed.notify_waiters();
        });
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
                        let sent = connection.send_packed_commands(&pipeline, 1, 1).await;
                        sent.and_then(|mut values| {
                            values.pop().ok_or_else(|| {
                                let what = "no reply after ASKING";
                                ::redis::RedisError::from((ErrorKind::Parse, what))
                            })
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
            let (next, learn) = after(&error);
            match learn {
                Learn::Nothing => {}
                Learn::Moved { host, port } => self.moved(slot, &host, port),
                Learn::Refresh => self.refresh_soon(false),
            }
            let next = match next {
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
