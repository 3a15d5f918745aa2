//! A real server on a free loopback port and a raw HTTP/1.1 client, for tests that
//! must cross a socket (the peer address is real, headers are bytes on the wire).

use std::net::SocketAddr;

use axum::Router;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Serves `app` on `127.0.0.1:0` with the peer address recorded (`ConnectInfo`).
pub async fn serve(app: Router) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .unwrap();
    });
    addr
}

/// A response as it came over the wire.
#[derive(Debug)]
#[allow(dead_code)] // each test binary reads the parts it needs
pub struct Reply {
    /// The status code.
    pub status: u16,
    /// The status line and fields, lowercased.
    pub head: String,
    /// The body.
    pub body: String,
}

/// One request over a fresh connection, with `fields`: the response.
pub async fn send(addr: SocketAddr, method: &str, path: &str, fields: &[(&str, &str)]) -> Reply {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let mut request =
        format!("{method} {path} HTTP/1.1\r\nHost: portero.test\r\nConnection: close\r\nContent-Length: 0\r\n");
    for (name, value) in fields {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    Reply {
        status: head[9..12].parse().unwrap(),
        head: head.to_ascii_lowercase(),
        body: body.to_owned(),
    }
}

/// One request over a fresh connection, with `fields`; the response's status code.
#[allow(dead_code)]
pub async fn status(addr: SocketAddr, method: &str, path: &str, fields: &[(&str, &str)]) -> u16 {
    send(addr, method, path, fields).await.status
}

/// One request with `body` (a form) over a fresh connection: the response.
#[allow(dead_code)]
pub async fn send_body(addr: SocketAddr, method: &str, path: &str, body: &str) -> Reply {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: portero.test\r\nConnection: close\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    Reply {
        status: head[9..12].parse().unwrap(),
        head: head.to_ascii_lowercase(),
        body: body.to_owned(),
    }
}

/// One request with `fields`; reads the response's head and the first bytes of its
/// body, then closes the connection (a client that goes away mid-stream).
#[allow(dead_code)]
pub async fn send_and_hang_up(addr: SocketAddr, method: &str, path: &str, fields: &[(&str, &str)]) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let mut request =
        format!("{method} {path} HTTP/1.1\r\nHost: portero.test\r\nConnection: close\r\nContent-Length: 0\r\n");
    for (name, value) in fields {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 512];
    while !String::from_utf8_lossy(&seen).contains("chunk 0") {
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "the stream ended before its first chunk");
        seen.extend_from_slice(&buf[..n]);
    }
    drop(stream);
}
