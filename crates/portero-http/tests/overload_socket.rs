//! The overload layers across real sockets: an axum server on a free loopback port and
//! hyper's HTTP/1.1 client — priority shedding under a flood, a deadline that keeps a
//! request from the handler, and a breaker in front of a real failing upstream.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use http::{Response, StatusCode};
use portero::{CircuitBreaker, ConcurrencyLimit, Priority, PriorityLimit};
use portero_http::queue::DeadlineQueueLayer;
use portero_http::{CircuitBreakerLayer, LoadShedLayer};
use tower::{service_fn, Layer, Service, ServiceExt};

mod support {
    pub mod adaptive;
    pub mod hyper_client;
    #[allow(dead_code)] // its raw client serves other tests
    pub mod loopback;
}
use support::adaptive::{adaptive_limit, delayed_behind};
use support::hyper_client::hyper_get;
use support::loopback::serve;

/// 40 clients flood a server of 20 slots with sheddable requests while one client
/// sends 100 critical ones: with priorities the critical ones get through (≥ 99 %) and
/// the flood takes the cut; with a plain concurrency limit they do not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn critical_requests_get_through_a_flood_of_sheddable_ones() {
    let classify = |req: &http::Request<axum::body::Body>| match req.headers().get("x-priority") {
        Some(v) if v == "critical" => Priority::CRITICAL,
        _ => Priority::SHEDDABLE,
    };
    let by_priority = LoadShedLayer::by_priority(
        Arc::new(PriorityLimit::three_classes(20)),
        classify,
        Duration::from_secs(1),
    );
    let (critical_ok, ok, refused) = flood(slow_app().layer(by_priority)).await;
    eprintln!("priority: critical {critical_ok} of 100; flood {ok} served, {refused} refused");
    assert!(critical_ok >= 99, "critical: {critical_ok} of 100");
    assert!(
        refused > ok / 2,
        "the flood absorbs the cut: {ok} served, {refused} refused"
    );

    let plain = LoadShedLayer::new(Arc::new(ConcurrencyLimit::new(20)), Duration::from_secs(1));
    let (critical_ok, ok, refused) = flood(slow_app().layer(plain)).await;
    eprintln!("plain: critical {critical_ok} of 100; flood {ok} served, {refused} refused");
    assert!(
        critical_ok < 90,
        "without priorities the flood takes critical slots too"
    );
}

/// A handler that takes 20 ms.
fn slow_app() -> Router {
    Router::new().fallback(|| async {
        tokio::time::sleep(Duration::from_millis(20)).await;
        "done"
    })
}

