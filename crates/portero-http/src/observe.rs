//! Counters and events per decision, only when the features ask for them: without
//! `metrics` and `tracing` this compiles to nothing, and with them and no recorder or
//! subscriber installed each call is a few loads.
//!
//! Metrics: `portero_requests_total{policy, outcome}`, a counter; `outcome` is one of
//! [`Outcome`]'s names. `portero_shed_total{layer, reason}`, a counter of requests the
//! overload layers answered without the inner service: `load_shed` / `over_capacity`,
//! `deadline_queue` / `queue_full` or `deadline_passed`, `circuit_breaker` /
//! `circuit_open`. Events (`tracing`, level INFO, target `portero_http`): one per
//! refused or shadow-refused request, with the policy and the outcome; one per shed
//! request, with the layer and the reason.

use crate::headers::Policy;

/// What the layer did with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Checked and admitted.
    Admitted,
    /// Checked and refused (429).
    Rejected,
    /// Refused by the limit but let through (shadow mode).
    ShadowRejected,
    /// Not checked (no key with `WhenNoKey::Allow`, or a full table with
    /// `WhenTableFull::Allow`).
    Unlimited,
}

impl Outcome {
    #[cfg_attr(not(any(feature = "metrics", feature = "tracing")), allow(dead_code))]
    fn as_str(self) -> &'static str {
        match self {
            Self::Admitted => "admitted",
            Self::Rejected => "rejected",
            Self::ShadowRejected => "shadow_rejected",
            Self::Unlimited => "unlimited",
        }
    }
}

/// Counts `outcome` under `policy` (and traces refusals).
#[inline]
pub(crate) fn record(policy: &Policy, outcome: Outcome) {
    #[cfg(feature = "metrics")]
    metrics::counter!(
        "portero_requests_total",
        "policy" => metrics::SharedString::from(policy.shared_name()),
        "outcome" => outcome.as_str()
    )
    .increment(1);
    #[cfg(feature = "tracing")]
    if matches!(outcome, Outcome::Rejected | Outcome::ShadowRejected) {
        tracing::info!(
            policy = policy.name(),
            outcome = outcome.as_str(),
            "rate limited"
        );
    }
    let _ = (policy, outcome);
}

/// Counts a request an overload layer answered without calling the inner service.
#[inline]
pub(crate) fn shed(layer: &'static str, reason: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!("portero_shed_total", "layer" => layer, "reason" => reason).increment(1);
    #[cfg(feature = "tracing")]
    tracing::info!(layer, reason, "shed");
    let _ = (layer, reason);
}
