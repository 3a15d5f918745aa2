//! The overload side: limits on work in flight rather than on a rate, and a breaker
//! for calls to a dependency that fails.
//!
//! - [`ConcurrencyLimit`]: at most `N` requests in flight, one atomic word.
//! - [`PriorityLimit`]: in-flight slots shared by priority classes, lower classes
//!   refused first.
//! - [`AdaptiveConcurrency`]: the in-flight limit found from measured latency.
//! - [`CircuitBreaker`]: stops calling a failing dependency for a while, then probes.
//!
//! Each state is one word updated by compare-and-swap, like the rate limiters'; this
//! layer stands only on the foundations (the word, the clock, the decision), and the
//! HTTP crate's shedding and breaker layers stand on it.

#[cfg(feature = "alloc")]
pub(crate) mod adaptive;
pub(crate) mod breaker;
pub(crate) mod concurrency;
#[cfg(feature = "alloc")]
pub(crate) mod priority;

#[cfg(feature = "alloc")]
pub use adaptive::{AdaptiveConcurrency, AdaptiveConfig, AdaptiveConfigError, AdaptivePermit};
pub use breaker::{BreakerCall, BreakerError, BreakerOpen, CircuitBreaker, Trip, MAX_RATE_WINDOW};
#[cfg(feature = "alloc")]
pub use concurrency::OwnedPermit;
pub use concurrency::{ConcurrencyLimit, Permit};
#[cfg(feature = "alloc")]
pub use priority::{Priority, PriorityError, PriorityLimit, MAX_CLASSES};
