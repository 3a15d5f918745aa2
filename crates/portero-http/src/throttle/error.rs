//! What a throttled call can fail with.

use std::fmt;
use std::time::Duration;

use portero::ReserveError;

/// The error of a [`ThrottleService`](super::ThrottleService).
#[derive(Debug)]
pub enum ThrottleError<E> {
    /// The call could not leave within the layer's maximum wait (nothing taken, the
    /// dependency not called): how long it would have waited, or had waited.
    WouldWait(Duration),
    /// The limit refused the call outright: a cost above its capacity
    /// (`CostExceedsCapacity`: it can never be admitted, so it fails at once), or a
    /// time out of range. Nothing taken, the dependency not called.
    Limit(ReserveError),
    /// The dependency's own error.
    Inner(E),
}

impl<E: fmt::Display> fmt::Display for ThrottleError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::WouldWait(wait) => {
                write!(f, "the call's turn is {wait:?} away, past the wait allowed")
            }
            Self::Limit(e) => e.fmt(f),
            Self::Inner(e) => e.fmt(f),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for ThrottleError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Inner(e) => Some(e),
            Self::Limit(e) => Some(e),
            Self::WouldWait(_) => None,
        }
    }
}
