//! [`LimitLayer`]: the one rate-limit pipeline, for every store — key → every
//! applicable limit (all or none, with refunds) → one decision → one answer. The
//! layer and its options, the service, the future, the limits and the store trait,
//! each in its own file; the decision procedure is `plan.rs` (limits that travel in
//! one call: `batching.rs`), the response writing `respond.rs`.

pub(crate) mod after;
pub(crate) mod awaiting;
pub(crate) mod batching;
pub(crate) mod entry;
pub(crate) mod future;
pub(crate) mod in_flight;
pub(crate) mod layer;
pub(crate) mod log_store;
pub(crate) mod options;
pub(crate) mod penalty;
pub(crate) mod plans;
pub(crate) mod procedure;
pub(crate) mod respond;
pub(crate) mod service;
pub(crate) mod settle;
pub(crate) mod store;
pub(crate) mod store_key;

pub use after::ResponseHead;
pub use entry::{AllRoutes, Limit, NoRoutes, Route};
pub use future::LimitFuture;
pub use in_flight::{InFlight, NoSlots, IN_FLIGHT_RETRY_NANOS};
pub use layer::LimitLayer;
pub use options::{CostFn, OutageAnswer, RefusalFn, RequestHead, WhenNoKey, WhenUnavailable};
pub use penalty::{Penalty, PenaltyError};
pub use plans::{Plans, WhichPlan};
pub use respond::RATELIMIT_SOURCE;
pub use service::LimitService;
pub use settle::Usage;
pub use store::{
    Batch, BatchPending, Checked, Checking, Held, Pending, Prepare, Prepared, Source, Store,
    StoreError, Ticket,
};
pub use store_key::StoreKey;
