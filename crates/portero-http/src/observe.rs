//! Counters and events per decision, only when the features ask for them: without
//! `metrics` and `tracing` this compiles to nothing, and with them and no recorder or
//! subscriber installed each call is a few loads.
//!
//! Metric: `portero_requests_total{policy, outcome}`, a counter; `outcome` is one of
//! [`Outcome`]'s names. Event (`tracing`, level INFO, target `portero_http`): one per
//! refused or shadow-refused request, with the policy and the outcome.

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
