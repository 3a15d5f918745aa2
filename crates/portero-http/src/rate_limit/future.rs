//! The response future: the inner service's answer with the fields added, or the
//! 429 decided before it was called.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use std::sync::Arc;

use http::Response;
use pin_project_lite::pin_project;
use portero::Decision;

use crate::headers::{self, Policy};

pin_project! {
    /// The response of a [`RateLimitService`](super::RateLimitService): the inner service's, with the
    /// `RateLimit` fields added, or a 429 answered at once.
    pub struct RateLimitFuture<Fut, B> {
        #[pin]
        pub(super) state: State<Fut, B>,
    }
}

pin_project! {
    #[project = StateProj]
    pub(super) enum State<Fut, B> {
        // Admitted: the inner service answers.
        Forwarded {
            #[pin]
            inner: Fut,
            // The decision, its policy, and whether to add the legacy fields.
            fields: Option<(Decision, Arc<Policy>, bool)>,
        },
        // Rejected: answered here.
        Answered { response: Option<Response<B>> },
    }
}

impl<Fut, B, E> Future for RateLimitFuture<Fut, B>
where
    Fut: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<B>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Forwarded { inner, fields } => {
                let mut response = match inner.poll(cx) {
                    Poll::Ready(Ok(response)) => response,
                    other => return other,
                };
                if let Some((decision, policy, legacy)) = fields.take() {
                    // Only the fields: a forwarded response is not a refusal, even when
                    // shadow mode let a rejected request through.
                    headers::insert_fields(response.headers_mut(), &decision, &policy);
                    if legacy {
                        headers::insert_legacy(response.headers_mut(), &decision, &policy);
                    }
                }
                Poll::Ready(Ok(response))
            }
            StateProj::Answered { response } => Poll::Ready(Ok(response
                .take()
                .expect("RateLimitFuture polled after it completed"))),
        }
    }
}

impl<Fut, B> fmt::Debug for RateLimitFuture<Fut, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitFuture").finish_non_exhaustive()
    }
}
