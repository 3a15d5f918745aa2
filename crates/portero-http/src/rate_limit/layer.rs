//! The layer and its configuration.

use core::fmt;
use std::sync::Arc;

use http::{HeaderMap, Method, Response, Uri};
use portero::{Decision, KeyedLimiter};
use tower_layer::Layer;

use super::RateLimitService;
use crate::headers::Policy;

/// What to answer a new client while the key table is full of active keys (see
/// [`portero::Overflow`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WhenTableFull {
    /// 429 (the default): a flood of new keys cannot get through unlimited. Its
    /// `Retry-After` is the policy's window: a newcomer gets a slot only once a
    /// tracked key has gone back to full, which for a quota whose burst is at most
    /// its limit is at most one window after that key's last request (sooner if keys
    /// go idle sooner; never while a flood keeps every key active).
    #[default]
    Reject,
    /// Let the request through unlimited, keeping the service available to new
    /// clients at the price of not limiting them until keys free up.
    Allow,
}

/// What a request gets when the key function finds no key in it (no client id, no
/// recorded peer address).
///
/// A missing key must not mean "unlimited": a client that leaves out the header a
/// limit keys on would otherwise never be limited. To key on the peer address when a
/// header is missing, say so in the key function ([`keys::either`](crate::keys::either)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WhenNoKey {
    /// Every request without a key shares one bucket of the same quota (the default):
    /// together they get one client's share.
    #[default]
    SharedBucket,
    /// Refuse it: 429 with `Retry-After: 1`.
    Reject,
    /// Let it through unlimited. Only for keys that every real client sends and
    /// something before this layer enforces (an authentication layer, say).
    Allow,
}

/// Checks one unit per request against a [`KeyedLimiter`], keyed by `key(&request)`.
///
/// An admitted request goes to the inner service and its response gets the
/// `RateLimit` fields; a rejected one never reaches it and is answered here, before
/// its body is read: 429, the fields, `Retry-After`, `Cache-Control: no-store` and
/// `{"error":"rate limit exceeded"}` as JSON (the response body type must implement
/// `From<&'static str>`, as axum's `Body` and http-body-util's `Full` do). Requests for
/// which `key` returns `None` are decided by [`WhenNoKey`] (default: one shared
/// bucket). Options: [`shadow`](Self::shadow) mode, [`legacy_headers`](Self::legacy_headers),
/// a per-request [`cost`](Self::cost), a custom [`refusal`](Self::refusal).
///
/// The outcome is counted with the `metrics` feature (see the crate docs).
///
/// The layer calls the inner service's `poll_ready` before it knows whether the
/// request will be admitted, like every tower middleware that answers by itself;
/// put it outside layers that reserve capacity in `poll_ready`.
pub struct RateLimitLayer<K, A: Copy, C, F> {
    pub(super) limiter: Arc<KeyedLimiter<K, A, C>>,
    pub(super) policy: Arc<Policy>,
    pub(super) key: F,
    pub(super) when_full: WhenTableFull,
    pub(super) when_no_key: WhenNoKey,
    pub(super) shadow: bool,
    pub(super) legacy: bool,
    pub(super) cost: Charge,
    pub(super) refusal: Option<Arc<RefusalFn>>,
}

/// Builds the response for a refused request (see [`RateLimitLayer::refusal`]).
pub type RefusalFn = dyn Fn(&Decision, &Policy) -> Response<String> + Send + Sync;

/// A request's cost in units, from its method, URI and fields (see
/// [`RateLimitLayer::cost`]).
pub type CostFn = dyn Fn(&Method, &Uri, &HeaderMap) -> u64 + Send + Sync;

/// The `cost` setter of both rate-limit layers (each holds a `cost: Charge`).
macro_rules! cost_setter {
    () => {
        /// Charges each request `cost(method, uri, fields)` units instead of one: a
        /// route that does more work, or the body's declared length. All or nothing; a
        /// request costing more than a limit could ever admit gets 413 Content Too Large.
        pub fn cost(
            mut self,
            cost: impl Fn(&http::Method, &http::Uri, &http::HeaderMap) -> u64 + Send + Sync + 'static,
        ) -> Self {
            self.cost = $crate::rate_limit::Charge::new(cost);
            self
        }
    };
}
pub(crate) use cost_setter;

/// What a request costs: one unit, or what a [`CostFn`] says (shared by both layers).
#[derive(Clone, Default)]
pub(crate) struct Charge(Option<Arc<CostFn>>);

impl Charge {
    pub(crate) fn new(
        cost: impl Fn(&Method, &Uri, &HeaderMap) -> u64 + Send + Sync + 'static,
    ) -> Self {
        Self(Some(Arc::new(cost)))
    }

    /// The units `request` costs.
    pub(crate) fn of<B>(&self, request: &http::Request<B>) -> u64 {
        self.0.as_ref().map_or(1, |cost| {
            cost(request.method(), request.uri(), request.headers())
        })
    }
}

impl<K, A: Copy, C, F> fmt::Debug for RateLimitLayer<K, A, C, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitLayer")
            .field("limiter", &self.limiter)
            .field("policy", &self.policy)
            .field("when_full", &self.when_full)
            .field("when_no_key", &self.when_no_key)
            .field("shadow", &self.shadow)
            .field("legacy", &self.legacy)
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
            when_no_key: self.when_no_key,
            shadow: self.shadow,
            legacy: self.legacy,
            cost: self.cost.clone(),
            refusal: self.refusal.clone(),
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
            when_no_key: WhenNoKey::default(),
            shadow: false,
            legacy: false,
            cost: Charge::default(),
            refusal: None,
        }
    }

    /// What requests without a key get (default: one shared bucket).
    pub fn when_no_key(mut self, answer: WhenNoKey) -> Self {
        self.when_no_key = answer;
        self
    }

    cost_setter!();

    /// What new clients get while the key table is full.
    pub fn when_table_full(mut self, answer: WhenTableFull) -> Self {
        self.when_full = answer;
        self
    }

    /// Answers refusals with `refusal(decision, policy)` instead of the JSON 429 — a page,
    /// another body, another status. The `RateLimit` fields, `Retry-After` and
    /// `Cache-Control: no-store` are added to whatever it returns (the response body
    /// type must also implement `From<String>`).
    pub fn refusal(
        mut self,
        refusal: impl Fn(&Decision, &Policy) -> Response<String> + Send + Sync + 'static,
    ) -> Self {
        self.refusal = Some(Arc::new(refusal));
        self
    }

    /// Shadow (dry-run) mode: decide and count as usual and send the `RateLimit`
    /// fields, but let every request through — to see what a new limit would refuse
    /// before it refuses anything. A request the limit would have refused carries
    /// `RateLimit: …;r=0;t=…` and no `Retry-After`.
    pub fn shadow(mut self, on: bool) -> Self {
        self.shadow = on;
        self
    }

    /// Also send `X-RateLimit-Limit`, `-Remaining` and `-Reset` (delta-seconds), for
    /// clients written against those (see [`headers::insert_legacy`](crate::headers::insert_legacy)).
    pub fn legacy_headers(mut self, on: bool) -> Self {
        self.legacy = on;
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
