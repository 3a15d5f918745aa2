//! Each overload layer's cost per request on the admitted path (nothing refused, nothing
//! waiting), around a service that answers at once, next to tower's own
//! `ConcurrencyLimit` and `LoadShed` + `ConcurrencyLimit` in the same run.

use std::convert::Infallible;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkGroup, Criterion};
use http::{Request, Response};
use portero::{
    AdaptiveConcurrency, AdaptiveConfig, CircuitBreaker, ConcurrencyLimit, Priority, PriorityLimit,
};
use portero_http::fair::FairShare;
use portero_http::queue::DeadlineQueueLayer;
use portero_http::{CircuitBreakerLayer, LoadShedLayer};
use tower::{service_fn, Layer, Service, ServiceBuilder};

const CAPACITY: usize = 1_000;
/// A service that answers at once.
fn answer(
) -> impl Service<Request<()>, Response = Response<String>, Error = Infallible, Future = impl Send>
       + Clone
       + Send
       + 'static {
    service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new(String::new())) })
}

/// Times one request through `svc` (a fresh clone, as a server does per connection):
/// readiness, the call, and the one poll that completes it. Requests are built
/// outside the timing.
fn bench<S>(g: &mut BenchmarkGroup<'_, WallTime>, name: &str, svc: S)
where
    S: Service<Request<()>, Response = Response<String>> + Clone,
    S::Error: std::fmt::Debug,
{
    let mut cx = Context::from_waker(Waker::noop());
    let mut i = 0u32;
    g.bench_function(name, |b| {
        b.iter_batched(
            || {
                i = i.wrapping_add(1);
                request(i)
            },
            |req| {
                let mut s = svc.clone();
                assert!(s.poll_ready(&mut cx).is_ready());
                let mut fut = pin!(s.call(req));
                match fut.as_mut().poll(&mut cx) {
                    Poll::Ready(r) => black_box(r.unwrap().status()),
                    Poll::Pending => panic!("{name}: the admitted path must not wait"),
                }
            },
            BatchSize::SmallInput,
        )
    });
}

fn per_request(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let _context = rt.enter(); // the deadline queue and breaker read tokio's clock
    let retry = Duration::from_secs(1);
    let tenant = |r: &Request<()>| r.headers().get("x-tenant").cloned();
    let class = |r: &Request<()>| {
        if r.headers().contains_key("x-critical") {
            Priority::CRITICAL
        } else {
            Priority::DEFAULT
        }
    };
    let adaptive = AdaptiveConcurrency::new(AdaptiveConfig {
        initial_limit: CAPACITY as u32,
        min_limit: CAPACITY as u32,
        max_limit: CAPACITY as u32,
        ..AdaptiveConfig::default()
    })
    .unwrap();
    let breaker = Arc::new(CircuitBreaker::new(5, Duration::from_secs(30)).unwrap());
    let fixed = Arc::new(ConcurrencyLimit::new(CAPACITY as u64));
    let priority = Arc::new(PriorityLimit::three_classes(CAPACITY as u64));
    let share = Arc::new(FairShare::new(CAPACITY as u32, 100).unwrap());

    let mut g = c.benchmark_group("overload_layer");
    bench(&mut g, "service_alone", answer());
    bench(
        &mut g,
        "tower_concurrency_limit",
        ServiceBuilder::new()
            .concurrency_limit(CAPACITY)
            .service(answer()),
    );
    bench(
        &mut g,
        "tower_load_shed",
        ServiceBuilder::new()
            .load_shed()
            .concurrency_limit(CAPACITY)
            .service(answer()),
    );
    bench(
        &mut g,
        "portero_load_shed",
        LoadShedLayer::new(fixed, retry).layer(answer()),
    );
    bench(
        &mut g,
        "portero_by_priority",
        LoadShedLayer::by_priority(priority, class, retry).layer(answer()),
    );
    bench(
        &mut g,
        "portero_by_tenant",
        LoadShedLayer::by_tenant(share, tenant, retry).layer(answer()),
    );
    bench(
        &mut g,
        "portero_adaptive",
        LoadShedLayer::adaptive(Arc::new(adaptive), retry).layer(answer()),
    );
    bench(
        &mut g,
        "portero_deadline_queue",
        DeadlineQueueLayer::new(CAPACITY, 100, Duration::from_secs(2)).layer(answer()),
    );
    bench(
        &mut g,
        "portero_breaker",
        CircuitBreakerLayer::<String>::new(breaker).layer(answer()),
    );
    g.finish();
}

fn request(i: u32) -> Request<()> {
    Request::get("/")
        .header("x-tenant", i % 100)
        .body(())
        .unwrap()
}

criterion_group!(benches, per_request);
criterion_main!(benches);
