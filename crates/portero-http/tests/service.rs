//! The layers in a real axum router, driven through tower's `oneshot`.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::routing::get;
use axum::Router;
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use portero::{ConcurrencyLimit, Gcra, KeyedLimiter, ManualClock, Quota};
use portero_http::{Limit, LimitLayer, LoadShedLayer, Policy, WhenUnavailable};
use tower::ServiceExt;

mod support {
    pub mod by_client;
    pub mod counters;
}
use support::by_client::{client_key, request};
use support::counters::Counters;

type Limiter = KeyedLimiter<String, Gcra, Arc<ManualClock>>;

fn app(limiter: Arc<Limiter>, quota: &Quota, when_full: WhenUnavailable) -> Router {
    Router::new().route("/", get(|| async { "ok" })).layer(
        LimitLayer::new(Limit::new(
            limiter,
            Policy::for_quota("per-client", quota).unwrap(),
            client_key,
        ))
        .when_unavailable(when_full),
    )
}

/// 100 keys of `quota` on a clock frozen at 0.
fn fresh_limiter(quota: Quota) -> Arc<Limiter> {
    Arc::new(KeyedLimiter::with_clock(
        Gcra::new(quota),
        100,
        Arc::new(ManualClock::new()),
    ))
}

type Layer = LimitLayer<Body>;

/// A layer over [`fresh_limiter`], advertising `name`, keyed by `x-client`.
fn limited(quota: Quota, name: &str) -> Layer {
    let key: fn(&Request<Body>) -> Option<String> = client_key;
    LimitLayer::new(Limit::new(
        fresh_limiter(quota),
        Policy::for_quota(name, &quota).unwrap(),
        key,
    ))
}

