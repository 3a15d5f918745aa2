//! [`RateLimitLayer`]: a keyed limit in front of a tower service — the layer, the
//! service it builds and the service's response future, each in its own file.

pub(crate) mod future;
mod layer;
mod service;

pub use future::RateLimitFuture;
pub(crate) use layer::{cost_setter, Charge};
pub use layer::{CostFn, RateLimitLayer, RefusalFn, WhenNoKey, WhenTableFull};
pub use service::RateLimitService;
