//! What the rate-limit layer allocates per request, counted by a global allocator:
//! the router alone, portero's layer keyed by `ClientIp::key`, the README's setup
//! (`ClientAddrLayer` + `LimitLayer` keyed by `keys::client_addr()`), and
//! tower_governor's layer with the same quota, each request admitted; and a refused
//! request. Counts are exact (one thread, a current-thread runtime), so they are held
//! to bounds: the layer's own allocations, over the router alone.

use std::alloc::{GlobalAlloc, Layout, System};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::{routing::get, Router};
use http::Request;
use portero::{Gcra, KeyedLimiter, Quota};
use portero_http::axum::ClientAddrLayer;
use portero_http::{keys, ClientIp, Limit, LimitLayer, Policy, TrustedProxies};
use tower::ServiceExt;

struct Counting;

thread_local! {
    // Per thread, so that tests running at once do not count each other's
    // allocations (each measures on its own thread: a current-thread runtime).
    static COUNTS: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
}

fn count(bytes: usize) {
    // `try_with`: a thread being torn down has no counts left to keep.
    let _ = COUNTS.try_with(|c| {
        let (n, b) = c.get();
        c.set((n + 1, b + bytes as u64));
    });
}

/// Allocations and bytes this thread has made so far.
fn counts() -> (u64, u64) {
    COUNTS.with(|c| c.get())
}

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const CLIENTS: u32 = 1_000;

fn request(i: u32) -> Request<Body> {
    let peer = SocketAddr::new(
        IpAddr::V4(Ipv4Addr::from(0xC000_0000 | (i % CLIENTS))),
        40_000,
    );
    let mut req = Request::get("/").body(Body::empty()).unwrap();
    req.extensions_mut().insert(ConnectInfo(peer));
    req
}

/// Allocations and bytes per request through `router`, after a warm-up that has seen
/// every client once; the request itself is built outside the count.
fn per_request(router: &Router, rt: &tokio::runtime::Runtime) -> (f64, f64) {
    for i in 0..2 * CLIENTS {
        rt.block_on(router.clone().oneshot(request(i))).unwrap();
    }
    let n = 2_000u32;
    let (mut allocs, mut bytes) = (0, 0);
    for i in 0..n {
        let req = request(i);
        let router = router.clone();
        let (a0, b0) = counts();
        let response = rt.block_on(router.oneshot(req)).unwrap();
        let (a1, b1) = counts();
        allocs += a1 - a0;
        bytes += b1 - b0;
        drop(response);
    }
    (allocs as f64 / f64::from(n), bytes as f64 / f64::from(n))
}

fn quota() -> Quota {
    portero_benches::open_quota()
}

#[test]
fn the_layer_allocates_little_per_request() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let plain = Router::new().route("/", get(|| async { "ok" }));
    let table = || Arc::new(KeyedLimiter::new(Gcra::new(quota()), 2 * CLIENTS as usize));
    let client = ClientIp::new(TrustedProxies::none());
    let one_layer = plain.clone().layer(LimitLayer::new(Limit::new(
        table(),
        Policy::for_quota("per-ip", &quota()).unwrap(),
        move |req: &Request<Body>| client.key(req),
    )));
    let readme = plain
        .clone()
        .layer(LimitLayer::new(Limit::new(
            table(),
            Policy::for_quota("per-ip", &quota()).unwrap(),
            keys::client_addr(),
        )))
        .layer(ClientAddrLayer::new(ClientIp::new(TrustedProxies::none())));
    let together = plain.clone().layer(
        tower::ServiceBuilder::new()
            .layer(ClientAddrLayer::new(ClientIp::new(TrustedProxies::none())))
            .layer(LimitLayer::new(Limit::new(
                table(),
                Policy::for_quota("per-ip", &quota()).unwrap(),
                keys::client_addr(),
            ))),
    );
    let config = tower_governor::governor::GovernorConfigBuilder::default()
        .per_nanosecond(1)
        .burst_size(1 << 30)
        .use_headers()
        .finish()
        .unwrap();
    let governor = plain
        .clone()
        .layer(tower_governor::GovernorLayer::new(Arc::new(config)));
    let closed = Quota::per_hour(1).unwrap();
    let client = ClientIp::new(TrustedProxies::none());
    let refusing = plain.clone().layer(LimitLayer::new(Limit::new(
        Arc::new(KeyedLimiter::new(Gcra::new(closed), 2 * CLIENTS as usize)),
        Policy::for_quota("per-ip", &closed).unwrap(),
        move |req: &Request<Body>| client.key(req),
    )));

    let identity = plain.clone().layer(tower::layer::util::Identity::new());
    let (base, base_bytes) = per_request(&plain, &rt);
    let mut rows = Vec::new();
    for (name, router) in [
        ("a layer that does nothing", &identity),
        ("portero, one layer", &one_layer),
        ("portero, README setup (two layers)", &readme),
        (
            "portero, the same two in one ServiceBuilder layer",
            &together,
        ),
        ("tower_governor", &governor),
        ("portero, refused", &refusing),
    ] {
        let (a, b) = per_request(router, &rt);
        println!("{name}: {:.1} allocations ({:.0} B) over the router alone ({base:.1}, {base_bytes:.0} B)", a - base, b - base_bytes);
        rows.push(a - base);
    }
    let [axum_layer, one, _readme, together, governor, refused] = rows[..] else {
        unreachable!()
    };
    // The layer's own: the `RateLimit` value's one copy and the response map's growth,
    // with portero-http's `metrics` feature on or off (a workspace build turns it on:
    // the request's counter borrows a key built once per policy).
    assert!(
        one - axum_layer <= 2.0,
        "portero's own allocations: {}",
        one - axum_layer
    );
    assert!(
        refused - axum_layer <= 3.0,
        "a refusal's: {}",
        refused - axum_layer
    );
    assert!(
        one < governor,
        "portero {one} against tower_governor {governor}"
    );
    assert!(
        together <= governor,
        "the README's pair in one layer {together} against {governor}"
    );
}

#[test]
fn the_fields_allocate_one_copy_per_value() {
    let policy = Policy::for_quota("per-ip", &quota()).unwrap();
    let d = portero::Decision::admitted(100, 42, 3_000_000_000);
    let mut headers = http::HeaderMap::with_capacity(8);
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain"),
    );
    // The policy's own field is shared once, then cloned without allocating.
    portero_http::headers::insert_fields(&mut headers.clone(), &d, &policy);
    let a0 = counts().0;
    portero_http::headers::insert_fields(&mut headers, &d, &policy);
    let allocs = counts().0 - a0;
    println!("insert_fields into a map with room: {allocs} allocation(s)");
    assert_eq!(allocs, 1, "the RateLimit value's copy, nothing else");
}
