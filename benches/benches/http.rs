//! The rate-limit layer's cost per request in an axum router — key from the peer
//! address, check, fields on the response — against tower_governor's layer on the
//! same router, and the router alone, in one run. Every request is admitted (an open
//! quota), 10,000 client addresses in turn. Three routers more show what no limiting
//! layer avoids: a layer that does nothing (axum's `Router::layer`), the key and check
//! alone, and the two fields alone.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use tower::ServiceExt;

#[path = "../support/http_routers.rs"]
mod http_routers;
use http_routers::{request, Routers};

const CLIENTS: u32 = 10_000;

fn routers() -> [(&'static str, axum::Router); 8] {
    let r = Routers::new(CLIENTS);
    [
        ("router_alone", r.plain),
        ("portero", r.portero),
        ("portero_readme_setup", r.readme),
        ("portero_client_addr_layer", r.addr_layer),
        ("tower_governor", r.governor),
        ("floor_layer_alone", r.identity),
        ("floor_check_only", r.check_only),
        ("floor_fields_only", r.fields_only),
    ]
}

fn layer_overhead(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut g = c.benchmark_group("http_layer");
    for (name, router) in routers() {
        let mut i = 0u32;
        g.bench_function(name, |b| {
            b.iter(|| {
                i = i.wrapping_add(1);
                let response = rt
                    .block_on(router.clone().oneshot(request(i, CLIENTS)))
                    .unwrap();
                black_box(response.status())
            })
        });
    }
    g.finish();
}

criterion_group!(benches, layer_overhead);
criterion_main!(benches);
