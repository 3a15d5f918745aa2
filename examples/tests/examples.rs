//! Every example program, run as a user runs it: the servers on a free loopback port
//! answering real requests (and stopped by their own process ids), the Redis one
//! against a redis-server this test starts, the outbound client to its end.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A running example, stopped when dropped.
struct Running {
    child: Child,
    addr: String,
}

impl Running {
    /// Starts `program` on a free port and waits for its "listening on" line.
    fn start(program: &str, env: &[(&str, &str)]) -> Self {
        let mut child = Command::new(program)
            .env("PORTERO_ADDR", "127.0.0.1:0")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the example starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("its stdout"))
            .read_line(&mut line)
            .expect("its first line");
        let addr = line
            .trim()
            .strip_prefix("listening on http://")
            .unwrap_or_else(|| panic!("not a listening line: {line:?}"))
            .to_owned();
        Self { child, addr }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 request over a fresh connection: the status and the response head
/// and body as text.
fn send(addr: &str, method: &str, path: &str, fields: &[(&str, &str)]) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).expect("the example listens");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: 0\r\n"
    );
    for (name, value) in fields {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {response:?}"));
    (status, response.to_ascii_lowercase())
}

#[test]
fn the_api_service_answers_as_its_docs_say() {
    let app = Running::start(env!("CARGO_BIN_EXE_api_service"), &[]);
    let a = app.addr.as_str();
    let (status, head) = send(a, "GET", "/", &[]);
    assert_eq!(status, 200);
    assert!(
        head.contains(r#"ratelimit: "per-ip";r=59;t=1, "trial";r=29;t=2"#),
        "{head}"
    );
    // A login without a user name is refused; one user gets 5 a minute.
    assert_eq!(send(a, "POST", "/login", &[]).0, 429);
    let logins: Vec<u16> = (0..6)
        .map(|_| send(a, "POST", "/login", &[("x-username", "ann")]).0)
        .collect();
    assert_eq!(logins, [200, 200, 200, 200, 200, 429]);
    assert_eq!(send(a, "POST", "/login", &[("x-username", "bob")]).0, 200);
    // An export costs 10 of the key's 100 units.
    let exports = (0..11)
        .filter(|_| send(a, "POST", "/api/export", &[("x-api-key", "k1")]).0 == 200)
        .count();
    assert_eq!(exports, 10);
    assert_eq!(send(a, "GET", "/api/items", &[("x-api-key", "k2")]).0, 200);
    // A trusted proxy (loopback) names the client: a fresh per-IP share.
    let (_, head) = send(a, "GET", "/", &[("x-forwarded-for", "203.0.113.9")]);
    assert!(head.contains(r#""per-ip";r=59"#), "{head}");
    assert_eq!(send(a, "GET", "/health", &[]).0, 200);
    let (status, metrics) = send(a, "GET", "/metrics", &[]);
    assert_eq!(status, 200);
    assert!(
        metrics.contains("# help portero_requests_total"),
        "{metrics}"
    );
    assert!(metrics.contains("outcome=\"rejected\""), "{metrics}");
}

#[test]
fn the_shared_limit_holds_across_two_instances_and_says_when_redis_is_away() {
    let mut redis = portero_redis::LocalRedis::start().expect("redis-server for this test");
    let url = redis.url();
    let env = [("REDIS_URL", url.as_str())];
    let one = Running::start(env!("CARGO_BIN_EXE_shared_limit"), &env);
    let two = Running::start(env!("CARGO_BIN_EXE_shared_limit"), &env);
    let admitted = (0..16)
        .map(|i| if i % 2 == 0 { &one } else { &two })
        .filter(|app| send(&app.addr, "GET", "/", &[("x-client", "ann")]).0 == 200)
        .count();
    assert_eq!(admitted, 10, "10 a minute across both instances");
    redis.stop();
    let (status, head) = send(&one.addr, "GET", "/", &[("x-client", "bob")]);
    assert_eq!(status, 200, "the local fallback decides");
    assert!(head.contains("ratelimit-source: fallback"), "{head}");
}

#[test]
fn the_outbound_client_keeps_the_providers_window() {
    let out = Command::new(env!("CARGO_BIN_EXE_outbound"))
        .output()
        .expect("the example runs");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("refused by the provider: 0"), "{text}");
}
