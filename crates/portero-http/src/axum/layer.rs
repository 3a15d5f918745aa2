//! The layer: the [`ClientIp`] every request's address is resolved with.

use std::sync::Arc;

use tower_layer::Layer;

use super::service::ClientAddrService;
use crate::client::ClientIp;

/// Resolves each request's [`ClientAddr`](crate::ClientAddr) once, with
/// [`ClientIp::key`], and puts it in the request's extensions, where the
/// [`ClientAddr`](crate::ClientAddr) extractor and [`keys::client_addr`](crate::keys::client_addr)
/// read it: handlers and limits see the same address.
///
/// A request without a recorded peer address (the server was not started with
/// `into_make_service_with_connect_info::<SocketAddr>()`) is a set-up fault: it is
/// answered 500 with [`LIMIT_FAILED_BODY`](crate::LIMIT_FAILED_BODY) as JSON, counted
/// in `portero_limit_failures_total{cause="key"}` (feature `metrics`) and logged at
/// ERROR (feature `tracing`) — never forwarded, never one bucket for every client.
///
/// Add it with [`Router::layer`](::axum::Router::layer) *after* the limits (the layer
/// added last runs first). The response body type must implement
/// `From<&'static str>`, as axum's `Body` does. Like every tower middleware that may
/// answer by itself, it readies the inner service before it knows whether it will
/// call it.
#[derive(Debug, Clone)]
pub struct ClientAddrLayer {
    client_ip: Arc<ClientIp>,
}

impl ClientAddrLayer {
    /// Resolves addresses with `client_ip` (its trusted proxies and prefixes).
    pub fn new(client_ip: ClientIp) -> Self {
        Self {
            client_ip: Arc::new(client_ip),
        }
    }
}

impl<S> Layer<S> for ClientAddrLayer {
    type Service = ClientAddrService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ClientAddrService {
            inner,
            client_ip: self.client_ip.clone(),
        }
    }
}
