//! Redis Cluster's hash slots (feature `cluster`): the slot of a key, the slot map a node
//! answers to `CLUSTER SLOTS`, and the map a cluster connection keeps ([`Routes`]).

use ::redis::aio::ConnectionManager;
use ::redis::{ErrorKind, RedisResult, Value};

/// A Redis Cluster's hash slots.
pub(crate) const SLOTS: usize = 16_384;

/// A slot no known node serves.
pub(crate) const NOWHERE: u16 = u16::MAX;

/// The slot map: each slot's master, as an index into `nodes`.
#[derive(Default)]
pub(crate) struct Routes {
    pub(crate) slots: Vec<u16>,
    pub(crate) nodes: Vec<Node>,
}

/// A node of the map, and the connection to it.
#[derive(Clone)]
pub(crate) struct Node {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) connection: ConnectionManager,
}

impl Routes {
    /// `slot`'s master, if the map knows one.
    pub(crate) fn master(&self, slot: u16) -> Option<&Node> {
        self.nodes
            .get(usize::from(*self.slots.get(usize::from(slot))?))
    }

    /// The nodes that serve a slot.
    pub(crate) fn masters(&self) -> impl Iterator<Item = &Node> {
        let serving = |(at, _): &(usize, &Node)| self.slots.iter().any(|s| usize::from(*s) == *at);
        self.nodes
            .iter()
            .enumerate()
            .filter(serving)
            .map(|(_, node)| node)
    }

    /// Whether every slot has a master.
    pub(crate) fn mapped(&self) -> bool {
        self.slots.len() == SLOTS && !self.slots.contains(&NOWHERE)
    }
}

/// The `CLUSTER SLOTS` answer of the node at `host` on `connection`: (first, last, master's
/// host, master's port) per range.
pub(crate) async fn cluster_slots(
    connection: &mut impl ::redis::aio::ConnectionLike,
    host: &str,
) -> RedisResult<Vec<(u16, u16, String, u16)>> {
    let value = connection
        .req_packed_command(::redis::cmd("CLUSTER").arg("SLOTS"))
        .await?
        .extract_error()?;
    let bad = || ::redis::RedisError::from((ErrorKind::Parse, "an unexpected CLUSTER SLOTS reply"));
    let Value::Array(ranges) = value else {
        return Err(bad());
    };
    let mut out = Vec::with_capacity(ranges.len());
    for range in ranges {
        let Value::Array(range) = range else {
            return Err(bad());
        };
        let (Some(Value::Int(first)), Some(Value::Int(last)), Some(Value::Array(master))) =
            (range.first(), range.get(1), range.get(2))
        else {
            return Err(bad());
        };
        let (Some(address), Some(Value::Int(port))) = (master.first(), master.get(1)) else {
            return Err(bad());
        };
        let address = match address {
            Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
            Value::SimpleString(text) => text.clone(),
            // No endpoint announced (`cluster-preferred-endpoint-type unknown-endpoint`).
            Value::Nil => String::new(),
            _ => return Err(bad()),
        };
        // An empty address (or "?") means the node that answered.
        let address = if address.is_empty() || address == "?" {
            host.to_owned()
        } else {
            address
        };
        let slot = |n: &i64| u16::try_from(*n).ok().filter(|&s| usize::from(s) < SLOTS);
        let (Some(first), Some(last), Ok(port)) = (slot(first), slot(last), u16::try_from(*port))
        else {
            return Err(bad());
        };
        if first <= last {
            out.push((first, last, address, port));
        }
    }
    Ok(out)
}

/// The hash slot of `key`: CRC16 (XMODEM) of its hash tag (the bytes between the first `{` and
/// the next `}`, if any and not empty) or of the whole key, modulo 16384.
pub(crate) fn key_slot(key: &[u8]) -> u16 {
    let tag = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let close = key[open + 1..].iter().position(|&b| b == b'}')?;
            (close > 0).then(|| &key[open + 1..open + 1 + close])
        })
        .unwrap_or(key);
    crc16(tag) % SLOTS as u16
}

/// CRC16/XMODEM (polynomial 0x1021, initial 0), as Redis Cluster hashes keys.
fn crc16(bytes: &[u8]) -> u16 {
    const TABLE: [u16; 256] = {
        let mut table = [0u16; 256];
        let mut i = 0;
        while i < 256 {
            let mut crc = (i as u16) << 8;
            let mut bit = 0;
            while bit < 8 {
                crc = if crc & 0x8000 != 0 {
                    (crc << 1) ^ 0x1021
                } else {
                    crc << 1
                };
                bit += 1;
            }
            table[i] = crc;
            i += 1;
        }
        table
    };
    bytes.iter().fold(0, |crc, &b| {
        (crc << 8) ^ TABLE[usize::from((crc >> 8) as u8 ^ b)]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Redis Cluster's own examples (the cluster specification) and its tag rules.
    #[test]
    fn slots_follow_the_cluster_specification() {
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), crc16(b"foo{}{bar}") % 16_384);
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
        assert_eq!(key_slot(b"foo{bar}{zap}"), key_slot(b"bar"));
    }
}
