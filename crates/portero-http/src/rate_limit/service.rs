//! The service: decides before the inner service is called.

use core::fmt;
use core::task::{Context, Poll};
use std::hash::Hash;

use http::{Request, Response};
use portero::{Algorithm, CheckError, Clock, Decision, KeyedError};
use tower_service::Service;

use super::future::{Fields, RateLimitFuture};
use super::{RateLimitLayer, WhenNoKey, WhenTableFull};
use crate::answer::{too_costly, too_many_requests};
use crate::headers::{insert, insert_legacy};
use crate::observe::{record, Outcome};

/// The service [`RateLimitLayer`] builds.
pub struct RateLimitService<S, K, A: Copy, C, F> {
    pub(super) inner: S,
    pub(super) layer: RateLimitLayer<K, A, C, F>,
}

impl<S: fmt::Debug, K, A: Copy, C, F> fmt::Debug for RateLimitService<S, K, A, C, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitService")
            .field("inner", &self.inner)
            .field("layer", &self.layer)
            .finish()
    }
}

impl<S: Clone, K, A: Copy, C, F: Clone> Clone for RateLimitService<S, K, A, C, F> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            layer: self.layer.clone(),
        }
    }
}

impl<S, K, A, C, F, ReqB, ResB> Service<Request<ReqB>> for RateLimitService<S, K, A, C, F>
where
    S: Service<Request<ReqB>, Response = Response<ResB>>,
    K: Hash,
    A: Algorithm + Copy,
    C: Clock,
    F: Fn(&Request<ReqB>) -> Option<K>,
    ResB: From<&'static str> + From<String>,
{
    type Response = Response<ResB>;
    type Error = S::Error;
    type Future = RateLimitFuture<S::Future, ResB>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqB>) -> Self::Future {
        let layer = &self.layer;
        let cost = layer.cost.of(&request);
        let checked = match (layer.key)(&request) {
            Some(key) => Some(layer.limiter.check_n(&key, cost)),
            None => match layer.when_no_key {
                WhenNoKey::SharedBucket => Some(layer.limiter.check_anonymous_n(cost)),
                WhenNoKey::Reject => Some(Ok(Decision::deny_for(
                    layer.policy.quota(),
                    portero::DENY_FOR_NANOS,
                ))),
                WhenNoKey::Allow => None,
            },
        };
        let decision = match checked {
            None => None,
            Some(Ok(d)) => Some(d),
            Some(Err(KeyedError::KeyTableFull { .. }))
                if layer.when_full == WhenTableFull::Allow =>
            {
                None
            }
            Some(Err(KeyedError::Check(CheckError::CostExceedsCapacity { .. }))) => {
                record(&layer.policy, Outcome::Rejected);
                return RateLimitFuture::answered(too_costly());
            }
            // A full table: a newcomer gets in once a tracked key has gone back to full
            // and its slot can be taken, which for a quota whose burst is at most its
            // limit is at most one window after that key's last request. Say that
            // rather than "a second": a flood keeps the table full far longer.
            Some(Err(KeyedError::KeyTableFull { .. })) => Some(Decision::deny_for(
                layer.policy.quota(),
                u64::try_from(layer.policy.window().as_nanos()).unwrap_or(u64::MAX),
            )),
            // Impossible for a clock-driven check (a bad time): deny for one second
            // rather than admit unlimited.
            Some(Err(_)) => Some(Decision::deny_for(
                layer.policy.quota(),
                portero::DENY_FOR_NANOS,
            )),
        };
        record(
            &layer.policy,
            match decision {
                None => Outcome::Unlimited,
                Some(d) if d.is_allowed() => Outcome::Admitted,
                Some(_) if layer.shadow => Outcome::ShadowRejected,
                Some(_) => Outcome::Rejected,
            },
        );
        match decision {
            Some(d) if !d.is_allowed() && !layer.shadow => {
                let mut response = match &layer.refusal {
                    Some(refusal) => {
                        let mut r = refusal(&d, &layer.policy).map(ResB::from);
                        insert(r.headers_mut(), &d, &layer.policy);
                        r
                    }
                    None => too_many_requests(&d, &layer.policy),
                };
                if layer.legacy {
                    insert_legacy(response.headers_mut(), &d, &layer.policy);
                }
                RateLimitFuture::answered(response)
            }
            _ => RateLimitFuture::forwarded(
                self.inner.call(request),
                decision.map(|decision| Fields::One {
                    decision,
                    policy: layer.policy.clone(),
                    legacy: layer.legacy,
                }),
            ),
        }
    }
}
