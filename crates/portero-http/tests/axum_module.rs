//! `portero_http::axum`: `ClientAddrLayer`, the `ClientAddr` extractor and
//! `keys::client_addr`, mostly over a real loopback socket (axum's `serve`, a raw
//! HTTP/1.1 client), with and without the peer address recorded.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::connect_info::MockConnectInfo;
use axum::extract::FromRequestParts;
use axum::routing::{get, post};
use axum::Router;
use http::Request;
use portero::{Decision, Gcra, KeyedLimiter, Quota};
use portero_http::axum::{ClientAddrLayer, MissingClientAddr, MISSING_CLIENT_ADDR_BODY};
use portero_http::{
    keys, route, Checking, ClientAddr, ClientIp, Limit, LimitLayer, Policy, Store, Ticket,
    TrustedProxies, LIMIT_FAILED_BODY, TOO_MANY_REQUESTS_BODY,
};
use tokio::net::TcpListener;
use tower::ServiceExt;

mod support {
    pub mod counters;
    pub mod loopback;
}
use support::counters::Counters;
use support::loopback::{send, serve, Reply};

fn per_minute(n: u64) -> Quota {
    Quota::per_minute(n).unwrap()
}

fn direct() -> ClientIp {
    ClientIp::new(TrustedProxies::none())
}

/// A store that remembers every key it was asked about, then counts in memory.
struct Recording {
    limiter: KeyedLimiter<ClientAddr, Gcra>,
    seen: Mutex<Vec<ClientAddr>>,
}

impl Recording {
    fn new(quota: Quota) -> Arc<Self> {
        Arc::new(Self {
            limiter: KeyedLimiter::new(Gcra::new(quota), 1_000),
            seen: Mutex::new(Vec::new()),
        })
    }

    fn seen(&self) -> Vec<ClientAddr> {
        self.seen.lock().unwrap().clone()
    }
}

impl Store<ClientAddr> for Recording {
    fn check_key(&self, key: Option<ClientAddr>, cost: u64) -> Checking {
        if let Some(key) = key {
            self.seen.lock().unwrap().push(key);
        }
        Store::<ClientAddr>::check_key(&self.limiter, key, cost)
    }

    fn standing(&self, key: Option<ClientAddr>) -> Checking {
        Store::<ClientAddr>::standing(&self.limiter, key)
    }

    fn refund_ticket(&self, ticket: Ticket) -> Option<Decision> {
        Store::<ClientAddr>::refund_ticket(&self.limiter, ticket)
    }
}

/// A per-client limit of `quota` keyed by the address `ClientAddrLayer` resolved.
fn per_client(store: Arc<Recording>, quota: Quota) -> LimitLayer<Body> {
    LimitLayer::new(Limit::new(
        store,
        Policy::for_quota("per-client", &quota).unwrap(),
        keys::client_addr(),
    ))
}

/// An app whose `/` answers the `ClientAddr` it extracted, counting handler calls.
fn echo_app(calls: Arc<AtomicUsize>) -> Router {
    Router::new().route(
        "/",
        get(move |client: ClientAddr| {
            calls.fetch_add(1, Ordering::SeqCst);
            async move { client.to_string() }
        }),
    )
}

/// The echo app behind a per-client limit of 3 a minute, keyed by what `resolver` makes
/// of each request's peer: the app, its count of handler calls and the limit's store.
fn limited_echo(resolver: ClientIp) -> (Router, Arc<AtomicUsize>, Arc<Recording>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let store = Recording::new(per_minute(3));
    let app = echo_app(calls.clone())
        .layer(per_client(store.clone(), per_minute(3)))
        .layer(ClientAddrLayer::new(resolver));
    (app, calls, store)
}

/// One `GET /` through `app` without a socket: the response's head and its body.
async fn get_root(app: &Router) -> (http::response::Parts, axum::body::Bytes) {
    let request = Request::get("/").body(Body::empty()).unwrap();
    let (head, body) = app.clone().oneshot(request).await.unwrap().into_parts();
    (head, axum::body::to_bytes(body, 1 << 16).await.unwrap())
}

/// Serves `app` without recording the peer address (the set-up mistake).
async fn serve_without_connect_info(app: Router) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    addr
}

/// How many of `replies` had each status.
fn tally(replies: &[Reply]) -> HashMap<u16, usize> {
    let mut counts = HashMap::new();
    for r in replies {
        *counts.entry(r.status).or_default() += 1;
    }
    counts
}

async fn send_n(addr: SocketAddr, n: usize, method: &str, path: &str) -> Vec<Reply> {
    let mut replies = Vec::with_capacity(n);
    for _ in 0..n {
        replies.push(send(addr, method, path, &[]).await);
    }
    replies
}

