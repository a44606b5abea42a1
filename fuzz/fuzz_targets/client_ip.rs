//! Client addresses from forwarding headers (`flowgate::http::ClientIp::resolve`, feature
//! `tower`): any peer, trusted networks (some written as text, read by `Cidr::from_str`), any
//! of the three header styles, prefixes, and header lines built of addresses in every form a
//! proxy writes (ports, brackets, RFC 7239 elements, quotes) mixed with arbitrary bytes.
//!
//! Asserts, from `resolve`'s documentation: it never panics; no peer, no client; an untrusted
//! peer is the client whatever the headers say; a trusted peer without the header is the
//! client; otherwise the client is the peer or an address written in that header, cut to its
//! prefix (nothing else can come out of the headers), and headers of other names change
//! nothing (of `X-Real-IP`, only the last line counts). A network read from text is written
//! back as text that reads as the same network, and contains its own first address.
#![no_main]

use std::net::IpAddr;

use arbitrary::Arbitrary;
use flowgate::http::{Cidr, ClientIp, ForwardedHeader};
use http::header::{HeaderMap, HeaderName, HeaderValue};
use libfuzzer_sys::fuzz_target;

/// Addresses that trusted networks and header entries share, so that chains of trusted proxies
/// and their clients come up often.
const POOL: [&str; 12] = [
    "10.0.0.1",
    "10.0.0.2",
    "10.255.255.254",
    "203.0.113.5",
    "198.51.100.7",
    "2001:db8::1",
    "2001:db8:1:2:3:4:5:6",
    "::ffff:10.0.0.3",
    "64:ff9b::192.0.2.77",
    "::192.0.2.8",
    "::1",
    "fd00::1",
];

#[derive(Arbitrary, Debug)]
enum Addr {
    Pool(u8),
    V4([u8; 4]),
    V6([u8; 16]),
}

