//! [`StackedRateLimitLayer`]: several limits per request — per route, per user, per
//! tenant, global — all or none, in one layer: the layer, the limits it holds, the
//! service and its future, each in its own file.

mod future;
mod layer;
mod limit;
mod service;

pub use future::StackedFuture;
pub use layer::StackedRateLimitLayer;
pub use service::StackedRateLimitService;
