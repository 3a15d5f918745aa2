//! The overload layers in an axum router or around a client service, driven in-process:
//! priority and fair shedding, the adaptive limit, the deadline queue, the breaker.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::routing::get;
use axum::Router;
use http::{Request, Response, StatusCode};
use portero::{CircuitBreaker, ManualClock, Priority, PriorityLimit};
use portero_http::fair::FairShare;
use portero_http::queue::{DeadlineQueueLayer, Order};
use portero_http::{BreakerCallError, CircuitBreakerLayer, LoadShedLayer};
use tokio::sync::Semaphore;
use tower::{service_fn, Layer, ServiceExt};

mod support {
    pub mod adaptive;
    pub mod counters;
}
use support::adaptive::{adaptive_limit, delayed_behind};

/// A handler that counts its calls and holds each request until `open` lets it go.
fn held(calls: Arc<AtomicU32>, open: Arc<Semaphore>) -> Router {
    Router::new().fallback(move || {
        let (calls, open) = (calls.clone(), open.clone());
        async move {
            calls.fetch_add(1, Ordering::SeqCst);
            open.acquire().await.unwrap().forget();
            "done"
        }
    })
}

fn get_path(path: &str, fields: &[(&str, &str)]) -> Request<Body> {
    let mut r = Request::get(path);
    for (k, v) in fields {
        r = r.header(*k, *v);
    }
    r.body(Body::empty()).unwrap()
}

/// Starts `n` requests that the handler will hold, and waits until all are inside.
async fn hold(app: &Router, calls: &AtomicU32, n: u32, path: &str, fields: &[(&str, &str)]) {
    let before = calls.load(Ordering::SeqCst);
    for _ in 0..n {
        tokio::spawn(app.clone().oneshot(get_path(path, fields)));
    }
    until(|| calls.load(Ordering::SeqCst) >= before + n).await;
}

/// Yields to the spawned requests until `done` holds (a test that would wait forever
/// fails instead).
async fn until(mut done: impl FnMut() -> bool) {
    for _ in 0..1_000_000 {
        if done() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("the awaited state never came");
}

async fn status(app: &Router, path: &str, fields: &[(&str, &str)]) -> StatusCode {
    app.clone()
        .oneshot(get_path(path, fields))
        .await
        .unwrap()
        .status()
}

fn class_of(req: &Request<Body>) -> Priority {
    match req.uri().path() {
        "/critical" => Priority::CRITICAL,
        "/sheddable" => Priority::SHEDDABLE,
        _ => Priority::DEFAULT,
    }
}

#[tokio::test]
async fn lower_priorities_are_refused_first_before_the_handler_runs() {
    let (calls, open) = (Arc::new(AtomicU32::new(0)), Arc::new(Semaphore::new(0)));
    let limit = Arc::new(PriorityLimit::three_classes(10));
    let app = held(calls.clone(), open.clone()).layer(LoadShedLayer::by_priority(
        limit.clone(),
        class_of,
        Duration::from_secs(2),
    ));
    hold(&app, &calls, 7, "/sheddable", &[]).await;
    let refused = app
        .clone()
        .oneshot(get_path("/sheddable", &[]))
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.headers()["retry-after"], "2");
    // The same JSON shape as a 429, so a client reads every refusal one way.
    assert_eq!(refused.headers()["content-type"], "application/json");
    let body = axum::body::to_bytes(refused.into_body(), 1024)
        .await
        .unwrap();
    assert_eq!(body, portero_http::SERVICE_UNAVAILABLE_BODY);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        7,
        "refused before the handler"
    );
    hold(&app, &calls, 2, "/default", &[]).await;
    assert_eq!(
        status(&app, "/default", &[]).await,
        StatusCode::SERVICE_UNAVAILABLE
    );
    hold(&app, &calls, 1, "/critical", &[]).await;
    assert_eq!(limit.in_use(), 10);
    assert_eq!(
        status(&app, "/critical", &[]).await,
        StatusCode::SERVICE_UNAVAILABLE
    );
    open.add_permits(1); // one finishes: the slot goes to critical work only
    until(|| limit.in_use() <= 9).await;
    assert_eq!(
        status(&app, "/sheddable", &[]).await,
        StatusCode::SERVICE_UNAVAILABLE
    );
    assert_eq!(
        status(&app, "/default", &[]).await,
        StatusCode::SERVICE_UNAVAILABLE
    );
    hold(&app, &calls, 1, "/critical", &[]).await;
    open.add_permits(100);
}

