//! Counters and events per decision, only when the features ask for them: without
//! `metrics` and `tracing` this compiles to nothing, and with them and no recorder or
//! subscriber installed each call is a few loads.
//!
//! Metrics: `portero_requests_total{policy, outcome, source}`, a counter per limit
//! and request; `outcome` is one of [`Outcome`]'s names, `source` who decided
//! (`memory`, `redis`, `cache`, `lease`, `fallback`). `portero_fallback_total{policy}`:
//! checks an outage policy answered. `portero_limit_failures_total{cause}`: requests
//! answered 500 because a limit could not be checked (`key`: the server could not tell
//! the key, no peer address; `store`: the store failed), and shadow limits that could
//! not be checked while the request went on (`shadow_key`, `shadow_store`: a limit that
//! only watches never changes an answer). `portero_shed_total{layer, reason}`, a counter of requests the
//! overload layers answered without the inner service: `load_shed` / `over_capacity`,
//! `deadline_queue` / `queue_full` or `deadline_passed`, `circuit_breaker` /
//! `circuit_open`. `portero_settlements_total{policy, result}`: admitted requests whose
//! limit settled after the response (`charged`, `given_back`, `unchanged`, `cleared`,
//! `failed`). Events (`tracing`, target `portero_http`): INFO per refused or
//! shadow-refused request, with the policy and the outcome; INFO per shed request,
//! with the layer and the reason; WARN per fallback answer and per shadow limit that
//! could not be checked; ERROR per limit that could not be checked, with its cause
//! (which names the fix).

use crate::headers::Policy;
use crate::limit::store::Source;

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
    /// `WhenUnavailable::Allow`).
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

/// What a settlement after the response did to a limit's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Settled {
    /// The real cost was above the estimate: the rest was charged (into debt).
    Charged,
    /// The real cost was below the estimate (or the request did not count): units
    /// went back.
    GivenBack,
    /// The real cost was the estimate.
    Unchanged,
    /// The key was forgotten (a success that clears it).
    Cleared,
    /// The response matched a `count_only` test (a failed login): the request
    /// counts, at its estimate.
    Counted,
    /// The store could not settle: the estimate stands.
    Failed,
}

impl Settled {
    #[cfg_attr(not(any(feature = "metrics", feature = "tracing")), allow(dead_code))]
    fn as_str(self) -> &'static str {
        match self {
            Self::Charged => "charged",
            Self::GivenBack => "given_back",
            Self::Unchanged => "unchanged",
            Self::Cleared => "cleared",
            Self::Counted => "counted",
            Self::Failed => "failed",
        }
    }
}

/// Every counter this crate records, and what it counts (its `# HELP`): one table,
/// read by [`describe_metrics`].
#[cfg(feature = "metrics")]
const COUNTERS: [(&str, &str); 5] = [
    (
        "portero_requests_total",
        "Requests a rate limit decided, by policy, outcome (admitted, rejected, shadow_rejected, unlimited) and source (memory, redis, cache, lease, fallback, unavailable).",
    ),
    (
        "portero_fallback_total",
        "Checks an outage policy answered because the shared store did not answer in time, by policy.",
    ),
    (
        "portero_limit_failures_total",
        "Requests whose rate limit could not be checked, by cause: key or store (answered 500), shadow_key or shadow_store (a shadow limit; let through).",
    ),
    (
        "portero_settlements_total",
        "Admitted requests whose limit settled after the response, by policy and result (charged, given_back, unchanged, cleared, counted, failed).",
    ),
    (
        "portero_shed_total",
        "Requests an overload layer answered 503 without calling the service, by layer and reason.",
    ),
];

/// Describes every counter this crate records to the installed `metrics` recorder
/// (feature `metrics`): their `# HELP` lines in a Prometheus exporter. Done by itself
/// the first time a counter is recorded; call it after installing the recorder to have
/// the descriptions before any request.
#[cfg(feature = "metrics")]
pub fn describe_metrics() {
    for (name, help) in COUNTERS {
        metrics::describe_counter!(name, metrics::Unit::Count, help);
    }
}

/// [`describe_metrics`], once per process, before the first counter is recorded.
#[cfg(feature = "metrics")]
#[inline]
fn described() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(describe_metrics);
}

