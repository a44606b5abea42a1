//! gRPC refusals over real sockets: a tonic service (its messages derived with prost's macro,
//! no protoc) behind the middleware, on tonic's own server (`Server::builder().layer(...)`) and
//! in an axum router, on 127.0.0.1:0, called by a tonic client over HTTP/2. The client must see
//! `RESOURCE_EXHAUSTED`, the policy's name, and the wait in `retry-after` and in a
//! `google.rpc.RetryInfo` detail. Quotas run on a manual clock.

#[path = "support/http_client.rs"]
mod http_client;

#[path = "support/axum_server.rs"]
mod axum_server;

#[path = "support/ruling.rs"]
mod ruling;

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use flowgate::clock::ManualClock;
use flowgate::http::{Inbound, RateLimitLayer, Ruling};
use flowgate::policy::{Policies, Policy};
use http::uri::PathAndQuery;
use http::StatusCode;
use tonic::codec::ProstCodec;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Endpoint, Server};
use tonic::{Code, Status};
use tonic_types::StatusExt;

#[derive(Clone, PartialEq, prost::Message)]
struct Ping {
    #[prost(string, tag = "1")]
    text: String,
}

const PATH: &str = "/flowgate.test.Echo/Ping";

/// The unary method: answers the ping's text.
struct Echo;

impl tonic::server::UnaryService<Ping> for Echo {
    type Response = Ping;
    type Future = Pin<Box<dyn Future<Output = Result<tonic::Response<Ping>, Status>> + Send>>;

    /// The text, and the layer's ruling if it attached one.
    fn call(&mut self, request: tonic::Request<Ping>) -> Self::Future {
        let ruling = request
            .extensions()
            .get::<Ruling>()
            .map(|r| ruling::describe(Some(r)));
        let mut text = request.into_inner().text;
        if let Some(ruling) = ruling {
            text = format!("{text} | {ruling}");
        }
        Box::pin(async move { Ok(tonic::Response::new(Ping { text })) })
    }
}

/// The method as an HTTP service, as tonic's generated servers route it.
#[derive(Clone)]
struct EchoRoute;

impl tonic::server::NamedService for EchoRoute {
    const NAME: &'static str = "flowgate.test.Echo";
}

/// Any request body: axum's, or tonic's on its own server.
impl<B> tower::Service<http::Request<B>> for EchoRoute
where
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>> + Send,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        Box::pin(async move {
            let mut grpc = tonic::server::Grpc::new(ProstCodec::<Ping, Ping>::default());
            Ok(grpc.unary(Echo, request).await)
        })
    }
}

/// Two calls per minute per client and method: one cell every 30 s.
fn policies(clock: &ManualClock) -> Policies<Inbound, ManualClock> {
    Policies::<Inbound>::builder()
        .clock(clock.clone())
        .policy(
            Policy::keyed_with("per-client-per-method", |r: &Inbound, key| {
                key.add(&r.client_ip()).add(r.path());
            })
            .quota("2/min".parse().unwrap()),
        )
        .build()
        .unwrap()
}

async fn serve(
    layer: RateLimitLayer<Policies<Inbound, ManualClock>>,
    connect_info: bool,
) -> SocketAddr {
    let app = Router::new().route_service(PATH, EchoRoute).layer(layer);
    axum_server::serve(app, connect_info).await
}

/// The same service on tonic's own server, the layer given to `Server::builder().layer(...)`
/// (the peer address from tonic's `TcpConnectInfo`).
async fn serve_tonic(layer: RateLimitLayer<Policies<Inbound, ManualClock>>) -> SocketAddr {
    let incoming = TcpIncoming::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let address = incoming.local_addr().unwrap();
    let server = Server::builder().layer(layer).add_service(EchoRoute);
    tokio::spawn(server.serve_with_incoming(incoming));
    address
}

async fn ping(channel: &Channel, text: &str) -> Result<tonic::Response<Ping>, Status> {
    ping_with(channel, text, None).await
}

/// [`ping`], with the metadata `x-api-key: api_key` if there is one.
async fn ping_with(
    channel: &Channel,
    text: &str,
    api_key: Option<&'static str>,
) -> Result<tonic::Response<Ping>, Status> {
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    grpc.ready().await.unwrap();
    let mut request = tonic::Request::new(Ping { text: text.into() });
    if let Some(api_key) = api_key {
        request
            .metadata_mut()
            .insert("x-api-key", api_key.parse().unwrap());
    }
    let path = PathAndQuery::from_static(PATH);
    grpc.unary(request, path, ProstCodec::<Ping, Ping>::default())
        .await
}