/// A tenant that an authentication layer has verified (here: a known API key).
#[derive(Clone, Copy)]
struct Tenant(&'static str);

/// Sets [`Tenant`] for known API keys only; anything else carries no tenant.
fn verify(mut req: Request<Body>) -> Request<Body> {
    let key = req.headers().get("x-api-key").and_then(|v| v.to_str().ok());
    let known = ["small-1", "small-2", "small-3", "noisy"];
    if let Some(&tenant) = known.iter().find(|&&k| Some(k) == key) {
        req.extensions_mut().insert(Tenant(tenant));
    }
    req
}

/// A client rotating invented tenant ids: with the id read straight from a header,
/// every invented id is a fresh tenant with nothing in flight, which the reserve
/// admits, and the rotator takes the reserve from the small tenants. With the tenant
/// taken from a verified credential (as the docs require), invented ids carry no
/// tenant and share one: the rotator is one tenant, and the small ones get the
/// reserve in full.
#[tokio::test]
async fn rotating_invented_tenant_ids_gains_nothing_with_verified_tenants() {
    for verified in [false, true] {
        let (calls, open) = (Arc::new(AtomicU32::new(0)), Arc::new(Semaphore::new(0)));
        let share = Arc::new(FairShare::new(10, 3).unwrap());
        let shed = if verified {
            LoadShedLayer::by_tenant(
                share.clone(),
                (|req: &Request<Body>| req.extensions().get::<Tenant>().map(|t| t.0))
                    as fn(&Request<Body>) -> Option<&'static str>,
                Duration::from_secs(1),
            )
        } else {
            LoadShedLayer::by_tenant(
                share.clone(),
                (|req: &Request<Body>| {
                    let v = req.headers().get("x-api-key")?.to_str().ok()?;
                    Some(&*v.to_owned().leak())
                }) as fn(&Request<Body>) -> Option<&'static str>,
                Duration::from_secs(1),
            )
        };
        let app = held(calls.clone(), open.clone())
            .layer(shed)
            .layer(tower::util::MapRequestLayer::new(verify));
        hold(&app, &calls, 7, "/", &[("x-api-key", "noisy")]).await;
        // The noisy client now invents a new key per request.
        let mut rotated_in = 0;
        for i in 0..20 {
            let key = format!("invented-{i}");
            let resp = app.clone().oneshot(get_path("/", &[("x-api-key", &key)]));
            let running = calls.load(Ordering::SeqCst);
            let handle = tokio::spawn(resp);
            until(|| calls.load(Ordering::SeqCst) > running || handle.is_finished()).await;
            if calls.load(Ordering::SeqCst) > running {
                rotated_in += 1;
            }
        }
        let mut small_served = 0;
        for key in ["small-1", "small-2", "small-3"] {
            let running = calls.load(Ordering::SeqCst);
            let handle = tokio::spawn(app.clone().oneshot(get_path("/", &[("x-api-key", key)])));
            until(|| calls.load(Ordering::SeqCst) > running || handle.is_finished()).await;
            if calls.load(Ordering::SeqCst) > running {
                small_served += 1;
            }
        }
        if verified {
            assert_eq!(
                (rotated_in, small_served),
                (0, 3),
                "invented ids gain nothing"
            );
        } else {
            assert_eq!((rotated_in, small_served), (3, 0), "the attack, unverified");
        }
        open.add_permits(100);
    }
}

#[tokio::test]
async fn a_noisy_tenant_is_refused_while_small_tenants_get_the_reserve() {
    let (calls, open) = (Arc::new(AtomicU32::new(0)), Arc::new(Semaphore::new(0)));
    let share = Arc::new(FairShare::new(4, 1).unwrap());
    let tenant = |req: &Request<Body>| req.headers().get("x-tenant").cloned();
    let app = held(calls.clone(), open.clone()).layer(LoadShedLayer::by_tenant(
        share.clone(),
        tenant,
        Duration::from_secs(1),
    ));
    hold(&app, &calls, 3, "/", &[("x-tenant", "noisy")]).await;
    assert_eq!(
        status(&app, "/", &[("x-tenant", "noisy")]).await,
        StatusCode::SERVICE_UNAVAILABLE
    );
    // A request without a tenant never gets the reserve; a small tenant does, and
    // then the service is full.
    assert_eq!(
        status(&app, "/", &[]).await,
        StatusCode::SERVICE_UNAVAILABLE
    );
    hold(&app, &calls, 1, "/", &[("x-tenant", "small")]).await;
    assert_eq!(
        status(&app, "/", &[("x-tenant", "rotated")]).await,
        StatusCode::SERVICE_UNAVAILABLE
    );
    assert_eq!(share.in_flight(), 4);
    open.add_permits(100);
}

#[tokio::test]
async fn the_adaptive_layer_starts_low_and_learns_from_latency() {
    let limit = adaptive_limit(5);
    let (calls, open) = (Arc::new(AtomicU32::new(0)), Arc::new(Semaphore::new(0)));
    let app = held(calls.clone(), open.clone()).layer(LoadShedLayer::adaptive(
        limit.clone(),
        Duration::from_secs(1),
    ));
    hold(&app, &calls, 3, "/", &[]).await;
    assert_eq!(
        status(&app, "/", &[]).await,
        StatusCode::SERVICE_UNAVAILABLE
    );
    open.add_permits(1000);
    until(|| limit.in_flight() == 0).await;
    for _ in 0..2 {
        assert_eq!(status(&app, "/", &[]).await, StatusCode::OK);
    }
    until(|| limit.in_flight() == 0).await;
    assert!(limit.baseline() > Duration::ZERO, "five calls measured it");
    assert_eq!(limit.limit(), 20, "then the initial limit");
}

/// The service becomes slower than its clients' timeout: every request is cancelled
/// by the client before it answers, none completes. The cancelled requests are slow
/// samples, so the limit falls to its minimum (before: it stayed where it was).
#[tokio::test(start_paused = true)]
async fn the_adaptive_limit_falls_when_every_request_is_cancelled() {
    use std::sync::atomic::AtomicU64;
    let limit = adaptive_limit(10);
    let delay_ms = Arc::new(AtomicU64::new(1));
    let app = delayed_behind(&limit, &delay_ms);
    for _ in 0..40 {
        assert_eq!(status(&app, "/", &[]).await, StatusCode::OK);
    }
    assert!(
        limit.limit() > 20,
        "grew while fast (1 ms on tokio's clock): {}",
        limit.limit()
    );
    delay_ms.store(100_000, Ordering::SeqCst); // 100 s, clients give up after 100 ms
    for _ in 0..2_000 {
        let r = tokio::time::timeout(
            Duration::from_millis(100),
            app.clone().oneshot(get_path("/", &[])),
        );
        assert!(r.await.is_err() || limit.limit() == 3);
    }
    assert_eq!(limit.limit(), 3, "the minimum");
    assert_eq!(limit.in_flight(), 0);
}

/// A handler that takes 500 ms. A request that gets its slot with 300 ms left would
/// answer after its client gave up: it is refused without running (before: it ran and
/// answered 200 ms late).
#[tokio::test(start_paused = true)]
async fn a_request_without_time_to_finish_is_not_started() {
    let calls = Arc::new(AtomicU32::new(0));
    let c = calls.clone();
    let layer = DeadlineQueueLayer::new(1, 4, Duration::from_secs(10))
        .timeout_header(http::HeaderName::from_static("x-request-timeout-ms"));
    let app = Router::new()
        .fallback(move || {
            c.fetch_add(1, Ordering::SeqCst);
            async {
                tokio::time::sleep(Duration::from_millis(500)).await;
                "done"
            }
        })
        .layer(layer.clone());
    assert_eq!(status(&app, "/", &[]).await, StatusCode::OK); // measures 500 ms
    assert_eq!(layer.service_time_estimate(), Duration::from_millis(500));
    let first = tokio::spawn(app.clone().oneshot(get_path("/", &[])));
    tokio::task::yield_now().await;
    let hurried = app
        .clone()
        .oneshot(get_path("/", &[("x-request-timeout-ms", "800")]));
    let hurried = hurried.await.unwrap();
    assert_eq!(hurried.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(first.await.unwrap().unwrap().status(), StatusCode::OK);
    assert_eq!(calls.load(Ordering::SeqCst), 2, "the hurried one never ran");
    // A configured estimate wins over the measured one.
    let strict = layer.clone().service_time(Duration::from_secs(20));
    assert_eq!(strict.service_time_estimate(), Duration::from_secs(20));
}

/// One cold request (2.5 s, longer than the clients' 2 s) must not lock the queue into
/// refusing: a request that finds a free slot starts at once with its whole deadline,
/// so the estimate keeps being measured and comes back down (before: 1,000 of 1,000
/// requests to a healthy 10 ms service refused, the estimate stuck at 2.5 s).
#[tokio::test(start_paused = true)]
async fn a_cold_start_does_not_lock_the_queue_into_refusing() {
    let layer = DeadlineQueueLayer::new(4, 16, Duration::from_secs(2));
    let app = Router::new()
        .fallback(|uri: http::Uri| async move {
            let ms = if uri.path() == "/cold" { 2_500 } else { 10 };
            tokio::time::sleep(Duration::from_millis(ms)).await;
            "done"
        })
        .layer(layer.clone());
    assert_eq!(status(&app, "/cold", &[]).await, StatusCode::OK);
    assert_eq!(layer.service_time_estimate(), Duration::from_millis(2_500));
    let mut ok = 0;
    for _ in 0..1_000 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        ok += u32::from(status(&app, "/fast", &[]).await == StatusCode::OK);
    }
    assert_eq!(ok, 1_000);
    assert!(layer.service_time_estimate() < Duration::from_millis(20));
}

/// Absurd durations for every duration setting of the queue and the breaker layer:
/// no panic, no overflow (before: `Duration::MAX` as the queue's timeout panicked
/// every request with "overflow when adding duration to instant").
#[tokio::test(start_paused = true)]
async fn absurd_durations_never_panic() {
    for (timeout, estimate) in [
        (Duration::MAX, None),
        (Duration::MAX, Some(Duration::MAX)),
        (Duration::ZERO, Some(Duration::MAX)),
        (Duration::from_secs(u64::MAX), Some(Duration::ZERO)),
    ] {
        let mut layer = DeadlineQueueLayer::new(1, 1, timeout)
            .retry_after(Duration::MAX)
            .timeout_header(http::HeaderName::from_static("x-request-timeout-ms"));
        if let Some(e) = estimate {
            layer = layer.service_time(e);
        }
        let app = Router::new().fallback(|| async { "done" }).layer(layer);
        for asked in ["999999999999", "0", "18446744073709551615"] {
            let r = app
                .clone()
                .oneshot(get_path("/", &[("x-request-timeout-ms", asked)]))
                .await
                .unwrap();
            assert!(matches!(
                r.status(),
                StatusCode::OK | StatusCode::SERVICE_UNAVAILABLE
            ));
        }
    }
    let breaker = Arc::new(CircuitBreaker::new(1, Duration::from_secs(1)).unwrap());
    for timeout in [Duration::MAX, Duration::ZERO, Duration::from_nanos(1)] {
        let client = CircuitBreakerLayer::new(breaker.clone())
            .call_timeout(timeout)
            .layer(service_fn(|_: ()| async {
                Ok::<_, std::convert::Infallible>(Response::new(String::new()))
            }));
        let _ = client.oneshot(()).await;
    }
    let shed = LoadShedLayer::new(Arc::new(portero::ConcurrencyLimit::new(0)), Duration::MAX);
    let app = Router::new().fallback(|| async { "done" }).layer(shed);
    assert_eq!(
        status(&app, "/", &[]).await,
        StatusCode::SERVICE_UNAVAILABLE
    );
    for bad in [Duration::ZERO, Duration::MAX] {
        assert!(CircuitBreaker::new(1, Duration::from_secs(1))
            .unwrap()
            .with_probe_timeout(bad)
            .is_err());
    }
}

#[tokio::test(start_paused = true)]
async fn a_request_past_its_deadline_never_reaches_the_handler() {
    let (calls, open) = (Arc::new(AtomicU32::new(0)), Arc::new(Semaphore::new(0)));
    let layer = DeadlineQueueLayer::new(1, 2, Duration::from_secs(2))
        .timeout_header(http::HeaderName::from_static("x-request-timeout-ms"));
    let app = held(calls.clone(), open.clone()).layer(layer.clone());
    hold(&app, &calls, 1, "/", &[]).await;
    // Waits in line, asks for 100 ms, gets none: 503 without running.
    let late = tokio::spawn(
        app.clone()
            .oneshot(get_path("/late", &[("x-request-timeout-ms", "100")])),
    );
    // A hostile timeout is cut to the configured 2 s.
    let patient = tokio::spawn(app.clone().oneshot(get_path(
        "/patient",
        &[("x-request-timeout-ms", "99999999999")],
    )));
    until(|| layer.waiting() >= 2).await;
    assert_eq!(
        status(&app, "/", &[]).await,
        StatusCode::SERVICE_UNAVAILABLE,
        "line full"
    );
    let late = late.await.unwrap().unwrap();
    assert_eq!(late.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(
        patient.await.unwrap().unwrap().status(),
        StatusCode::SERVICE_UNAVAILABLE
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1, "neither ever ran");
    open.add_permits(1);
    until(|| layer.running() == 0).await;
}

#[tokio::test]
async fn the_line_is_served_in_its_order_and_a_client_that_leaves_frees_its_place() {
    for (order, expected) in [(Order::OldestFirst, "/a"), (Order::NewestFirst, "/c")] {
        let served = Arc::new(std::sync::Mutex::new(Vec::new()));
        let open = Arc::new(Semaphore::new(0));
        let app = {
            let (served, open) = (served.clone(), open.clone());
            Router::new().route(
                "/{*path}",
                get(move |uri: http::Uri| {
                    let (served, open) = (served.clone(), open.clone());
                    async move {
                        served.lock().unwrap().push(uri.path().to_owned());
                        open.acquire().await.unwrap().forget();
                        "done"
                    }
                }),
            )
        };
        let layer = DeadlineQueueLayer::new(1, 3, Duration::from_secs(60)).order(order);
        let app = app.layer(layer.clone());
        tokio::spawn(app.clone().oneshot(get_path("/first", &[])));
        until(|| layer.running() >= 1).await;
        let mut waiting = Vec::new();
        for path in ["/a", "/b", "/c"] {
            waiting.push(tokio::spawn(app.clone().oneshot(get_path(path, &[]))));
            until(|| layer.waiting() >= waiting.len()).await;
        }
        waiting.remove(1).abort(); // "/b" gives up
        open.add_permits(1);
        until(|| served.lock().unwrap().len() >= 2).await;
        assert_eq!(served.lock().unwrap()[1], expected);
        open.add_permits(10);
        for w in waiting {
            assert_eq!(w.await.unwrap().unwrap().status(), StatusCode::OK);
        }
        assert_eq!(
            served.lock().unwrap().len(),
            3,
            "the one that left never ran"
        );
        assert_eq!((layer.running(), layer.waiting()), (0, 0));
    }
}

#[tokio::test]
async fn the_breaker_layer_stops_calls_answers_the_fallback_and_probes() {
    let clock = Arc::new(ManualClock::new());
    let breaker = CircuitBreaker::new(5, Duration::from_secs(30)).unwrap();
    let breaker = Arc::new(breaker.with_clock(clock.clone()));
    let (hits, healthy) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let upstream = {
        let (hits, healthy) = (hits.clone(), healthy.clone());
        service_fn(move |_: ()| {
            hits.fetch_add(1, Ordering::SeqCst);
            let code = if healthy.load(Ordering::SeqCst) == 1 {
                200
            } else {
                503
            };
            async move {
                let r = Response::builder()
                    .status(code)
                    .body(String::new())
                    .unwrap();
                Ok::<_, std::convert::Infallible>(r)
            }
        })
    };
    let client = CircuitBreakerLayer::new(breaker.clone())
        .fallback(|open| Response::new(format!("fallback, retry in {:?}", open.retry_after)))
        .layer(upstream);
    for _ in 0..50 {
        client.clone().oneshot(()).await.unwrap();
    }
    assert_eq!(
        hits.load(Ordering::SeqCst),
        5,
        "five failures, then no more calls"
    );
    let answer = client.clone().oneshot(()).await.unwrap();
    assert_eq!(answer.body(), "fallback, retry in 30s");
    healthy.store(1, Ordering::SeqCst);
    clock.advance(30_000_000_000);
    assert_eq!(
        client.clone().oneshot(()).await.unwrap().status(),
        StatusCode::OK
    );
    assert_eq!(hits.load(Ordering::SeqCst), 6, "one probe");
    for _ in 0..10 {
        client.clone().oneshot(()).await.unwrap();
    }
    assert_eq!(hits.load(Ordering::SeqCst), 16, "closed again");

    // Without a fallback the caller gets the error, and a custom rule decides.
    let strict = CircuitBreakerLayer::new(Arc::new(
        CircuitBreaker::new(1, Duration::from_secs(1)).unwrap(),
    ))
    .failure_if(|r: &Response<String>| r.status() == StatusCode::OK)
    .layer(service_fn(|_: ()| async {
        Ok::<_, std::convert::Infallible>(Response::new(String::new()))
    }));
    strict.clone().oneshot(()).await.unwrap();
    assert!(matches!(
        strict.oneshot(()).await,
        Err(BreakerCallError::Open(_))
    ));
}

#[tokio::test(start_paused = true)]
async fn a_call_past_its_timeout_fails_and_counts() {
    let breaker = Arc::new(CircuitBreaker::new(1, Duration::from_secs(30)).unwrap());
    let hangs = service_fn(|_: ()| async {
        std::future::pending::<()>().await;
        Ok::<_, std::convert::Infallible>(Response::new(String::new()))
    });
    let client = CircuitBreakerLayer::new(breaker.clone())
        .call_timeout(Duration::from_secs(2))
        .layer(hangs);
    assert!(matches!(
        client.clone().oneshot(()).await,
        Err(BreakerCallError::TimedOut)
    ));
    assert!(matches!(
        client.oneshot(()).await,
        Err(BreakerCallError::Open(_))
    ));
}

/// A probe that never answers: the layer's default call timeout fails it, and with
/// no call timeout at all the breaker's own probe timeout does. An hour after the
/// dependency recovered, every call goes through again (before: 100 of 100 refused).
#[tokio::test(start_paused = true)]
async fn a_hung_probe_does_not_keep_the_breaker_half_open() {
    for with_timeout in [true, false] {
        let clock = Arc::new(ManualClock::new());
        let breaker = CircuitBreaker::new(5, Duration::from_secs(30)).unwrap();
        let breaker = Arc::new(breaker.with_clock(clock.clone()));
        let healthy = Arc::new(AtomicU32::new(0));
        let hits = Arc::new(AtomicU32::new(0));
        let (h, n) = (healthy.clone(), hits.clone());
        let upstream = service_fn(move |_: ()| {
            let call = n.fetch_add(1, Ordering::SeqCst);
            let state = h.load(Ordering::SeqCst);
            async move {
                match state {
                    0 => Ok(Response::builder().status(500).body(String::new()).unwrap()),
                    // Recovering: the first call after the outage hangs for good.
                    _ if call == 5 => std::future::pending().await,
                    _ => Ok::<_, std::convert::Infallible>(Response::new(String::new())),
                }
            }
        });
        let layer = CircuitBreakerLayer::new(breaker.clone());
        let layer = if with_timeout {
            layer
        } else {
            layer.without_call_timeout()
        };
        let client = layer.layer(upstream);
        for _ in 0..5 {
            let _ = client.clone().oneshot(()).await;
        }
        healthy.store(1, Ordering::SeqCst);
        clock.advance(30_000_000_000);
        let probe = tokio::spawn(client.clone().oneshot(()));
        tokio::time::sleep(Duration::from_secs(3_600)).await;
        clock.advance(3_600_000_000_000);
        assert_eq!(
            probe.is_finished(),
            with_timeout,
            "the call timeout ends it"
        );
        let mut served = 0;
        for _ in 0..100 {
            if client.clone().oneshot(()).await.is_ok() {
                served += 1;
            }
        }
        assert_eq!(served, 100, "recovered: closed again");
        assert_eq!(
            hits.load(Ordering::SeqCst),
            106,
            "5 failures, the hung probe, 100"
        );
    }
}

/// An open breaker answers with its fallback even while the inner client is saturated
/// (its `poll_ready` never finishes): the dependency is not called, so its readiness
/// does not matter.
#[tokio::test(start_paused = true)]
async fn an_open_breaker_answers_without_waiting_for_a_saturated_client() {
    let breaker = Arc::new(CircuitBreaker::new(1, Duration::from_secs(30)).unwrap());
    breaker.try_call().unwrap().failure();
    let client = CircuitBreakerLayer::new(breaker)
        .fallback(|_| Response::new("fallback".to_string()))
        .layer(NeverReady);
    let answer = tokio::time::timeout(Duration::from_secs(10), client.oneshot(()))
        .await
        .expect("answered at once")
        .unwrap();
    assert_eq!(answer.body(), "fallback");
}

/// One handler running, for as long as it lives.
struct Running(Arc<AtomicU32>);

impl Running {
    fn enter(running: &Arc<AtomicU32>, most: &AtomicU32) -> Self {
        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
        most.fetch_max(now, Ordering::SeqCst);
        Self(running.clone())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The line's invariant under a storm: 300 requests with random deadlines (some past
/// before a slot frees, some leaving early) through 3 slots and a line of 20, on a
/// multi-threaded runtime. Afterwards nothing runs and nothing waits: no slot was lost
/// to a waiter that left or expired while it was being handed over, and never more
/// than 3 ran at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_slot_is_lost_when_waiters_expire_or_leave_during_hand_over() {
    let running = Arc::new(AtomicU32::new(0));
    let most = Arc::new(AtomicU32::new(0));
    let app = {
        let (running, most) = (running.clone(), most.clone());
        Router::new().fallback(move || {
            let (running, most) = (running.clone(), most.clone());
            async move {
                // Counted down on drop too: a client that leaves drops its handler.
                let _running = Running::enter(&running, &most);
                tokio::time::sleep(Duration::from_millis(2)).await;
                "done"
            }
        })
    };
    let layer = DeadlineQueueLayer::new(3, 20, Duration::from_millis(50))
        .timeout_header(http::HeaderName::from_static("x-request-timeout-ms"));
    let app = app.layer(layer.clone());
    // Four storms: the races are timing-dependent, each storm is another chance.
    for _storm in 0..4 {
        let tasks: Vec<_> = (0..300u64)
            .map(|i| {
                let app = app.clone();
                tokio::spawn(async move {
                    // Spread over ≈ 45 ms, so the line is busy the whole time.
                    tokio::time::sleep(Duration::from_micros(i * 150)).await;
                    let budget = (i * 7919 % 30).to_string();
                    let request = app.oneshot(get_path("/", &[("x-request-timeout-ms", &budget)]));
                    if i % 5 == 0 {
                        // This client gives up after 1 ms, whatever the line is doing.
                        let _ = tokio::time::timeout(Duration::from_millis(1), request).await;
                    } else {
                        let status = request.await.unwrap().status();
                        assert!(
                            status == StatusCode::OK || status == StatusCode::SERVICE_UNAVAILABLE
                        );
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while layer.running() + layer.waiting() > 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "slots lost: {} running, {} waiting",
                layer.running(),
                layer.waiting()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    assert!(
        most.load(Ordering::SeqCst) <= 3,
        "never more than 3 at once"
    );
}

/// Requests the overload layers answer without the inner service are counted:
/// `portero_shed_total{layer, reason}` (decided in `call`, so a local recorder sees them).
#[tokio::test]
async fn shed_requests_are_counted_by_layer_and_reason() {
    use tower::Service;
    let recorder = support::counters::Counters::default();
    let held = || {
        service_fn(|_: Request<Body>| async {
            std::future::pending::<()>().await;
            Ok::<_, std::convert::Infallible>(Response::new(Body::empty()))
        })
    };
    let mut shed = LoadShedLayer::new(
        Arc::new(portero::ConcurrencyLimit::new(1)),
        Duration::from_secs(1),
    )
    .layer(held());
    let mut queue = DeadlineQueueLayer::new(1, 1, Duration::from_secs(60)).layer(held());
    let breaker = Arc::new(CircuitBreaker::new(1, Duration::from_secs(30)).unwrap());
    let mut client = CircuitBreakerLayer::new(breaker.clone()).layer(service_fn(|_: ()| async {
        Ok::<_, std::convert::Infallible>(
            Response::builder().status(500).body(String::new()).unwrap(),
        )
    }));
    client.ready().await.unwrap().call(()).await.unwrap(); // one failure opens it
    let mut kept = Vec::new();
    metrics::with_local_recorder(&recorder, || {
        for _ in 0..3 {
            kept.push(shed.call(get_path("/", &[])));
        }
        let mut q = Vec::new();
        for _ in 0..4 {
            q.push(queue.call(get_path("/", &[])));
        }
        drop(q);
        for _ in 0..2 {
            drop(client.call(()));
        }
    });
    let get = |layer: &str, reason: &str| {
        recorder.get(&format!(
            "portero_shed_total{{layer={layer},reason={reason}}}"
        ))
    };
    assert_eq!(
        get("load_shed", "over_capacity"),
        2,
        "one of three gets the slot"
    );
    assert_eq!(
        get("deadline_queue", "queue_full"),
        2,
        "one runs, one waits"
    );
    assert_eq!(get("circuit_breaker", "circuit_open"), 2);
}

/// A client that never becomes ready (a connect to a black-holed host, a full buffer)
/// once the open period is over: readiness past the call timeout is a failed call, so
/// the probe fails, the breaker opens again and the fallback answers (before: every
/// caller waited on the inner readiness forever, and no probe was ever taken).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_becomes_ready_fails_the_probe_within_the_call_timeout() {
    let breaker = Arc::new(CircuitBreaker::new(1, Duration::from_millis(200)).unwrap());
    breaker.try_call().unwrap().failure();
    let client = CircuitBreakerLayer::new(breaker.clone())
        .call_timeout(Duration::from_millis(100))
        .fallback(|_| Response::new("fallback".to_string()))
        .layer(NeverReady);
    tokio::time::sleep(Duration::from_millis(250)).await; // the open period is over
    let started = std::time::Instant::now();
    let first = tokio::time::timeout(Duration::from_secs(2), client.clone().oneshot(()))
        .await
        .expect("answered within the call timeout, not hung");
    assert!(matches!(first, Err(BreakerCallError::TimedOut)));
    assert!(started.elapsed() < Duration::from_millis(500));
    assert!(
        breaker
            .refusal_at(portero::Clock::now(breaker.clock()))
            .is_some(),
        "open again"
    );
    let next = tokio::time::timeout(Duration::from_millis(50), client.oneshot(()))
        .await
        .expect("the fallback, at once")
        .unwrap();
    assert_eq!(next.body(), "fallback");
}

/// A client service that is never ready (saturated, or stuck connecting): the breaker
/// layer must never call it.
#[derive(Clone)]
struct NeverReady;

impl tower::Service<()> for NeverReady {
    type Response = Response<String>;
    type Error = std::convert::Infallible;
    type Future = std::future::Ready<Result<Response<String>, Self::Error>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Pending
    }

    fn call(&mut self, _: ()) -> Self::Future {
        unreachable!("never ready, never called")
    }
}

/// A health check the overload layers exempt keeps answering while they shed: one
/// slot, held by a slow request; `/health` reaches the handler at once (holding no
/// slot), another request is refused 503 — with a load shedder and with a deadline
/// queue, each given the same route helper a limit takes.
#[tokio::test]
async fn an_exempt_route_answers_while_the_layer_sheds() {
    use portero::ConcurrencyLimit;
    use portero_http::route;
    type Shed = Box<dyn Fn(Router) -> Router>;
    let shedders: [(&str, Shed); 2] = [
        (
            "load shed",
            Box::new(|app: Router| {
                app.layer(
                    LoadShedLayer::new(Arc::new(ConcurrencyLimit::new(1)), Duration::from_secs(1))
                        .exempt(route::get::<Body>("/health")),
                )
            }),
        ),
        (
            "deadline queue",
            Box::new(|app: Router| {
                app.layer(
                    DeadlineQueueLayer::new(1, 0, Duration::from_secs(5))
                        .exempt(route::get::<Body>("/health")),
                )
            }),
        ),
    ];
    for (name, shed) in shedders {
        let calls = Arc::new(AtomicU32::new(0));
        let open = Arc::new(Semaphore::new(0));
        let app = shed(held(calls.clone(), open.clone()));
        hold(&app, &calls, 1, "/slow", &[]).await;
        let health = tokio::spawn(app.clone().oneshot(get_path("/health", &[])));
        until(|| calls.load(Ordering::SeqCst) == 2).await; // inside, not shed
        assert_eq!(
            status(&app, "/other", &[]).await,
            StatusCode::SERVICE_UNAVAILABLE,
            "{name}"
        );
        open.add_permits(2);
        assert_eq!(
            health.await.unwrap().unwrap().status(),
            StatusCode::OK,
            "{name}"
        );
    }
}
