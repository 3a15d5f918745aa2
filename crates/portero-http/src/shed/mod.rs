//! [`LoadShedLayer`]: a concurrency limit that answers 503 instead of queueing — the
//! layer, the service it builds, the service's response future, and the admissions
//! that decide (fixed, by priority, by tenant, adaptive), each in its own file.

pub mod admission;
pub(crate) mod future;
pub(crate) mod layer;
pub(crate) mod service;

pub use future::LoadShedFuture;
pub use layer::LoadShedLayer;
pub use service::LoadShedService;
