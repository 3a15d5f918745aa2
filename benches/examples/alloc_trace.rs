//! Where a request's allocations come from: one request through one of the routers
//! of `support/http_routers.rs` (`portero`, the default; `refused`; `identity`, a
//! layer that does nothing), after a warm-up, with a backtrace printed for every
//! allocation it makes. What `tests/http_allocations.rs` counts, named:
//! `cargo run --release -p portero-benches --example alloc_trace -- refused`.
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use tower::ServiceExt;
#[path = "../support/http_routers.rs"]
mod http_routers;
use http_routers::{request, Routers};
/// The system allocator, printing a backtrace for each allocation while `ON`.
struct T;
thread_local! { static ON: Cell<bool> = const { Cell::new(false) }; static IN: Cell<bool> = const { Cell::new(false) }; }
// SAFETY: forwards every call to the system allocator unchanged; only prints.
unsafe impl GlobalAlloc for T {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if ON.with(Cell::get) && !IN.with(Cell::get) {
            IN.with(|i| i.set(true));
            eprintln!(
                "ALLOC {} bytes\n{}",
                l.size(),
                std::backtrace::Backtrace::force_capture()
            );
            IN.with(|i| i.set(false));
        }
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        if ON.with(Cell::get) && !IN.with(Cell::get) {
            IN.with(|i| i.set(true));
            eprintln!(
                "REALLOC {} bytes\n{}",
                n,
                std::backtrace::Backtrace::force_capture()
            );
            IN.with(|i| i.set(false));
        }
        unsafe { System.realloc(p, l, n) }
    }
}
#[global_allocator]
static G: T = T;
fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let r = Routers::new(1000);
    let which = std::env::args().nth(1).unwrap_or_default();
    let router = if which == "refused" {
        r.refusing
    } else if which == "identity" {
        r.identity
    } else {
        r.portero
    };
    for i in 0..2000 {
        rt.block_on(router.clone().oneshot(request(i, 1000)))
            .unwrap();
    }
    let req = request(7, 1000);
    let router2 = router.clone();
    ON.with(|o| o.set(true));
    let resp = rt.block_on(router2.oneshot(req)).unwrap();
    ON.with(|o| o.set(false));
    drop(resp);
}
