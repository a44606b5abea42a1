//! [`Inbound`]: the request as the policies' key extractors see it — its head (method, URI,
//! headers, extensions) and the client address the middleware resolved — and where the peer
//! address is looked for.

use std::net::{IpAddr, SocketAddr};

use http::header::{AsHeaderName, HeaderMap, HeaderValue};
use http::request::Parts;
use http::{Extensions, Method, Uri};

use crate::policy::Key;

/// A request's head, as the key extractors of a [`Policies<Inbound>`](crate::Policies) set see
/// it, with the client address the middleware resolved (see [`ClientIp`](super::ClientIp)).
///
/// The middleware moves the request's head in and out (no copy of headers, no allocation).
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
///         .quota("100/min".parse()?),
///     )
///     .build()?;
///
/// let (parts, ()) = http::Request::get("/search").header("x-api-key", "k1").body(())?.into_parts();
/// let inbound = Inbound::new(parts, None);
/// assert!(policies.check(&inbound).is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Inbound {
    parts: Parts,
    client: Option<IpAddr>,
}

impl Inbound {
    /// A request's head and its client's address (as [`ClientIp::resolve`](super::ClientIp::resolve)
    /// gives it).
    pub fn new(parts: Parts, client: Option<IpAddr>) -> Self {
        Self { parts, client }
    }

    /// The client's address, cut to its prefix; `None` when it cannot be told (see
    /// [`Unkeyed`](super::Unkeyed)).
    #[inline]
    pub fn client_ip(&self) -> Option<IpAddr> {
        self.client
    }

    /// The request method.
    #[inline]
    pub fn method(&self) -> &Method {
        &self.parts.method
    }

    /// The request URI.
    #[inline]
    pub fn uri(&self) -> &Uri {
        &self.parts.uri
    }

    /// The URI's path. Keying by the raw path lets clients invent keys; prefer
    /// [`route`](Self::route) where the router provides it (the tables are bounded either way).
    #[inline]
    pub fn path(&self) -> &str {
        self.parts.uri.path()
    }

    /// The route pattern the request matched (`/users/{id}`), from axum's `MatchedPath` (with
    /// the `axum` feature, when the layer is added with `route_layer` or on a route, so that it
    /// runs after routing); `None` otherwise.
    #[inline]
    pub fn route(&self) -> Option<&str> {
        route(&self.parts.extensions)
    }

    /// [`route`](Self::route), or the [`path`](Self::path) when there is none.
    #[inline]
    pub fn route_or_path(&self) -> &str {
        self.route().unwrap_or_else(|| self.path())
    }

    /// The request headers.
    #[inline]
    pub fn headers(&self) -> &HeaderMap {
        &self.parts.headers
    }

    /// The first value of the header `name`, if any.
    #[inline]
    pub fn header<K: AsHeaderName>(&self, name: K) -> Option<&HeaderValue> {
        self.parts.headers.get(name)
    }

    /// The request extensions (an authenticated user a previous layer inserted, for example).
    #[inline]
    pub fn extensions(&self) -> &Extensions {
        &self.parts.extensions
    }

    /// The peer's address, as [`peer_addr`] finds it.
    #[inline]
    pub fn peer(&self) -> Option<IpAddr> {
        peer_addr(&self.parts.extensions)
    }

    /// The whole head.
    pub fn parts(&self) -> &Parts {
        &self.parts
    }

    /// The head back.
    pub fn into_parts(self) -> Parts {
        self.parts
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
pub fn by_client_ip(request: &Inbound, key: &mut Key) {
    key.add(&request.client);
}

/// The peer's address from a request's extensions: axum's `ConnectInfo<SocketAddr>` (with the
/// `axum` feature; serve with `into_make_service_with_connect_info::<SocketAddr>()`), or a
/// [`SocketAddr`] or an [`IpAddr`] that the connection's service inserted (with plain hyper:
/// `request.extensions_mut().insert(remote_addr)` in the `service_fn` of each connection).
#[inline]
pub fn peer_addr(extensions: &Extensions) -> Option<IpAddr> {
    #[cfg(feature = "axum")]
    if let Some(info) = extensions.get::<axum::extract::ConnectInfo<SocketAddr>>() {
        return Some(info.0.ip());
    }
    if let Some(address) = extensions.get::<SocketAddr>() {
        return Some(address.ip());
    }
    extensions.get::<IpAddr>().copied()
}

#[cfg(feature = "axum")]
#[inline]
fn route(extensions: &Extensions) -> Option<&str> {
    extensions
        .get::<axum::extract::MatchedPath>()
        .map(|path| path.as_str())
}

#[cfg(not(feature = "axum"))]
#[inline]
fn route(_: &Extensions) -> Option<&str> {
    None
}
