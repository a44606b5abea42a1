//! Redis Cluster (feature `redis-cluster`): the connection that follows `MOVED` and `ASK`
//! without ever replaying a call that may have run. Decisions over several slots: `across`.
//!
//! # Redirects, never replays
//! The cluster client is built with no retries of its own: it retries a command after a lost
//! connection too, and a script that may have run must not run twice. [`Cluster`] follows
//! only the answers that say the command did not run: `MOVED` (to the node named), `ASK`
//! (`ASKING` and the command, to the node named), and `TRYAGAIN`, `CLUSTERDOWN`,
//! `MASTERDOWN`, `LOADING` and `READONLY` (again by slot, after a short pause), at most
//! [`MAX_REDIRECTS`] times and within the decision's deadline.
//!

use core::time::Duration;

use ::redis::cluster::{ClusterClient, ClusterConfig};
use ::redis::cluster_async::ClusterConnection;
use ::redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use ::redis::{Cmd, ErrorKind, RedisResult, ServerErrorKind, Value};

use super::script::Sender;

/// The most redirects (and pauses) one command follows.
pub(crate) const MAX_REDIRECTS: usize = 8;

/// A connection to a Redis Cluster, made in the background: cheap to clone.
#[derive(Clone)]
pub(crate) struct Cluster {
    connection: ClusterConnection,
}

impl Cluster {
    /// A connection to `client`'s cluster (built with no retries), connecting in the
    /// background.
    pub(crate) fn new(client: &ClusterClient, connect_timeout: Duration) -> Self {
        let config = ClusterConfig::new().set_connection_timeout(connect_timeout);
        Self {
            connection: client.get_pending_async_connection_with_config(config),
        }
    }

    /// Whether some node answers a `PING`.
    pub(crate) async fn ping(&self) -> bool {
        let mut connection = self.clone();
        let ping = ::redis::cmd("PING");
        (connection.send(&ping).await)
            .and_then(Value::extract_error)
            .is_ok()
    }

    /// Sends `command` once to `to` (by the command's key if `None`), with `ASKING` first for
    /// an `ASK` redirect.
    async fn send_to(
        &mut self,
        command: &Cmd,
        to: &Option<(bool, String, u16)>,
    ) -> RedisResult<Value> {
        let connection = &mut self.connection;
        let Some((ask, host, port)) = to else {
            return ::redis::aio::ConnectionLike::req_packed_command(connection, command).await;
        };
        let node = SingleNodeRoutingInfo::ByAddress {
            host: host.clone(),
            port: *port,
        };
        if !ask {
            return (connection.route_command(command.clone(), RoutingInfo::SingleNode(node)))
                .await;
        }
        let mut pipeline = ::redis::pipe();
        pipeline.cmd("ASKING").ignore().add_command(command.clone());
        let mut values = connection.route_pipeline(pipeline, 0, 2, node).await?;
        values
            .pop()
            .ok_or_else(|| ::redis::RedisError::from((ErrorKind::Client, "no reply after ASKING")))
    }
}

/// What to do after an error: the node to send to next (`ASK` or not), `None` to send by slot
/// again after a pause; or the error if the command may have run (or was refused for good).
fn after(error: &::redis::RedisError) -> Option<Option<(bool, String, u16)>> {
    let redirect = |ask| {
        let (node, _slot) = error.redirect_node()?;
        let (host, port) = node.rsplit_once(':')?;
        Some(Some((ask, host.to_owned(), port.parse().ok()?)))
    };
    match error.kind() {
        ErrorKind::Server(ServerErrorKind::Moved) => redirect(false),
        ErrorKind::Server(ServerErrorKind::Ask) => redirect(true),
        ErrorKind::Server(
            ServerErrorKind::TryAgain
            | ServerErrorKind::ClusterDown
            | ServerErrorKind::MasterDown
            | ServerErrorKind::BusyLoading
            | ServerErrorKind::ReadOnly,
        ) => Some(None),
        _ => None,
    }
}

impl Sender for Cluster {
    async fn send(&mut self, command: &Cmd) -> RedisResult<Value> {
        let mut to = None;
        let mut attempt = 0;
        loop {
            attempt += 1;
            // A server's error reply arrives as a value; redirects arrive as errors.
            let error = match self
                .send_to(command, &to)
                .await
                .and_then(Value::extract_error)
            {
                Ok(value) => return Ok(value),
                Err(error) => error,
            };
            let next = match after(&error) {
                Some(next) if attempt < MAX_REDIRECTS => next,
                _ => return Err(error),
            };
            if next.is_none() {
                // The slot is moving or its node failing over: the map is being rebuilt.
                tokio::time::sleep(Duration::from_millis(5 << attempt.min(4))).await;
            }
            to = next;
        }
    }
}
