//! The overload layers in an axum router or around a client service, driven in-process:
//! priority and fair shedding, the adaptive limit, the deadline queue (the breaker
//! layer: `breaker_layer.rs`).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::routing::get;
use axum::Router;
use http::{Request, Response, StatusCode};
use portero::{CircuitBreaker, Priority, PriorityLimit};
use portero_http::fair::FairShare;
use portero_http::queue::{DeadlineQueueLayer, Order};
use portero_http::{CircuitBreakerLayer, LoadShedLayer};
use tokio::sync::Semaphore;
use tower::{service_fn, Layer, ServiceExt};

mod support {
    pub mod adaptive;
    pub mod held;
}
use support::adaptive::{adaptive_limit, delayed_behind};
use support::held::{get_path, held, hold, status, until};

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
