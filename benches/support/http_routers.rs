//! The axum routers the HTTP layer is measured in, for the criterion benchmark
//! (`benches/http.rs`) and the allocation count (`tests/http_allocations.rs`): the
//! router alone, portero's layer as users set it up, tower_governor's with the same
//! quota, and requests from `clients` peer addresses in turn.
#![allow(dead_code)] // each binary uses the routers it measures

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::{routing::get, Router};
use http::{HeaderValue, Request};
use portero::{Gcra, KeyedLimiter, Quota};
use portero_benches::open_quota;
use portero_http::axum::ClientAddrLayer;
use portero_http::{headers, keys, ClientIp, Limit, LimitLayer, Policy, TrustedProxies};

/// Request `i`, from the `i % clients`-th peer address.
pub fn request(i: u32, clients: u32) -> Request<Body> {
    let peer = SocketAddr::new(
        IpAddr::V4(Ipv4Addr::from(0xC000_0000 | (i % clients))),
        40_000,
    );
    let mut req = Request::get("/").body(Body::empty()).unwrap();
    req.extensions_mut().insert(ConnectInfo(peer));
    req
}

/// Every setup, over `clients` peers (each table holds twice as many keys).
pub struct Routers {
    /// One route, no layer.
    pub plain: Router,
    /// A layer that does nothing but hold a pointer, as every real layer holds its
    /// state: what axum's `Router::layer` costs by itself (a layer of no size costs
    /// it one allocation less, as axum clones the layer per request).
    pub identity: Router,
    /// portero's `LimitLayer` keyed by `ClientIp::key`, an open quota.
    pub portero: Router,
    /// The address resolved by its own layer, as two `Router::layer`s
    /// (`ClientAddrLayer`, `LimitLayer` keyed by `keys::client_addr()`).
    pub addr_two_layers: Router,
    /// The same two in one `ServiceBuilder` layer (when handlers need the address too).
    pub addr_layer: Router,
    /// The README's setup: one `LimitLayer` keyed by `keys::client_ip(ClientIp)`.
    pub readme: Router,
    /// A floor of what any limiting layer does, in the same `Router::layer`: the
    /// README's key and check on the same table, and nothing written.
    pub check_only: Router,
    /// The other floor: the two fields written on every response (the policy's value
    /// cloned, the `RateLimit` value formatted), and no check.
    pub fields_only: Router,
    /// tower_governor's layer with the same quota and key, fields on.
    pub governor: Router,
    /// portero's layer refusing every request (one per hour, spent).
    pub refusing: Router,
}

impl Routers {
    pub fn new(clients: u32) -> Self {
        let plain = Router::new().route("/", get(|| async { "ok" }));
        let table = |q: Quota| Arc::new(KeyedLimiter::new(Gcra::new(q), 2 * clients as usize));
        let policy = |q: Quota| Policy::for_quota("per-ip", &q).unwrap();
        let by_ip = |q: Quota| {
            let client = ClientIp::new(TrustedProxies::none());
            LimitLayer::new(Limit::new(
                table(q),
                policy(q),
                move |req: &Request<Body>| client.key(req),
            ))
        };
        let by_addr = || {
            LimitLayer::new(Limit::new(
                table(open_quota()),
                policy(open_quota()),
                keys::client_addr(),
            ))
        };
        let resolve = || ClientAddrLayer::new(ClientIp::new(TrustedProxies::none()));
        let config = tower_governor::governor::GovernorConfigBuilder::default()
            .per_nanosecond(1)
            .burst_size(1 << 30)
            .use_headers()
            .finish()
            .unwrap();
        Self {
            identity: {
                let state = Arc::new(());
                plain.clone().layer(tower::util::MapRequestLayer::new(
                    move |req: Request<Body>| {
                        let _ = &state;
                        req
                    },
                ))
            },
            portero: plain.clone().layer(by_ip(open_quota())),
            addr_two_layers: plain.clone().layer(by_addr()).layer(resolve()),
            addr_layer: plain.clone().layer(
                tower::ServiceBuilder::new()
                    .layer(resolve())
                    .layer(by_addr()),
            ),
            readme: plain.clone().layer(LimitLayer::new(Limit::new(
                table(open_quota()),
                policy(open_quota()),
                keys::client_ip::<Body>(ClientIp::new(TrustedProxies::none())),
            ))),
            governor: plain
                .clone()
                .layer(tower_governor::GovernorLayer::new(Arc::new(config))),
            check_only: {
                let limiter = table(open_quota());
                let client = ClientIp::new(TrustedProxies::none());
                plain.clone().layer(tower::util::MapRequestLayer::new(
                    move |req: Request<Body>| {
                        if let Ok(key) = client.key(&req) {
                            std::hint::black_box(limiter.check(&key));
                        }
                        req
                    },
                ))
            },
            fields_only: {
                let policy = HeaderValue::from_static(r#""per-ip";q=1073741824;w=1"#);
                plain.clone().layer(tower::util::MapResponseLayer::new(
                    move |mut res: axum::response::Response| {
                        // Written on the stack, copied once into the value.
                        let mut digits = itoa::Buffer::new();
                        let left = digits.format(std::hint::black_box(1_073_741_823u64));
                        let mut value = [0u8; 64];
                        let mut len = 0;
                        for part in [&b"\"per-ip\";r="[..], left.as_bytes(), b";t=1"] {
                            value[len..len + part.len()].copy_from_slice(part);
                            len += part.len();
                        }
                        let fields = res.headers_mut();
                        fields.append(headers::RATELIMIT_POLICY, policy.clone());
                        if let Ok(v) = HeaderValue::from_bytes(&value[..len]) {
                            fields.append(headers::RATELIMIT, v);
                        }
                        res
                    },
                ))
            },
            refusing: plain.clone().layer(by_ip(Quota::per_hour(1).unwrap())),
            plain,
        }
    }
}