/// Ten `GET path` from one client over a loopback socket to [`limited_echo`] (peers
/// taken as they are): the replies, the handler's calls and the limit's store.
async fn ten_gets_to_limited_echo(path: &str) -> (Vec<Reply>, Arc<AtomicUsize>, Arc<Recording>) {
    let (app, calls, store) = limited_echo(direct());
    let addr = serve(app).await;
    (send_n(addr, 10, "GET", path).await, calls, store)
}

/// (a) One client, a quota of 3: exactly 3 of 10 reach the handler; the handler's
/// extractor and the limit's key are the same address, the loopback peer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_connect_info_a_quota_of_3_admits_exactly_3_of_10_and_handler_and_limit_agree() {
    let (replies, calls, store) = ten_gets_to_limited_echo("/").await;
    assert_eq!(tally(&replies), HashMap::from([(200, 3), (429, 7)]));
    assert_eq!(
        calls.load(Ordering::SeqCst),
        3,
        "only the admitted reach the handler"
    );
    let loopback = direct().resolve(IpAddr::from([127, 0, 0, 1]), &http::HeaderMap::new());
    for r in replies.iter().filter(|r| r.status == 200) {
        assert_eq!(r.body, loopback.to_string(), "what the handler extracted");
        assert!(r.head.contains("\r\nratelimit:"), "{}", r.head);
    }
    for r in replies.iter().filter(|r| r.status == 429) {
        assert_eq!(r.body, TOO_MANY_REQUESTS_BODY);
    }
    assert_eq!(
        store.seen(),
        vec![loopback; 10],
        "what the limit counted under"
    );
}

/// Behind a trusted proxy the address is resolved once from `X-Forwarded-For`: the
/// handler sees the forwarded client, and the limit counts each client apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_trusted_proxy_handler_and_limit_see_the_forwarded_client() {
    let (app, calls, store) =
        limited_echo(ClientIp::new(TrustedProxies::new(["127.0.0.1"]).unwrap()));
    let addr = serve(app).await;

    for client in ["198.51.100.1", "198.51.100.2"] {
        let xff = format!("{client}, 127.0.0.1");
        let mut admitted = 0;
        for _ in 0..5 {
            let r = send(addr, "GET", "/", &[("X-Forwarded-For", &xff)]).await;
            if r.status == 200 {
                assert_eq!(r.body, client);
                admitted += 1;
            }
        }
        assert_eq!(admitted, 3, "{client}");
    }
    let seen: Vec<String> = store.seen().iter().map(ToString::to_string).collect();
    assert_eq!(seen[..5], ["198.51.100.1"; 5]);
    assert_eq!(seen[5..], ["198.51.100.2"; 5]);
    assert_eq!(calls.load(Ordering::SeqCst), 6);
}

/// (b) Served without `into_make_service_with_connect_info`: every request is a 500
/// with the JSON body, none reaches the handler (nor the limit), each is counted.
///
/// A current-thread runtime: the server's tasks run on this thread, so a thread-local
/// recorder sees their counters and no other test's.
#[tokio::test(flavor = "current_thread")]
async fn without_connect_info_every_request_is_a_counted_500_that_never_reaches_the_handler() {
    let counters = Counters::default();
    let _local = metrics::set_default_local_recorder(&counters);
    let (app, calls, store) = limited_echo(direct());
    let addr = serve_without_connect_info(app).await;

    let replies = send_n(addr, 10, "GET", "/").await;
    for r in &replies {
        assert_eq!(r.status, 500);
        assert_eq!(r.body, LIMIT_FAILED_BODY);
        assert!(
            r.head.contains("content-type: application/json"),
            "{}",
            r.head
        );
    }
    assert_eq!(calls.load(Ordering::SeqCst), 0, "never forwarded");
    assert!(store.seen().is_empty(), "never a shared bucket");
    assert_eq!(counters.get("portero_limit_failures_total{cause=key}"), 10);
}

/// (c) In a test without a socket, `MockConnectInfo` (outermost) stands in for the
/// connection, and `oneshot` drives the router.
#[tokio::test]
async fn mock_connect_info_with_oneshot_resolves_the_mocked_peer() {
    let peer = SocketAddr::from(([192, 0, 2, 7], 4000));
    let (app, calls, store) = limited_echo(direct());
    let app = app.layer(MockConnectInfo(peer));

    let mut statuses = Vec::new();
    for _ in 0..5 {
        let (head, body) = get_root(&app).await;
        let status = head.status.as_u16();
        if status == 200 {
            assert_eq!(body, "192.0.2.7");
        }
        statuses.push(status);
    }
    assert_eq!(statuses, [200, 200, 200, 429, 429]);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert!(store.seen().iter().all(|a| a.to_string() == "192.0.2.7"));
}

