//! The layer: which limiter the calls share, and how long one may wait.

use std::sync::Arc;
use std::time::Duration;

use portero::{Clock, DefaultClock, Gcra, RateLimiter};
use tower_layer::Layer;

use super::ThrottleService;

/// Wraps a client service so that each call books one unit of a GCRA limiter and
/// waits for its slot ([`RateLimiter::reserve`]), first come, first served, instead of
/// being refused; a call whose turn is more than `max_wait` away fails at once with
/// [`ThrottleError::WouldWait`](super::ThrottleError::WouldWait) without calling. Share
/// one limiter between every path that reaches the dependency (a nightly job
/// included), counted in the unit it charges. A call dropped while it waits gives its
/// slot back when nothing was booked after it. Needs a tokio runtime with its timer.
///
/// ```
/// use std::{sync::Arc, time::Duration};
/// use portero::{Quota, RateLimiter};
/// use portero_http::ThrottleLayer;
///
/// // The provider allows 100 messages per second: wait up to 5 s for a turn.
/// let sms = Arc::new(RateLimiter::gcra(Quota::per_second(100)?));
/// let layer = ThrottleLayer::new(sms, Duration::from_secs(5));
/// # let _ = layer;
/// # Ok::<(), portero::QuotaError>(())
/// ```
///
/// A call may cost more than one unit ([`cost`](Self::cost): messages in a batch, bytes
/// of a body); a call whose cost is above the limiter's burst can never be admitted and
/// fails at once with [`ThrottleError::Limit`](super::ThrottleError::Limit) holding
/// `CostExceedsCapacity`, without booking or calling.
#[derive(Debug)]
pub struct ThrottleLayer<C = DefaultClock, F = OnePerCall> {
    pub(super) limiter: Arc<RateLimiter<Gcra, C>>,
    pub(super) max_wait: Duration,
    pub(super) cost: F,
}

/// What a call costs in the limiter's units: one per call ([`OnePerCall`]), or any
/// `Fn(&Req) -> u64` given to [`ThrottleLayer::cost`].
pub trait CallCost<Req> {
    /// The units `request` books.
    fn cost(&self, request: &Req) -> u64;
}

/// The default [`CallCost`]: every call books one unit.
#[derive(Debug, Clone, Copy, Default)]
pub struct OnePerCall;

impl<Req> CallCost<Req> for OnePerCall {
    fn cost(&self, _: &Req) -> u64 {
        1
    }
}

impl<Req, F: Fn(&Req) -> u64> CallCost<Req> for F {
    fn cost(&self, request: &Req) -> u64 {
        self(request)
    }
}

impl<C: Clock> ThrottleLayer<C> {
    /// Calls through `limiter`, each waiting at most `max_wait` for its turn.
    pub fn new(limiter: Arc<RateLimiter<Gcra, C>>, max_wait: Duration) -> Self {
        Self {
            limiter,
            max_wait,
            cost: OnePerCall,
        }
    }
}

impl<C, F> ThrottleLayer<C, F> {
    /// Each call books `cost(&request)` units instead of one.
    ///
    /// ```
    /// use std::{sync::Arc, time::Duration};
    /// use portero::{Quota, RateLimiter};
    /// use portero_http::ThrottleLayer;
    ///
    /// // 1,000 recipients per second, a batch of messages per call.
    /// let sms = Arc::new(RateLimiter::gcra(Quota::per_second(1_000)?));
    /// let layer = ThrottleLayer::new(sms, Duration::from_secs(5))
    ///     .cost(|batch: &Vec<String>| batch.len() as u64);
    /// # let _ = layer;
    /// # Ok::<(), portero::QuotaError>(())
    /// ```
    pub fn cost<G>(self, cost: G) -> ThrottleLayer<C, G> {
        ThrottleLayer {
            limiter: self.limiter,
            max_wait: self.max_wait,
            cost,
        }
    }
}

impl<C, F: Clone> Clone for ThrottleLayer<C, F> {
    fn clone(&self) -> Self {
        Self {
            limiter: self.limiter.clone(),
            max_wait: self.max_wait,
            cost: self.cost.clone(),
        }
    }
}

impl<S, C, F: Clone> Layer<S> for ThrottleLayer<C, F> {
    type Service = ThrottleService<S, C, F>;

    fn layer(&self, inner: S) -> Self::Service {
        ThrottleService {
            inner,
            layer: self.clone(),
        }
    }
}
