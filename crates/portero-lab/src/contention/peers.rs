//! The peers that are not the same kind of thing as a GCRA, each held to what its own
//! rule promises in the audit run:
//!
//! - Cloudflare's `pingora-limits` `Rate` is an **estimator**: it counts each key's
//!   events in the current interval in a count-min sketch (a count can read high when
//!   keys share slots, never low), and a service refuses once the count passes its
//!   limit. Used that way here: a check observes one event and is admitted while the
//!   count is at most `limit`. Its intervals restart whenever one is found over, so
//!   they are at least `W` long: from its creation, at most `1 + ⌊elapsed / W⌋` of them
//!   have begun, each admitting at most `limit` per key.
//! - Kuadrant's `limitador` (in memory) is a **limiter built for a network service**
//!   (Envoy's rate-limit service): a limit has a namespace, conditions and variables
//!   evaluated per request (CEL), counted in windows of whole seconds from a key's
//!   first hit — the same bound as above, with `W` in seconds.
//!
//! Both get a window several times the audit run (so one window's `limit` is what a
//! key may admit in the run) and the enforcing quota's burst as their limit, and
//! 10,000 keys drawn uniformly, as portero's and governor's keyed subjects.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use limitador::limit::{Context, Limit, Namespace};
use pingora_limits::rate::Rate;
use portero::Quota;

/// A window of `quota.burst()` units `windows` times the span the quota was made for
/// (`burst / rate`): what a windowed peer is given for the audit.
fn window_of(quota: &Quota, windows: u32) -> Duration {
    let span = Duration::from_nanos(quota.interval_nanos().saturating_mul(quota.burst()));
    // At most a day: a window longer than any run tests nothing more.
    span.checked_mul(windows)
        .unwrap_or(Duration::MAX)
        .clamp(Duration::from_millis(1), Duration::from_secs(86_400))
}

/// `limit × (1 + ⌊since creation / window⌋)`: the most one key may admit.
fn windowed_allowance(limit: u64, created: Instant, window: Duration) -> u64 {
    let begun = created.elapsed().as_nanos() / window.as_nanos().max(1);
    limit.saturating_mul(1 + u64::try_from(begun).unwrap_or(u64::MAX))
}

/// `pingora-limits`' `Rate` as a keyed limit.
pub struct PingoraKeyed {
    rate: Rate,
    limit: isize,
    window: Duration,
    created: Instant,
    keys: Vec<Vec<u64>>,
    distinct: u64,
    quota: Quota,
}

impl PingoraKeyed {
    /// `quota.burst()` per window (see the module; at least a second), each thread
    /// over its own key stream; a sketch of 4 × 65,536 counters (the default 4 × 1,024 would have
    /// ten of the 10,000 keys share each counter).
    pub fn new(quota: Quota, keys: Vec<Vec<u64>>, distinct: u64) -> Self {
        // At least a second: pingora-limits 0.9's `Rate` panics when two threads
        // start a new interval within its first second (`now - 1000` in
        // `maybe_reset` underflows), so no interval may end before then.
        let window = window_of(&quota, 4).max(Duration::from_secs(1));
        Self {
            rate: Rate::new_with_estimator_config(window, 4, 1 << 16),
            limit: isize::try_from(quota.burst()).unwrap_or(isize::MAX),
            window,
            created: Instant::now(),
            keys,
            distinct,
            quota,
        }
    }
}

/// `limitador`'s in-memory limiter, one limit per key (the variable `k`).
pub struct LimitadorKeyed {
    limiter: limitador::RateLimiter,
    namespace: Namespace,
    limit: u64,
    window: Duration,
    created: Instant,
    keys: Vec<Vec<u64>>,
    distinct: u64,
    quota: Quota,
}

impl LimitadorKeyed {
    /// `quota.burst()` per window of whole seconds (at least one), each thread over
    /// its own key stream, room for every key's counter.
    pub fn new(quota: Quota, keys: Vec<Vec<u64>>, distinct: u64) -> Self {
        let window = Duration::from_secs(window_of(&quota, 4).as_secs_f64().ceil().max(1.0) as u64);
        let limiter = limitador::RateLimiter::new(distinct.max(1) * 2);
        let k = "k".try_into().expect("a variable");
        let limit = Limit::new("study", quota.burst(), window.as_secs(), vec![], vec![k]);
        limiter.add_limit(limit);
        Self {
            limiter,
            namespace: "study".into(),
            limit: quota.burst(),
            window,
            created: Instant::now(),
            keys,
            distinct,
            quota,
        }
    }
}

// Each held to its limit per window begun (see the module).
super::checker::keyed_checker! {
    PingoraKeyed: |s, k| s.rate.observe(&k, 1) <= s.limit,
        allowance: |s| windowed_allowance(s.limit as u64, s.created, s.window);
    LimitadorKeyed: |s, k| {
        // As a service hands it a request's values: a context per check.
        let ctx: Context = HashMap::from([("k".to_owned(), k.to_string())]).into();
        s.limiter
            .check_rate_limited_and_update(&s.namespace, &ctx, 1)
            .is_ok_and(|r| !r.limited)
    }, allowance: |s| windowed_allowance(s.limit, s.created, s.window);
}