async fn body(response: http::Response<Body>) -> String {
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

#[tokio::test]
async fn five_per_minute_then_429_with_every_field() {
    let quota = Quota::per_minute(5).unwrap();
    let clock = Arc::new(ManualClock::new());
    let limiter = Arc::new(KeyedLimiter::with_clock(
        Gcra::new(quota),
        100,
        clock.clone(),
    ));
    let app = app(limiter, &quota, WhenUnavailable::Reject);

    for left in (0..5).rev() {
        let response = app.clone().oneshot(request(Some("alice"))).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let h = response.headers();
        assert_eq!(h["ratelimit-policy"], r#""per-client";q=5;w=60"#);
        assert_eq!(
            h["ratelimit"],
            format!(r#""per-client";r={left};t={}"#, 12 * (5 - left))
        );
        assert!(h.get("retry-after").is_none());
        assert_eq!(body(response).await, "ok");
    }
    clock.advance(500_000_000); // 0.5 s: the next unit is due in 11.5 s
    let response = app.clone().oneshot(request(Some("alice"))).await.unwrap();
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    let h = response.headers();
    assert_eq!(h["retry-after"], "12");
    assert_eq!(h["ratelimit"], r#""per-client";r=0;t=12"#);
    assert_eq!(h["cache-control"], "no-store");
    assert_eq!(h["content-type"], "application/json");
    assert_eq!(
        body(response).await,
        r#"{"error":"rate limit exceeded"}"#,
        "answered here: the handler never ran"
    );

    // Another client has its own share; requests without a key share one bucket
    // (leaving the header out is never unlimited).
    let bob = app.clone().oneshot(request(Some("bob"))).await.unwrap();
    assert_eq!(bob.status(), StatusCode::OK);
    let mut anonymous_ok = 0;
    for _ in 0..20 {
        let anonymous = app.clone().oneshot(request(None)).await.unwrap();
        anonymous_ok += usize::from(anonymous.status() == StatusCode::OK);
        assert!(anonymous.headers().get("ratelimit").is_some());
    }
    assert_eq!(
        anonymous_ok, 5,
        "20 requests without the header: one client's share"
    );

    // After the advertised wait, alice gets exactly one more.
    clock.advance(11_500_000_000);
    let again = app.clone().oneshot(request(Some("alice"))).await.unwrap();
    assert_eq!(again.status(), StatusCode::OK);
    let after = app.clone().oneshot(request(Some("alice"))).await.unwrap();
    assert_eq!(after.status(), StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test]
async fn a_full_key_table_rejects_or_admits_new_clients_as_configured() {
    let quota = Quota::per_minute(5).unwrap();
    // Refused, a newcomer no limit decided gets the outage answer (503, Retry-After).
    for (when_full, expected) in [
        (WhenUnavailable::Reject, StatusCode::SERVICE_UNAVAILABLE),
        (WhenUnavailable::Allow, StatusCode::OK),
    ] {
        let clock = Arc::new(ManualClock::new());
        // Room for one key: "first" holds it (it has used units, so it is not idle).
        let limiter = Arc::new(KeyedLimiter::with_clock(Gcra::new(quota), 1, clock));
        let app = app(limiter.clone(), &quota, when_full);
        let first = app.clone().oneshot(request(Some("first"))).await.unwrap();
        assert_eq!(first.status(), StatusCode::OK);
        let mut held = 0;
        for i in 0..50 {
            let client = format!("new-{i}");
            let response = app.clone().oneshot(request(Some(&client))).await.unwrap();
            assert_eq!(response.status(), expected, "{when_full:?}");
            if when_full == WhenUnavailable::Reject {
                // The window: "first" is back to full 12 s after its request, within it
                // (before: "1", while newcomers stayed refused for 12 s).
                assert_eq!(response.headers()["retry-after"], "60");
            }
            held = limiter.len();
        }
        assert_eq!(held, 1, "the table never grows past its cap");
        // The client already tracked keeps its exact state either way.
        assert_eq!(limiter.state_of(&"first".to_owned()), Some(12_000_000_000));
    }
}

#[tokio::test]
async fn load_shedding_answers_503_beyond_the_permits_and_frees_them() {
    let limit = Arc::new(ConcurrencyLimit::new(2));
    let gate = Arc::new(tokio::sync::Notify::new());
    let waiting = gate.clone();
    let app = Router::new()
        .route(
            "/",
            get(move || {
                let gate = waiting.clone();
                async move {
                    gate.notified().await;
                    "done"
                }
            }),
        )
        .layer(LoadShedLayer::new(
            limit.clone(),
            Duration::from_millis(1500),
        ));

    let a = tokio::spawn(app.clone().oneshot(request(None)));
    let b = tokio::spawn(app.clone().oneshot(request(None)));
    while limit.in_use() < 2 {
        tokio::task::yield_now().await;
    }
    let shed = app.clone().oneshot(request(None)).await.unwrap();
    assert_eq!(shed.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(shed.headers()["retry-after"], "2", "1.5 s rounds up");

    // A cancelled request gives its permit back at once.
    let c = {
        gate.notify_one(); // let one of a/b finish
        let done = tokio::select! { r = a => r, r = b => r };
        assert_eq!(done.unwrap().unwrap().status(), StatusCode::OK);
        assert_eq!(limit.in_use(), 1);
        let mut pending = Box::pin(app.clone().oneshot(request(None)));
        assert!(futures_poll_once(pending.as_mut()).await.is_none());
        assert_eq!(limit.in_use(), 2);
        drop(pending);
        limit.in_use()
    };
    assert_eq!(c, 1);
    gate.notify_waiters();
}

/// Polls a future once; `Some` if it was ready.
async fn futures_poll_once<F: std::future::Future + Unpin>(mut f: F) -> Option<F::Output> {
    std::future::poll_fn(|cx| {
        std::task::Poll::Ready(match std::pin::Pin::new(&mut f).poll(cx) {
            std::task::Poll::Ready(v) => Some(v),
            std::task::Poll::Pending => None,
        })
    })
    .await
}

/// Shadow mode decides, counts and advertises, but never refuses: what the limit
/// would have refused carries `r=0` and no `Retry-After`. Legacy fields on request.
#[tokio::test]
async fn shadow_mode_never_rejects_and_says_what_it_would_have_done() {
    let quota = Quota::per_minute(5).unwrap();
    let app = Router::new().route("/", get(|| async { "ok" })).layer(
        limited(quota, "new-limit")
            .shadow(true)
            .legacy_headers(true),
    );
    let mut would_refuse = 0;
    for _ in 0..20 {
        let response = app.clone().oneshot(request(Some("alice"))).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let h = response.headers();
        assert!(h.get("retry-after").is_none() && h.get("cache-control").is_none());
        assert_eq!(h["x-ratelimit-limit"], "5");
        if h["ratelimit"].to_str().unwrap().contains("r=0;t=12") {
            would_refuse += 1;
            assert_eq!(h["x-ratelimit-remaining"], "0");
            assert_eq!(h["x-ratelimit-reset"], "12");
        }
    }
    assert_eq!(would_refuse, 15);
}

/// A body that records whether anyone read it.
struct Tattle(Arc<std::sync::atomic::AtomicBool>);

impl http_body::Body for Tattle {
    type Data = axum::body::Bytes;
    type Error = std::convert::Infallible;
    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
        std::task::Poll::Ready(None)
    }
}

/// The 429 is decided before the body is read or the handler (or any inner layer)
/// runs: a refused request's body is never polled; an admitted one's is.
#[tokio::test]
async fn a_refused_request_body_is_never_read() {
    let quota = Quota::per_minute(1).unwrap();
    let limiter = fresh_limiter(quota);
    let app = Router::new()
        .route("/", axum::routing::post(|body: String| async move { body }))
        .layer(LimitLayer::new(Limit::new(
            limiter,
            Policy::for_quota("p", &quota).unwrap(),
            client_key,
        )));
    for expect_read in [true, false] {
        let read = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let req = Request::post("/")
            .header("x-client", "alice")
            .body(Body::new(Tattle(read.clone())))
            .unwrap();
        let status = app.clone().oneshot(req).await.unwrap().status();
        assert_eq!(status == StatusCode::OK, expect_read);
        assert_eq!(read.load(std::sync::atomic::Ordering::SeqCst), expect_read);
    }
}

/// Admitted, rejected and shadow-rejected requests are counted per policy through the
/// `metrics` facade.
#[test]
fn outcomes_are_counted_per_policy() {
    use tower::{Layer, Service};
    let quota = Quota::per_minute(2).unwrap();
    let recorder = Counters::default();
    for (name, shadow) in [("enforced", false), ("trial", true)] {
        let limiter = fresh_limiter(quota);
        let layer = LimitLayer::new(Limit::new(
            limiter,
            Policy::for_quota(name, &quota).unwrap(),
            client_key,
        ))
        .shadow(shadow);
        let inner = tower::service_fn(|_: Request<Body>| async {
            Ok::<_, std::convert::Infallible>(http::Response::new(Body::empty()))
        });
        let mut service = layer.layer(inner);
        // The decision is made and counted in `call`, before any future runs.
        metrics::with_local_recorder(&recorder, || {
            for _ in 0..5 {
                drop(service.call(request(Some("alice"))));
            }
        });
    }
    let key = |policy: &str, outcome: &str| {
        recorder.get(&format!(
            "portero_requests_total{{policy={policy},outcome={outcome},source=memory}}"
        ))
    };
    assert_eq!(key("enforced", "admitted"), 2);
    assert_eq!(key("enforced", "rejected"), 3);
    assert_eq!(key("trial", "admitted"), 2);
    assert_eq!(key("trial", "shadow_rejected"), 3);
    assert_eq!(key("trial", "rejected"), 0);
    // Every counter is described (its `# HELP` in a Prometheus exporter).
    metrics::with_local_recorder(&recorder, portero_http::describe_metrics);
    for name in [
        "portero_requests_total",
        "portero_fallback_total",
        "portero_limit_failures_total",
        "portero_shed_total",
    ] {
        let help = recorder.help(name).unwrap_or_default();
        assert!(help.len() > 20, "{name}: {help:?}");
    }
}

/// Plans named by their policy's name, made into the layer's limit with no policy
/// made up for it: each client gets its plan's quota and fields, and is counted in the
/// metrics under its plan's name; a name no plan has is the key function's fault (500).
#[test]
fn plans_by_name_are_counted_under_their_own_policy() {
    use portero_http::Plans;
    use tower::{Layer, Service};
    let plan = |name: &str, per_minute| {
        let q = Quota::per_minute(per_minute).unwrap();
        (Policy::for_quota(name, &q).unwrap(), fresh_limiter(q))
    };
    let (free, pro) = (plan("free", 1), plan("pro", 3));
    let plans = Plans::new().plan(free.0, free.1).plan(pro.0, pro.1);
    let key = |req: &Request<Body>| {
        let who = req.headers().get("x-client")?.to_str().ok()?.to_owned();
        let plan = match who.as_str() {
            "paying" => "pro",
            "stranger" => "platinum",
            _ => "free",
        };
        Some((plan, who))
    };
    let layer = LimitLayer::new(plans.limit(key));
    let inner = tower::service_fn(|_: Request<Body>| async {
        Ok::<_, std::convert::Infallible>(http::Response::new(Body::empty()))
    });
    let mut service = layer.layer(inner);
    let recorder = Counters::default();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut statuses = Vec::new();
    metrics::with_local_recorder(&recorder, || {
        for who in [
            "alice", "alice", "paying", "paying", "paying", "paying", "stranger",
        ] {
            let answer = runtime.block_on(service.call(request(Some(who)))).unwrap();
            statuses.push((who, answer.status().as_u16()));
        }
    });
    assert_eq!(
        statuses,
        [
            ("alice", 200),
            ("alice", 429),
            ("paying", 200),
            ("paying", 200),
            ("paying", 200),
            ("paying", 429),
            ("stranger", 500),
        ]
    );
    let key = |policy: &str, outcome: &str| {
        recorder.get(&format!(
            "portero_requests_total{{policy={policy},outcome={outcome},source=memory}}"
        ))
    };
    assert_eq!((key("free", "admitted"), key("free", "rejected")), (1, 1));
    assert_eq!((key("pro", "admitted"), key("pro", "rejected")), (3, 1));
}

/// A per-request cost (here the declared body length in kilobytes): all or nothing, and
/// one huge request gets 413 without a Retry-After, costing nothing.
#[tokio::test]
async fn requests_are_charged_their_cost_and_a_huge_one_is_413() {
    let quota = Quota::per_minute(10).unwrap();
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(limited(quota, "kb").cost(|_, _, fields| {
            let bytes = fields.get("content-length").and_then(|v| v.to_str().ok());
            bytes
                .and_then(|b| b.parse::<u64>().ok())
                .unwrap_or(0)
                .div_ceil(1_000)
                .max(1)
        }));
    let send = |length: &'static str| {
        let req = Request::get("/")
            .header("x-client", "alice")
            .header("content-length", length)
            .body(Body::empty())
            .unwrap();
        app.clone().oneshot(req)
    };
    let huge = send("50000").await.unwrap();
    assert_eq!(huge.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert!(huge.headers().get("retry-after").is_none());
    let first = send("6000").await.unwrap();
    assert_eq!(
        first.headers()["ratelimit"],
        r#""kb";r=4;t=36"#,
        "the 413 cost nothing"
    );
    let refused = send("5000").await.unwrap();
    assert_eq!(
        refused.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "5 > 4 left: all or nothing"
    );
    assert_eq!(send("4000").await.unwrap().status(), StatusCode::OK);
}

/// A custom refusal: its body and status, with the limit's fields added.
#[tokio::test]
async fn a_custom_refusal_keeps_the_fields() {
    let quota = Quota::per_minute(1).unwrap();
    let app =
        Router::new()
            .route("/", get(|| async { "ok" }))
            .layer(limited(quota, "page").refusal(|d, policy| {
                let mut r = http::Response::new(format!(
                    "<p>{} is busy; try again in {} s</p>",
                    policy.name(),
                    d.retry_after().as_secs()
                ));
                r.headers_mut()
                    .insert("content-type", "text/html".parse().unwrap());
                *r.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
                r
            }));
    assert_eq!(
        app.clone()
            .oneshot(request(Some("ann")))
            .await
            .unwrap()
            .status(),
        StatusCode::OK
    );
    let refused = app.clone().oneshot(request(Some("ann"))).await.unwrap();
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.headers()["retry-after"], "60");
    assert_eq!(refused.headers()["ratelimit"], r#""page";r=0;t=60"#);
    assert_eq!(refused.headers()["content-type"], "text/html");
    assert_eq!(
        body(refused).await,
        "<p>page is busy; try again in 60 s</p>"
    );
}

/// Two layers nested — a login limit inside a per-client limit: the login's 429 keeps
/// its own fields, and the outer layer adds its policy to the lists instead of
/// replacing them (before: the 429 showed only the outer `"per-client";r=…`).
#[tokio::test]
async fn nested_layers_add_their_fields_to_the_lists() {
    let login_quota = Quota::per_minute(2).unwrap();
    let client_quota = Quota::per_minute(100).unwrap();
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(limited(login_quota, "login"))
        .layer(limited(client_quota, "per-client"));
    for _ in 0..2 {
        let r = app.clone().oneshot(request(Some("eve"))).await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
    }
    let r = app.clone().oneshot(request(Some("eve"))).await.unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    let list = |name: &str| {
        r.headers()
            .get_all(name)
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let fields = list("ratelimit");
    assert!(fields.starts_with(r#""login";r=0;t="#), "{fields}");
    assert!(fields.contains(r#", "per-client";r=97;t="#), "{fields}");
    assert_eq!(
        list("ratelimit-policy"),
        r#""login";q=2;w=60, "per-client";q=100;w=60"#
    );
    assert_eq!(r.headers()["retry-after"], "30", "the refusing policy's");
}
