//! A real Redis Cluster for tests: three masters with one replica each, six `redis-server`
//! processes started with `--cluster-enabled yes` on free loopback ports and joined by
//! `redis-cli --cluster create --cluster-replicas 1`, with the two events a cluster client has
//! to survive on demand: a master killed (`SIGKILL`) and its replica promoted, and a slot
//! migrated live in steps (`ASK` redirects while it moves, `MOVED` after). Nothing is persisted,
//! and every process is killed by its pid when the cluster is dropped, by a panicking test too.
//!
//! Both programs come from Debian's packages, which `scripts/install-redis` installs. Without
//! them [`RedisCluster::start`] fails loudly.
//!
//! Every wait here polls at most a stated number of times within a stated time and, when it
//! gives up, says what it was still waiting for.
//!
//! # Shards
//! The cluster is created as three shards, numbered by the slots they were given (shard 0 holds
//! slots 0-5460): a master and its replica. A shard keeps its number when its replica takes
//! over, so [`RedisCluster::masters`]`()[i]` is shard `i`'s current master before and after a
//! failover, and after slots move.
#![allow(dead_code)]

#[path = "redis_server.rs"]
pub mod redis_server;

use std::collections::BTreeSet;
use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use redis_server::free_port;

/// Shards: masters at start, each with one replica.
const SHARDS: usize = 3;
/// Hash slots in every Redis Cluster.
const SLOTS: usize = 16_384;
/// How long a node may be silent before it is suspected to have failed: small, so that a
/// failover takes about three times this; large enough that a busy 2-core machine does not
/// fail a healthy node over.
const NODE_TIMEOUT: Duration = Duration::from_millis(500);
/// How often a wait looks again.
const POLL: Duration = Duration::from_millis(20);
/// Whole start-ups tried before giving up (a free port may be taken before a node binds it).
const START_ATTEMPTS: usize = 3;
/// For one node to answer `PING` after it was spawned.
const PING_LIMIT: Duration = Duration::from_secs(5);
/// For `redis-cli --cluster create` (it sleeps a second between its own checks).
const CREATE_LIMIT: Duration = Duration::from_secs(20);
/// For every node to agree on the slots, say `cluster_state:ok`, and every replica to sync.
const SETTLE_LIMIT: Duration = Duration::from_secs(15);
/// For a replica to take over from a killed master (about three node timeouts are expected).
const FAILOVER_LIMIT: Duration = Duration::from_secs(15);
/// For one `redis-cli` run that is not `--cluster create`.
const CLI_LIMIT: Duration = Duration::from_secs(10);
/// For a connection to a node, and then for each reply.
const CONNECT_LIMIT: Duration = Duration::from_secs(1);
const REPLY_LIMIT: Duration = Duration::from_secs(5);
/// Keys per `MIGRATE`: `redis-cli --cluster reshard`'s default (its `--cluster-pipeline`).
const MIGRATE_BATCH: usize = 10;
/// `MIGRATE`'s own timeout, in milliseconds.
const MIGRATE_TIMEOUT_MS: u64 = 5_000;
/// The most batches one [`RedisCluster::move_keys`] sends, and the time it may take.
const MAX_BATCHES: usize = 100_000;
const MOVE_LIMIT: Duration = Duration::from_secs(60);

/// Three masters and three replicas on 127.0.0.1, killed when dropped.
pub struct RedisCluster {
    /// By shard: `nodes[2 * i]` started as shard `i`'s master, `nodes[2 * i + 1]` as its replica.
    nodes: Vec<Process>,
    dir: PathBuf,
    started_in: Duration,
}

/// One `redis-server` of the cluster.
struct Process {
    /// `None` once killed. A mutex so that a test can kill a node while other threads use the
    /// cluster through `&RedisCluster`.
    child: Mutex<Option<Child>>,
    port: u16,
    pid: u32,
    /// The cluster's name for it (`CLUSTER MYID`), known once the cluster is created.
    id: String,
}

