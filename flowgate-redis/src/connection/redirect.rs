//! What an error answered to a cluster call means (feature `cluster`): follow a
//! redirect, wait and send by slot again, or give up because the call may have run.

use ::redis::{ErrorKind, ServerErrorKind};

/// Where to send a command next.
pub(super) enum Target {
    /// To the master of the command's slot.
    Slot,
    /// To the node named, after `ASKING` if `ask`.
    Node { host: String, port: u16, ask: bool },
}

/// What an error teaches the cluster's map: a slot moved to a node (`MOVED`), or the map
/// should be asked for again soon.
pub(super) enum Learn {
    Nothing,
    Moved { host: String, port: u16 },
    Refresh,
}

/// What to do after an error: the target to send to next (`None` if the command may have run,
/// or was refused for good), and what the map learns from it.
pub(super) fn after(error: &::redis::RedisError) -> (Option<Target>, Learn) {
    // An empty host (`:6380`, a cluster whose nodes announce no endpoint) names no node: the
    // map is asked for again instead.
    let node = || {
        let (node, _slot) = error.redirect_node()?;
        let (host, port) = node.rsplit_once(':')?;
        let port = port.parse::<u16>().ok()?;
        (!host.is_empty()).then(|| (host.to_owned(), port))
    };
    let named = |node: Option<(String, u16)>| match node {
        Some((host, port)) => Learn::Moved { host, port },
        None => Learn::Refresh,
    };
    match error.kind() {
        ErrorKind::Server(ServerErrorKind::Moved) => (Some(Target::Slot), named(node())),
        ErrorKind::Server(ServerErrorKind::Ask) => match node() {
            Some((host, port)) => (
                Some(Target::Node {
                    host,
                    port,
                    ask: true,
                }),
                Learn::Nothing,
            ),
            None => (Some(Target::Slot), Learn::Refresh),
        },
        ErrorKind::Server(
            ServerErrorKind::TryAgain
            | ServerErrorKind::ClusterDown
            | ServerErrorKind::MasterDown
            | ServerErrorKind::BusyLoading
            | ServerErrorKind::ReadOnly,
        ) => (Some(Target::Slot), Learn::Refresh),
        _ => {
            let lost = error.is_io_error() || error.is_connection_dropped() || error.is_timeout();
            (None, if lost { Learn::Refresh } else { Learn::Nothing })
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
