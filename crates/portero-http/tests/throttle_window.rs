//! A provider's window, kept at real send times: a fake provider that allows 20 calls
//! in any sliding second and counts the calls as they really arrive, behind
//! `ThrottleLayer::window(20, 1 s + 20 ms)`, at several loads (200 tasks among them, some with
//! timeouts around their calls): it refuses none, and the calls get through at the
//! provider's rate. (Configured as a GCRA rate, `Quota::per_second(20)`, the same
//! traffic drew 27 refusals and 40 calls in one second.)

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portero_http::ThrottleLayer;
use tower::{service_fn, Layer, ServiceExt};

const N: usize = 20;
const W: Duration = Duration::from_secs(1);

/// The provider's count: arrivals in the last `W`, and the refusals so far.
#[derive(Default)]
struct Provider {
    arrivals: VecDeque<Instant>,
    served: usize,
    refused: usize,
}

async fn run(tasks: usize, patience: Option<Duration>, for_how_long: Duration) -> (usize, usize) {
    let provider = Arc::new(Mutex::new(Provider::default()));
    let p = provider.clone();
    let service = service_fn(move |()| {
        let now = Instant::now();
        let mut p = p.lock().unwrap();
        while p
            .arrivals
            .front()
            .is_some_and(|&t| now.duration_since(t) >= W)
        {
            p.arrivals.pop_front();
        }
        if p.arrivals.len() < N {
            p.arrivals.push_back(now);
            p.served += 1;
        } else {
            p.refused += 1;
        }
        async { Ok::<_, Infallible>(()) }
    });
    // The provider's window and 20 ms for the calls' transit (check to arrival) to
    // vary by on a loaded machine, as the layer's docs advise.
    let window = W + Duration::from_millis(20);
    let client = ThrottleLayer::window(N as u64, window, Duration::from_secs(10))
        .unwrap()
        .layer(service);
    let started = Instant::now();
    let workers: Vec<_> = (0..tasks)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move {
                while started.elapsed() < for_how_long {
                    let call = client.clone().oneshot(());
                    match patience {
                        Some(p) => {
                            let _ = tokio::time::timeout(p, call).await;
                        }
                        None => {
                            let _ = call.await;
                        }
                    }
                }
            })
        })
        .collect();
    tokio::time::sleep(for_how_long).await;
    for w in workers {
        w.abort(); // those still in line took nothing
        let _ = w.await;
    }
    let p = provider.lock().unwrap();
    (p.served, p.refused)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_window_is_never_exceeded_at_real_send_times() {
    let span = Duration::from_millis(2_500);
    for (tasks, patience) in [
        (1, None),
        (30, None),
        (200, None),
        (200, Some(Duration::from_millis(300))),
    ] {
        let (served, refused) = run(tasks, patience, span).await;
        assert_eq!(refused, 0, "{tasks} tasks, patience {patience:?}: refused");
        // 20 at once, then 20 more every second: 60 in 2.5 s, within 10 %.
        assert!(
            served >= 54,
            "{tasks} tasks, patience {patience:?}: {served} served"
        );
    }
}
