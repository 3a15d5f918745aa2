//! The headers an answer asks Envoy to add to its response to the client
//! (`response_headers_to_add`), where the server is asked for them
//! (`--response-headers`):
//!
//! - `envoy`: envoyproxy/ratelimit's three (`LIMIT_RESPONSE_HEADERS_ENABLED`), from
//!   the limited descriptor with the fewest requests remaining: its limit, its
//!   remaining and the seconds until its window ends (rounded up), under the names
//!   envoyproxy/ratelimit uses by default (`RateLimit-Limit`, `RateLimit-Remaining`,
//!   `RateLimit-Reset`) or those its `LIMIT_*_HEADER` variables set;
//! - `ietf`: the IETF `RateLimit-Policy` and `RateLimit` fields, one member per
//!   limited descriptor, and on a refusal `Retry-After`, written by portero-http's
//!   one implementation of those fields;
//! - `both`, or `none` (the default, as envoyproxy/ratelimit's).

use std::time::Duration;

use portero::Decision;
use portero_http::headers::insert_all;
use portero_http::Policy;

use crate::decide::{Answer, Code, Status};

/// Which headers answers carry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeaderStyle {
    /// envoyproxy/ratelimit's three, under these names (limit, remaining, reset).
    pub envoy: Option<[String; 3]>,
    /// The IETF fields.
    pub ietf: bool,
}

impl HeaderStyle {
    /// envoyproxy/ratelimit's default names.
    pub fn envoy_names() -> [String; 3] {
        ["RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"].map(String::from)
    }

    /// The style a command line names (`none`, `envoy`, `ietf`, `both`), with
    /// envoyproxy/ratelimit's header names `names`.
    pub fn from_name(name: &str, names: [String; 3]) -> Option<Self> {
        let (envoy, ietf) = match name {
            "none" => (false, false),
            "envoy" => (true, false),
            "ietf" => (false, true),
            "both" => (true, true),
            _ => return None,
        };
        Some(Self {
            envoy: envoy.then_some(names),
            ietf,
        })
    }

    /// The headers of `answer`, as (name, value) pairs.
    pub fn of(&self, answer: &Answer) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if let Some(names) = &self.envoy {
            envoy_headers(answer, names, &mut out);
        }
        if self.ietf {
            ietf_headers(answer, &mut out);
        }
        out
    }
}

fn envoy_headers(answer: &Answer, names: &[String; 3], out: &mut Vec<(String, String)>) {
    let tightest = answer
        .statuses
        .iter()
        .filter(|s| s.limit.is_some())
        .min_by_key(|s| s.remaining);
    let Some(status) = tightest else { return };
    let Some(limit) = &status.limit else { return };
    // Whole seconds, rounded up as the IETF `t` and `Retry-After` are: from 1 to the
    // unit's length, never a 0 that says "now" while the window still refuses.
    let reset = status
        .until_reset
        .map_or(0, |d| d.as_secs() + u64::from(d.subsec_nanos() > 0));
    out.push((names[0].clone(), limit.requests_per_unit.to_string()));
    out.push((names[1].clone(), status.remaining.to_string()));
    out.push((names[2].clone(), reset.to_string()));
}

fn ietf_headers(answer: &Answer, out: &mut Vec<(String, String)>) {
    let mut items = Vec::new();
    for (i, status) in answer.statuses.iter().enumerate() {
        if let Some(item) = item_of(i, status) {
            items.push(item);
        }
    }
    if items.is_empty() {
        return;
    }
    // Of the refusing descriptors, the one that waits longest: the request fits only
    // once every one of them does.
    let refused_by = items
        .iter()
        .enumerate()
        .filter(|(_, (d, _))| !d.is_allowed())
        .max_by_key(|(_, (d, _))| d.retry_after_nanos())
        .map(|(i, _)| i);
    let pairs: Vec<(Decision, &Policy)> = items.iter().map(|(d, p)| (*d, p)).collect();
    let mut headers = http::HeaderMap::new();
    insert_all(&mut headers, &pairs, refused_by);
    for (name, value) in &headers {
        if let Ok(value) = value.to_str() {
            out.push((name.as_str().to_string(), value.to_string()));
        }
    }
}

/// Descriptor `i`'s decision and policy: named by its rule where that name is a
/// structured-field token, else `d<i>`.
fn item_of(i: usize, status: &Status) -> Option<(Decision, Policy)> {
    let limit = status.limit.as_ref()?;
    let window = limit.unit.seconds();
    let per_unit = u64::from(limit.requests_per_unit);
    let policy = Policy::new(&limit.name, per_unit, window)
        .or_else(|_| Policy::new(&format!("d{i}"), per_unit, window))
        .ok()?;
    let nanos =
        |d: Option<Duration>| d.map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    let until_reset = nanos(status.until_reset);
    let remaining = u64::from(status.remaining);
    // Whole again when the count is (a fixed window: when it ends, if anything was
    // spent in it).
    let reset = if remaining < limit.shape.capacity(limit.requests_per_unit) {
        until_reset
    } else {
        0
    };
    let allowed = status.code == Code::Ok;
    let retry = nanos(status.retry_after.or(status.until_reset));
    let decision = Decision::new(allowed, per_unit, remaining, 1, retry, reset);
    Some((decision, policy))
}
