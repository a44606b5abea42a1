//! An axum server for tests over loopback: an app served on a free 127.0.0.1 port, with or
//! without the peer address in each request, until the test's runtime ends.
#![allow(dead_code)]

use std::net::SocketAddr;

use axum::Router;
use tokio::net::TcpListener;

/// Serves `app` with the peer address in each request (`ConnectInfo`) or not, on a free
/// loopback port, and returns that address.
pub async fn serve(app: Router, connect_info: bool) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        if connect_info {
            let app = app.into_make_service_with_connect_info::<SocketAddr>();
            axum::serve(listener, app).await.unwrap();
        } else {
            axum::serve(listener, app).await.unwrap();
        }
    });
    address
}
