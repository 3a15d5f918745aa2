//! What the rate-limit layer allocates per request, counted by a global allocator:
//! the router alone, portero's layer keyed by `ClientIp::key`, the README's setup
//! (`ClientAddrLayer` + `LimitLayer` keyed by `keys::client_addr()`), and
//! tower_governor's layer with the same quota, each request admitted; and a refused
//! request. Counts are exact (one thread, a current-thread runtime), so they are held
//! to bounds: the layer's own allocations, over the router alone.

use std::alloc::{GlobalAlloc, Layout, System};

use axum::Router;
use portero_http::Policy;
use tower::ServiceExt;

#[path = "../support/http_routers.rs"]
mod http_routers;
use http_routers::{request, Routers};

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

/// Allocations and bytes per request through `router`, after a warm-up that has seen
/// every client once; the request itself is built outside the count.
fn per_request(router: &Router, rt: &tokio::runtime::Runtime) -> (f64, f64) {
    for i in 0..2 * CLIENTS {
        rt.block_on(router.clone().oneshot(request(i, CLIENTS)))
            .unwrap();
    }
    let n = 2_000u32;
    let (mut allocs, mut bytes) = (0, 0);
    for i in 0..n {
        let req = request(i, CLIENTS);
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

fn quota() -> portero::Quota {
    portero_benches::open_quota()
}

#[test]
fn the_layer_allocates_little_per_request() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let Routers {
        plain,
        identity,
        portero: one_layer,
        addr_two_layers,
        addr_layer: together,
        readme,
        governor,
        refusing,
        check_only,
        fields_only,
    } = Routers::new(CLIENTS);
    let (base, base_bytes) = per_request(&plain, &rt);
    let mut rows = Vec::new();
    for (name, router) in [
        ("a layer that does nothing", &identity),
        ("portero, one layer", &one_layer),
        ("portero, the README's setup (keys::client_ip)", &readme),
        (
            "portero, ClientAddrLayer + LimitLayer (two layers)",
            &addr_two_layers,
        ),
        (
            "portero, the same two in one ServiceBuilder layer",
            &together,
        ),
        ("tower_governor", &governor),
        ("portero, refused", &refusing),
        ("floor: the key and check only", &check_only),
        ("floor: the two fields only", &fields_only),
    ] {
        let (a, b) = per_request(router, &rt);
        println!("{name}: {:.1} allocations ({:.0} B) over the router alone ({base:.1}, {base_bytes:.0} B)", a - base, b - base_bytes);
        rows.push(a - base);
    }
    let [axum_layer, one, readme, _two, together, governor, refused, check_floor, fields_floor] =
        rows[..]
    else {
        unreachable!()
    };
    // The layer's own, over what axum's `Router::layer` costs any layer that holds
    // state (it clones the layer per request): one, the `RateLimit` value's copy (the
    // policy field is built once), with portero-http's `metrics` feature on or off (a
    // workspace build turns it on: the request's counter borrows a key built once per
    // policy).
    assert!(
        one - axum_layer <= 1.0,
        "portero's own allocations: {}",
        one - axum_layer
    );
    // A refusal writes a body, its map and three fields instead of the handler's
    // answer: no more than a layer that does nothing and lets the handler answer
    // (`Retry-After` written with one copy, not `HeaderValue::from`'s two).
    assert!(
        refused <= axum_layer,
        "a refusal's: {refused} against {axum_layer}"
    );
    assert!(
        one < governor,
        "portero {one} against tower_governor {governor}"
    );
    // The floors: a check allocates nothing; the two fields, their one value. The
    // README's setup allocates no more than the fields' floor.
    assert!(
        check_floor <= axum_layer && readme <= fields_floor,
        "floors: check {check_floor}, fields {fields_floor}, the README's setup {readme}"
    );
    assert!(
        readme - axum_layer <= 1.0,
        "the README's setup's own allocations: {}",
        readme - axum_layer
    );
    assert!(
        together <= governor,
        "the address layer and the limit in one layer {together} against {governor}"
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
