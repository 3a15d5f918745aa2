//! [`LoadShedLayer`]: a concurrency limit that answers 503 instead of queueing — the
//! layer, the service it builds and the service's response future, each in its own
//! file.

mod future;
mod layer;
mod service;

pub use future::LoadShedFuture;
pub use layer::LoadShedLayer;
pub use service::LoadShedService;
