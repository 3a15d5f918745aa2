//! The service: enter, wait in line until a slot or the deadline, then run.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use tower_layer::Layer;

use std::time::Duration;

use http::{Request, Response};
use tokio::time::Instant;
use tower_service::Service;

use super::gate::Entry;
use super::layer::DeadlineQueueLayer;
use crate::answer::service_unavailable;
use crate::limit::entry::{NoRoutes, Route};
use crate::observe::shed;

/// The response future of a [`DeadlineQueueService`]: boxed, because it waits in line
/// and then drives a clone of the inner service (the queue is the slow path; the
/// lock-free [`LoadShedLayer`](crate::LoadShedLayer) is the fast one).
pub type DeadlineQueueFuture<R, E> = Pin<Box<dyn Future<Output = Result<R, E>> + Send>>;

/// The service [`DeadlineQueueLayer`] builds.
#[derive(Debug, Clone)]
pub struct DeadlineQueueService<S, X = NoRoutes> {
    pub(super) inner: S,
    pub(super) layer: DeadlineQueueLayer<X>,
}

// The layer builds this service; the impl lives here so that the layer (its
// options) never imports the service it builds.
impl<S, X: Clone> Layer<S> for DeadlineQueueLayer<X> {
    type Service = DeadlineQueueService<S, X>;

    fn layer(&self, inner: S) -> Self::Service {
        DeadlineQueueService {
            inner,
            layer: self.clone(),
        }
    }
}

impl<S, X, ReqB, ResB> Service<Request<ReqB>> for DeadlineQueueService<S, X>
where
    X: Route<ReqB> + Clone + Send + 'static,
    S: Service<Request<ReqB>, Response = Response<ResB>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Send,
    ReqB: Send + 'static,
    ResB: From<&'static str> + Send + 'static,
{
    type Response = Response<ResB>;
    type Error = S::Error;
    type Future = DeadlineQueueFuture<Response<ResB>, S::Error>;

    // Readiness is awaited inside the future, on the clone that will run the request:
    // a request waiting in line must not hold the inner service's readiness.
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<ReqB>) -> Self::Future {
        if self.layer.exempt.matches(&request) {
            let clone = self.inner.clone();
            let mut inner = std::mem::replace(&mut self.inner, clone);
            return Box::pin(async move {
                std::future::poll_fn(|cx| inner.poll_ready(cx)).await?;
                inner.call(request).await
            });
        }
        let now = Instant::now();
        let deadline = far_enough(now, self.layer.timeout_of(request.headers()));
        let gate = self.layer.gate.clone();
        let estimate = self.layer.service_time_estimate();
        // Waiting past the instant that leaves the estimated service time is futile.
        let start_by = deadline.checked_sub(estimate).unwrap_or(now).max(now);
        let entry = gate.enter(start_by);
        if matches!(entry, Entry::Full) {
            shed("deadline_queue", "queue_full");
        }
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let refused = service_unavailable::<ResB>(&self.layer.retry_after);
        let layer = self.layer.clone();
        Box::pin(async move {
            let (slot, waited) = match entry {
                Entry::Now(slot) => (slot, false),
                Entry::Full => return Ok(refused),
                Entry::Wait(line) => match tokio::time::timeout_at(start_by, line).await {
                    Ok(Ok(slot)) => (slot, true),
                    // Past the deadline, or dropped from the line as expired.
                    _ => {
                        shed("deadline_queue", "deadline_passed");
                        return Ok(refused);
                    }
                },
            };
            let started = Instant::now();
            let done_by = started.checked_add(layer.service_time_estimate());
            // Only a request that lost time in line is judged by the estimate: one that
            // found a free slot has its whole deadline, and running it keeps the
            // estimate measured (refusing those too, one slow request could push the
            // estimate past every deadline and nothing would ever run to lower it).
            if started >= deadline || (waited && done_by.is_none_or(|done| done > deadline)) {
                // It could not answer before its client gives up: never run it.
                shed("deadline_queue", "deadline_passed");
                return Ok(refused);
            }
            std::future::poll_fn(|cx| inner.poll_ready(cx)).await?;
            let response = inner.call(request).await;
            gate.record_service_time(started.elapsed());
            drop(slot);
            response
        })
    }
}

/// `now + timeout`, or about 30 years on for a timeout beyond the clock's range
/// (`Duration::MAX` means "no deadline"; adding it to an instant would panic).
fn far_enough(now: Instant, timeout: Duration) -> Instant {
    now.checked_add(timeout)
        .or_else(|| now.checked_add(FAR_FUTURE))
        .unwrap_or(now)
}

/// About 30 years: farther than any client waits.
const FAR_FUTURE: Duration = Duration::from_secs(30 * 365 * 86_400);
