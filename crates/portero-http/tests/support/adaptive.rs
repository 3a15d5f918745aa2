//! The adaptive concurrency limit, and a handler behind it whose latency a test sets.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use portero::{AdaptiveConcurrency, AdaptiveConfig};
use portero_http::LoadShedLayer;

/// An adaptive limit with the default settings, adjusted every `batch` samples.
pub fn adaptive_limit(batch: u16) -> Arc<AdaptiveConcurrency> {
    Arc::new(
        AdaptiveConcurrency::new(AdaptiveConfig {
            batch,
            ..AdaptiveConfig::default()
        })
        .unwrap(),
    )
}

/// A handler that answers after the milliseconds `delay_ms` holds when a request
/// arrives, behind the adaptive layer on `limit` (refusals say: retry after 1 s).
pub fn delayed_behind(limit: &Arc<AdaptiveConcurrency>, delay_ms: &Arc<AtomicU64>) -> Router {
    let delay_ms = delay_ms.clone();
    Router::new()
        .fallback(move || {
            let ms = delay_ms.load(Ordering::SeqCst);
            async move {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                "done"
            }
        })
        .layer(LoadShedLayer::adaptive(
            limit.clone(),
            Duration::from_secs(1),
        ))
}
