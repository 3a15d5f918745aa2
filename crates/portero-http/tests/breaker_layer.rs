//! The circuit-breaker layer in an axum router or around a client service, driven
//! in-process: it stops calls, answers the fallback, probes, and never hangs.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::Router;
use http::{Request, Response, StatusCode};
use portero::{CircuitBreaker, ManualClock};
use portero_http::queue::DeadlineQueueLayer;
use portero_http::{BreakerCallError, CircuitBreakerLayer, LoadShedLayer};
use tokio::sync::Semaphore;
use tower::{service_fn, Layer, ServiceExt};

mod support {
    pub mod counters;
    pub mod held;
}
use support::held::{get_path, held, hold, status, until};

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
    // Open for 2 s, calls timed out at 300 ms: long beside a loaded machine's delays,
    // so that the breaker is still open again when the next call comes.
    let breaker = Arc::new(CircuitBreaker::new(1, Duration::from_secs(2)).unwrap());
    breaker.try_call().unwrap().failure();
    let client = CircuitBreakerLayer::new(breaker.clone())
        .call_timeout(Duration::from_millis(300))
        .fallback(|_| Response::new("fallback".to_string()))
        .layer(NeverReady);
    tokio::time::sleep(Duration::from_millis(2_050)).await; // the open period is over
    let started = std::time::Instant::now();
    let first = tokio::time::timeout(Duration::from_secs(5), client.clone().oneshot(()))
        .await
        .expect("answered within the call timeout, not hung");
    assert!(matches!(first, Err(BreakerCallError::TimedOut)));
    assert!(started.elapsed() < Duration::from_millis(1_500));
    assert!(
        breaker
            .refusal_at(portero::Clock::now(breaker.clock()))
            .is_some(),
        "open again"
    );
    // Sooner than the call timeout: answered without waiting on the client.
    let next = tokio::time::timeout(Duration::from_millis(250), client.oneshot(()))
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
