//! The client's address: the peer's, or, behind proxies the operator trusts, the first untrusted
//! address of the forwarding chain read from the right; normalized (IPv4-mapped IPv6 addresses
//! become IPv4) and cut to a prefix (a /64 for IPv6 by default), so that one client is one key.
//!
//! Pure functions of the peer address and the request headers: no I/O, no allocation.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use http::header::{HeaderMap, HeaderName, FORWARDED};

use super::cidr::{keep_v4, keep_v6, normalize, Cidr};

/// The header that the trusted proxies write the client's address into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ForwardedHeader {
    /// `X-Forwarded-For: client, proxy1, proxy2`: each proxy appends its peer.
    #[default]
    XForwardedFor,
    /// RFC 7239 `Forwarded: for=client, for="[2001:db8::1]:4711"`: each proxy appends an
    /// element; its `for` parameter names the proxy's peer.
    Forwarded,
    /// `X-Real-IP: client`: one address, set by the proxy in front (read only when the peer is
    /// trusted; the last one if several).
    XRealIp,
}

/// What to do with a request whose client address cannot be told (no peer address in the
/// request's extensions, or a malformed forwarding header from a trusted proxy).
///
/// By default such a request is refused with `500 Internal Server Error`: a server that does
/// not hand the peer address to the middleware (axum without
/// `into_make_service_with_connect_info::<SocketAddr>()`) would otherwise put every client in
/// one bucket of each per-client limit, silently. Each such request is counted
/// ([`RateLimitLayer::unkeyed`](super::RateLimitLayer::unkeyed), and the `metrics` feature's
/// `flowgate_http_unkeyed_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Unkeyed {
    /// [`Inbound::client_ip`](super::Inbound::client_ip) is `None`: the requests without an
    /// address share one bucket of every policy keyed by it (`None` is a key like any other),
    /// unless the policy's extractor skips them. An explicit choice: right for a service
    /// behind one trusted proxy that may omit the header, wrong as an accident.
    Shared,
    /// Refuse the request with this status before any policy is consulted (it takes nothing);
    /// [`refusal_response`](super::RateLimitLayer::refusal_response) can answer it otherwise.
    Refuse(http::StatusCode),
}

impl Default for Unkeyed {
    /// `Refuse(500)`: a missing address is a server misconfiguration until said otherwise.
    fn default() -> Self {
        Self::Refuse(http::StatusCode::INTERNAL_SERVER_ERROR)
    }
}

/// How the middleware tells who the client is: see the [module docs](super#client-addresses).
///
/// By default the client is the peer (the TCP connection's remote address), forwarding headers
/// are ignored (any client can forge them), IPv6 clients are keyed by their /64 and IPv4
/// clients by their address.
///
/// ```
/// use flowgate::http::{ClientIp, ForwardedHeader};
/// use http::HeaderMap;
///
/// let behind_lb = ClientIp::peer()
///     .trust(["10.0.0.0/8".parse()?])
///     .header(ForwardedHeader::XForwardedFor);
///
/// let mut headers = HeaderMap::new();
/// headers.insert("x-forwarded-for", "6.6.6.6, 203.0.113.7, 10.0.0.2".parse()?);
/// // The load balancer 10.0.0.1 is trusted, so is 10.0.0.2; 203.0.113.7 is the client
/// // (6.6.6.6 was written by the client itself and is ignored).
/// let client = behind_lb.resolve(Some("10.0.0.1".parse()?), &headers);
/// assert_eq!(client, Some("203.0.113.7".parse()?));
///
/// // Without trust, the header is ignored: the peer is the client.
/// let direct = ClientIp::peer().resolve(Some("198.51.100.9".parse()?), &headers);
/// assert_eq!(direct, Some("198.51.100.9".parse()?));
///
/// // IPv6 clients are keyed by their /64.
/// let v6 = ClientIp::peer().resolve(Some("2001:db8:1:2:aaaa::1".parse()?), &headers);
/// assert_eq!(v6, Some("2001:db8:1:2::".parse()?));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "a ClientIp does nothing until a layer is given it (`RateLimitLayer::client_ip`)"]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientIp {
    trusted: Box<[Cidr]>,
    header: ForwardedHeader,
    v4_prefix: u8,
    v6_prefix: u8,
    /// The masks of the two prefixes, made when a prefix is set rather than on every request.
    v4_keep: u32,
    v6_keep: u128,
    missing: Unkeyed,
    embedded_v4: bool,
}

