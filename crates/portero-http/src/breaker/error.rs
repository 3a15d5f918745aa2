//! What a call through the breaker can fail with.

use std::fmt;

use portero::BreakerOpen;

/// The error of a [`CircuitBreakerService`](super::CircuitBreakerService).
#[derive(Debug)]
pub enum BreakerCallError<E> {
    /// The breaker is open and no fallback is set: the dependency was not called.
    Open(BreakerOpen),
    /// The call took longer than the layer's call timeout (counted as a failure).
    TimedOut,
    /// The dependency's own error (counted as a failure).
    Inner(E),
}

impl<E: fmt::Display> fmt::Display for BreakerCallError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Open(open) => write!(
                f,
                "circuit open: dependency not called, retry after {:?}",
                open.retry_after
            ),
            Self::TimedOut => f.write_str("call timed out"),
            Self::Inner(e) => e.fmt(f),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for BreakerCallError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Inner(e) => Some(e),
            _ => None,
        }
    }
}
