//! axum integration (feature `axum`): resolve the client's address once per request,
//! for the handlers and the limits alike.
//!
//! - [`ClientAddrLayer`]: resolves each request's [`ClientAddr`](crate::ClientAddr)
//!   with [`ClientIp::key`](crate::ClientIp::key) (the peer, or what a trusted proxy
//!   forwarded) and puts it in the request's extensions. No recorded peer address (the
//!   server was not started with `into_make_service_with_connect_info::<SocketAddr>()`)
//!   is answered 500 with the same JSON shape as a 429, logged and counted — never
//!   forwarded, never one bucket for every client.
//! - [`ClientAddr`](crate::ClientAddr) is an extractor: a handler sees the address its
//!   limits counted under ([`MissingClientAddr`], a 500, without the layer).
//! - [`keys::client_addr`](crate::keys::client_addr): the key function that reads it.
//!
//! Layer order: in tower and axum **the layer added last runs first**, so add
//! [`ClientAddrLayer`] after the [`LimitLayer`](crate::LimitLayer) that reads its
//! address — or, better, both in one `tower::ServiceBuilder` (which runs its layers
//! top to bottom) passed to one [`Router::layer`](::axum::Router::layer): axum boxes
//! the service of each `Router::layer` call, and two calls cost per request what one
//! does twice (11 allocations against 6, `benches/tests/http_allocations.rs`). Use
//! `Router::layer`, not `route_layer`: `layer` also wraps the fallback, so requests
//! to paths no route matches (a 404 scan) are limited too; `route_layer` lets them
//! through unlimited.
//!
//! ```
//! use std::{net::SocketAddr, sync::Arc};
//!
//! use axum::{body::Body, routing::{get, post}, Router};
//! use http::Request;
//! use portero::{Gcra, KeyedLimiter, Quota};
//! use portero_http::axum::ClientAddrLayer;
//! use portero_http::{keys, route, ClientAddr, ClientIp, Limit, LimitLayer, Policy, TrustedProxies};
//! use tower::ServiceExt;
//!
//! let per_client = Quota::per_minute(60)?;
//! let login = Quota::per_minute(5)?;
//! let store = Arc::new(KeyedLimiter::new(Gcra::new(per_client), 100_000));
//! let logins = Arc::new(KeyedLimiter::new(Gcra::new(login), 100_000));
//! let limits = LimitLayer::new(Limit::new(
//!     store,
//!     Policy::for_quota("per-client", &per_client)?,
//!     keys::client_addr(),
//! ))
//! .limit(
//!     Limit::new(logins, Policy::for_quota("login", &login)?, keys::client_addr())
//!         .route(route::post("/login")),
//! );
//! let client_ip = ClientIp::new(TrustedProxies::none()); // no proxy: the peer is the client
//! let app: Router = Router::new()
//!     .route("/", get(|client: ClientAddr| async move { format!("hello {client}") }))
//!     .route("/login", post(|| async { "welcome" }))
//!     .layer(limits) // runs second: counts under the address resolved before it
//!     .layer(ClientAddrLayer::new(client_ip)); // runs first: resolves the address
//!
//! // Serve it with the peer address recorded:
//! //     axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>())
//! // In a test, `MockConnectInfo` stands in for the connection:
//! let peer = SocketAddr::from(([192, 0, 2, 1], 4000));
//! let app = app.layer(axum::extract::connect_info::MockConnectInfo(peer));
//! # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
//! let response = app.oneshot(Request::get("/").body(Body::empty())?).await?;
//! assert_eq!(response.status(), 200);
//! assert!(response.headers().contains_key("ratelimit"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub(crate) mod extract;
pub(crate) mod future;
pub(crate) mod layer;
pub(crate) mod service;

pub use extract::{MissingClientAddr, MISSING_CLIENT_ADDR_BODY};
pub use future::ClientAddrFuture;
pub use layer::ClientAddrLayer;
pub use service::ClientAddrService;