impl Default for ClientIp {
    fn default() -> Self {
        Self::peer()
    }
}

impl ClientIp {
    /// The peer is the client; forwarding headers are ignored.
    pub fn peer() -> Self {
        Self {
            trusted: Box::new([]),
            header: ForwardedHeader::XForwardedFor,
            v4_prefix: 32,
            v6_prefix: 64,
            v4_keep: keep_v4(32),
            v6_keep: keep_v6(64),
            missing: Unkeyed::default(),
            embedded_v4: true,
        }
    }

    /// Trusts the proxies in `networks` (added to those already trusted): when the peer is one
    /// of them, the client is read from the [forwarding header](Self::header).
    pub fn trust(mut self, networks: impl IntoIterator<Item = Cidr>) -> Self {
        let mut trusted = self.trusted.into_vec();
        trusted.extend(networks);
        self.trusted = trusted.into_boxed_slice();
        self
    }

    /// The header the trusted proxies set (`X-Forwarded-For` by default).
    pub fn header(mut self, header: ForwardedHeader) -> Self {
        self.header = header;
        self
    }

    /// Keys IPv6 clients by their first `bits` bits (64 by default; more than 128 counts as 128).
    pub fn ipv6_prefix(mut self, bits: u8) -> Self {
        self.v6_prefix = bits.min(128);
        self.v6_keep = keep_v6(self.v6_prefix);
        self
    }

    /// Keys IPv4 clients by their first `bits` bits (32 by default; more than 32 counts as 32).
    pub fn ipv4_prefix(mut self, bits: u8) -> Self {
        self.v4_prefix = bits.min(32);
        self.v4_keep = keep_v4(self.v4_prefix);
        self
    }

    /// Whether a client address of the NAT64 well-known prefix (`64:ff9b::a.b.c.d`) or the
    /// IPv4-compatible form (`::a.b.c.d`) is keyed by the IPv4 address it carries (the
    /// default): otherwise every IPv4 host behind a NAT64 gateway shares the gateway's /64.
    pub fn embedded_ipv4(mut self, embedded: bool) -> Self {
        self.embedded_v4 = embedded;
        self
    }

    /// What to do when the client cannot be told (refuse with 500 by default; see
    /// [`Unkeyed`]).
    pub fn when_missing(mut self, rule: Unkeyed) -> Self {
        self.missing = rule;
        self
    }

    /// The rule for requests whose client cannot be told.
    pub fn missing(&self) -> Unkeyed {
        self.missing
    }

    /// The client of a request that came from `peer` with `headers`, cut to its prefix; `None`
    /// if there is no peer address, or if a trusted proxy's forwarding header is malformed
    /// where it matters (a malformed entry to the right of the first untrusted address, or a
    /// bad `X-Real-IP`).
    ///
    /// The chain is walked from the right: every entry there was written by a proxy we trust,
    /// down to the first address we do not trust, which is the client (entries further left
    /// were written by the client and are not believed). If every address is trusted, the
    /// leftmost is the client; if the header is absent, the trusted peer itself is.
    #[inline]
    pub fn resolve(&self, peer: Option<IpAddr>, headers: &HeaderMap) -> Option<IpAddr> {
        let peer = normalize(peer?);
        if !self.trusts(peer) {
            return Some(self.cut(peer));
        }
        self.forwarded(peer, headers)
    }

    /// [`resolve`](Self::resolve) for a trusted peer: the client its headers name.
    #[inline(never)]
    fn forwarded(&self, peer: IpAddr, headers: &HeaderMap) -> Option<IpAddr> {
        let client = match self.header {
            ForwardedHeader::XRealIp => match headers.get_all(X_REAL_IP).iter().next_back() {
                None => Some(peer),
                Some(value) => value.to_str().ok().and_then(parse_node).map(normalize),
            },
            ForwardedHeader::XForwardedFor => self.walk(peer, headers, X_FORWARDED_FOR, parse_node),
            ForwardedHeader::Forwarded => self.walk(peer, headers, FORWARDED, forwarded_for),
        };
        client.map(|client| self.cut(client))
    }

