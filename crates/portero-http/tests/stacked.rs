//! Several limits per request in one layer, through an axum router: per-route, per
//! user, per tenant and global, all or none, with every policy's fields in one list.

use std::sync::Arc;

use axum::body::Body;
use axum::routing::{get, post};
use axum::Router;
use http::{HeaderName, Method, Request, StatusCode};
use portero::{Gcra, KeyedLimiter, ManualClock, Quota};
use portero_http::{keys, Limit, LimitLayer, Policy};
use tower::ServiceExt;

mod support {
    pub mod loopback;
}

type Limiter<K> = Arc<KeyedLimiter<K, Gcra, Arc<ManualClock>>>;

fn limiter<K: std::hash::Hash>(quota: Quota, clock: &Arc<ManualClock>) -> Limiter<K> {
    Arc::new(KeyedLimiter::with_clock(
        Gcra::new(quota),
        1_000,
        clock.clone(),
    ))
}

struct Setup {
    app: Router,
    user: Limiter<http::HeaderValue>,
    tenant: Limiter<http::HeaderValue>,
    global: Limiter<()>,
}

fn setup() -> Setup {
    let clock = Arc::new(ManualClock::new());
    let per_min = |n| Quota::per_minute(n).unwrap();
    let (login, user, tenant, global) = (
        limiter(per_min(2), &clock),
        limiter(per_min(5), &clock),
        limiter(per_min(8), &clock),
        limiter(per_min(100), &clock),
    );
    let by = |name: &'static str| keys::header::<Body>(HeaderName::from_static(name));
    let policy = |name: &str, n| Policy::for_quota(name, &per_min(n)).unwrap();
    let is_login = |r: &Request<Body>| r.method() == Method::POST && r.uri().path() == "/login";
    let layer = LimitLayer::<Body>::new(
        Limit::new(login, policy("login", 2), by("x-user")).route(is_login),
    )
    .limit(Limit::new(user.clone(), policy("user", 5), by("x-user")))
    .limit(Limit::new(
        tenant.clone(),
        policy("tenant", 8),
        by("x-tenant"),
    ))
    .limit(Limit::new(
        global.clone(),
        policy("global", 100),
        keys::global(),
    ));
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .route("/login", post(|| async { "welcome" }))
        .layer(layer);
    Setup {
        app,
        user,
        tenant,
        global,
    }
}

async fn send(
    app: &Router,
    method: Method,
    path: &str,
    user: &str,
    tenant: &str,
) -> http::Response<Body> {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("x-user", user)
        .header("x-tenant", tenant)
        .body(Body::empty())
        .unwrap();
    app.clone().oneshot(req).await.unwrap()
}

fn remaining<K: std::hash::Hash + ?Sized>(
    l: &KeyedLimiter<K, Gcra, Arc<ManualClock>>,
    key: &K,
) -> u64 {
    l.peek_at(key, 0, 0).unwrap().remaining()
}

