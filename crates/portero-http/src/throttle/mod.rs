//! [`ThrottleLayer`]: the calling side's limit — calls to a dependency that charges
//! per call (an SMS provider, a partner API with a hard quota) wait their turn instead
//! of being refused. The layer, the service and the error, each in its own file.

pub(crate) mod error;
pub(crate) mod layer;
pub(crate) mod service;

pub use error::ThrottleError;
pub use layer::{CallCost, OnePerCall, ThrottleLayer};
pub use service::{ThrottleFuture, ThrottleService};