    /// The rightmost untrusted address of the chain in the `name` headers, or the leftmost if
    /// all are trusted, or `peer` if there is no chain; `None` if an entry on the way is
    /// malformed. Read from the right and stopped at the first untrusted entry, so that text
    /// the client wrote (everything left of it) is never parsed: an unbalanced quote or a
    /// stray byte there cannot change what a trusted proxy wrote. Entries are split at every
    /// comma (proxies write addresses, which have none) and decoded one by one.
    fn walk(
        &self,
        peer: IpAddr,
        headers: &HeaderMap,
        name: HeaderName,
        parse: impl Fn(&str) -> Option<IpAddr>,
    ) -> Option<IpAddr> {
        let mut nearest = peer;
        for value in headers.get_all(name).iter().rev() {
            for entry in value.as_bytes().rsplit(|&byte| byte == b',') {
                let entry = core::str::from_utf8(entry).ok()?.trim();
                if entry.is_empty() {
                    continue;
                }
                let address = normalize(parse(entry)?);
                if !self.trusts(address) {
                    return Some(address);
                }
                nearest = address;
            }
        }
        Some(nearest)
    }

    fn trusts(&self, address: IpAddr) -> bool {
        self.trusted.iter().any(|network| network.contains(address))
    }

    /// The client's key: its embedded IPv4 address if it has one (and that is asked), cut
    /// to the family's prefix.
    fn cut(&self, address: IpAddr) -> IpAddr {
        let address = if self.embedded_v4 {
            embedded_v4(address)
        } else {
            address
        };
        match address {
            IpAddr::V4(v4) => IpAddr::V4(Ipv4Addr::from(u32::from(v4) & self.v4_keep)),
            IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & self.v6_keep)),
        }
    }
}

/// The IPv4 address inside an IPv6 address of the two forms that carry one whole: the NAT64
/// well-known prefix `64:ff9b::/96` (RFC 6052: an IPv4 host seen through a NAT64 gateway) and
/// the deprecated IPv4-compatible `::a.b.c.d` (RFC 4291; not `::` or `::1`). Any other address
/// as it is.
fn embedded_v4(address: IpAddr) -> IpAddr {
    let IpAddr::V6(v6) = address else {
        return address;
    };
    let bits = u128::from(v6);
    let low = bits as u32;
    let nat64 = bits >> 32 == 0x0064_ff9b_0000_0000_0000_0000;
    let compatible = bits >> 32 == 0 && low > 1;
    if nat64 || compatible {
        IpAddr::V4(low.into())
    } else {
        address
    }
}

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_REAL_IP: HeaderName = HeaderName::from_static("x-real-ip");

/// An address as a forwarding header writes it: `192.0.2.1`, `192.0.2.1:8080`, `2001:db8::1`,
/// `[2001:db8::1]` or `[2001:db8::1]:8080`.
fn parse_node(node: &str) -> Option<IpAddr> {
    let node = node.trim();
    if let Ok(address) = node.parse::<IpAddr>() {
        return Some(address);
    }
    if let Some(bracketed) = node.strip_prefix('[') {
        let (inside, after) = bracketed.split_once(']')?;
        let port_ok = after.is_empty() || after.strip_prefix(':').is_some_and(is_port);
        return port_ok.then(|| inside.parse::<Ipv6Addr>().ok().map(IpAddr::V6))?;
    }
    let (host, port) = node.rsplit_once(':')?;
    if !is_port(port) {
        return None;
    }
    host.parse::<Ipv4Addr>().ok().map(IpAddr::V4)
}

fn is_port(port: &str) -> bool {
    port.parse::<u16>().is_ok()
}

