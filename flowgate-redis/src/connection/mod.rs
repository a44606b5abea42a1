//! The connection to Redis: one server's connection manager, or a Redis Cluster connection
//! (feature `cluster`: flowgate's own routing, `cluster.rs`), set up for the limiter's timeout.

use core::time::Duration;

use ::redis::aio::{ConnectionManager, ConnectionManagerConfig};

#[cfg(feature = "cluster")]
mod cluster;
#[cfg(feature = "cluster")]
mod redirect;
#[cfg(feature = "cluster")]
mod slots;

#[cfg(feature = "cluster")]
pub(crate) use self::cluster::Cluster;
use crate::error::RedisConfigError;
use crate::script::Script;
use crate::settings::{RedisBackend, Server};
use crate::stats::Counters;
use flowgate::backend::Failure;

/// A master of a cluster, as the slot map names it: host and port.
pub(crate) type Master = (String, u16);

/// A limiter's connection: cheap to clone (the clones share the sockets).
#[derive(Clone)]
pub(crate) enum Connection {
    One(ConnectionManager),
    #[cfg(feature = "cluster")]
    Cluster(Cluster),
}

impl Connection {
    /// `script`'s call that `command` makes (see [`Script::eval`]).
    pub(crate) async fn eval(
        &self,
        script: &Script,
        command: impl Fn(&str, &str) -> ::redis::Cmd,
        counters: &Counters,
    ) -> Result<::redis::Value, Failure> {
        match self {
            Self::One(manager) => script.eval(&mut manager.clone(), command, counters).await,
            #[cfg(feature = "cluster")]
            Self::Cluster(cluster) => script.eval(&mut cluster.clone(), command, counters).await,
        }
    }

    /// Whether every server answers a `PING` within `wait`: `Err` names one that does not
    /// (`host:port`; empty for the one server) and why.
    pub(crate) async fn ready(&self, wait: Duration) -> Result<(), (String, String)> {
        match self {
            Self::One(manager) => {
                (ping(&mut manager.clone(), wait).await).map_err(|error| (String::new(), error))
            }
            #[cfg(feature = "cluster")]
            Self::Cluster(cluster) => cluster.ready(wait).await,
        }
    }

    /// Whether the server answers a `PING` within `wait`, or why not: the one server; in a
    /// cluster, the master `node`, or without one some node (which gives the slot map).
    #[cfg_attr(not(feature = "cluster"), allow(unused_variables))]
    pub(crate) async fn ping(&self, node: Option<&Master>, wait: Duration) -> Result<(), String> {
        match self {
            Self::One(manager) => self::ping(&mut manager.clone(), wait).await,
            #[cfg(feature = "cluster")]
            Self::Cluster(cluster) => cluster.ping(node, wait).await,
        }
    }

    /// Whether the master numbered `node` (see [`node_of`](Self::node_of)) serves a slot
    /// (always, for the one server).
    #[cfg_attr(not(feature = "cluster"), allow(unused_variables))]
    pub(crate) fn serves(&self, node: u16) -> bool {
        match self {
            Self::One(_) => true,
            #[cfg(feature = "cluster")]
            Self::Cluster(cluster) => cluster.serves(node),
        }
    }

    /// Where the master numbered `node` is (a cluster's; `None` for the one server).
    #[cfg_attr(not(feature = "cluster"), allow(unused_variables))]
    pub(crate) fn address(&self, node: u16) -> Option<Master> {
        match self {
            Self::One(_) => None,
            #[cfg(feature = "cluster")]
            Self::Cluster(cluster) => cluster.address(node),
        }
    }

    /// Whether every slot of a cluster has a master (never, for the one server: its calls go
    /// through no master's breaker).
    pub(crate) fn mapped(&self) -> bool {
        match self {
            Self::One(_) => false,
            #[cfg(feature = "cluster")]
            Self::Cluster(cluster) => cluster.mapped(),
        }
    }

    /// The number of the master that serves `key` (a cluster's, if its slot map is known; a
    /// number stays the node's while the connection lives), whose breaker its calls go
    /// through; `None` for the one server.
    #[cfg_attr(not(feature = "cluster"), allow(unused_variables))]
    pub(crate) fn node_of(&self, key: &[u8]) -> Option<u16> {
        match self {
            Self::One(_) => None,
            #[cfg(feature = "cluster")]
            Self::Cluster(cluster) => cluster.master_of(slots::key_slot(key)),
        }
    }
}

/// Whether `connection` answers a `PING` within `wait`, or why not. Two tries: after an outage
/// a connection manager answers the first command with the error of its last failed attempt
/// and starts a new one, which the second awaits.
async fn ping(
    connection: &mut impl ::redis::aio::ConnectionLike,
    wait: Duration,
) -> Result<(), String> {
    let tries = async {
        let mut error = String::new();
        for _ in 0..2 {
            let answer = connection.req_packed_command(&::redis::cmd("PING")).await;
            match answer.and_then(::redis::Value::extract_error) {
                Ok(_) => return Ok(()),
                Err(e) => error = e.to_string(),
            }
        }
        Err(error)
    };
    let answer = tokio::time::timeout(wait, tries).await;
    answer.unwrap_or_else(|_| Err(format!("no answer within {wait:?}")))
}

/// Where `server` is, as `host:port` (or the seeds of a cluster), for messages: no password.
pub(crate) fn describe(server: &Server) -> String {
    match server {
        Server::One(client) => client.get_connection_info().addr().to_string(),
        #[cfg(feature = "cluster")]
        Server::Cluster(seeds) => {
            let seeds: Vec<_> = seeds.iter().map(|seed| seed.addr().to_string()).collect();
            format!("the cluster of {}", seeds.join(", "))
        }
    }
}

/// A connection to `backend`'s server or cluster, connecting lazily (inside a tokio runtime).
///
/// With a breaker, a connection manager (a cluster has one per master) makes one attempt per
/// reconnection and never sleeps between attempts: the breaker is the backoff (one probe per
/// cool-down), so a decision never waits for a reconnection that is sleeping. Without one, the
/// manager retries with its own backoff.
pub(crate) fn connect(backend: &RedisBackend) -> Result<Connection, RedisConfigError> {
    if tokio::runtime::Handle::try_current().is_err() {
        return Err(RedisConfigError::NoRuntime);
    }
    backend.check()?;
    let mut config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(backend.timeout.max(Duration::from_millis(250))))
        .set_response_timeout(None)
        .set_min_delay(Duration::from_millis(10))
        .set_max_delay(Duration::from_secs(1));
    if !backend.breaker.is_off() {
        config = config.set_number_of_retries(0);
    }
    let connection = match &backend.server {
        Server::One(client) => {
            let manager = ConnectionManager::new_lazy_with_config(client.clone(), config)
                .map_err(|e| RedisConfigError::Client(e.to_string()))?;
            Connection::One(manager)
        }
        #[cfg(feature = "cluster")]
        Server::Cluster(seeds) => Connection::Cluster(Cluster::new(seeds.clone(), config)),
    };
    Ok(connection)
}
