//! [`Inbound`]: the request as the policies' key extractors see it — its head (method, URI,
//! headers, extensions) and the client address the middleware resolved — and where the peer
//! address is looked for.

use core::ptr::NonNull;
use std::net::{IpAddr, SocketAddr};

use http::header::{AsHeaderName, HeaderMap, HeaderValue};
use http::{Extensions, Method, Uri};

use crate::policy::Key;

/// A request's head, as the key extractors of a [`Policies<Inbound>`](crate::Policies) set see
/// it, with the client address the middleware resolved (see [`ClientIp`](super::ClientIp)).
///
/// It borrows the request (no copy, no allocation), for the length of [`scope`](Self::scope).
///
/// ```
/// use flowgate::http::Inbound;
/// use flowgate::policy::{Policies, Policy};
/// use flowgate::clock::ManualClock;
///
/// let policies = Policies::<Inbound>::builder()
///     .clock(ManualClock::new())
///     // Per API key and route; requests without the header share one bucket (`None`).
///     .policy(
///         Policy::keyed_with("per-key-per-route", |r: &Inbound, key| {
///             key.add(&r.header("x-api-key")).add(r.route_or_path());
///         })
///         .quota("1/min".parse()?),
///     )
///     .build()?;
///
/// let request = http::Request::get("/search").header("x-api-key", "k1").body(())?;
/// assert!(Inbound::scope(&request, None, |inbound| policies.check(inbound).is_ok()));
/// assert!(Inbound::scope(&request, None, |inbound| policies.check(inbound).is_err()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Inbound {
    // Pointers into the request's head, which outlives every `&Inbound` handed out: an
    // `Inbound` only exists inside `scope`, borrowing a request that cannot move or change
    // until `scope` returns (see its SAFETY comment). A lifetime parameter would say this
    // without `unsafe`, but a policy set's request type is one type for all requests; the
    // head is not moved into an owned `Inbound` because that copy cost the middleware more
    // than tower_governor's whole overhead (BENCHMARKS.md, "The HTTP layer").
    method: NonNull<Method>,
    uri: NonNull<Uri>,
    headers: NonNull<HeaderMap>,
    extensions: NonNull<Extensions>,
    client: Client,
}

/// The client's address as an `Inbound` holds it: its 128 bits (an IPv4 address in the low 32)
/// and its family. Aligned words, not an `Option<IpAddr>` (17 bytes, byte-aligned): copying
/// those just after they were written stalled the processor's store forwarding, which the
/// middleware benchmark showed.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct Client {
    bits: u128,
    /// 0: none; 4 or 6: the family.
    family: u8,
}

impl Client {
    #[inline(always)]
    fn pack(address: Option<IpAddr>) -> Self {
        match address {
            None => Self { bits: 0, family: 0 },
            Some(IpAddr::V4(v4)) => Self {
                bits: u128::from(u32::from(v4)),
                family: 4,
            },
            Some(IpAddr::V6(v6)) => Self {
                bits: u128::from(v6),
                family: 6,
            },
        }
    }

    #[inline(always)]
    fn unpack(self) -> Option<IpAddr> {
        match self.family {
            // Truncation: an IPv4 address was packed into the low 32 bits.
            4 => Some(IpAddr::from((self.bits as u32).to_be_bytes())),
            6 => Some(IpAddr::from(self.bits.to_be_bytes())),
            _ => None,
        }
    }
}

impl core::fmt::Debug for Inbound {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Inbound")
            .field("method", self.method())
            .field("uri", self.uri())
            .field("client", &self.client_ip())
            .finish_non_exhaustive()
    }
}

impl Inbound {
    /// Calls `f` with `request`'s head as an `Inbound`, with `client` as its client's address
    /// (as [`ClientIp::resolve`](super::ClientIp::resolve) gives it): what the middleware does
    /// for every request, for checking a [`Policies<Inbound>`](crate::Policies) set elsewhere.
    #[inline]
    pub fn scope<B, T>(
        request: &http::Request<B>,
        client: Option<IpAddr>,
        f: impl FnOnce(&Inbound) -> T,
    ) -> T {
        let inbound = Inbound {
            method: NonNull::from(request.method()),
            uri: NonNull::from(request.uri()),
            headers: NonNull::from(request.headers()),
            extensions: NonNull::from(request.extensions()),
            client: Client::pack(client),
        };
        // SAFETY (of every later dereference): `request` is borrowed shared for this whole call,
        // so its head neither moves nor changes while `inbound` lives; `inbound` is a local
        // that `f` can only borrow (`Inbound` is neither `Clone` nor constructible outside this
        // function), and every accessor ties what it returns to that borrow, so no reference
        // into the head outlives this call.
        f(&inbound)
    }

    /// The client's address, cut to its prefix; `None` when it cannot be told (see
    /// [`Unkeyed`](super::Unkeyed)).
    #[inline]
    pub fn client_ip(&self) -> Option<IpAddr> {
        self.client.unpack()
    }

    /// The request method.
    #[inline]
    pub fn method(&self) -> &Method {
        // SAFETY: see `scope`: the head outlives `self`.
        unsafe { self.method.as_ref() }
    }

    /// The request URI.
    #[inline]
    pub fn uri(&self) -> &Uri {
        // SAFETY: see `scope`: the head outlives `self`.
        unsafe { self.uri.as_ref() }
    }

    /// The URI's path. Keying by the raw path lets clients invent keys; prefer
    /// [`route`](Self::route) where the router provides it (the tables are bounded either way).
    #[inline]
    pub fn path(&self) -> &str {
        self.uri().path()
    }