/// A node of the cluster, as the cluster reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterNode {
    /// Its client port on 127.0.0.1.
    pub port: u16,
    /// Its process.
    pub pid: u32,
    /// Its node id (40 hex digits).
    pub id: String,
}

impl ClusterNode {
    /// `redis://127.0.0.1:port/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// `127.0.0.1:port`, as `MOVED` and `ASK` name it.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

/// A master killed by [`RedisCluster::kill_master`], to wait for its replica with
/// [`RedisCluster::wait_for_failover`].
#[derive(Clone, Debug)]
pub struct Killed {
    /// The master, as it was before the kill.
    pub master: ClusterNode,
    /// Its replica, which is to take over.
    pub replica: ClusterNode,
    /// When it was killed.
    pub at: Instant,
}

/// A slot on its way from one master to another ([`RedisCluster::begin_migration`]): the source
/// `MIGRATING`, the target `IMPORTING`, until [`RedisCluster::finish_migration`].
#[derive(Clone, Debug)]
pub struct Migration {
    /// The slot.
    pub slot: u16,
    /// Its owner until the migration finishes.
    pub from: ClusterNode,
    /// Its owner after.
    pub to: ClusterNode,
}

impl RedisCluster {
    /// Starts six nodes, creates the cluster with `redis-cli --cluster create --cluster-replicas
    /// 1 --cluster-yes`, and waits until every node says `cluster_state:ok`, all agree on who
    /// serves all 16384 slots, and every replica's link to its master is up.
    ///
    /// # Panics
    /// If a program is missing, or none of three attempts (new ports each) comes up within its
    /// limits; the message has each attempt's error and the tail of its nodes' logs.
    pub fn start() -> Self {
        let start = Instant::now();
        let mut errors = Vec::new();
        for _ in 0..START_ATTEMPTS {
            match Self::try_start() {
                Ok(mut cluster) => {
                    cluster.started_in = start.elapsed();
                    return cluster;
                }
                // The attempt's processes were killed when its cluster was dropped.
                Err(error) => errors.push(error),
            }
        }
        panic!(
            "no Redis Cluster in {START_ATTEMPTS} attempts ({:?}):\n{}",
            start.elapsed(),
            errors.join("\n---\n")
        );
    }

    fn try_start() -> Result<Self, String> {
        let ports = distinct_free_ports(2 * SHARDS * 2)?;
        let dir = std::env::temp_dir().join(format!(
            "flowgate-redis-cluster-{}-{}",
            std::process::id(),
            ports[0]
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("scratch directory: {e}"))?;
        let mut cluster = Self {
            nodes: Vec::new(),
            dir,
            started_in: Duration::ZERO,
        };
        for pair in ports.chunks(2) {
            let process = cluster.spawn(pair[0], pair[1]);
            // Pushed before it is checked: a node that fails is still killed on drop.
            cluster.nodes.push(process?);
        }
        for node in &cluster.nodes {
            cluster.wait_for_ping(node)?;
        }
        let create = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(cluster.nodes.iter().map(|node| address(node.port)))
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| missing("redis-cli", &e));
        let output = run_bounded(create?, CREATE_LIMIT)
            .map_err(|e| cluster.with_logs(&format!("redis-cli --cluster create: {e}")))?;
        if !output.contains("All 16384 slots covered") {
            return Err(cluster.with_logs(&format!("redis-cli --cluster create said:\n{output}")));
        }
        for index in 0..cluster.nodes.len() {
            let id: String = query(cluster.nodes[index].port, redis::cmd("CLUSTER").arg("MYID"))
                .map_err(|e| format!("CLUSTER MYID: {e}"))?;
            cluster.nodes[index].id = id;
        }
        wait_until("the new cluster to settle", SETTLE_LIMIT, || {
            cluster.settled()
        })
        .map_err(|e| cluster.with_logs(&e))?;
        // Once settled: right after the create, gossip may not have told the first node yet
        // which nodes are replicas.
        cluster.order_by_shard()?;
        Ok(cluster)
    }

