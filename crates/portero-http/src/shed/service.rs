//! The service: takes a permit or sheds, before the inner service is called.

use core::task::{Context, Poll};

use http::{Request, Response};
use tower_service::Service;

use super::future::{LoadShedFuture, State};
use super::LoadShedLayer;
use crate::answer::service_unavailable;

/// The service [`LoadShedLayer`] builds.
#[derive(Debug, Clone)]
pub struct LoadShedService<S> {
    pub(super) inner: S,
    pub(super) layer: LoadShedLayer,
}

impl<S, ReqB, ResB> Service<Request<ReqB>> for LoadShedService<S>
where
    S: Service<Request<ReqB>, Response = Response<ResB>>,
    ResB: Default,
{
    type Response = Response<ResB>;
    type Error = S::Error;
    type Future = LoadShedFuture<S::Future, ResB>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqB>) -> Self::Future {
        let state = match self.layer.limit.try_acquire_owned() {
            Ok(permit) => State::Serving {
                inner: self.inner.call(request),
                permit: Some(permit),
            },
            Err(_) => State::Shed {
                response: Some(service_unavailable(&self.layer.retry_after)),
            },
        };
        LoadShedFuture { state }
    }
}
