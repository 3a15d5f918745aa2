//! The service: takes a slot or sheds, before the inner service is called.

use core::task::{Context, Poll};
use tower_layer::Layer;

use http::{Request, Response};
use tower_service::Service;

use super::admission::Admission;
use super::future::{LoadShedFuture, State};
use super::layer::LoadShedLayer;
use crate::answer::service_unavailable;
use crate::limit::entry::{NoRoutes, Route};
use crate::observe::shed;

/// The service [`LoadShedLayer`] builds.
#[derive(Debug, Clone)]
pub struct LoadShedService<S, A, X = NoRoutes> {
    pub(super) inner: S,
    pub(super) layer: LoadShedLayer<A, X>,
}

// The layer builds this service; the impl lives here so that the layer (its
// options) never imports the service it builds.
impl<S, A: Clone, X: Clone> Layer<S> for LoadShedLayer<A, X> {
    type Service = LoadShedService<S, A, X>;

    fn layer(&self, inner: S) -> Self::Service {
        LoadShedService {
            inner,
            layer: self.clone(),
        }
    }
}

impl<S, A, X, ReqB, ResB> Service<Request<ReqB>> for LoadShedService<S, A, X>
where
    S: Service<Request<ReqB>, Response = Response<ResB>>,
    A: Admission<ReqB>,
    X: Route<ReqB>,
    ResB: From<&'static str>,
{
    type Response = Response<ResB>;
    type Error = S::Error;
    type Future = LoadShedFuture<S::Future, ResB, A::Permit>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqB>) -> Self::Future {
        if self.layer.exempt.matches(&request) {
            let inner = self.inner.call(request);
            return LoadShedFuture {
                state: State::Serving {
                    inner,
                    permit: None,
                },
            };
        }
        let state = match self.layer.admission.admit(&request) {
            Some(permit) => State::Serving {
                inner: self.inner.call(request),
                permit: Some(permit),
            },
            None => {
                shed("load_shed", "over_capacity");
                State::Shed {
                    response: Some(service_unavailable(&self.layer.retry_after)),
                }
            }
        };
        LoadShedFuture { state }
    }
}