#[tokio::test]
async fn every_limit_applies_all_or_none_with_every_field() {
    let s = setup();
    let ann = http::HeaderValue::from_static("ann");
    let acme = http::HeaderValue::from_static("acme");
    for left in (0..5).rev() {
        let r = send(&s.app, Method::GET, "/", "ann", "acme").await;
        assert_eq!(r.status(), StatusCode::OK);
        let fields = r.headers()["ratelimit"].to_str().unwrap().to_owned();
        assert!(
            fields.starts_with(&format!(r#""user";r={left};"#)),
            "{fields}"
        );
        assert!(fields.contains(r#", "tenant";r="#) && fields.contains(r#", "global";r="#));
        assert_eq!(
            r.headers()["ratelimit-policy"],
            r#""user";q=5;w=60, "tenant";q=8;w=60, "global";q=100;w=60"#
        );
    }
    // ann's sixth: refused by her user limit; the tenant and global limits keep theirs.
    let r = send(&s.app, Method::GET, "/", "ann", "acme").await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.headers()["retry-after"], "12");
    assert_eq!(remaining(&s.tenant, &acme), 3);
    assert_eq!(remaining(&s.global, &()), 95);
    // bob takes the tenant's last 3; his fourth is refused by the tenant, and his user
    // unit for it is given back: a refused stacked request costs nothing anywhere.
    for _ in 0..3 {
        assert_eq!(
            send(&s.app, Method::GET, "/", "bob", "acme").await.status(),
            StatusCode::OK
        );
    }
    let r = send(&s.app, Method::GET, "/", "bob", "acme").await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    let fields = r.headers()["ratelimit"].to_str().unwrap().to_owned();
    assert!(fields.contains(r#""tenant";r=0;t="#), "{fields}");
    assert_eq!(
        remaining(&s.user, &http::HeaderValue::from_static("bob")),
        2
    );
    // The refusal reports bob's user limit as it is after the refund: 2 left, not the
    // 1 it said before the unit went back.
    assert!(fields.starts_with(r#""user";r=2;t="#), "{fields}");
    assert_eq!(remaining(&s.global, &()), 92);
    assert_eq!(remaining(&s.user, &ann), 0);
}

#[tokio::test]
async fn a_route_limit_applies_to_its_route_only() {
    let s = setup();
    let login = |u: &'static str, t: &'static str| send(&s.app, Method::POST, "/login", u, t);
    assert_eq!(login("cy", "a").await.status(), StatusCode::OK);
    let r = login("cy", "b").await;
    assert_eq!(
        r.headers()["ratelimit-policy"]
            .to_str()
            .unwrap()
            .split(", ")
            .count(),
        4
    );
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(
        login("cy", "c").await.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "login: 2 per minute"
    );
    // Reads by the same user are not held by the login limit (3 of 5 user units left).
    assert_eq!(
        send(&s.app, Method::GET, "/", "cy", "d").await.status(),
        StatusCode::OK
    );
}

/// The same stack over a real loopback socket: exact 200 and 429 counts per client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stack_over_a_real_socket() {
    let addr = support::loopback::serve(setup().app).await;
    let mut counts = Vec::new();
    for (user, n) in [("ann", 6), ("bob", 4)] {
        let mut ok = 0;
        for _ in 0..n {
            let fields = [("x-user", user), ("x-tenant", "acme")];
            ok += usize::from(support::loopback::status(addr, "GET", "/", &fields).await == 200);
        }
        counts.push(ok);
    }
    // ann: 5 of 6 (her user limit); bob: 3 of 4 (the tenant's last 3 of 8).
    assert_eq!(counts, [5, 3]);
}

/// A client rotating the API key it writes, from one address: counted under the pair
/// (`keys::both`), every rotated key is a fresh bucket (20 of 20 admitted at a limit of
/// 5); with a second limit on the address in the stack, as the key docs advise, the
/// address's limit holds (5 of 20).
#[tokio::test]
async fn rotating_a_written_key_meets_the_address_limit_in_a_stack() {
    let clock = Arc::new(ManualClock::new());
    let five = Quota::per_minute(5).unwrap();
    let policy = |name: &str| Policy::for_quota(name, &five).unwrap();
    let api_key = || keys::header::<Body>(HeaderName::from_static("x-api-key"));
    let address = || keys::header::<Body>(HeaderName::from_static("x-peer"));
    let pair = LimitLayer::<Body>::new(Limit::new(
        limiter(five, &clock),
        policy("pair"),
        keys::both(api_key(), address()),
    ));
    let stacked =
        LimitLayer::<Body>::new(Limit::new(limiter(five, &clock), policy("key"), api_key()))
            .limit(Limit::new(limiter(five, &clock), policy("addr"), address()));
    for (layer, want) in [(pair, 20), (stacked, 5)] {
        let app = Router::new()
            .route("/", get(|| async { "ok" }))
            .layer(layer);
        let mut admitted = 0;
        for i in 0..20 {
            let req = Request::get("/")
                .header("x-api-key", format!("rotated-{i}"))
                .header("x-peer", "198.51.100.7")
                .body(Body::empty())
                .unwrap();
            admitted +=
                u32::from(app.clone().oneshot(req).await.unwrap().status() == StatusCode::OK);
        }
        assert_eq!(admitted, want);
    }
}
