//! Edges of the one pipeline that an outside review broke, each pinned: a shadow limit
//! never refuses (not even a cost above its capacity), `route::get` covers `HEAD`
//! (axum serves it with the GET handler), a cost of 0 is charged as 1, nested layers'
//! legacy fields keep the tightest limit, a required extension that is missing is a
//! 500, not a shared bucket, and a shadow limit whose key fails lets the request through.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::body::Body;
use axum::routing::get;
use axum::Router;
use http::{HeaderName, HeaderValue, Request, StatusCode};
use portero::{Gcra, KeyedLimiter, ManualClock, Quota};
use portero_http::{keys, route, Limit, LimitLayer, Policy};
use tower::ServiceExt;

type Store = Arc<KeyedLimiter<HeaderValue, Gcra, Arc<ManualClock>>>;

fn per_minute(n: u64) -> Quota {
    Quota::per_minute(n).unwrap()
}

fn store(quota: Quota) -> Store {
    Arc::new(KeyedLimiter::with_clock(
        Gcra::new(quota),
        100,
        Arc::new(ManualClock::new()),
    ))
}

fn limit(
    quota: Quota,
    name: &str,
) -> Limit<Store, impl Fn(&Request<Body>) -> Option<HeaderValue> + Clone + Send + Sync> {
    Limit::new(
        store(quota),
        Policy::for_quota(name, &quota).unwrap(),
        keys::header::<Body>(HeaderName::from_static("x-client")),
    )
}

fn app(layer: LimitLayer<Body>) -> Router {
    Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer)
}

fn request(method: &str) -> Request<Body> {
    Request::builder()
        .method(method)
        .uri("/")
        .header("x-client", "alice")
        .body(Body::empty())
        .unwrap()
}

async fn status(app: &Router, method: &str) -> StatusCode {
    app.clone().oneshot(request(method)).await.unwrap().status()
}

#[tokio::test]
async fn a_shadow_limit_never_refuses_not_even_a_cost_above_its_capacity() {
    // Per limit: the enforced limit admits cost 10, the shadowed trial (burst 5) could
    // never; the request goes through.
    let layer = LimitLayer::new(limit(per_minute(100), "enforced"))
        .limit(limit(per_minute(5), "trial").shadow(true))
        .cost(|_, _, _| 10);
    assert_eq!(status(&app(layer), "GET").await, StatusCode::OK);
    // Layer-wide shadow mode: every request through.
    let layer = LimitLayer::new(limit(per_minute(5), "p"))
        .shadow(true)
        .cost(|_, _, _| 6);
    assert_eq!(status(&app(layer), "GET").await, StatusCode::OK);
    // Enforced, the same cost is a 413.
    let layer = LimitLayer::new(limit(per_minute(5), "p")).cost(|_, _, _| 6);
    assert_eq!(
        status(&app(layer), "GET").await,
        StatusCode::PAYLOAD_TOO_LARGE
    );
}

#[tokio::test]
async fn a_get_route_limit_also_counts_head_which_runs_the_get_handler() {
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let app = Router::new()
        .route(
            "/",
            get(move || {
                seen.fetch_add(1, Ordering::SeqCst);
                async { "ok" }
            }),
        )
        .layer(LimitLayer::new(
            limit(per_minute(2), "reads").route(route::get("/")),
        ));
    let mut ok = 0;
    for method in ["GET", "HEAD", "HEAD", "HEAD", "GET"] {
        ok += usize::from(status(&app, method).await == StatusCode::OK);
    }
    assert_eq!(ok, 2, "2 per minute, GET and HEAD together");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_cost_of_zero_is_charged_as_one_unit() {
    let layer = LimitLayer::new(limit(per_minute(3), "p")).cost(|_, _, _| 0);
    let app = app(layer);
    let mut ok = 0;
    for _ in 0..10 {
        ok += usize::from(status(&app, "GET").await == StatusCode::OK);
    }
    assert_eq!(ok, 3, "a request is never free");
}

#[tokio::test]
async fn nested_layers_keep_the_tightest_limits_legacy_fields() {
    let inner = LimitLayer::new(limit(per_minute(1), "inner")).legacy_headers(true);
    let outer = LimitLayer::new(limit(per_minute(100), "outer")).legacy_headers(true);
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(inner)
        .layer(outer);
    let first = app.clone().oneshot(request("GET")).await.unwrap();
    assert_eq!(first.headers()["x-ratelimit-remaining"], "0");
    assert_eq!(first.headers()["x-ratelimit-limit"], "1");
    let refused = app.clone().oneshot(request("GET")).await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.headers()["x-ratelimit-remaining"], "0");
    assert_eq!(refused.headers()["x-ratelimit-limit"], "1");
    assert_eq!(refused.headers()["x-ratelimit-reset"], "60");
}