    /// Spawns one node on `port` (cluster bus on `bus_port`) in its own scratch directory.
    fn spawn(&self, port: u16, bus_port: u16) -> Result<Process, String> {
        let dir = self.node_dir(port);
        std::fs::create_dir_all(&dir).map_err(|e| format!("scratch directory: {e}"))?;
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args([
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
            ])
            // The bus port is given, not derived (port + 10000 can pass 65535).
            .args(["--cluster-port", &bus_port.to_string()])
            .args([
                "--cluster-node-timeout",
                &NODE_TIMEOUT.as_millis().to_string(),
            ])
            // A replica takes over however long ago it heard from its master.
            .args(["--cluster-replica-validity-factor", "0"])
            // The healthy masters keep serving their slots while one is down (the default
            // refuses every command, CLUSTERDOWN, until the failed master's slots are served).
            .args(["--cluster-require-full-coverage", "no"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            // A replica's first sync starts at once (the default waits 5 s for more replicas).
            .args(["--repl-diskless-sync-delay", "0"])
            .args(["--enable-debug-command", "local", "--loglevel", "notice"])
            .arg("--logfile")
            .arg(dir.join("redis.log"))
            .arg("--dir")
            .arg(&dir)
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| missing("redis-server", &e))?;
        Ok(Process {
            pid: child.id(),
            child: Mutex::new(Some(child)),
            port,
            id: String::new(),
        })
    }

    fn node_dir(&self, port: u16) -> PathBuf {
        self.dir.join(format!("node-{port}"))
    }

    fn wait_for_ping(&self, node: &Process) -> Result<(), String> {
        wait_until("a new node to answer PING", PING_LIMIT, || {
            // Exited first: a node that could not bind must not be mistaken for another
            // process's server answering on the same port.
            if let Some(child) = lock(&node.child).as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(format!("redis-server exited with {status}"));
                }
            }
            query::<String>(node.port, &redis::cmd("PING")).map_err(|e| e.to_string())
        })
        .map(drop)
        .map_err(|e| self.with_logs(&format!("port {}: {e}", node.port)))
    }

    /// Puts `nodes` in shard order, from the first node's view: masters by their first slot,
    /// each followed by its replica.
    fn order_by_shard(&mut self) -> Result<(), String> {
        let view = view_of(self.nodes[0].port)?;
        let mut masters: Vec<&Entry> = view.iter().filter(|e| !e.slots.is_empty()).collect();
        masters.sort_by_key(|e| e.slots.iter().map(|r| r.0).min());
        let mut order = Vec::new();
        for master in &masters {
            let replicas: Vec<&Entry> = view
                .iter()
                .filter(|e| e.master.as_deref() == Some(master.id.as_str()))
                .collect();
            if replicas.len() != 1 {
                return Err(format!(
                    "master {} has {} replicas, not one: {view:?}",
                    master.port,
                    replicas.len()
                ));
            }
            order.extend([master.id.clone(), replicas[0].id.clone()]);
        }
        if masters.len() != SHARDS {
            return Err(format!(
                "{} masters hold slots, not {SHARDS}",
                masters.len()
            ));
        }
        let mut by_id: Vec<Option<Process>> = self.nodes.drain(..).map(Some).collect();
        for id in &order {
            let index = by_id
                .iter()
                .position(|p| p.as_ref().is_some_and(|p| &p.id == id))
                .ok_or_else(|| format!("node {id} is not one of ours"))?;
            self.nodes.extend(by_id[index].take());
        }
        // Any left over (none expected) are still ours to kill.
        self.nodes.extend(by_id.into_iter().flatten());
        Ok(())
    }

    /// The error `error` with the last lines of every node's log, to say why a start failed.
    fn with_logs(&self, error: &str) -> String {
        let mut message = error.to_owned();
        for node in &self.nodes {
            let log = std::fs::read_to_string(self.node_dir(node.port).join("redis.log"))
                .unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            let tail = lines[lines.len().saturating_sub(5)..].join("\n    ");
            message += &format!("\n  node {} log:\n    {tail}", node.port);
        }
        message
    }

