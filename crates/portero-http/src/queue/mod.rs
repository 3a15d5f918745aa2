//! [`DeadlineQueueLayer`]: a bounded line with a deadline per request, in front of a
//! fixed number of running requests — the line itself ([`order`]), the slots and the
//! lock around them, the layer and the service, each in its own file.

pub(crate) mod gate;
pub(crate) mod layer;
pub mod order;
pub(crate) mod service;

pub use layer::DeadlineQueueLayer;
pub use order::{DeadlineQueue, Order};
pub use service::{DeadlineQueueFuture, DeadlineQueueService};
