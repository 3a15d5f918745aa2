//! The layer and its configuration: what counts as a failure, what answers while the
//! circuit is open, how long a call may take.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::Response;
use portero::{BreakerOpen, CircuitBreaker, Clock, DefaultClock};

/// Decides whether a response counts as a failure.
pub type FailureFn<B> = Arc<dyn Fn(&Response<B>) -> bool + Send + Sync>;
/// Answers in the dependency's place while the circuit is open.
pub type FallbackFn<B> = Arc<dyn Fn(BreakerOpen) -> Response<B> + Send + Sync>;

/// The call timeout a [`CircuitBreakerLayer`] starts with: 10 seconds.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Wraps a client service (anything that sends a `Request` and gets a `Response`) in a
/// [`CircuitBreaker`].
///
/// Failures are the inner service's errors, calls past
/// [`call_timeout`](Self::call_timeout) (by default [`DEFAULT_CALL_TIMEOUT`], so a
/// dependency that hangs instead of failing still counts), and responses
/// [`failure_if`](Self::failure_if) picks (by default any 5xx). While the circuit is open the dependency is not called:
/// the call answers [`fallback`](Self::fallback)'s response, or
/// [`BreakerCallError::Open`](super::BreakerCallError::Open) without one. A call
/// dropped before it finishes counts as a failure (it was most likely a timeout
/// above this layer). While the circuit is open the layer is ready without waiting
/// for the inner service's readiness: a saturated client does not delay the fallback.
/// (If the open period ends between `poll_ready` and `call` on such a service, that one
/// call is answered as open with a zero `retry_after`; the next one probes.) The call
/// timeout also runs while the inner service is not ready: a client that cannot take a
/// call within it fails that call (`TimedOut`, counted), so a client stuck connecting
/// to a black-holed host opens the breaker instead of hanging its callers.
///
/// ```
/// use std::{sync::Arc, time::Duration};
/// use portero::CircuitBreaker;
/// use portero_http::CircuitBreakerLayer;
///
/// let breaker = Arc::new(CircuitBreaker::new(5, Duration::from_secs(30))?);
/// let layer = CircuitBreakerLayer::<String>::new(breaker)
///     .call_timeout(Duration::from_secs(2))
///     .fallback(|_open| http::Response::new("cached answer".to_string()));
/// # let _ = layer;
/// # Ok::<(), portero::BreakerError>(())
/// ```
pub struct CircuitBreakerLayer<B, C = DefaultClock> {
    pub(super) breaker: Arc<CircuitBreaker<C>>,
    pub(super) is_failure: FailureFn<B>,
    pub(super) fallback: Option<FallbackFn<B>>,
    pub(super) timeout: Option<Duration>,
}

impl<B, C: Clock> CircuitBreakerLayer<B, C> {
    /// Calls through `breaker`, counting errors and 5xx responses as failures.
    pub fn new(breaker: Arc<CircuitBreaker<C>>) -> Self {
        Self {
            breaker,
            is_failure: Arc::new(|r: &Response<B>| r.status().is_server_error()),
            fallback: None,
            timeout: Some(DEFAULT_CALL_TIMEOUT),
        }
    }

    /// Which responses count as failures (errors and timeouts always do); for example
    /// also 429, or not 501.
    pub fn failure_if(mut self, f: impl Fn(&Response<B>) -> bool + Send + Sync + 'static) -> Self {
        self.is_failure = Arc::new(f);
        self
    }

    /// The response while the circuit is open, instead of an error.
    pub fn fallback(
        mut self,
        f: impl Fn(BreakerOpen) -> Response<B> + Send + Sync + 'static,
    ) -> Self {
        self.fallback = Some(Arc::new(f));
        self
    }

    /// A call that takes longer fails with [`BreakerCallError::TimedOut`] and counts
    /// as a failure (needs a tokio runtime with its timer; any duration is accepted,
    /// `Duration::MAX` included). The default is [`DEFAULT_CALL_TIMEOUT`].
    ///
    /// [`BreakerCallError::TimedOut`]: super::BreakerCallError::TimedOut
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// No call timeout at all: only for a client that times out its own calls. The
    /// breaker's probe timeout still ends a probe that never answers.
    pub fn without_call_timeout(mut self) -> Self {
        self.timeout = None;
        self
    }
}

impl<B, C> Clone for CircuitBreakerLayer<B, C> {
    fn clone(&self) -> Self {
        Self {
            breaker: self.breaker.clone(),
            is_failure: self.is_failure.clone(),
            fallback: self.fallback.clone(),
            timeout: self.timeout,
        }
    }
}

impl<B, C: fmt::Debug> fmt::Debug for CircuitBreakerLayer<B, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CircuitBreakerLayer")
            .field("breaker", &self.breaker)
            .field("fallback", &self.fallback.is_some())
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}