    /// How long [`start`](Self::start) took, retries included.
    pub fn started_in(&self) -> Duration {
        self.started_in
    }

    /// Every node whose process runs, in shard order (a master, then its replica).
    pub fn nodes(&self) -> Vec<ClusterNode> {
        self.live().map(Process::node).collect()
    }

    /// `redis://127.0.0.1:port/` of every node whose process runs.
    pub fn urls(&self) -> Vec<String> {
        self.nodes().iter().map(ClusterNode::url).collect()
    }

    /// The URLs of the current masters: the initial nodes to give a cluster client (it finds
    /// the replicas itself).
    pub fn seed_urls(&self) -> Vec<String> {
        self.masters().iter().map(ClusterNode::url).collect()
    }

    /// The current master of each shard, in shard order, as a running node sees the cluster.
    /// A shard whose master was killed is missing until its replica has taken over.
    pub fn masters(&self) -> Vec<ClusterNode> {
        let view = self.view();
        // Whether a node runs is ours to know; the cluster's `fail?` flags are opinions that
        // come and go with a slow pong.
        self.nodes
            .chunks(2)
            .filter_map(|shard| {
                shard.iter().find(|node| {
                    node.is_alive() && view.iter().any(|e| e.id == node.id && e.is_master())
                })
            })
            .map(Process::node)
            .collect()
    }

    /// A running replica of `master`, as a running node sees the cluster (none after its
    /// replica took over from a killed master).
    pub fn replica_of(&self, master: &ClusterNode) -> Option<ClusterNode> {
        let view = self.view();
        self.live()
            .find(|node| {
                view.iter()
                    .any(|e| e.id == node.id && e.master.as_deref() == Some(master.id.as_str()))
            })
            .map(Process::node)
    }

    /// The hash slot of `key` (`CLUSTER KEYSLOT`, asked of a running node).
    pub fn slot_of(&self, key: &str) -> u16 {
        let node = self.live().next().expect("a running node").node();
        self.query(&node, redis::cmd("CLUSTER").arg("KEYSLOT").arg(key))
    }

    /// The master that serves `slot`, as a running master sees the cluster (all nodes
    /// agree once [`start`](Self::start), [`wait_for_failover`](Self::wait_for_failover) or
    /// [`finish_migration`](Self::finish_migration) returned).
    ///
    /// # Panics
    /// If no node serves it.
    pub fn node_for_slot(&self, slot: u16) -> ClusterNode {
        let owner = self
            .view()
            .into_iter()
            .find(|e| e.serves(slot))
            .unwrap_or_else(|| panic!("no node serves slot {slot}"));
        self.by_id(&owner.id)
    }

    /// Sends `command` to `node` on a fresh connection (1 s to connect, 5 s for the reply) and
    /// returns its reply or error, without following a redirect: `MOVED` and `ASK` come back
    /// as errors (`error.code()`, `error.redirect_node()`).
    pub fn command<T: redis::FromRedisValue>(
        &self,
        node: &ClusterNode,
        command: &redis::Cmd,
    ) -> redis::RedisResult<T> {
        query(node.port, command)
    }

    /// Runs `redis-cli -c` against `node` with `args` (the command and its arguments; `-c`
    /// follows `MOVED` and `ASK`) and returns what it printed, trimmed.
    ///
    /// # Panics
    /// If it cannot run, fails, or takes more than ten seconds.
    pub fn cli(&self, node: &ClusterNode, args: &[&str]) -> String {
        let child = Command::new("redis-cli")
            .args(["-c", "-h", "127.0.0.1", "-p", &node.port.to_string()])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{}", missing("redis-cli", &e)));
        run_bounded(child, CLI_LIMIT)
            .unwrap_or_else(|e| panic!("redis-cli -c -p {} {args:?}: {e}", node.port))
            .trim()
            .to_owned()
    }

