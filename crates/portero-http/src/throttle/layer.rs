//! The layer: which limiter the calls share, and how long one may wait.

use std::sync::Arc;
use std::time::Duration;

use portero::wait::Waitable;
use portero::{DefaultClock, Gcra, Quota, QuotaError, RateLimiter, SlidingLog, StdClock};

/// Wraps a client service so that each call waits in line for its units of a shared
/// limit ([`portero::wait`]: first come, first served, each call checked at the instant
/// it leaves) instead of being refused. Share one limit between every path that
/// reaches the dependency (a nightly job included), counted in the unit it charges.
/// A call dropped while it waits (its caller gave up) took nothing, and the calls
/// behind it move up. A call that could not leave within `max_wait` fails with
/// [`ThrottleError::WouldWait`](super::ThrottleError::WouldWait) without calling: at
/// once when the line and the limit already say so. Needs a tokio runtime with its
/// timer.
///
/// Say what the provider enforces. A provider that allows **N per window W** (most
/// do: "100 messages per second", counted over any second) is met exactly by
/// [`window`](Self::window): no window `W` of the clock's time ever holds more than `N`
/// calls' starts, however late the timers fire. A GCRA limiter
/// ([`new`](Self::new)) meters a rate with a burst: `Quota::per_second(100)` lets up to
/// `B + W/T` calls start in a window `W` (101 with burst 1, 200 with the default burst
/// of 100), which such a provider refuses — pick it for a provider that states a rate.
///
/// ```
/// use std::time::Duration;
/// use portero_http::ThrottleLayer;
///
/// // The provider allows 100 messages per second: wait up to 5 s for a turn.
/// let layer = ThrottleLayer::window(100, Duration::from_secs(1), Duration::from_secs(5))?;
/// # let _ = layer;
/// # Ok::<(), portero::QuotaError>(())
/// ```
///
/// A call may cost more than one unit ([`cost`](Self::cost): messages in a batch, bytes
/// of a body); a call whose cost is above the limit's capacity can never be admitted
/// and fails at once with [`ThrottleError::Limit`](super::ThrottleError::Limit) holding
/// `CostExceedsCapacity`, without calling.
#[derive(Debug)]
pub struct ThrottleLayer<L = RateLimiter<Gcra, DefaultClock>, F = OnePerCall> {
    pub(super) limiter: Arc<L>,
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

impl<L: Waitable> ThrottleLayer<L> {
    /// Calls through `limiter` (a [`RateLimiter`] of any algorithm, a [`SlidingLog`],
    /// shared with whatever else reaches the dependency), each waiting at most
    /// `max_wait` for its turn.
    ///
    /// ```
    /// use std::{sync::Arc, time::Duration};
    /// use portero::{Quota, RateLimiter};
    /// use portero_http::ThrottleLayer;
    ///
    /// // A partner API that states a rate: 50 per second, bursts of 10.
    /// let partner = Arc::new(RateLimiter::gcra(Quota::per_second(50)?.with_burst(10)?));
    /// let layer = ThrottleLayer::new(partner, Duration::from_secs(2));
    /// # let _ = layer;
    /// # Ok::<(), portero::QuotaError>(())
    /// ```
    pub fn new(limiter: Arc<L>, max_wait: Duration) -> Self {
        Self {
            limiter,
            max_wait,
            cost: OnePerCall,
        }
    }
}

impl ThrottleLayer<SlidingLog<StdClock>> {
    /// Calls to a provider that allows `n` per `window` (counted over any window):
    /// each call's start is checked against an exact log of the last `window`'s starts
    /// when it leaves, so no window of this process's monotonic clock
    /// ([`StdClock`], `std::time::Instant`: what the rest of the process measures time
    /// with, where the faster default clock can run a little apart from it) ever holds
    /// more than `n`. Build a [`SlidingLog`] on another clock and use
    /// [`new`](Self::new) for another. Each call waits at most `max_wait`.
    ///
    /// The provider counts arrivals, which come a little after the starts here, and
    /// not all equally late (a loaded machine, the network): give the window what the
    /// transit may vary by, on top of the provider's (`1 s + 20 ms` for "20 per
    /// second"), and a late call can never land in the next call's window.
    pub fn window(n: u64, window: Duration, max_wait: Duration) -> Result<Self, QuotaError> {
        let log = SlidingLog::with_clock(Quota::new(n, window)?, StdClock::new());
        Ok(Self::new(Arc::new(log), max_wait))
    }
}

impl<L, F> ThrottleLayer<L, F> {
    /// Each call books `cost(&request)` units instead of one.
    ///
    /// ```
    /// use std::{sync::Arc, time::Duration};
    /// use portero::{Quota, RateLimiter};
    /// use portero_http::ThrottleLayer;
    ///
    /// // 1,000 recipients per second, a batch of messages per call.
    /// let sms = Arc::new(RateLimiter::gcra(Quota::per_second(1_000)?.with_burst(1_000)?));
    /// let layer = ThrottleLayer::new(sms, Duration::from_secs(5))
    ///     .cost(|batch: &Vec<String>| batch.len() as u64);
    /// # let _ = layer;
    /// # Ok::<(), portero::QuotaError>(())
    /// ```
    pub fn cost<G>(self, cost: G) -> ThrottleLayer<L, G> {
        ThrottleLayer {
            limiter: self.limiter,
            max_wait: self.max_wait,
            cost,
        }
    }
}

impl<L, F: Clone> Clone for ThrottleLayer<L, F> {
    fn clone(&self) -> Self {
        Self {
            limiter: self.limiter.clone(),
            max_wait: self.max_wait,
            cost: self.cost.clone(),
        }
    }
}