/// Critical requests served (of 100), and the flood's served and refused.
async fn flood(app: Router) -> (u32, u32, u32) {
    let addr = serve(app).await;
    let flooding = Arc::new(AtomicBool::new(true));
    let (shed_ok, shed_refused) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let flood: Vec<_> = (0..40)
        .map(|_| {
            let (flooding, ok, refused) = (flooding.clone(), shed_ok.clone(), shed_refused.clone());
            tokio::spawn(async move {
                while flooding.load(Ordering::Relaxed) {
                    match hyper_get(addr, "/feed", &[]).await {
                        200 => ok.fetch_add(1, Ordering::Relaxed),
                        503 => refused.fetch_add(1, Ordering::Relaxed),
                        other => panic!("unexpected {other}"),
                    };
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut critical_ok = 0;
    for _ in 0..100 {
        if hyper_get(addr, "/pay", &[("x-priority", "critical")]).await == 200 {
            critical_ok += 1;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    flooding.store(false, Ordering::Relaxed);
    for f in flood {
        f.await.unwrap();
    }
    let (ok, refused) = (
        shed_ok.load(Ordering::Relaxed),
        shed_refused.load(Ordering::Relaxed),
    );
    (critical_ok, ok, refused)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_past_its_deadline_never_reaches_the_handler() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let app = {
        let seen = seen.clone();
        Router::new().fallback(move |uri: http::Uri| {
            let seen = seen.clone();
            async move {
                seen.lock().unwrap().push(uri.path().to_owned());
                // Long beside `/late`'s 100 ms, so that a loaded machine's delays cannot
                // let `/slow` finish before `/late`'s deadline passes.
                tokio::time::sleep(Duration::from_millis(1_000)).await;
                "done"
            }
        })
    }
    .layer(
        DeadlineQueueLayer::new(1, 8, Duration::from_secs(5))
            .timeout_header(http::HeaderName::from_static("x-request-timeout-ms")),
    );
    let addr = serve(app).await;
    let slow = tokio::spawn(hyper_get(addr, "/slow", &[]));
    // `/slow` holds the only slot before the others come (waited for, not guessed).
    while seen.lock().unwrap().is_empty() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let late = tokio::spawn(hyper_get(addr, "/late", &[("x-request-timeout-ms", "100")]));
    let patient = tokio::spawn(hyper_get(
        addr,
        "/patient",
        &[("x-request-timeout-ms", "4000")],
    ));
    assert_eq!(late.await.unwrap(), 503);
    assert_eq!(slow.await.unwrap(), 200);
    assert_eq!(patient.await.unwrap(), 200);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        *seen.lock().unwrap(),
        ["/slow", "/patient"],
        "/late never ran"
    );
}

/// How an upstream misbehaves while it is broken.
#[derive(Clone, Copy)]
enum Broken {
    /// It answers 500 at once.
    Fails,
    /// It answers 200, but only after 30 s.
    Hangs,
}

/// An upstream on a loopback port, broken at first.
struct Upstream {
    addr: SocketAddr,
    /// While set (read as a call arrives), it misbehaves; otherwise it answers 200.
    broken: Arc<AtomicBool>,
    /// The calls it received.
    hits: Arc<AtomicU32>,
}

/// An upstream that misbehaves as `how` says while it is broken.
async fn upstream(how: Broken) -> Upstream {
    let (broken, hits) = (Arc::new(AtomicBool::new(true)), Arc::new(AtomicU32::new(0)));
    let (is_broken, count) = (broken.clone(), hits.clone());
    let addr = serve(Router::new().fallback(move || {
        count.fetch_add(1, Ordering::SeqCst);
        let misbehaves = is_broken.load(Ordering::SeqCst);
        async move {
            match (misbehaves, how) {
                (false, _) => StatusCode::OK,
                (true, Broken::Fails) => StatusCode::INTERNAL_SERVER_ERROR,
                (true, Broken::Hangs) => {
                    tokio::time::sleep(Duration::from_secs(30)).await;
                    StatusCode::OK
                }
            }
        }
    }))
    .await;
    Upstream { addr, broken, hits }
}

/// The client service a breaker wraps: each call a GET of its path from `addr` over a
/// fresh hyper connection, answered with the upstream's status.
fn calls_to(
    addr: SocketAddr,
) -> impl Service<&'static str, Response = Response<()>, Error = Infallible, Future: Send> + Clone {
    service_fn(move |path: &'static str| async move {
        let status = hyper_get(addr, path, &[]).await;
        Ok::<_, Infallible>(Response::builder().status(status).body(()).unwrap())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_breaker_stops_calling_a_failing_upstream_and_recovers_after_it_heals() {
    let failing = upstream(Broken::Fails).await;
    let breaker = Arc::new(CircuitBreaker::new(5, Duration::from_millis(300)).unwrap());
    let client = CircuitBreakerLayer::new(breaker)
        .fallback(|_| {
            Response::builder()
                .status(StatusCode::OK)
                .header("x-fallback", "1")
                .body(())
                .unwrap()
        })
        .layer(calls_to(failing.addr));
    let mut fallbacks = 0;
    for _ in 0..30 {
        let r = client.clone().oneshot("/").await.unwrap();
        fallbacks += u32::from(r.headers().contains_key("x-fallback"));
    }
    assert_eq!(
        failing.hits.load(Ordering::SeqCst),
        5,
        "the upstream saw 5 calls, not 30"
    );
    assert_eq!(fallbacks, 25);
    failing.broken.store(false, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(350)).await;
    let probe = client.clone().oneshot("/").await.unwrap();
    assert_eq!(probe.status(), StatusCode::OK);
    assert!(
        !probe.headers().contains_key("x-fallback"),
        "the probe reached it"
    );
    for _ in 0..10 {
        let r = client.clone().oneshot("/").await.unwrap();
        assert!(!r.headers().contains_key("x-fallback"));
    }
    assert_eq!(
        failing.hits.load(Ordering::SeqCst),
        16,
        "closed again: every call reaches it"
    );
}

/// An upstream that hangs instead of failing, across a real socket: each call ends at
/// the layer's call timeout and counts as a failure, so after 5 the breaker opens and
/// the hung upstream sees no more calls; when it answers again, the probe closes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_to_a_hung_upstream_time_out_and_open_the_breaker() {
    let hung = upstream(Broken::Hangs).await;
    // Timeouts and the open time long beside a loaded machine's delays: each hung call
    // reaches the upstream before its timeout, and the 15 refusals all come while the
    // breaker is open.
    let breaker = Arc::new(CircuitBreaker::new(5, Duration::from_secs(2)).unwrap());
    let client = CircuitBreakerLayer::new(breaker)
        .call_timeout(Duration::from_millis(400))
        .layer(calls_to(hung.addr));
    let started = std::time::Instant::now();
    let mut timed_out = 0;
    let mut open = 0;
    for _ in 0..20 {
        match client.clone().oneshot("/").await {
            Err(portero_http::BreakerCallError::TimedOut) => timed_out += 1,
            Err(portero_http::BreakerCallError::Open(_)) => open += 1,
            other => panic!("unexpected {:?}", other.map(|r| r.status())),
        }
    }
    assert_eq!((timed_out, open), (5, 15));
    assert_eq!(
        hung.hits.load(Ordering::SeqCst),
        5,
        "the hung upstream saw 5 calls"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "bounded by the call timeout"
    );
    hung.broken.store(false, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    assert_eq!(
        client.clone().oneshot("/").await.unwrap().status(),
        StatusCode::OK
    );
    assert_eq!(
        client.oneshot("/").await.unwrap().status(),
        StatusCode::OK,
        "closed"
    );
}

/// The adaptive layer across real sockets: while the handler is fast the limit grows;
/// when it becomes slower than its clients' 100 ms timeout, every client hangs up
/// before the answer, the server drops those requests, and the limit falls to its
/// minimum (cancelled requests are slow samples).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_adaptive_limit_falls_when_clients_give_up_before_the_answer() {
    use std::sync::atomic::AtomicU64;
    let limit = adaptive_limit(10);
    let delay_ms = Arc::new(AtomicU64::new(2));
    let addr = serve(delayed_behind(&limit, &delay_ms)).await;
    for _ in 0..60 {
        assert_eq!(hyper_get(addr, "/", &[]).await, 200);
    }
    let grown = limit.limit();
    assert!(grown > 20, "grew while fast: {grown}");
    delay_ms.store(2_000, Ordering::SeqCst);
    for _ in 0..400 {
        let gave_up = tokio::time::timeout(Duration::from_millis(100), hyper_get(addr, "/", &[]));
        let _ = gave_up.await;
        if limit.limit() == 3 {
            break;
        }
    }
    assert_eq!(limit.limit(), 3, "down to the minimum from {grown}");
}
