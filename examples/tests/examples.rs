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

/// One POST with `body` (a form): the status and the response, lowercased.
fn post_form(addr: &str, path: &str, body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).expect("the example listens");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response[9..12].parse().expect("a status");
    (status, response.to_ascii_lowercase())
}

/// Whether `left` is `expected`, give or take what refills while the test runs
/// (the example's clock is real: a free key earns a token every 6 ms).
fn about(left: Option<u64>, expected: u64) -> bool {
    left.is_some_and(|left| (expected..=expected + 100).contains(&left))
}

/// The `r` of the `RateLimit` item named `name` in a response head.
fn remaining(head: &str, name: &str) -> Option<u64> {
    let line = head.lines().find(|l| l.starts_with("ratelimit:"))?;
    let item = line
        .split(',')
        .find(|i| i.contains(&format!("\"{name}\"")))?;
    item.split(';')
        .find_map(|p| p.trim().strip_prefix("r="))?
        .parse()
        .ok()
}

#[test]
fn the_model_gateway_settles_costs_after_the_call_and_counts_failed_logins() {
    let app = Running::start(env!("CARGO_BIN_EXE_llm_gateway"), &[]);
    let a = app.addr.as_str();
    let call = |key: &str, tokens: &str| {
        send(
            a,
            "POST",
            "/v1/complete",
            &[("x-api-key", key), ("x-simulate-tokens", tokens)],
        )
    };
    // A free key: 10,000 tokens a minute, each call settled at what it used.
    let (status, head) = call("free_ann", "4000");
    assert_eq!(status, 200);
    assert!(about(remaining(&head, "free"), 6_000), "{head}");
    assert!(
        head.contains(r#"ratelimit-policy: "free";q=10000;w=60"#),
        "{head}"
    );
    let (_, head) = call("free_ann", "4000");
    assert!(about(remaining(&head, "free"), 2_000), "{head}");
    // Admitted on its estimate of 500, it used 4,000: 2,000 tokens of debt.
    let (status, head) = call("free_ann", "4000");
    assert_eq!(status, 200);
    assert_eq!(remaining(&head, "free"), Some(0), "{head}");
    let (status, head) = call("free_ann", "10");
    assert_eq!(status, 429, "{head}");
    // 2,500 tokens to refill at 6 ms each (the debt and the next estimate): 15 s,
    // give or take the time the calls took.
    let wait: u64 = head
        .lines()
        .find_map(|l| l.strip_prefix("retry-after: "))
        .and_then(|v| v.trim().parse().ok())
        .expect("a retry-after");
    assert!((14..=15).contains(&wait), "{head}");
    // A pro key: its own plan, and only its own plan in its fields.
    let (status, head) = call("pro_bo", "4000");
    assert_eq!(status, 200);
    assert!(about(remaining(&head, "pro"), 96_000), "{head}");
    assert!(!head.contains("\"free\""), "{head}");
    // A streamed completion settles when it ends: 3,000 tokens.
    let (status, body) = send(
        a,
        "POST",
        "/v1/stream",
        &[("x-api-key", "free_cy"), ("x-simulate-tokens", "3000")],
    );
    assert_eq!(status, 200);
    assert!(body.contains("chunk 9"), "{body}");
    std::thread::sleep(Duration::from_millis(100));
    let (_, head) = call("free_cy", "1000");
    assert!(about(remaining(&head, "free"), 6_000), "{head}");
    // Failed logins: 5 per user name; a success is not counted and clears them.
    let form = |password: &str| format!("user=ann&password={password}");
    for _ in 0..4 {
        assert_eq!(post_form(a, "/login", &form("guess")).0, 401);
    }
    let (status, head) = post_form(a, "/login", &form("open-sesame"));
    assert_eq!(status, 200);
    assert_eq!(remaining(&head, "login"), Some(5), "{head}");
    for _ in 0..5 {
        assert_eq!(post_form(a, "/login", &form("guess")).0, 401);
    }
    assert_eq!(post_form(a, "/login", &form("open-sesame")).0, 429);
    assert_eq!(
        post_form(a, "/login", "user=bo&password=open-sesame").0,
        200
    );
}

/// The model gateway with its token budget in Redis: two instances spend one budget,
/// each call settled at its usage wherever it was admitted.
#[test]
fn two_model_gateways_over_redis_spend_one_budget() {
    let redis = portero_redis::LocalRedis::start().expect("redis-server for this test");
    let url = redis.url();
    let env = [("REDIS_URL", url.as_str())];
    let one = Running::start(env!("CARGO_BIN_EXE_llm_gateway"), &env);
    let two = Running::start(env!("CARGO_BIN_EXE_llm_gateway"), &env);
    let call = |app: &Running, tokens: &str| {
        send(
            &app.addr,
            "POST",
            "/v1/complete",
            &[("x-api-key", "free_cy"), ("x-simulate-tokens", tokens)],
        )
    };
    let (status, head) = call(&one, "4000");
    assert_eq!(status, 200, "{head}");
    assert!(about(remaining(&head, "free"), 6_000), "{head}");
    // The other instance sees what the first used.
    let (status, head) = call(&two, "4000");
    assert_eq!(status, 200, "{head}");
    assert!(about(remaining(&head, "free"), 2_000), "{head}");
    // Admitted on its estimate (500), it used 4,000: the debt holds on both.
    assert_eq!(call(&one, "4000").0, 200);
    assert_eq!(call(&two, "10").0, 429);
    assert_eq!(call(&one, "10").0, 429);
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
