//! The rate-limit layer's cost per request in an axum router — key from the peer
//! address, check, fields on the response — against tower_governor's layer on the
//! same router, and the router alone, in one run. Every request is admitted (an open
//! quota), 10,000 client addresses in turn.

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::{routing::get, Router};
use criterion::{criterion_group, criterion_main, Criterion};
use http::Request;
use portero::{Gcra, KeyedLimiter};
use portero_benches::open_quota;
use portero_http::axum::ClientAddrLayer;
use portero_http::{keys, ClientIp, Limit, LimitLayer, Policy, TrustedProxies};
use tower::ServiceExt;

const CLIENTS: u32 = 10_000;

fn request(i: u32) -> Request<Body> {
    let peer = SocketAddr::new(
        IpAddr::V4(Ipv4Addr::from(0xC000_0000 | (i % CLIENTS))),
        40_000,
    );
    let mut req = Request::get("/").body(Body::empty()).unwrap();
    req.extensions_mut().insert(ConnectInfo(peer));
    req
}

fn routers() -> [(&'static str, Router); 4] {
    let plain = Router::new().route("/", get(|| async { "ok" }));
    let limiter = Arc::new(KeyedLimiter::new(
        Gcra::new(open_quota()),
        2 * CLIENTS as usize,
    ));
    let client = ClientIp::new(TrustedProxies::none());
    let portero = plain.clone().layer(LimitLayer::new(Limit::new(
        limiter,
        Policy::for_quota("per-ip", &open_quota()).unwrap(),
        move |req: &Request<Body>| client.key(req),
    )));
    // The README's setup: the client's address resolved once, then the limit, in one
    // `Router::layer`.
    let readme = plain.clone().layer(
        tower::ServiceBuilder::new()
            .layer(ClientAddrLayer::new(ClientIp::new(TrustedProxies::none())))
            .layer(LimitLayer::new(Limit::new(
                Arc::new(KeyedLimiter::new(
                    Gcra::new(open_quota()),
                    2 * CLIENTS as usize,
                )),
                Policy::for_quota("per-ip", &open_quota()).unwrap(),
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
    [
        ("router_alone", plain),
        ("portero", portero),
        ("portero_readme_setup", readme),
        ("tower_governor", governor),
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
                let response = rt.block_on(router.clone().oneshot(request(i))).unwrap();
                black_box(response.status())
            })
        });
    }
    g.finish();
}

criterion_group!(benches, layer_overhead);
criterion_main!(benches);