    /// The route pattern the request matched (`/users/{id}`), from axum's `MatchedPath` (with
    /// the `axum` feature; none for the 404 fallback) or actix-web's `match_pattern` (with the
    /// `actix` feature); `None` otherwise.
    #[inline]
    pub fn route(&self) -> Option<&str> {
        route(self.extensions())
    }

    /// [`route`](Self::route), or the [`path`](Self::path) when there is none.
    #[inline]
    pub fn route_or_path(&self) -> &str {
        self.route().unwrap_or_else(|| self.path())
    }

    /// The request headers.
    #[inline]
    pub fn headers(&self) -> &HeaderMap {
        // SAFETY: see `scope`: the head outlives `self`.
        unsafe { self.headers.as_ref() }
    }

    /// The first value of the header `name`, if any.
    #[inline]
    pub fn header<K: AsHeaderName>(&self, name: K) -> Option<&HeaderValue> {
        self.headers().get(name)
    }

    /// The request extensions (an authenticated user a previous layer inserted, for example).
    #[inline]
    pub fn extensions(&self) -> &Extensions {
        // SAFETY: see `scope`: the head outlives `self`.
        unsafe { self.extensions.as_ref() }
    }

    /// The peer's address, as the request's extensions give it (see the
    /// [module docs](super#client-addresses)).
    #[inline]
    pub fn peer(&self) -> Option<IpAddr> {
        peer_addr(self.extensions())
    }
}

/// A key extractor for [`Policy::keyed_with`](crate::Policy::keyed_with): the client's
/// address ([`Inbound::client_ip`]; requests without one share the `None` bucket).
///
/// ```
/// use flowgate::http::{by_client_ip, Inbound};
/// use flowgate::Policy;
///
/// let per_client = Policy::keyed_with("per-client", by_client_ip).quota("20/min".parse()?);
/// # let _: Policy<Inbound> = per_client;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[inline]
pub fn by_client_ip(request: &Inbound, key: &mut Key<'_>) {
    key.add(&request.client);
}

/// The peer's address from a request's extensions: axum's `ConnectInfo<SocketAddr>` (with the
/// `axum` feature; serve with `into_make_service_with_connect_info::<SocketAddr>()`), tonic's
/// `TcpConnectInfo` (with the `tonic` feature: tonic's server inserts it over plain TCP; over
/// TLS it inserts a `TlsConnectInfo`, which this does not read), or a
/// [`SocketAddr`] or an [`IpAddr`] that the connection's service inserted (with plain hyper:
/// `request.extensions_mut().insert(remote_addr)` in the `service_fn` of each connection).
#[inline]
pub(crate) fn peer_addr(extensions: &Extensions) -> Option<IpAddr> {
    #[cfg(feature = "axum")]
    if let Some(info) = extensions.get::<axum::extract::ConnectInfo<SocketAddr>>() {
        return Some(info.0.ip());
    }
    #[cfg(feature = "tonic")]
    if let Some(address) = extensions
        .get::<tonic::transport::server::TcpConnectInfo>()
        .and_then(|info| info.remote_addr())
    {
        return Some(address.ip());
    }
    if let Some(address) = extensions.get::<SocketAddr>() {
        return Some(address.ip());
    }
    extensions.get::<IpAddr>().copied()
}

/// The route pattern a router other than axum's matched (actix-web's), as its middleware
/// puts it in the request's extensions.
#[cfg_attr(not(feature = "actix"), allow(dead_code))]
#[derive(Clone)]
pub(crate) struct MatchedRoute(pub(crate) String);

#[inline]
fn route(extensions: &Extensions) -> Option<&str> {
    #[cfg(feature = "axum")]
    if let Some(path) = extensions.get::<axum::extract::MatchedPath>() {
        return Some(path.as_str());
    }
    #[cfg(feature = "actix")]
    if let Some(route) = extensions.get::<MatchedRoute>() {
        return Some(&route.0);
    }
    #[cfg(not(any(feature = "axum", feature = "actix")))]
    let _ = extensions;
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every accessor reads the borrowed head (run under Miri too: `cargo +nightly miri test
    /// --features axum --lib http::inbound`).
    #[test]
    fn a_scoped_inbound_reads_the_request_it_borrows() {
        let mut request = http::Request::post("/users/7?x=1")
            .header("x-api-key", "k1")
            .body(vec![1u8, 2, 3])
            .unwrap();
        let peer: SocketAddr = "192.0.2.1:4000".parse().unwrap();
        request.extensions_mut().insert(peer);
        let client = Some(IpAddr::from([192, 0, 2, 1]));
        let seen = Inbound::scope(&request, client, |inbound| {
            (
                inbound.method().clone(),
                inbound.path().to_owned(),
                inbound.uri().query().map(str::to_owned),
                inbound.header("x-api-key").cloned(),
                inbound.headers().len(),
                inbound.peer(),
                inbound.client_ip(),
                inbound.route_or_path().to_owned(),
                format!("{inbound:?}").contains("192.0.2.1"),
            )
        });
        assert_eq!(seen.0, Method::POST);
        assert_eq!(seen.1, "/users/7");
        assert_eq!(seen.2.as_deref(), Some("x=1"));
        assert_eq!(seen.3, Some(HeaderValue::from_static("k1")));
        assert_eq!(seen.4, 1);
        assert_eq!(seen.5, Some(peer.ip()));
        assert_eq!(seen.6, client);
        assert_eq!(seen.7, "/users/7");
        assert!(seen.8);
        // The request is whole afterwards.
        assert_eq!(request.into_body(), vec![1, 2, 3]);
    }
}