/// (d) `Router::layer` wraps the fallback too: a scan of unknown paths is limited
/// (3 of 10 get their 404, the rest 429). With `route_layer` it would not be.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unmatched_paths_are_limited_with_router_layer_not_with_route_layer() {
    let (replies, _, _) = ten_gets_to_limited_echo("/wp-login.php").await;
    assert_eq!(tally(&replies), HashMap::from([(404, 3), (429, 7)]));

    // The contrast: route_layer only wraps matched routes, so the scan is unlimited.
    let store = Recording::new(per_minute(3));
    let app = echo_app(Arc::default())
        .route_layer(per_client(store.clone(), per_minute(3)))
        .route_layer(ClientAddrLayer::new(direct()));
    let addr = serve(app).await;
    let replies = send_n(addr, 10, "GET", "/wp-login.php").await;
    assert_eq!(tally(&replies), HashMap::from([(404, 10)]));
    assert!(store.seen().is_empty());
}

/// (e) A login limit on `route::post("/login")`: 5 of 20 logins are admitted, and the
/// other routes (another method, another path) are not limited by it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_limit_limits_only_post_login() {
    let login = per_minute(5);
    let logins = Recording::new(login);
    let app = Router::new()
        .route("/", get(|| async { "home" }))
        .route(
            "/login",
            post(|| async { "welcome" }).get(|| async { "form" }),
        )
        .route("/other", post(|| async { "other" }))
        .layer(LimitLayer::new(
            Limit::new(
                logins.clone(),
                Policy::for_quota("login", &login).unwrap(),
                keys::client_addr(),
            )
            .route(route::post("/login")),
        ))
        .layer(ClientAddrLayer::new(direct()));
    let addr = serve(app).await;

    let replies = send_n(addr, 20, "POST", "/login").await;
    assert_eq!(tally(&replies), HashMap::from([(200, 5), (429, 15)]));
    assert!(replies[..5].iter().all(|r| r.body == "welcome"));
    for (method, path) in [("GET", "/"), ("GET", "/login"), ("POST", "/other")] {
        let replies = send_n(addr, 20, method, path).await;
        assert_eq!(
            tally(&replies),
            HashMap::from([(200, 20)]),
            "{method} {path}"
        );
        assert!(!replies[0].head.contains("\r\nratelimit:"), "not limited");
    }
    assert_eq!(logins.seen().len(), 20, "only the logins were counted");
}

/// (f) The extractor without the layer: a 500 whose JSON body names the layer.
#[tokio::test]
async fn the_extractor_without_the_layer_answers_500_naming_client_addr_layer() {
    let calls = Arc::new(AtomicUsize::new(0));
    let app = echo_app(calls.clone()).layer(MockConnectInfo(SocketAddr::from(([192, 0, 2, 7], 1))));
    let (head, body) = get_root(&app).await;
    assert_eq!(head.status, 500);
    assert_eq!(head.headers["content-type"], "application/json");
    assert_eq!(body, MISSING_CLIENT_ADDR_BODY);
    let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert!(json["error"].as_str().unwrap().contains("ClientAddrLayer"));
    let (mut parts, ()) = Request::get("/").body(()).unwrap().into_parts();
    let rejection: MissingClientAddr = ClientAddr::from_request_parts(&mut parts, &())
        .await
        .unwrap_err();
    assert!(rejection.to_string().contains("ClientAddrLayer"));
    let _: &dyn std::error::Error = &rejection;
    assert_eq!(calls.load(Ordering::SeqCst), 0);

    // `Option<ClientAddr>` is `None` instead.
    let app = Router::new().route(
        "/",
        get(|client: Option<ClientAddr>| async move { format!("{client:?}") }),
    );
    let (head, body) = get_root(&app).await;
    assert_eq!(head.status, 200);
    assert_eq!(body, "None");
}

/// `keys::client_addr` without the layer before it (missing, or in the wrong order):
/// the limit answers 500 (`MissingExtension`), never forwards, never a shared bucket.
#[tokio::test]
async fn the_key_function_without_the_layer_before_it_is_a_500() {
    let peer = MockConnectInfo(SocketAddr::from(([192, 0, 2, 7], 1)));
    let missing = echo_app(Arc::default())
        .layer(per_client(Recording::new(per_minute(3)), per_minute(3)))
        .layer(peer);
    let wrong_order = echo_app(Arc::default())
        .layer(ClientAddrLayer::new(direct()))
        .layer(per_client(Recording::new(per_minute(3)), per_minute(3)))
        .layer(peer);
    for app in [missing, wrong_order] {
        for _ in 0..5 {
            let (head, body) = get_root(&app).await;
            assert_eq!(head.status, 500);
            assert_eq!(body, LIMIT_FAILED_BODY);
        }
    }
}