/// Nested layers' fields are one list per field, on one line: the inner layer's
/// policy first, then the outer's (they were two `RateLimit` lines and two
/// `RateLimit-Policy` lines).
#[tokio::test]
async fn nested_layers_write_one_list_per_field() {
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(LimitLayer::new(limit(per_minute(10), "inner")))
        .layer(LimitLayer::new(limit(per_minute(100), "outer")));
    let r = app.clone().oneshot(request("GET")).await.unwrap();
    let lines = |name| r.headers().get_all(name).iter().count();
    assert_eq!((lines("ratelimit"), lines("ratelimit-policy")), (1, 1));
    assert_eq!(
        r.headers()["ratelimit"],
        r#""inner";r=9;t=6, "outer";r=99;t=1"#
    );
    assert_eq!(
        r.headers()["ratelimit-policy"],
        r#""inner";q=10;w=60, "outer";q=100;w=60"#
    );
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct UserId(u64);

#[tokio::test]
async fn a_required_extension_that_is_missing_is_a_500_not_a_shared_bucket() {
    let store = Arc::new(KeyedLimiter::new(Gcra::new(per_minute(2)), 100));
    let layer = LimitLayer::new(Limit::new(
        store,
        Policy::for_quota("per-user", &per_minute(2)).unwrap(),
        keys::required_extension::<UserId, Body>(),
    ));
    let app = app(layer);
    for _ in 0..3 {
        assert_eq!(
            status(&app, "GET").await,
            StatusCode::INTERNAL_SERVER_ERROR,
            "the layer that inserts UserId is missing or after the limit"
        );
    }
    let mut with_user = request("GET");
    with_user.extensions_mut().insert(UserId(7));
    let r = app.clone().oneshot(with_user).await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}

/// A shadow limit never changes an answer, also when its key cannot be told: a new
/// client-address limit tried in shadow on a router that resolves no address (no
/// `ClientAddrLayer`), per limit or layer-wide, lets every request through (once
/// answered 500, for every store).
#[tokio::test]
async fn a_shadow_limit_whose_key_fails_lets_the_request_through() {
    let addresses = || {
        let quota = per_minute(2);
        let store = Arc::new(KeyedLimiter::new(Gcra::new(quota), 100));
        Limit::new(
            store,
            Policy::for_quota("per-ip", &quota).unwrap(),
            keys::client_addr::<Body>(),
        )
    };
    let per_limit =
        app(LimitLayer::new(limit(per_minute(100), "enforced")).limit(addresses().shadow(true)));
    let layer_wide = app(LimitLayer::new(addresses()).shadow(true));
    for app in [&per_limit, &layer_wide] {
        for _ in 0..4 {
            assert_eq!(status(app, "GET").await, StatusCode::OK);
        }
    }
    // Enforced, the same limit is a 500 that names the missing layer.
    let enforced = app(LimitLayer::new(addresses()));
    assert_eq!(
        status(&enforced, "GET").await,
        StatusCode::INTERNAL_SERVER_ERROR
    );
}

/// A cost above a later limit's capacity is a 413 (never admissible), also when an
/// earlier limit would refuse it for now: a 429 would send the client to retry
/// into the 413.
#[tokio::test]
async fn a_cost_no_limit_could_ever_admit_is_413_even_when_another_refuses_first() {
    let layer = LimitLayer::new(limit(per_minute(10), "wide"))
        .limit(limit(per_minute(5), "narrow"))
        .cost(|_, _, fields| {
            fields
                .get("x-cost")
                .and_then(|v| v.to_str().ok()?.parse().ok())
                .unwrap_or(1)
        });
    let app = app(layer);
    let costing = |n: u64| {
        Request::builder()
            .uri("/")
            .header("x-client", "alice")
            .header("x-cost", n.to_string())
            .body(Body::empty())
            .unwrap()
    };
    let spent = app.clone().oneshot(costing(5)).await.unwrap();
    assert_eq!(spent.status(), StatusCode::OK, "5 of each");
    let six = app.clone().oneshot(costing(6)).await.unwrap();
    assert_eq!(
        six.status(),
        StatusCode::PAYLOAD_TOO_LARGE,
        "the narrow limit can never admit 6 (the wide one has 5 left: a 429 for now)"
    );
}

/// A request without a key that its limit lets through unlimited
/// (`WhenNoKey::Allow`) is not held to that limit's capacity either.
#[tokio::test]
async fn a_keyless_request_let_through_unlimited_is_never_too_costly() {
    let layer = LimitLayer::new(limit(per_minute(5), "per-client"))
        .when_no_key(portero_http::WhenNoKey::Allow)
        .cost(|_, _, _| 9);
    let keyless = Request::builder().uri("/").body(Body::empty()).unwrap();
    let answer = app(layer).oneshot(keyless).await.unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
}

/// The outage answer is the user's choice: a newcomer that a full table cannot take
/// (no limit decided) gets 503 with `Retry-After` by default, and the 429 of a client
/// over its limit with `OutageAnswer::TooManyRequests`.
#[tokio::test]
async fn the_outage_answer_is_503_unless_asked_for_429() {
    use portero_http::OutageAnswer;
    let full = |answer: Option<OutageAnswer>| {
        let quota = per_minute(5);
        let table = Arc::new(KeyedLimiter::with_clock(
            Gcra::new(quota),
            1,
            Arc::new(ManualClock::new()),
        ));
        let layer = LimitLayer::new(Limit::new(
            table,
            Policy::for_quota("api", &quota).unwrap(),
            keys::header::<Body>(HeaderName::from_static("x-client")),
        ));
        app(match answer {
            Some(a) => layer.outage_answer(a),
            None => layer,
        })
    };
    for (answer, want) in [
        (None, StatusCode::SERVICE_UNAVAILABLE),
        (
            Some(OutageAnswer::ServiceUnavailable),
            StatusCode::SERVICE_UNAVAILABLE,
        ),
        (
            Some(OutageAnswer::TooManyRequests),
            StatusCode::TOO_MANY_REQUESTS,
        ),
    ] {
        let app = full(answer);
        assert_eq!(status(&app, "GET").await, StatusCode::OK); // "alice" takes the slot
        let newcomer = Request::builder()
            .uri("/")
            .header("x-client", "bob")
            .body(Body::empty())
            .unwrap();
        let r = app.clone().oneshot(newcomer).await.unwrap();
        assert_eq!(r.status(), want, "{answer:?}");
        assert!(r.headers().contains_key("retry-after"));
    }
}

/// A cost and a no-key policy per limit, all or none with the others in one layer: an
/// API key's limit counts `POST /export` as 10 while the per-client limit counts it as
/// one (a second layer for the weighted limit lost all-or-none and wrote the fields
/// twice); a refusal by the weighted limit gives the client's unit back; a cost above
/// a limit's own capacity is a 413; and one limit can refuse keyless requests while
/// the layer shares a bucket for them.
#[tokio::test]
async fn each_limit_can_have_its_own_cost_and_no_key_policy() {
    use portero_http::WhenNoKey;
    let client = limit(per_minute(5), "client");
    let api = limit(per_minute(20), "api").cost(|method, uri, _| {
        if method == http::Method::POST && uri.path() == "/export" {
            10
        } else {
            1
        }
    });
    let app = Router::new()
        .route("/export", axum::routing::post(|| async { "exported" }))
        .layer(LimitLayer::new(client).limit(api));
    let export = || {
        Request::post("/export")
            .header("x-client", "alice")
            .body(Body::empty())
            .unwrap()
    };
    for _ in 0..2 {
        let r = app.clone().oneshot(export()).await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
    }
    let third = app.clone().oneshot(export()).await.unwrap();
    assert_eq!(third.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        third.headers()["ratelimit"],
        r#""client";r=3;t=24, "api";r=0;t=30"#,
        "the client's unit given back; one list for both"
    );
    // 10 units where the limit holds 5: never admissible.
    let small = limit(per_minute(5), "small").cost(|_, _, _| 10);
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(LimitLayer::new(limit(per_minute(100), "wide")).limit(small));
    assert_eq!(status(&app, "GET").await, StatusCode::PAYLOAD_TOO_LARGE);
    // A keyless request: shared by the layer, refused by the strict limit.
    let strict = limit(per_minute(100), "strict").when_no_key(WhenNoKey::Reject);
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(LimitLayer::new(limit(per_minute(100), "shared")).limit(strict));
    let keyless = Request::get("/").body(Body::empty()).unwrap();
    assert_eq!(
        app.clone().oneshot(keyless).await.unwrap().status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    let keyless = Request::get("/").body(Body::empty()).unwrap();
    let shared_only = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(LimitLayer::new(limit(per_minute(100), "shared")));
    assert_eq!(
        shared_only.oneshot(keyless).await.unwrap().status(),
        StatusCode::OK
    );
}