impl Addr {
    fn ip(&self) -> IpAddr {
        match self {
            Self::Pool(i) => POOL[usize::from(*i) % POOL.len()].parse().unwrap(),
            Self::V4(octets) => IpAddr::from(*octets),
            Self::V6(octets) => IpAddr::from(*octets),
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Network {
    Of(Addr, u8),
    Text(String),
}

/// How a proxy writes an address in a header.
#[derive(Arbitrary, Debug)]
enum Form {
    Plain,
    Port(u16),
    Bracketed,
    BracketedPort(u16),
    /// An RFC 7239 element: `for=…`, quoted or not, with another parameter or not.
    For {
        quoted: bool,
        proto: bool,
    },
}

#[derive(Arbitrary, Debug)]
enum Entry {
    Address(Addr, Form),
    Raw(Vec<u8>),
}

#[derive(Arbitrary, Debug)]
struct Line {
    /// 0: `X-Forwarded-For`, 1: `Forwarded`, 2: `X-Real-IP`, else another header.
    name: u8,
    entries: Vec<Entry>,
    /// Separators: `,` then `spaces` spaces.
    spaces: u8,
}

#[derive(Arbitrary, Debug)]
struct Input {
    peer: Option<Addr>,
    trust: Vec<Network>,
    header: u8,
    v4_prefix: u8,
    v6_prefix: u8,
    embedded_v4: bool,
    lines: Vec<Line>,
}

fuzz_target!(|input: Input| check(input));

fn check(input: Input) {
    let networks: Vec<Cidr> = input.trust.iter().filter_map(network).collect();
    let header = match input.header % 3 {
        0 => ForwardedHeader::XForwardedFor,
        1 => ForwardedHeader::Forwarded,
        _ => ForwardedHeader::XRealIp,
    };
    let cut = ClientIp::peer()
        .ipv4_prefix(input.v4_prefix)
        .ipv6_prefix(input.v6_prefix)
        .embedded_ipv4(input.embedded_v4);
    let config = cut.clone().trust(networks.iter().copied()).header(header);
    // The key of an address: what `resolve` makes of it as an untrusted peer.
    let key = |address: IpAddr| cut.resolve(Some(address), &HeaderMap::new()).unwrap();

    let mut headers = HeaderMap::new();
    for line in &input.lines {
        if let Ok(value) = HeaderValue::from_bytes(&line.value()) {
            headers.append(line.header_name(), value);
        }
    }
    let name = match header {
        ForwardedHeader::XForwardedFor => HeaderName::from_static("x-forwarded-for"),
        ForwardedHeader::Forwarded => http::header::FORWARDED,
        _ => HeaderName::from_static("x-real-ip"),
    };
    let lines: Vec<&HeaderValue> = headers.get_all(&name).iter().collect();

    let peer = input.peer.as_ref().map(Addr::ip);
    let client = config.resolve(peer, &headers);
    let Some(peer) = peer else {
        assert_eq!(client, None, "no peer, no client");
        return;
    };
    if !networks.iter().any(|n| n.contains(peer)) || lines.is_empty() {
        assert_eq!(client, Some(key(peer)), "the peer is the client");
        return;
    }
    if let Some(client) = client {
        let written = lines.iter().flat_map(|v| written_addresses(v.as_bytes()));
        assert!(
            client == key(peer) || written.map(key).any(|k| k == client),
            "{client} is neither the peer {peer} nor an address of {lines:?}"
        );
    }
    // Only the header's own lines count (of X-Real-IP, only the last).
    let mut own = HeaderMap::new();
    let kept = match header {
        ForwardedHeader::XRealIp => &lines[lines.len() - 1..],
        _ => &lines[..],
    };
    for value in kept {
        own.append(&name, (*value).clone());
    }
    assert_eq!(
        config.resolve(Some(peer), &own),
        client,
        "other lines changed the client"
    );
}

/// The network `written` names; one read from text must write back as itself.
fn network(written: &Network) -> Option<Cidr> {
    match written {
        Network::Of(addr, prefix) => Cidr::new(addr.ip(), *prefix).ok(),
        Network::Text(text) => {
            let cidr: Cidr = text.parse().ok()?;
            let again = cidr.to_string();
            assert_eq!(
                again.parse::<Cidr>().ok(),
                Some(cidr),
                "{text:?} written as {again:?}"
            );
            assert!(cidr.contains(cidr.network()), "{cidr} contains its network");
            Some(cidr)
        }
    }
}

impl Line {
    fn header_name(&self) -> HeaderName {
        match self.name {
            0 => HeaderName::from_static("x-forwarded-for"),
            1 => http::header::FORWARDED,
            2 => HeaderName::from_static("x-real-ip"),
            _ => HeaderName::from_static("x-other"),
        }
    }

    fn value(&self) -> Vec<u8> {
        let mut value = Vec::new();
        for (i, entry) in self.entries.iter().enumerate() {
            if i > 0 {
                value.push(b',');
                value.extend(std::iter::repeat_n(b' ', usize::from(self.spaces % 4)));
            }
            match entry {
                Entry::Address(addr, form) => {
                    value.extend(written(addr.ip(), form).bytes());
                }
                Entry::Raw(bytes) => value.extend(bytes),
            }
        }
        value
    }
}

fn written(ip: IpAddr, form: &Form) -> String {
    let bracketed = match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("[{v6}]"),
    };
    match form {
        Form::Plain => ip.to_string(),
        Form::Port(port) => format!("{bracketed}:{port}"),
        Form::Bracketed => bracketed,
        Form::BracketedPort(port) => format!("[{ip}]:{port}"),
        Form::For { quoted, proto } => {
            let node = if *quoted {
                format!("\"{bracketed}\"")
            } else {
                ip.to_string()
            };
            if *proto {
                format!("for={node};proto=https")
            } else {
                format!("for={node}")
            }
        }
    }
}

/// Every address written in `value`: each longest run of the characters addresses are written
/// with (hex digits, `.`, `:`), read whole, or as an IPv4 address before a `:port`. A superset
/// of what any reading of the header can find.
fn written_addresses(value: &[u8]) -> Vec<IpAddr> {
    let text = String::from_utf8_lossy(value);
    let mut found = Vec::new();
    let runs = text.split(|c: char| !(c.is_ascii_hexdigit() || c == '.' || c == ':'));
    for run in runs.filter(|r| !r.is_empty()) {
        if let Ok(ip) = run.parse() {
            found.push(ip);
        }
        if let Some((host, _)) = run.rsplit_once(':') {
            if let Ok(v4) = host.parse::<std::net::Ipv4Addr>() {
                found.push(IpAddr::V4(v4));
            }
        }
    }
    found
}
