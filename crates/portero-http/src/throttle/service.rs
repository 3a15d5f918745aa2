//! The service: wait in line for the call's units, then call the dependency.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tower_layer::Layer;

use portero::wait::Waitable;
use portero::ReserveError;
use tower_service::Service;

use super::error::ThrottleError;
use super::layer::{CallCost, OnePerCall, ThrottleLayer};

/// The response future of a [`ThrottleService`]: boxed, because it waits for its slot
/// and then drives a clone of the inner service.
pub type ThrottleFuture<R, E> = Pin<Box<dyn Future<Output = Result<R, ThrottleError<E>>> + Send>>;

/// The service [`ThrottleLayer`] builds.
#[derive(Debug)]
pub struct ThrottleService<S, L, F = OnePerCall> {
    pub(super) inner: S,
    pub(super) layer: ThrottleLayer<L, F>,
}

// The layer builds this service; the impl lives here so that the layer (its
// options) never imports the service it builds.
impl<S, L, F: Clone> Layer<S> for ThrottleLayer<L, F> {
    type Service = ThrottleService<S, L, F>;

    fn layer(&self, inner: S) -> Self::Service {
        ThrottleService {
            inner,
            layer: self.clone(),
        }
    }
}

impl<S: Clone, L, F: Clone> Clone for ThrottleService<S, L, F> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            layer: self.layer.clone(),
        }
    }
}

impl<S, Req, L, F> Service<Req> for ThrottleService<S, L, F>
where
    F: CallCost<Req>,
    S: Service<Req> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Send,
    Req: Send + 'static,
    L: Waitable + 'static,
{
    type Response = S::Response;
    type Error = ThrottleError<S::Error>;
    type Future = ThrottleFuture<S::Response, S::Error>;

    // Readiness is awaited inside the future, after the wait, on the clone that will
    // make the call: a call waiting for its turn must not hold the client's readiness.
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let mut inner = self.inner.clone();
        let cost = self.layer.cost.cost(&request);
        let (limiter, max_wait) = (self.layer.limiter.clone(), self.layer.max_wait);
        Box::pin(async move {
            // In line from the first poll; dropped here (the caller gave up), the call
            // took nothing and the next one moves up.
            match portero::wait::until_admitted(&*limiter, cost, max_wait, Duration::ZERO).await {
                Ok(_) => {}
                Err(ReserveError::TooLong { wait }) => return Err(ThrottleError::WouldWait(wait)),
                Err(e) => return Err(ThrottleError::Limit(e)),
            }
            std::future::poll_fn(|cx| inner.poll_ready(cx))
                .await
                .map_err(ThrottleError::Inner)?;
            inner.call(request).await.map_err(ThrottleError::Inner)
        })
    }
}
