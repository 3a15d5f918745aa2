//! The service: resolves the address, then calls the inner service, or answers 500.

use core::task::{Context, Poll};
use std::sync::Arc;

use http::{Request, Response};
use tower_service::Service;

use super::future::ClientAddrFuture;
use crate::answer::limit_failed;
use crate::client::ClientIp;
use crate::observe::failed;

/// The service [`ClientAddrLayer`](super::ClientAddrLayer) builds.
#[derive(Debug, Clone)]
pub struct ClientAddrService<S> {
    pub(super) inner: S,
    pub(super) client_ip: Arc<ClientIp>,
}

impl<S, ReqB, ResB> Service<Request<ReqB>> for ClientAddrService<S>
where
    S: Service<Request<ReqB>, Response = Response<ResB>>,
    ResB: From<&'static str>,
{
    type Response = Response<ResB>;
    type Error = S::Error;
    type Future = ClientAddrFuture<S::Future, ResB>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<ReqB>) -> Self::Future {
        match self.client_ip.key(&request) {
            Ok(addr) => {
                request.extensions_mut().insert(addr);
                ClientAddrFuture::called(self.inner.call(request))
            }
            Err(e) => {
                failed("key", &e);
                ClientAddrFuture::answered(limit_failed())
            }
        }
    }
}
