//! The service: decides before the inner service is called.

use core::fmt;
use core::task::{Context, Poll};
use std::sync::Arc;

use http::{Request, Response};
use tower_service::Service;

use super::future::LimitFuture;
use super::procedure::{Flow, Procedure};
use super::respond::refuse;

/// The service [`LimitLayer`](super::LimitLayer) builds.
pub struct LimitService<S, B> {
    pub(super) inner: S,
    pub(super) plan: Arc<Procedure<B>>,
}

impl<S: Clone, B> Clone for LimitService<S, B> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            plan: self.plan.clone(),
        }
    }
}

impl<S: fmt::Debug, B> fmt::Debug for LimitService<S, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LimitService")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S, ReqB: 'static, ResB> Service<Request<ReqB>> for LimitService<S, ReqB>
where
    S: Service<Request<ReqB>, Response = Response<ResB>> + Clone,
    ResB: From<&'static str> + From<String>,
{
    type Response = Response<ResB>;
    type Error = S::Error;
    type Future = LimitFuture<S::Future, S, ReqB, ResB>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<ReqB>) -> Self::Future {
        let plan = &self.plan;
        let mut run = plan.start(&request);
        match plan.drive(&mut run, &request) {
            Flow::Admitted => {
                if plan.settles_by_usage {
                    plan.hand_usage(&mut run.applied, &mut request);
                }
                LimitFuture::forwarded(
                    self.inner.call(request),
                    Some((self.plan.clone(), run.applied)),
                )
            }
            Flow::Refused(why) => LimitFuture::answered(refuse(plan, &run.applied, why)),
            Flow::Waiting(pending) => {
                // The service that was polled ready serves this request once the
                // remote answer comes; a clone takes its place for the next one.
                let clone = self.inner.clone();
                let inner = core::mem::replace(&mut self.inner, clone);
                LimitFuture::waiting(pending, inner, request, run, self.plan.clone())
            }
        }
    }
}