    /// Kills shard `index`'s current master at once (`SIGKILL` to its pid, as `kill -9`),
    /// noting its replica and the time.
    ///
    /// # Panics
    /// If there is no such shard or its master has no running replica.
    pub fn kill_master(&self, index: usize) -> Killed {
        let masters = self.masters();
        let master = masters
            .get(index)
            .unwrap_or_else(|| panic!("no master {index} of {}", masters.len()))
            .clone();
        let replica = self
            .replica_of(&master)
            .unwrap_or_else(|| panic!("master {} has no replica to take over", master.port));
        let process = self.process(&master.id);
        let at = Instant::now();
        process.kill();
        Killed {
            master,
            replica,
            at,
        }
    }

    /// Waits until the killed master's replica says `role:master`, every running node says
    /// `cluster_state:ok` and all agree on the slots (the replica now serving the killed
    /// master's), and returns how long that took from the kill.
    ///
    /// # Panics
    /// If that takes more than fifteen seconds from the kill.
    pub fn wait_for_failover(&self, killed: &Killed) -> Duration {
        let limit = FAILOVER_LIMIT.saturating_sub(killed.at.elapsed());
        let what = format!("replica {} to take over", killed.replica.port);
        wait_until(&what, limit, || {
            let info: String = query(killed.replica.port, redis::cmd("INFO").arg("replication"))
                .map_err(|e| e.to_string())?;
            if field(&info, "role") != Some("master") {
                return Err(format!("replica {} is not master yet", killed.replica.port));
            }
            self.settled()
        })
        .unwrap_or_else(|e| panic!("{e}"));
        killed.at.elapsed()
    }

    /// Starts moving `slot` from master `from` to master `to` as `redis-cli --cluster reshard`
    /// does: `CLUSTER SETSLOT slot IMPORTING from` on the target, then `MIGRATING to` on the
    /// source. Until [`finish_migration`](Self::finish_migration), the source answers for the
    /// keys it still holds and sends `ASK` for the others.
    ///
    /// # Panics
    /// If `from` does not serve `slot` or a node refuses.
    pub fn begin_migration(&self, slot: u16, from: &ClusterNode, to: &ClusterNode) -> Migration {
        let owner = self.node_for_slot(slot);
        assert_eq!(owner, *from, "slot {slot} is not served by {}", from.port);
        let _: String = self.query(
            to,
            redis::cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(slot)
                .arg("IMPORTING")
                .arg(&from.id),
        );
        let _: String = self.query(
            from,
            redis::cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(slot)
                .arg("MIGRATING")
                .arg(&to.id),
        );
        Migration {
            slot,
            from: from.clone(),
            to: to.clone(),
        }
    }

