//! [`StackedRateLimitLayer`]: several limits per request — per route, per user, per
//! tenant, global — all or none, in one layer: the layer, the limits it holds and the
//! service, each in its own file (the response future is
//! [`RateLimitFuture`](crate::RateLimitFuture), shared with the one-limit layer).

mod layer;
mod limit;
mod service;

pub use layer::{all_routes, StackedRateLimitLayer};
pub use service::StackedRateLimitService;
