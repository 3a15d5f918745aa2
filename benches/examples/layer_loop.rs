//! The HTTP layer's own cost as a user's plain program times it: each router of
//! `support/http_routers.rs` driven by `oneshot` on a current-thread runtime, the
//! default release profile, 10,000 client addresses in turn, every request admitted;
//! five rounds interleaved, the best round's ns per request, and each layer's own cost
//! (the router with it minus the router alone). Two floors show what no limiting
//! layer avoids: the key and check alone, and the two fields alone.
//! `cargo run --release -p portero-benches --example layer_loop`.

use std::hint::black_box;
use std::time::Instant;

use tower::ServiceExt;

#[path = "../support/http_routers.rs"]
mod http_routers;
use http_routers::{request, Routers};

const CLIENTS: u32 = 10_000;

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    // Requests per router per round (`LAYER_LOOP_N`, for a profiler's shorter run).
    let n: u32 = std::env::var("LAYER_LOOP_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300_000);
    let r = Routers::new(CLIENTS);
    let routers = [
        ("router alone", r.plain),
        ("a layer that does nothing", r.identity),
        ("portero (ClientIp::key)", r.portero),
        ("portero, the README's setup", r.readme),
        ("portero + ClientAddrLayer", r.addr_layer),
        ("tower_governor", r.governor),
        ("floor: the key and check only", r.check_only),
        ("floor: the two fields only", r.fields_only),
    ];
    // One router, one round (`LAYER_LOOP_ONLY=k`, its place in the list): what an
    // instruction counter such as `valgrind --tool=cachegrind` measures without the
    // others' noise.
    let only: Option<usize> = std::env::var("LAYER_LOOP_ONLY")
        .ok()
        .and_then(|v| v.parse().ok());
    let mut best = [f64::INFINITY; 8];
    for _ in 0..if only.is_some() { 1 } else { 5 } {
        for (k, (_, router)) in routers.iter().enumerate() {
            if only.is_some_and(|o| o != k) {
                continue;
            }
            let t = Instant::now();
            for i in 0..n {
                let response = rt
                    .block_on(router.clone().oneshot(request(i, CLIENTS)))
                    .expect("infallible");
                black_box(response.status());
            }
            best[k] = best[k].min(t.elapsed().as_nanos() as f64 / f64::from(n));
        }
    }
    for ((name, _), ns) in routers.iter().zip(best) {
        println!("{name:<30} {ns:>8.1} ns   own {:>6.1} ns", ns - best[0]);
    }
    let governor = best[5] - best[0];
    println!(
        "own cost vs tower_governor's: the README's setup {:.2}x, with ClientAddrLayer {:.2}x",
        (best[3] - best[0]) / governor,
        (best[4] - best[0]) / governor
    );
    // Each floor pays axum's `Router::layer` once; the README's setup pays it once too.
    let floor = (best[6] - best[0]) + (best[7] - best[1]);
    println!(
        "floor (check + fields, one Router::layer): {floor:.1} ns = {:.2}x tower_governor's own",
        floor / governor
    );
}
