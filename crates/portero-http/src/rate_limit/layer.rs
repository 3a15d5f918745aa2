//! The layer and its configuration.

use core::fmt;
use std::sync::Arc;

use portero::KeyedLimiter;
use tower_layer::Layer;

use super::RateLimitService;
use crate::headers::Policy;

/// What to answer a new client while the key table is full of active keys (see
/// [`portero::Overflow`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WhenTableFull {
    /// 429 with `Retry-After: 1` (the default): a flood of new keys cannot get
    /// through unlimited.
    #[default]
    Reject,
    /// Let the request through unlimited, keeping the service available to new
    /// clients at the price of not limiting them until keys free up.
    Allow,
}

/// Checks one unit per request against a [`KeyedLimiter`], keyed by `key(&request)`.
///
/// An admitted request goes to the inner service and its response gets the
/// `RateLimit` fields; a rejected one never reaches it and is answered here: 429, the
/// fields, `Retry-After`, `Cache-Control: no-store` and an empty body (the response
/// body type must implement `Default`). Requests for which `key` returns `None` are
/// not limited by this layer.
///
/// The layer calls the inner service's `poll_ready` before it knows whether the
/// request will be admitted, like every tower middleware that answers by itself;
/// put it outside layers that reserve capacity in `poll_ready`.
pub struct RateLimitLayer<K, A: Copy, C, F> {
    pub(super) limiter: Arc<KeyedLimiter<K, A, C>>,
    pub(super) policy: Arc<Policy>,
    pub(super) key: F,
    pub(super) when_full: WhenTableFull,
}

impl<K, A: Copy, C, F> fmt::Debug for RateLimitLayer<K, A, C, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitLayer")
            .field("limiter", &self.limiter)
            .field("policy", &self.policy)
            .field("when_full", &self.when_full)
            .finish_non_exhaustive()
    }
}

impl<K, A: Copy, C, F: Clone> Clone for RateLimitLayer<K, A, C, F> {
    fn clone(&self) -> Self {
        Self {
            limiter: self.limiter.clone(),
            policy: self.policy.clone(),
            key: self.key.clone(),
            when_full: self.when_full,
        }
    }
}

impl<K, A: Copy, C, F> RateLimitLayer<K, A, C, F> {
    /// Limits by `limiter`, advertising `policy`, keyed by `key`.
    pub fn new(limiter: Arc<KeyedLimiter<K, A, C>>, policy: Policy, key: F) -> Self {
        Self {
            limiter,
            policy: Arc::new(policy),
            key,
            when_full: WhenTableFull::default(),
        }
    }

    /// What new clients get while the key table is full.
    pub fn when_table_full(mut self, answer: WhenTableFull) -> Self {
        self.when_full = answer;
        self
    }
}

impl<S, K, A: Copy, C, F: Clone> Layer<S> for RateLimitLayer<K, A, C, F> {
    type Service = RateLimitService<S, K, A, C, F>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimitService {
            inner,
            layer: self.clone(),
        }
    }
}
