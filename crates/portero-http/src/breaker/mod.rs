//! [`CircuitBreakerLayer`]: the caller's side — a tower layer for clients that stops
//! calling a failing dependency, answers with a fallback, and probes for recovery. The
//! layer, the service, its future and the error, each in its own file.

pub(crate) mod error;
pub(crate) mod future;
pub(crate) mod layer;
pub(crate) mod service;

pub use error::BreakerCallError;
pub use future::CircuitBreakerFuture;
pub use layer::{CircuitBreakerLayer, FailureFn, FallbackFn, DEFAULT_CALL_TIMEOUT};
pub use service::CircuitBreakerService;
