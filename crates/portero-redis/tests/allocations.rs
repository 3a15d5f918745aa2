//! A typed key reaches Redis without a `String` of its own: preparing a check writes
//! the key straight into the one Redis key the call sends (the only buffer, besides
//! the prepared check's box), and a check a live lease answers allocates only its ticket.
//! Counted by a global allocator, per thread, around the synchronous part of a check.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use http::HeaderValue;
use portero::Quota;
use portero_http::{Checking, ClientAddr, Store};
use portero_redis::{LeasedLimiter, LocalRedis, RedisAlgorithm, RedisLimiter};

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded to the system allocator unchanged; the counter is
// a const-initialised thread-local, which allocates nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        System.alloc(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// Allocations `f` makes on this thread.
fn allocations<T>(f: impl FnOnce() -> T) -> (usize, T) {
    let before = ALLOCATIONS.with(Cell::get);
    let out = f();
    (ALLOCATIONS.with(Cell::get) - before, out)
}

fn addr() -> ClientAddr {
    let peer = SocketAddr::from(([203, 0, 113, 9], 4000));
    let mut request = http::Request::new(());
    request.extensions_mut().insert(peer);
    portero_http::ClientIp::new(portero_http::TrustedProxies::none())
        .key(&request)
        .unwrap()
}

/// A limiter of 100 a minute on `server`.
async fn limiter(server: &LocalRedis) -> RedisLimiter {
    let quota = Quota::per_minute(100).unwrap();
    RedisLimiter::connect(&server.url(), RedisAlgorithm::gcra(quota).unwrap())
        .await
        .unwrap()
        .timeout(Duration::from_secs(5))
}

#[tokio::test(flavor = "current_thread")]
async fn a_typed_key_is_written_once_into_the_redis_key() {
    let server = LocalRedis::start().expect("redis-server for this test");
    let limiter = limiter(&server).await;
    let header = HeaderValue::from_static("key-7f3a");
    let ip: IpAddr = "2001:db8::1".parse().unwrap();
    let client = addr();
    // The Redis key (one buffer) and the prepared check's box; nothing else.
    let (n, prepared) = allocations(|| Store::<ClientAddr>::prepare(&limiter, Some(client), 1));
    assert!(matches!(prepared, portero_http::Prepare::Ready(_)));
    assert!(n <= 2, "ClientAddr: {n} allocations");
    let (n, _) = allocations(|| Store::<HeaderValue>::prepare(&limiter, Some(header.clone()), 1));
    assert!(n <= 2, "header: {n} allocations");
    let (n, _) = allocations(|| Store::<(IpAddr, u64)>::prepare(&limiter, Some((ip, 42)), 1));
    assert!(n <= 2, "pair: {n} allocations");
}

#[tokio::test(flavor = "current_thread")]
async fn a_check_a_live_lease_answers_allocates_only_its_ticket() {
    let server = LocalRedis::start().expect("redis-server for this test");
    let leased = LeasedLimiter::new(limiter(&server).await, 10, Duration::from_secs(60), 100);
    let key = HeaderValue::from_static("key-7f3a");
    // The first check leases a batch (a round trip); the next ones spend it here.
    match Store::<HeaderValue>::check_key(&leased, Some(key.clone()), 1) {
        Checking::Pending(p) => assert!(p.await.unwrap().decision.is_allowed()),
        Checking::Done(d) => assert!(d.unwrap().decision.is_allowed()),
    }
    for _ in 0..5 {
        let (n, answer) =
            allocations(|| Store::<HeaderValue>::check_key(&leased, Some(key.clone()), 1));
        assert!(matches!(answer, Checking::Done(Ok(_))), "{answer:?}");
        // The ticket's one: what the admission took, held once, so a ticket cloned or
        // edited settles it at most once and at what it took (a ticket that held only
        // the lease's tag was settled ten times by its clones: 500 admitted for 100).
        assert_eq!(n, 1, "a lease hit allocated more than its ticket");
    }
}