async fn channel(address: SocketAddr) -> Channel {
    Channel::from_shared(format!("http://{address}"))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

/// Two calls pass with the draft's quota headers in their metadata; the third is refused as
/// gRPC: `RESOURCE_EXHAUSTED` naming the policy, `retry-after` in whole seconds and the exact
/// wait (here 19.5 s) in `RetryInfo`. The same route called as plain HTTP is still a 429.
#[tokio::test]
async fn a_refused_call_is_resource_exhausted_with_its_wait() {
    let clock = ManualClock::new();
    let address = serve(RateLimitLayer::new(policies(&clock)), true).await;
    refuses_the_third_call(address, &clock, false).await;

    // Not a gRPC call (no `application/grpc`): the HTTP refusal.
    let client = http_client::client();
    let (status, headers, _) =
        http_client::get(&client, address, PATH, &[] as &[(&str, &str)]).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(headers["content-type"], "application/problem+json");
}

/// On tonic's own server, the layer given to `Server::builder().layer(...)`: the same answers,
/// each client told by its address (a second client is not refused with the first).
#[tokio::test]
async fn tonics_own_server_takes_the_layer() {
    let clock = ManualClock::new();
    let layer = RateLimitLayer::new(policies(&clock)).attach_decisions(true);
    let address = serve_tonic(layer).await;
    refuses_the_third_call(address, &clock, true).await;

    // Another client (a second loopback address) has a bucket of its own: two calls pass
    // while the first client's bucket has one cell left at most.
    let connector = tower::service_fn(move |_: http::Uri| async move {
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.bind("127.0.0.2:0".parse().unwrap())?;
        let stream = socket.connect(address).await?;
        Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
    });
    let other = Endpoint::from_shared(format!("http://{address}"))
        .unwrap()
        .connect_with_connector(connector)
        .await
        .unwrap();
    // The method's handler reads the decision from the request's extensions.
    for left in [1, 0] {
        let answer = ping(&other, "other").await.expect("admitted");
        let ruling = format!(
            "admitted quotas=per-client-per-method:{left} tightest=per-client-per-method dry_run=-"
        );
        assert_eq!(answer.get_ref().text, format!("other | {ruling}"));
    }
    assert_eq!(
        ping(&other, "other").await.expect_err("refused").code(),
        Code::ResourceExhausted
    );
}

/// Two calls to `address` pass (their echo carrying the layer's ruling when it is `attached`);
/// the third, 10.5 s later, is refused with its wait; after it, a call passes again.
async fn refuses_the_third_call(address: SocketAddr, clock: &ManualClock, attached: bool) {
    let channel = channel(address).await;

    for i in 0..2 {
        let answer = ping(&channel, "hello").await.expect("admitted");
        let ruling = format!(
            " | admitted quotas=per-client-per-method:{} tightest=per-client-per-method dry_run=-",
            1 - i
        );
        let text = format!("hello{}", if attached { ruling.as_str() } else { "" });
        assert_eq!(answer.get_ref().text, text, "call {i}");
        let remaining = format!("\"per-client-per-method\";r={};t=30", 1 - i);
        let ratelimit = answer.metadata().get("ratelimit").unwrap();
        assert_eq!(ratelimit.to_str().unwrap(), remaining, "call {i}");
    }
    clock.advance(Duration::from_millis(10_500));
    let status = ping(&channel, "hello").await.expect_err("refused");
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert_eq!(
        status.message(),
        "rate limited by policy 'per-client-per-method': retry after 20 s"
    );
    let retry_after = status.metadata().get("retry-after").unwrap();
    assert_eq!(retry_after.to_str().unwrap(), "20");
    let retry_info = status.get_details_retry_info().expect("RetryInfo detail");
    assert_eq!(retry_info.retry_delay, Some(Duration::from_millis(19_500)));
    assert!(status.metadata().get("ratelimit").is_some());

    // After the wait, the call passes again.
    clock.advance(Duration::from_millis(19_500));
    assert!(ping(&channel, "again").await.is_ok());
}

/// A server that does not pass the peer address refuses every call (the default rule), as
/// gRPC `INTERNAL` with the reason, and without a retry detail: waiting would not help.
#[tokio::test]
async fn a_call_whose_client_cannot_be_told_is_internal() {
    let clock = ManualClock::new();
    let address = serve(RateLimitLayer::new(policies(&clock)), false).await;
    let status = ping(&channel(address).await, "hello")
        .await
        .expect_err("refused");
    assert_eq!(status.code(), Code::Internal);
    assert!(status
        .message()
        .starts_with("the client's address could not be determined"));
    assert!(status.metadata().get("retry-after").is_none());
    assert!(status.get_details_retry_info().is_none());
}

/// A key extractor's rejection reaches a tonic client as the gRPC code of its status
/// (`UNAUTHENTICATED` for a 401) with its message and no retry detail, on tonic's own server;
/// a `refusal_response` that answers it with 403 makes it `PERMISSION_DENIED`. A call with a
/// key passes.
#[tokio::test]
async fn a_rejected_call_carries_its_status_as_a_grpc_code() {
    use flowgate::http::Refusal;
    use flowgate::outcome::Rejection;
    static NO_KEY: Rejection = Rejection::new(401, "the call carries no API key");
    let set = || {
        Policies::<Inbound>::builder()
            .clock(ManualClock::new())
            .policy(
                Policy::keyed_with("per-api-key", |r: &Inbound, key| {
                    match r.header("x-api-key") {
                        Some(api_key) => key.add(api_key.as_bytes()),
                        None => key.reject(&NO_KEY),
                    };
                })
                .quota("2/min".parse().unwrap()),
            )
            .build()
            .unwrap()
    };
    let plain = channel(serve_tonic(RateLimitLayer::new(set())).await).await;
    let forbidding = RateLimitLayer::new(set()).refusal_response(|refusal: &Refusal| {
        let mut response = refusal.response();
        if response.status() == StatusCode::UNAUTHORIZED {
            *response.status_mut() = StatusCode::FORBIDDEN;
        }
        response
    });
    let forbidding = channel(serve_tonic(forbidding).await).await;
    for (channel, code) in [
        (&plain, Code::Unauthenticated),
        (&forbidding, Code::PermissionDenied),
    ] {
        let status = ping(channel, "hello").await.expect_err("rejected");
        assert_eq!(status.code(), code);
        assert_eq!(status.message(), "the call carries no API key");
        assert!(status.metadata().get("retry-after").is_none());
        assert!(status.get_details_retry_info().is_none());
        let admitted = ping_with(channel, "hello", Some("k1"))
            .await
            .expect("admitted");
        assert_eq!(admitted.get_ref().text, "hello");
    }
}
