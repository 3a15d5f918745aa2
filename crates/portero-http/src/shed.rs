//! [`LoadShedLayer`]: a concurrency limit that answers 503 instead of queueing.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use std::sync::Arc;
use std::time::Duration;

use http::header::RETRY_AFTER;
use http::{HeaderValue, Request, Response, StatusCode};
use pin_project_lite::pin_project;
use portero::{ConcurrencyLimit, OwnedPermit};
use tower_layer::Layer;
use tower_service::Service;

/// At most `C` requests in flight through the inner service; one more is answered
/// 503 Service Unavailable with a `Retry-After` at once.
///
/// A rate limit admits the same rate however slow the server gets; a concurrency
/// limit admits `C / S` requests per second for a service time `S` (Little's law),
/// so when the server slows down it admits less, and the excess is shed in
/// microseconds instead of waiting in a queue until it times out. The permit is held
/// until the inner service's response future completes or is dropped (a cancelled
/// request frees its slot at once); a streamed body is not counted after that.
#[derive(Debug, Clone)]
pub struct LoadShedLayer {
    limit: Arc<ConcurrencyLimit>,
    retry_after: HeaderValue,
}

impl LoadShedLayer {
    /// Sheds beyond `limit`'s permits, advising clients to come back after
    /// `retry_after` (whole seconds, rounded up, at least 1).
    pub fn new(limit: Arc<ConcurrencyLimit>, retry_after: Duration) -> Self {
        let secs = retry_after.as_nanos().div_ceil(1_000_000_000).max(1);
        Self {
            limit,
            retry_after: HeaderValue::from(u64::try_from(secs).unwrap_or(u64::MAX)),
        }
    }
}

impl<S> Layer<S> for LoadShedLayer {
    type Service = LoadShedService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        LoadShedService {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service [`LoadShedLayer`] builds.
#[derive(Debug, Clone)]
pub struct LoadShedService<S> {
    inner: S,
    layer: LoadShedLayer,
}

impl<S, ReqB, ResB> Service<Request<ReqB>> for LoadShedService<S>
where
    S: Service<Request<ReqB>, Response = Response<ResB>>,
    ResB: Default,
{
    type Response = Response<ResB>;
    type Error = S::Error;
    type Future = ShedFuture<S::Future, ResB>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqB>) -> Self::Future {
        match self.layer.limit.try_acquire_owned() {
            Ok(permit) => ShedFuture {
                state: State::Serving {
                    inner: self.inner.call(request),
                    permit: Some(permit),
                },
            },
            Err(_) => {
                let mut response = Response::new(ResB::default());
                *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
                response
                    .headers_mut()
                    .insert(RETRY_AFTER, self.layer.retry_after.clone());
                ShedFuture {
                    state: State::Shed {
                        response: Some(response),
                    },
                }
            }
        }
    }
}

pin_project! {
    /// The response of a [`LoadShedService`].
    pub struct ShedFuture<Fut, B> {
        #[pin]
        state: State<Fut, B>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<Fut, B> {
        // In flight, holding a permit until this future completes or is dropped.
        Serving {
            #[pin]
            inner: Fut,
            permit: Option<OwnedPermit>,
        },
        // Shed: a 503 answered at once.
        Shed { response: Option<Response<B>> },
    }
}

impl<Fut, B, E> Future for ShedFuture<Fut, B>
where
    Fut: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<B>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Serving { inner, permit } => {
                let out = inner.poll(cx);
                if out.is_ready() {
                    permit.take(); // the slot is free as soon as the answer is
                }
                out
            }
            StateProj::Shed { response } => Poll::Ready(Ok(response
                .take()
                .expect("ShedFuture polled after it completed"))),
        }
    }
}