/// Counts `outcome` under `policy`, decided by `source` (and traces refusals).
#[inline]
pub(crate) fn record(policy: &Policy, outcome: Outcome, source: Source) {
    #[cfg(feature = "metrics")]
    described();
    #[cfg(feature = "metrics")]
    {
        static METADATA: metrics::Metadata<'static> =
            metrics::Metadata::new(module_path!(), metrics::Level::INFO, Some(module_path!()));
        policy.counters.with(
            policy.name_shared(),
            (outcome as usize, outcome.as_str()),
            (source as usize, source.as_str()),
            |key| metrics::with_recorder(|r| r.register_counter(key, &METADATA).increment(1)),
        );
    }
    #[cfg(feature = "tracing")]
    if matches!(outcome, Outcome::Rejected | Outcome::ShadowRejected) {
        tracing::info!(
            policy = policy.name(),
            outcome = outcome.as_str(),
            source = source.as_str(),
            "rate limited"
        );
    }
    let _ = (policy, outcome, source);
}

/// Counts and traces a check an outage policy answered.
#[inline]
pub(crate) fn fallback(policy: &Policy) {
    #[cfg(feature = "metrics")]
    described();
    #[cfg(feature = "metrics")]
    metrics::counter!(
        "portero_fallback_total",
        "policy" => metrics::SharedString::from(policy.shared_name())
    )
    .increment(1);
    #[cfg(feature = "tracing")]
    tracing::warn!(
        policy = policy.name(),
        "rate limit decided by the outage policy: the shared store did not answer in time"
    );
    let _ = policy;
}

/// Counts (and traces) a settlement after the response: `error` when the store
/// could not settle (the estimate stands).
pub(crate) fn settled(policy: &Policy, result: Settled, error: Option<&dyn std::error::Error>) {
    #[cfg(feature = "metrics")]
    described();
    #[cfg(feature = "metrics")]
    metrics::counter!(
        "portero_settlements_total",
        "policy" => metrics::SharedString::from(policy.shared_name()),
        "result" => result.as_str()
    )
    .increment(1);
    #[cfg(feature = "tracing")]
    match error {
        Some(error) => tracing::warn!(
            policy = policy.name(),
            error = %error,
            "a settlement after the response failed; the estimate stands"
        ),
        None => tracing::debug!(policy = policy.name(), result = result.as_str(), "settled"),
    }
    let _ = (policy, result, error);
}

/// Counts and logs a request answered 500 because its limit could not be checked.
pub(crate) fn failed(cause: &'static str, error: &dyn std::error::Error) {
    count_failure(cause);
    said_once(cause, error);
    #[cfg(feature = "tracing")]
    tracing::error!(cause, error = %error, "rate limit could not be checked; answered 500");
}

/// The first failure of each cause, on stderr, whatever the features: a server
/// misconfigured (no peer address recorded, layers in the wrong order) must say so
/// where its operator looks first, not only through a subscriber they may not have.
fn said_once(cause: &'static str, error: &dyn std::error::Error) {
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    static KEY: AtomicBool = AtomicBool::new(false);
    static STORE: AtomicBool = AtomicBool::new(false);
    let said = if cause == "key" { &KEY } else { &STORE };
    if !said.swap(true, Relaxed) {
        eprintln!(
            "portero-http: a rate limit could not be checked ({cause}), answered 500: {error} \
             (said once; every one is counted on portero_limit_failures_total)"
        );
    }
}

/// Counts a shadow limit that could not be checked (its key, its store): the request
/// went on, as it would without the limit (`cause` is `shadow_key` or `shadow_store`
/// on `portero_limit_failures_total`).
#[cold]
pub(crate) fn failed_in_shadow(cause: &'static str, error: &dyn std::error::Error) {
    let cause = match cause {
        "key" => "shadow_key",
        _ => "shadow_store",
    };
    count_failure(cause);
    #[cfg(feature = "tracing")]
    tracing::warn!(cause, error = %error, "a shadow rate limit could not be checked; let through");
    let _ = error;
}

/// One more on `portero_limit_failures_total` for `cause`.
fn count_failure(cause: &'static str) {
    #[cfg(feature = "metrics")]
    described();
    #[cfg(feature = "metrics")]
    metrics::counter!("portero_limit_failures_total", "cause" => cause).increment(1);
    let _ = cause;
}

/// Counts a request an overload layer answered without calling the inner service.
#[inline]
pub(crate) fn shed(layer: &'static str, reason: &'static str) {
    #[cfg(feature = "metrics")]
    described();
    #[cfg(feature = "metrics")]
    metrics::counter!("portero_shed_total", "layer" => layer, "reason" => reason).increment(1);
    #[cfg(feature = "tracing")]
    tracing::info!(layer, reason, "shed");
    let _ = (layer, reason);
}
