//! What an error answered to a cluster call means (feature `redis-cluster`): follow a
//! redirect, wait and send by slot again, or give up because the call may have run.

use ::redis::{ErrorKind, ServerErrorKind};

use super::cluster::Cluster;

/// Where to send a command next.
pub(super) enum Target {
    /// To the master of the command's slot.
    Slot,
    /// To the node named, after `ASKING` if `ask`.
    Node { host: String, port: u16, ask: bool },
}

/// What to do after an error: the target to send to next, or `None` if the command may have
/// run (or was refused for good). A redirect also teaches the map (`MOVED`).
pub(super) fn after(cluster: &Cluster, slot: u16, error: &::redis::RedisError) -> Option<Target> {
    // An empty host (`:6380`, a cluster whose nodes announce no endpoint) names no node: the
    // map is asked for again instead.
    let node = || {
        let (node, _slot) = error.redirect_node()?;
        let (host, port) = node.rsplit_once(':')?;
        let node = (!host.is_empty()).then(|| (host.to_owned(), port.parse::<u16>().ok()));
        match node {
            Some((host, Some(port))) => Some((host, port)),
            _ => {
                cluster.refresh_soon(false);
                None
            }
        }
    };
    match error.kind() {
        ErrorKind::Server(ServerErrorKind::Moved) => {
            if let Some((host, port)) = node() {
                cluster.moved(slot, &host, port);
            }
            Some(Target::Slot)
        }
        ErrorKind::Server(ServerErrorKind::Ask) => Some(match node() {
            Some((host, port)) => Target::Node {
                host,
                port,
                ask: true,
            },
            None => Target::Slot,
        }),
        ErrorKind::Server(
            ServerErrorKind::TryAgain
            | ServerErrorKind::ClusterDown
            | ServerErrorKind::MasterDown
            | ServerErrorKind::BusyLoading
            | ServerErrorKind::ReadOnly,
        ) => {
            cluster.refresh_soon(false);
            Some(Target::Slot)
        }
        _ => {
            if error.is_io_error() || error.is_connection_dropped() || error.is_timeout() {
                cluster.refresh_soon(false);
            }
            None
        }
    }
}

/// The server error kind of `error`, if it is one.
pub(super) fn server_kind(error: &::redis::RedisError) -> Option<ServerErrorKind> {
    match error.kind() {
        ErrorKind::Server(kind) => Some(kind),
        _ => None,
    }
}
