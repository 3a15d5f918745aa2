//! The layer and its configuration.

use std::sync::Arc;
use std::time::Duration;

use http::HeaderValue;
use portero::ConcurrencyLimit;
use tower_layer::Layer;

use super::LoadShedService;
use crate::headers::retry_after_value;

/// At most `C` requests in flight through the inner service; one more is answered
/// 503 Service Unavailable with a `Retry-After` at once.
///
/// A rate limit admits the same rate however slow the server gets; a concurrency
/// limit admits `C / S` requests per second for a service time `S` (Little's law),
/// so when the server slows down it admits less, and the excess is shed in
/// microseconds instead of waiting in a queue until it times out. The permit is held
/// until the inner service's response future completes or is dropped (a cancelled
/// request frees its slot at once); a streamed body is not counted after that.
#[derive(Debug, Clone)]
pub struct LoadShedLayer {
    pub(super) limit: Arc<ConcurrencyLimit>,
    pub(super) retry_after: HeaderValue,
}

impl LoadShedLayer {
    /// Sheds beyond `limit`'s permits, advising clients to come back after
    /// `retry_after` (whole seconds, rounded up, at least 1).
    pub fn new(limit: Arc<ConcurrencyLimit>, retry_after: Duration) -> Self {
        Self {
            limit,
            retry_after: retry_after_value(retry_after),
        }
    }
}

impl<S> Layer<S> for LoadShedLayer {
    type Service = LoadShedService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        LoadShedService {
            inner,
            layer: self.clone(),
        }
    }
}
