//! The calling side's limit: calls to a dependency wait their turn through
//! `ThrottleLayer` instead of being refused (tokio's paused clock: exact instants).

use std::convert::Infallible;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use portero::{Gcra, Quota, RateLimiter};
use portero_http::{ThrottleError, ThrottleLayer};
use tokio::time::Instant;
use tower::{service_fn, Layer, Service, ServiceExt};

/// Nanoseconds since it was made, on tokio's clock (paused in these tests): the limit
/// and the waits read the same instants.
#[derive(Debug, Clone, Copy)]
struct TokioClock(Instant);

impl portero::Clock for TokioClock {
    fn now(&self) -> u64 {
        u64::try_from(self.0.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

/// A shared GCRA limit of `quota` on tokio's clock: each call waits in line and is
/// checked when it wakes.
fn gcra(quota: Quota) -> Arc<RateLimiter<Gcra, TokioClock>> {
    Arc::new(RateLimiter::gcra(quota).with_clock(TokioClock(Instant::now())))
}

/// A dependency that counts its calls: it answers each request with `answer(request)`
/// and the instant (tokio's clock) it was called.
fn counted_provider<R, T: Send>(
    answer: fn(R) -> T,
) -> (
    impl Service<R, Response = (T, Instant), Error = Infallible, Future: Send> + Clone,
    Arc<AtomicU32>,
) {
    let calls = Arc::new(AtomicU32::new(0));
    let c = calls.clone();
    let provider = service_fn(move |request: R| {
        c.fetch_add(1, Ordering::SeqCst);
        let answer = answer(request);
        async move { Ok((answer, Instant::now())) }
    });
    (provider, calls)
}

/// A provider allowing 10 calls per second (burst 1), called by 8 tasks at once with
/// up to 500 ms of patience: the first 6 are served at 0, 100, …, 500 ms in call
/// order, the dependency sees exactly those 6, and the last 2, whose turns would be
/// 600 and 700 ms away, fail at once without calling. A call dropped while waiting
/// took nothing: the next one gets its turn.
#[tokio::test(start_paused = true)]
async fn calls_wait_their_turn_and_the_impatient_fail_at_once() {
    let quota = Quota::per_second(10).unwrap().with_burst(1).unwrap();
    let limiter = gcra(quota);
    let (provider, calls) = counted_provider(|()| ());
    let client = ThrottleLayer::new(limiter.clone(), Duration::from_millis(500)).layer(provider);
    let start = Instant::now();
    let tasks: Vec<_> = (0..8)
        .map(|_| tokio::spawn(client.clone().oneshot(())))
        .collect();
    let mut results = Vec::new();
    for t in tasks {
        results.push(t.await.unwrap());
    }
    let served: Vec<Duration> = results
        .iter()
        .filter_map(|r| r.as_ref().ok().map(|((), at)| *at - start))
        .collect();
    let want: Vec<Duration> = (0..6).map(|k| Duration::from_millis(100 * k)).collect();
    assert_eq!(served, want);
    assert!(results[6..]
        .iter()
        .all(|r| matches!(r, Err(ThrottleError::WouldWait(_)))));
    assert_eq!(calls.load(Ordering::SeqCst), 6);

    // A call that gives up while it waits: its turn goes to the next caller.
    let limiter = gcra(quota);
    let client = ThrottleLayer::new(limiter.clone(), Duration::from_secs(1)).layer(service_fn(
        |_: ()| async { Ok::<_, std::convert::Infallible>(()) },
    ));
    client.clone().oneshot(()).await.unwrap(); // the burst
    let impatient = tokio::time::timeout(Duration::from_millis(10), client.clone().oneshot(()));
    assert!(
        impatient.await.is_err(),
        "gave up before its turn at 100 ms"
    );
    // It took nothing: the next caller's turn is the one it gave up (100 ms).
    client.clone().oneshot(()).await.unwrap();
    assert_eq!(
        start.elapsed(),
        Duration::from_millis(600),
        "at 500 + 100 ms"
    );
}

/// A per-call cost: batches of messages against 10 per second (burst 4) book one unit
/// per message, in call order — a batch of 3 and one of 1 fill the burst at 0, a batch
/// of 2 is served at 200 ms, the next single at 300 ms. A batch of 5, above the burst,
/// can never fit: it fails at once with `CostExceedsCapacity`, booking nothing and
/// never calling the dependency.
#[tokio::test(start_paused = true)]
async fn a_call_books_its_own_cost_and_one_above_the_burst_fails_at_once() {
    use portero::{CheckError, ReserveError};
    let quota = Quota::per_second(10).unwrap().with_burst(4).unwrap();
    let limiter = gcra(quota);
    let (provider, calls) = counted_provider(|batch: Vec<&'static str>| batch.len());
    let client = ThrottleLayer::new(limiter.clone(), Duration::from_secs(5))
        .cost(|batch: &Vec<&'static str>| batch.len() as u64)
        .layer(provider);
    let start = Instant::now();
    let too_big = client.clone().oneshot(vec!["m"; 5]).await;
    match too_big {
        Err(ThrottleError::Limit(e)) => {
            assert_eq!(
                e,
                ReserveError::Check(CheckError::CostExceedsCapacity {
                    cost: 5,
                    capacity: 4
                })
            );
            assert!(e.to_string().contains("can never be admitted"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(start.elapsed(), Duration::ZERO, "failed at once");
    assert_eq!(
        calls.load(Ordering::SeqCst),
        0,
        "the dependency never called"
    );
    let tasks: Vec<_> = [3, 1, 2, 1]
        .into_iter()
        .map(|n| tokio::spawn(client.clone().oneshot(vec!["m"; n])))
        .collect();
    let mut served = Vec::new();
    for t in tasks {
        let (n, at) = t.await.unwrap().unwrap();
        served.push((n, (at - start).as_millis()));
    }
    assert_eq!(served, [(3, 0), (1, 0), (2, 200), (1, 300)]);
    assert_eq!(calls.load(Ordering::SeqCst), 4);
}
