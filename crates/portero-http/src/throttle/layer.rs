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
#[derive(Debug)]
pub struct ThrottleLayer<C = DefaultClock> {
    pub(super) limiter: Arc<RateLimiter<Gcra, C>>,
    pub(super) max_wait: Duration,
}

impl<C: Clock> ThrottleLayer<C> {
    /// Calls through `limiter`, each waiting at most `max_wait` for its turn.
    pub fn new(limiter: Arc<RateLimiter<Gcra, C>>, max_wait: Duration) -> Self {
        Self { limiter, max_wait }
    }
}

impl<C> Clone for ThrottleLayer<C> {
    fn clone(&self) -> Self {
        Self {
            limiter: self.limiter.clone(),
            max_wait: self.max_wait,
        }
    }
}

impl<S, C> Layer<S> for ThrottleLayer<C> {
    type Service = ThrottleService<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        ThrottleService {
            inner,
            layer: self.clone(),
        }
    }
}
