//! A real HTTP client for tests: hyper's HTTP/1.1 connection, one per request.

use std::net::SocketAddr;

use tokio::net::TcpStream;

/// One GET over a fresh connection with hyper's HTTP/1.1 client: the status code.
pub async fn hyper_get(addr: SocketAddr, path: &str, fields: &[(&str, &str)]) -> u16 {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(connection);
    let mut request = http::Request::get(path).header("host", "portero.test");
    for (name, value) in fields {
        request = request.header(*name, *value);
    }
    let request = request
        .body(http_body_util::Empty::<axum::body::Bytes>::new())
        .unwrap();
    sender
        .send_request(request)
        .await
        .unwrap()
        .status()
        .as_u16()
}