/// The `for` node of one RFC 7239 element (`for=192.0.2.60;proto=http;by=…`), unquoted; `None`
/// if the element has no `for`, more than one, or one that is not an address (`unknown`, an
/// obfuscated `_name`).
fn forwarded_for(element: &str) -> Option<IpAddr> {
    let mut nodes = element.split(';').filter_map(|pair| {
        let (name, value) = pair.split_once('=')?;
        name.trim()
            .eq_ignore_ascii_case("for")
            .then_some(value.trim())
    });
    let node = nodes.next()?;
    if nodes.next().is_some() {
        return None;
    }
    let node = node
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or(node);
    parse_node(node)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn headers(name: &'static str, values: &[&str]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for value in values {
            map.append(name, value.parse().unwrap());
        }
        map
    }

    fn trusting(networks: &[&str], header: ForwardedHeader) -> ClientIp {
        ClientIp::peer()
            .trust(networks.iter().map(|n| n.parse().unwrap()))
            .header(header)
    }

    #[test]
    fn networks_parse_normalize_and_refuse_bad_input() {
        let lan: Cidr = "10.9.8.7/8".parse().unwrap();
        assert_eq!(lan.to_string(), "10.0.0.0/8");
        let host: Cidr = "2001:db8::1".parse().unwrap();
        assert_eq!(host.prefix(), 128);
        let mapped: Cidr = "::ffff:192.168.0.0/112".parse().unwrap();
        assert_eq!(mapped.to_string(), "192.168.0.0/16");
        let everything: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(everything.contains(ip("255.1.2.3")));
        assert!(!everything.contains(ip("2001:db8::1")));
        for bad in [
            "10.0.0.0/33",
            "::/129",
            "10.0.0/8",
            "10.0.0.0/",
            "x",
            "",
            "10.0.0.0/-1",
        ] {
            assert!(bad.parse::<Cidr>().is_err(), "{bad}");
        }
    }

    #[test]
    fn without_trust_the_peer_is_the_client_whatever_the_headers_say() {
        let forged = headers("x-forwarded-for", &["1.2.3.4"]);
        let client = ClientIp::peer().resolve(Some(ip("198.51.100.1")), &forged);
        assert_eq!(client, Some(ip("198.51.100.1")));
        let real_ip = headers("x-real-ip", &["1.2.3.4"]);
        let client = ClientIp::peer().resolve(Some(ip("198.51.100.1")), &real_ip);
        assert_eq!(client, Some(ip("198.51.100.1")));
        assert_eq!(ClientIp::peer().resolve(None, &forged), None);
    }

    #[test]
    fn the_chain_is_walked_from_the_right_to_the_first_untrusted_address() {
        let config = trusting(&["10.0.0.0/8"], ForwardedHeader::XForwardedFor);
        let peer = Some(ip("10.0.0.1"));
        // Two header lines form one list; the client forged the leftmost entries.
        let chain = headers(
            "x-forwarded-for",
            &["7.7.7.7, 203.0.113.5", "10.1.1.1 , 10.2.2.2"],
        );
        assert_eq!(config.resolve(peer, &chain), Some(ip("203.0.113.5")));
        // An untrusted peer: headers ignored.
        assert_eq!(
            config.resolve(Some(ip("192.0.2.1")), &chain),
            Some(ip("192.0.2.1"))
        );
        // Everything trusted: the leftmost.
        let all = headers("x-forwarded-for", &["10.3.3.3, 10.2.2.2"]);
        assert_eq!(config.resolve(peer, &all), Some(ip("10.3.3.3")));
        // No header: the trusted peer itself.
        assert_eq!(config.resolve(peer, &HeaderMap::new()), peer);
        // Ports and brackets.
        let ported = headers("x-forwarded-for", &["[2001:db8::7]:443, 203.0.113.9:80"]);
        assert_eq!(config.resolve(peer, &ported), Some(ip("203.0.113.9")));
    }

    #[test]
    fn malformed_entries_matter_only_right_of_the_client() {
        let config = trusting(&["10.0.0.0/8"], ForwardedHeader::XForwardedFor);
        let peer = Some(ip("10.0.0.1"));
        let left = headers("x-forwarded-for", &["garbage, 203.0.113.5, 10.0.0.9"]);
        assert_eq!(config.resolve(peer, &left), Some(ip("203.0.113.5")));
        let right = headers("x-forwarded-for", &["203.0.113.5, garbage, 10.0.0.9"]);
        assert_eq!(config.resolve(peer, &right), None);
        // What the client wrote cannot spoil what the proxy appended on the same line: an
        // unbalanced quote, a byte that is not ASCII.
        let quote = headers("x-forwarded-for", &["\"1.2.3.4, 203.0.113.5"]);
        assert_eq!(config.resolve(peer, &quote), Some(ip("203.0.113.5")));
        let mut binary = HeaderMap::new();
        binary.insert(
            "x-forwarded-for",
            http::HeaderValue::from_bytes(b"\xff, 203.0.113.5").unwrap(),
        );
        assert_eq!(config.resolve(peer, &binary), Some(ip("203.0.113.5")));
        binary.insert(
            "x-forwarded-for",
            http::HeaderValue::from_bytes(b"203.0.113.5, \xff").unwrap(),
        );
        assert_eq!(config.resolve(peer, &binary), None);
    }

    #[test]
    fn rfc_7239_elements_with_quotes_ports_and_obfuscation() {
        let config = trusting(&["10.0.0.0/8"], ForwardedHeader::Forwarded);
        let peer = Some(ip("10.0.0.1"));
        let chain = headers(
            "forwarded",
            &[r#"for=6.6.6.6, for="[2001:db8:cafe::17]:4711";proto=https, For=10.0.0.5;by=x"#],
        );
        assert_eq!(
            config.resolve(peer, &chain),
            Some(ip("2001:db8:cafe::")) // cut to its /64
        );
        let hidden = headers("forwarded", &["for=_hidden, for=10.0.0.5"]);
        assert_eq!(config.resolve(peer, &hidden), None);
        let unknown_left = headers("forwarded", &["for=unknown, for=198.51.100.2"]);
        assert_eq!(
            config.resolve(peer, &unknown_left),
            Some(ip("198.51.100.2"))
        );
    }

    #[test]
    fn x_real_ip_is_one_hop() {
        let config = trusting(&["10.0.0.0/8"], ForwardedHeader::XRealIp);
        let peer = Some(ip("10.0.0.1"));
        let set = headers("x-real-ip", &["1.1.1.1", "203.0.113.5"]);
        assert_eq!(config.resolve(peer, &set), Some(ip("203.0.113.5")));
        let bad = headers("x-real-ip", &["nope"]);
        assert_eq!(config.resolve(peer, &bad), None);
        assert_eq!(config.resolve(peer, &HeaderMap::new()), peer);
    }

    #[test]
    fn prefixes_and_mapped_addresses() {
        let none = HeaderMap::new();
        let default = ClientIp::peer();
        assert_eq!(
            default.resolve(Some(ip("2001:db8:a:b:c:d:e:f")), &none),
            Some(ip("2001:db8:a:b::"))
        );
        assert_eq!(
            default.resolve(Some(ip("::ffff:192.0.2.77")), &none),
            Some(ip("192.0.2.77"))
        );
        // IPv4 hosts seen through NAT64, and the IPv4-compatible form, are keyed by their IPv4
        // address (not by the gateway's /64, which they would all share); unless told not to.
        for embedded in ["64:ff9b::192.0.2.77", "::192.0.2.77"] {
            assert_eq!(
                default.resolve(Some(ip(embedded)), &none),
                Some(ip("192.0.2.77")),
                "{embedded}"
            );
        }
        assert_eq!(default.resolve(Some(ip("::1")), &none), Some(ip("::")));
        assert_eq!(
            default.resolve(Some(ip("64:ff9b:1::192.0.2.77")), &none),
            Some(ip("64:ff9b:1::")),
            "the local-use NAT64 prefix is a network of its own"
        );
        let as_is = ClientIp::peer().embedded_ipv4(false);
        assert_eq!(
            as_is.resolve(Some(ip("64:ff9b::192.0.2.77")), &none),
            Some(ip("64:ff9b::"))
        );
        let wide = ClientIp::peer().ipv6_prefix(200).ipv4_prefix(24);
        assert_eq!(
            wide.resolve(Some(ip("2001:db8::1")), &none),
            Some(ip("2001:db8::1"))
        );
        assert_eq!(
            wide.resolve(Some(ip("192.0.2.77")), &none),
            Some(ip("192.0.2.0"))
        );
        let zero = ClientIp::peer().ipv6_prefix(0).ipv4_prefix(0);
        assert_eq!(
            zero.resolve(Some(ip("192.0.2.77")), &none),
            Some(ip("0.0.0.0"))
        );
        // A trusted proxy list given as mapped addresses still matches IPv4 peers.
        let mapped = trusting(&["::ffff:10.0.0.0/104"], ForwardedHeader::XForwardedFor);
        let chain = headers("x-forwarded-for", &["203.0.113.5"]);
        assert_eq!(
            mapped.resolve(Some(ip("10.0.0.1")), &chain),
            Some(ip("203.0.113.5"))
        );
    }
}
