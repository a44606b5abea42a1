//! A real HTTP/1 client for tests over loopback: one `GET` with headers, answered with its
//! status, headers and body.
#![allow(dead_code)]

use std::net::SocketAddr;

use bytes::Bytes;
use http::{HeaderMap, Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

pub type HttpClient = Client<HttpConnector, Empty<Bytes>>;

/// A client on tokio, with a pool of keep-alive connections.
pub fn client() -> HttpClient {
    Client::builder(TokioExecutor::new()).build_http()
}

/// `GET http://{address}{path}` with `headers`; panics if the request fails.
pub async fn get(
    client: &HttpClient,
    address: SocketAddr,
    path: &str,
    headers: &[(&str, impl AsRef<str>)],
) -> (StatusCode, HeaderMap, Bytes) {
    let mut request = Request::get(format!("http://{address}{path}"));
    for (name, value) in headers {
        request = request.header(*name, value.as_ref());
    }
    let response = client
        .request(request.body(Empty::new()).unwrap())
        .await
        .unwrap();
    let (parts, body) = response.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    (parts.status, parts.headers, body)
}
