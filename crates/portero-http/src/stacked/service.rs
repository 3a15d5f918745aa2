//! The service: checks every applicable limit before the inner service is called.

use core::fmt;
use core::task::{Context, Poll};
use std::sync::Arc;

use http::{Request, Response};
use portero::{CheckError, Decision, KeyedError};
use tower_service::Service;

use super::limit::Refund;
use super::StackedRateLimitLayer;
use crate::answer::{too_costly, too_many_requests_for};
use crate::headers::Policy;
use crate::observe::{record, Outcome};
use crate::rate_limit::future::{Fields, RateLimitFuture};

/// The service [`StackedRateLimitLayer`] builds.
pub struct StackedRateLimitService<S, B> {
    pub(super) inner: S,
    pub(super) layer: StackedRateLimitLayer<B>,
}

impl<S: Clone, B> Clone for StackedRateLimitService<S, B> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            layer: self.layer.clone(),
        }
    }
}

impl<S: fmt::Debug, B> fmt::Debug for StackedRateLimitService<S, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StackedRateLimitService")
            .field("inner", &self.inner)
            .field("layer", &self.layer)
            .finish()
    }
}

impl<S, B, ResB> Service<Request<B>> for StackedRateLimitService<S, B>
where
    S: Service<Request<B>, Response = Response<ResB>>,
    ResB: From<&'static str>,
{
    type Response = Response<ResB>;
    type Error = S::Error;
    type Future = RateLimitFuture<S::Future, ResB>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let cost = self.layer.cost.of(&request);
        let mut taken: Vec<(Decision, Arc<Policy>)> = Vec::new();
        let mut refunds: Vec<Refund> = Vec::new();
        for limit in self.layer.limits.iter().filter(|l| l.applies(&request)) {
            let (outcome, refund) = limit.acquire(&request, cost);
            let refused = match outcome {
                Ok(d) if d.is_allowed() => {
                    taken.push((d, limit.policy().clone()));
                    refunds.push(refund);
                    continue;
                }
                Ok(d) => d,
                Err(KeyedError::Check(CheckError::CostExceedsCapacity { .. })) => {
                    give_back(&mut taken, refunds);
                    record(limit.policy(), Outcome::Rejected);
                    return RateLimitFuture::answered(too_costly());
                }
                // A full table or a time out of range: refuse for a second.
                Err(_) => Decision::deny_for(limit.policy().quota(), portero::DENY_FOR_NANOS),
            };
            // All or none: what the earlier limits took goes back.
            give_back(&mut taken, refunds);
            record(limit.policy(), Outcome::Rejected);
            taken.push((refused, limit.policy().clone()));
            let refused_by = taken.len() - 1;
            return RateLimitFuture::answered(too_many_requests_for(&taken, refused_by));
        }
        for (_, policy) in &taken {
            record(policy, Outcome::Admitted);
        }
        RateLimitFuture::forwarded(self.inner.call(request), Some(Fields::Many(taken)))
    }
}

/// Refunds the earlier limits, newest first, and reports each as it stands after its
/// refund (a limit without one, the shared no-key bucket, stays charged and says so).
fn give_back(taken: &mut [(Decision, Arc<Policy>)], refunds: Vec<Refund>) {
    for ((decision, _), refund) in taken.iter_mut().zip(refunds).rev() {
        if let Some(after) = refund.and_then(|r| r()) {
            *decision = after;
        }
    }
}