    /// Moves at most `limit` of the slot's keys still on the source to the target
    /// (`CLUSTER GETKEYSINSLOT`, then `MIGRATE ... KEYS`, ten keys a batch) and returns how
    /// many moved.
    ///
    /// # Panics
    /// If a node refuses, or moving takes more than a minute.
    pub fn move_keys(&self, migration: &Migration, limit: usize) -> usize {
        let Migration { slot, from, to } = migration;
        let deadline = Instant::now() + MOVE_LIMIT;
        let mut moved = 0;
        for _ in 0..MAX_BATCHES {
            let batch = MIGRATE_BATCH.min(limit - moved);
            if batch == 0 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "moving slot {slot}'s keys took over {MOVE_LIMIT:?} ({moved} moved)"
            );
            let keys: Vec<Vec<u8>> = self.query(
                from,
                redis::cmd("CLUSTER")
                    .arg("GETKEYSINSLOT")
                    .arg(slot)
                    .arg(batch),
            );
            if keys.is_empty() {
                break;
            }
            // "" and 0: the keys are named after KEYS, and database 0 is a cluster's only one.
            let _: String = self.query(
                from,
                redis::cmd("MIGRATE")
                    .arg("127.0.0.1")
                    .arg(to.port)
                    .arg("")
                    .arg(0)
                    .arg(MIGRATE_TIMEOUT_MS)
                    .arg("KEYS")
                    .arg(&keys),
            );
            moved += keys.len();
        }
        moved
    }

    /// Moves the slot's remaining keys, gives the slot to the target (`CLUSTER SETSLOT slot
    /// NODE to` on the target, then the source, then the other masters), waits until every
    /// running node agrees and has no slot open, and returns how many keys this call moved.
    ///
    /// # Panics
    /// If a node refuses, or the nodes do not agree within fifteen seconds.
    pub fn finish_migration(&self, migration: &Migration) -> usize {
        let Migration { slot, from, to } = migration;
        let moved = self.move_keys(migration, usize::MAX);
        let left: u64 = self.query(from, redis::cmd("CLUSTER").arg("COUNTKEYSINSLOT").arg(slot));
        assert_eq!(left, 0, "slot {slot} still has keys on {}", from.port);
        let others = self.masters().into_iter().filter(|m| m != from && m != to);
        for node in [to.clone(), from.clone()].into_iter().chain(others) {
            let _: String = self.query(
                &node,
                redis::cmd("CLUSTER")
                    .arg("SETSLOT")
                    .arg(slot)
                    .arg("NODE")
                    .arg(&to.id),
            );
        }
        let what = format!("every node to give slot {slot} to {}", to.port);
        wait_until(&what, SETTLE_LIMIT, || {
            for node in self.live() {
                let view = view_of(node.port)?;
                let owner = view.iter().find(|e| e.serves(*slot));
                if owner.map(|e| e.id.as_str()) != Some(to.id.as_str()) {
                    return Err(format!("node {} has another owner", node.port));
                }
                if view.iter().any(|e| !e.open.is_empty()) {
                    return Err(format!("node {} has a slot open", node.port));
                }
            }
            self.settled()
        })
        .unwrap_or_else(|e| panic!("{e}"));
        moved
    }

    /// Moves `slot` from `from` to `to` in one go: [`begin_migration`](Self::begin_migration),
    /// then [`finish_migration`](Self::finish_migration); returns how many keys moved.
    pub fn migrate_slot(&self, slot: u16, from: &ClusterNode, to: &ClusterNode) -> usize {
        let migration = self.begin_migration(slot, from, to);
        self.finish_migration(&migration)
    }

    /// Whether the cluster is whole, or what is missing: every running node says
    /// `cluster_state:ok` with all slots served and knows every node, all agree on who serves
    /// which slots, and every running replica's link to its master is up.
    fn settled(&self) -> Result<(), String> {
        // The first node's port, and its slot ranges by owner.
        let mut agreed: Option<(u16, Owners)> = None;
        for node in self.live() {
            let info: String = query(node.port, redis::cmd("CLUSTER").arg("INFO"))
                .map_err(|e| format!("node {}: {e}", node.port))?;
            let slots_ok = SLOTS.to_string();
            let known = self.nodes.len().to_string();
            for (name, want) in [
                ("cluster_state", "ok"),
                ("cluster_slots_ok", slots_ok.as_str()),
                ("cluster_known_nodes", known.as_str()),
            ] {
                let value = field(&info, name);
                if value != Some(want) {
                    return Err(format!("node {}: {name} {value:?}", node.port));
                }
            }
            let view = view_of(node.port)?;
            let mut owners: Owners = view
                .iter()
                .filter(|e| !e.slots.is_empty())
                .map(|e| (e.id.clone(), e.slots.clone()))
                .collect();
            owners.sort();
            match &agreed {
                None => agreed = Some((node.port, owners)),
                Some((port, first)) if *first != owners => {
                    return Err(format!("nodes {port} and {} disagree on slots", node.port))
                }
                Some(_) => {}
            }
            let myself = view.iter().find(|e| e.myself);
            if myself.is_some_and(|e| e.master.is_some()) {
                let replication: String = query(node.port, redis::cmd("INFO").arg("replication"))
                    .map_err(|e| format!("node {}: {e}", node.port))?;
                let link = field(&replication, "master_link_status");
                if link != Some("up") {
                    return Err(format!("replica {}: master link {link:?}", node.port));
                }
            }
        }
        Ok(())
    }

    /// `CLUSTER NODES` as the node [`masters`](Self::masters) and
    /// [`node_for_slot`](Self::node_for_slot) ask sees it: for a failing assertion's message.
    pub fn topology(&self) -> String {
        let port = self.viewer().port;
        query(port, redis::cmd("CLUSTER").arg("NODES"))
            .unwrap_or_else(|e| format!("CLUSTER NODES on {port}: {e}"))
    }

    /// The cluster as [`viewer`](Self::viewer) sees it.
    fn view(&self) -> Vec<Entry> {
        view_of(self.viewer().port).unwrap_or_else(|e| panic!("{e}"))
    }

    /// The first running node that started as a master (any running node if none).
    fn viewer(&self) -> &Process {
        self.nodes
            .iter()
            .step_by(2)
            .chain(self.nodes.iter().skip(1).step_by(2))
            .find(|node| node.is_alive())
            .expect("a running node")
    }

    fn live(&self) -> impl Iterator<Item = &Process> {
        self.nodes.iter().filter(|node| node.is_alive())
    }

    fn by_id(&self, id: &str) -> ClusterNode {
        self.process(id).node()
    }

    fn process(&self, id: &str) -> &Process {
        self.nodes
            .iter()
            .find(|node| node.id == id)
            .unwrap_or_else(|| panic!("node {id} is not one of ours"))
    }

    /// [`command`](Self::command) on `node`, which must answer.
    fn query<T: redis::FromRedisValue>(&self, node: &ClusterNode, command: &redis::Cmd) -> T {
        query(node.port, command).unwrap_or_else(|e| panic!("node {}: {e}", node.port))
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for node in &self.nodes {
            node.kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Process {
    fn node(&self) -> ClusterNode {
        ClusterNode {
            port: self.port,
            pid: self.pid,
            id: self.id.clone(),
        }
    }

    fn is_alive(&self) -> bool {
        lock(&self.child).is_some()
    }

    /// `SIGKILL` to its pid, then reaped.
    fn kill(&self) {
        if let Some(mut child) = lock(&self.child).take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Each master's id and slot ranges, sorted: what every node must agree on.
type Owners = Vec<(String, Vec<(u16, u16)>)>;

/// One line of `CLUSTER NODES`.
#[derive(Debug)]
struct Entry {
    id: String,
    port: u16,
    flags: Vec<String>,
    myself: bool,
    /// The master's id, for a replica.
    master: Option<String>,
    /// Served slots, as inclusive ranges.
    slots: Vec<(u16, u16)>,
    /// Slots this node is importing or migrating (listed on its own line only).
    open: Vec<String>,
}

impl Entry {
    fn is_master(&self) -> bool {
        self.flags.iter().any(|f| f == "master")
    }

    fn serves(&self, slot: u16) -> bool {
        self.slots
            .iter()
            .any(|&(low, high)| low <= slot && slot <= high)
    }
}

/// `CLUSTER NODES` of the node on `port`, parsed.
fn view_of(port: u16) -> Result<Vec<Entry>, String> {
    let text: String = query(port, redis::cmd("CLUSTER").arg("NODES"))
        .map_err(|e| format!("CLUSTER NODES on {port}: {e}"))?;
    text.lines().map(parse_entry).collect()
}

/// `<id> <ip:port@bus-port> <flags> <master|-> <ping> <pong> <epoch> <link> <slot>...`
fn parse_entry(line: &str) -> Result<Entry, String> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let bad = || format!("a CLUSTER NODES line: {line:?}");
    if fields.len() < 8 {
        return Err(bad());
    }
    let address = fields[1].split('@').next().ok_or_else(bad)?;
    let port = address.rsplit(':').next().ok_or_else(bad)?;
    let flags: Vec<String> = fields[2].split(',').map(str::to_owned).collect();
    let mut slots = Vec::new();
    let mut open = Vec::new();
    for slot in &fields[8..] {
        if slot.starts_with('[') {
            open.push((*slot).to_owned());
            continue;
        }
        let (low, high) = slot.split_once('-').unwrap_or((slot, slot));
        slots.push((
            low.parse().map_err(|_| bad())?,
            high.parse().map_err(|_| bad())?,
        ));
    }
    Ok(Entry {
        id: fields[0].to_owned(),
        port: port.parse().map_err(|_| bad())?,
        myself: flags.iter().any(|f| f == "myself"),
        flags,
        master: (fields[3] != "-").then(|| fields[3].to_owned()),
        slots,
        open,
    })
}

/// `command` on a fresh connection to the node on `port`, with bounded waits.
fn query<T: redis::FromRedisValue>(port: u16, command: &redis::Cmd) -> redis::RedisResult<T> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
    let mut connection = client.get_connection_with_timeout(CONNECT_LIMIT)?;
    connection.set_read_timeout(Some(REPLY_LIMIT))?;
    connection.set_write_timeout(Some(REPLY_LIMIT))?;
    command.query(&mut connection)
}

/// The value of `name` in an `INFO` or `CLUSTER INFO` reply (`name:value` lines).
fn field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

/// Calls `check` every 20 ms until it succeeds, at most `limit / 20 ms + 1` times and for at
/// most `limit`; on timeout the error names `what` and the last thing `check` said.
fn wait_until<T>(
    what: &str,
    limit: Duration,
    mut check: impl FnMut() -> Result<T, String>,
) -> Result<T, String> {
    let start = Instant::now();
    let tries = limit.as_millis() / POLL.as_millis() + 1;
    let mut last = String::from("never checked");
    for _ in 0..tries {
        match check() {
            Ok(value) => return Ok(value),
            Err(error) => last = error,
        }
        if start.elapsed() >= limit {
            break;
        }
        std::thread::sleep(POLL);
    }
    Err(format!(
        "waited {:?} for {what}; last: {last}",
        start.elapsed()
    ))
}

/// Waits at most `limit` for `child` to exit with success and returns its standard output and
/// error; kills it (by its pid) if it is still running then.
fn run_bounded(mut child: Child, limit: Duration) -> Result<String, String> {
    // Read while it runs, so that a full pipe never stalls it.
    let stdout = read_all(child.stdout.take());
    let stderr = read_all(child.stderr.take());
    let status = wait_until("the program to exit", limit, || match child.try_wait() {
        Ok(Some(status)) => Ok(status),
        Ok(None) => Err("still running".to_owned()),
        Err(error) => Err(error.to_string()),
    });
    if status.is_err() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let output = stdout.join().unwrap_or_default() + &stderr.join().unwrap_or_default();
    match status {
        Ok(status) if status.success() => Ok(output),
        Ok(status) => Err(format!("exited with {status}:\n{output}")),
        Err(error) => Err(format!("{error}; killed:\n{output}")),
    }
}

/// A thread reading all of `pipe` (ends when the process's end of it closes).
fn read_all<R: Read + Send + 'static>(pipe: Option<R>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_string(&mut text);
        }
        text
    })
}

/// `count` distinct loopback ports that were free a moment ago.
fn distinct_free_ports(count: usize) -> Result<Vec<u16>, String> {
    let mut ports = BTreeSet::new();
    let mut order = Vec::new();
    for _ in 0..count * 10 {
        let port = free_port();
        if ports.insert(port) {
            order.push(port);
            if order.len() == count {
                return Ok(order);
            }
        }
    }
    Err(format!("no {count} distinct free ports"))
}

fn address(port: u16) -> String {
    format!("127.0.0.1:{port}")
}

fn missing(program: &str, error: &std::io::Error) -> String {
    format!("cannot run {program} ({error}): run scripts/install-redis, or scripts/test")
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
