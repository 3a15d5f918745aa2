//! The response fields of a limited service, after the IETF draft
//! "RateLimit header fields for HTTP" (draft-ietf-httpapi-ratelimit-headers).
//!
//! ```text
//! RateLimit-Policy: "per-ip";q=5;w=60     the policy: q units per w seconds
//! RateLimit: "per-ip";r=4;t=12            now: r units left, full again in t seconds
//! Retry-After: 12                          on a 429 only: whole seconds, rounded up
//! Cache-Control: no-store                  on a 429 only: no cache may replay it
//! ```
//!
//! Seconds are always rounded **up**: a client that waits the advertised time is
//! never early. On a rejection `t` is the retry-after (the client may send one more
//! unit after `t` seconds), and it is at least 1.
//!
//! ```
//! use portero::{Quota, RateLimiter, ManualClock};
//! use portero_http::headers::{insert, Policy};
//!
//! let quota = Quota::per_minute(5)?;
//! let limiter = RateLimiter::gcra(quota).with_clock(ManualClock::new());
//! let policy = Policy::for_quota("per-ip", &quota)?;
//! let mut fields = http::HeaderMap::new();
//! insert(&mut fields, &limiter.check(), &policy);
//! assert_eq!(fields["ratelimit-policy"], r#""per-ip";q=5;w=60"#);
//! assert_eq!(fields["ratelimit"], r#""per-ip";r=4;t=12"#);
//! assert!(fields.get("retry-after").is_none());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use core::fmt;
use std::time::Duration;

use http::header::{CACHE_CONTROL, RETRY_AFTER};
use http::{HeaderMap, HeaderName, HeaderValue};
use portero::{Decision, Quota};

use crate::field_value::FieldValue;

/// `RateLimit`.
pub const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
/// `RateLimit-Policy`.
pub const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");

const NANOS_PER_SEC: u64 = 1_000_000_000;

/// The longest wait any field advertises, in seconds: one year (366 days). Longer
/// ones (a limiter whose time went out of range answers "never", `u64::MAX` ns) are
/// sent as this, so every number a client reads is finite and bounded, and a client
/// that adds it to its clock cannot overflow.
pub const MAX_ADVERTISED_SECS: u64 = 366 * 86_400;

/// A named quota policy as the client sees it: `quota` units per `window` seconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    name: std::sync::Arc<str>,
    quota: u64,
    window_secs: u64,
    /// The prebuilt `RateLimit-Policy` value (it never changes).
    field: HeaderValue,
    /// Its counters' keys, built once each (feature `metrics`).
    #[cfg(feature = "metrics")]
    pub(crate) counters: crate::metric_keys::RequestKeys,
}

/// Why a [`Policy`] could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyError {
    /// The name is not a structured-field token (a letter or `*`, then letters,
    /// digits and ``!#$%&'*+-.^_`|~:/``), so it could not be sent safely.
    BadName(String),
    /// A zero window: every quota covers some time.
    ZeroWindow,
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BadName(name) => {
                write!(f, "policy name {name:?} is not a structured-field token")
            }
            Self::ZeroWindow => f.write_str("a policy window must be at least one second"),
        }
    }
}

impl std::error::Error for PolicyError {}

fn is_token(name: &str) -> bool {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '*');
    first_ok && chars.all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~:/".contains(c))
}

impl Policy {
    /// A policy called `name` of `quota` units per `window_secs` seconds.
    pub fn new(name: &str, quota: u64, window_secs: u64) -> Result<Self, PolicyError> {
        if !is_token(name) {
            return Err(PolicyError::BadName(name.to_owned()));
        }
        if window_secs == 0 {
            return Err(PolicyError::ZeroWindow);
        }
        let field = HeaderValue::try_from(format!("\"{name}\";q={quota};w={window_secs}"))
            .expect("a token and two integers are a valid field value");
        Ok(Self {
            name: name.into(),
            quota,
            window_secs,
            field,
            #[cfg(feature = "metrics")]
            counters: Default::default(),
        })
    }

    /// The policy a portero [`Quota`] advertises, agreeing with what the limit admits:
    /// its **burst** per the time the burst refills in (`q = B`, `w = ⌈B·T⌉` seconds,
    /// at least 1). With the default burst (the limit) that is the limit per the
    /// period; `Quota::per_second(1).with_burst(10)` advertises `q=10;w=10` (ten at
    /// once, one a second on average), never `q=1;w=1` beside `r=9`. The rounding up
    /// only ever advertises less than is admitted. (Window algorithms ignore a
    /// quota's burst: give them a quota with the default one, or [`Policy::new`].)
    ///
    /// ```
    /// use portero::Quota;
    /// use portero_http::Policy;
    /// let p = Policy::for_quota("api", &Quota::per_second(1)?.with_burst(10)?)?;
    /// assert_eq!((p.quota(), p.window().as_secs()), (10, 10));
    /// let p = Policy::for_quota("api", &Quota::per_minute(100)?)?;
    /// assert_eq!((p.quota(), p.window().as_secs()), (100, 60));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn for_quota(name: &str, quota: &Quota) -> Result<Self, PolicyError> {
        // `B·T` from the quota as configured, `B·period / limit`, not from the
        // interval rounded up to whole nanoseconds: 3 per 2 s refills in 2 s, not
        // 2,000,000,001 ns (which whole seconds round up to 3).
        let span = (u128::from(quota.burst()) * u128::from(quota.period_nanos()))
            .div_ceil(u128::from(quota.limit()));
        let span = u64::try_from(span).unwrap_or(u64::MAX);
        Self::new(name, quota.burst(), seconds_up(span).max(1))
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The name as a shared string (metric labels take it without copying).
    #[cfg(feature = "metrics")]
    pub(crate) fn shared_name(&self) -> std::sync::Arc<str> {
        self.name.clone()
    }

    /// The name as a shared string, borrowed.
    #[cfg(feature = "metrics")]
    pub(crate) fn name_shared(&self) -> &std::sync::Arc<str> {
        &self.name
    }

    /// Units per window.
    pub fn quota(&self) -> u64 {
        self.quota
    }

    /// The window in seconds.
    pub fn window(&self) -> Duration {
        Duration::from_secs(self.window_secs)
    }
}

/// Nanoseconds as whole seconds, rounded up, at most [`MAX_ADVERTISED_SECS`].
fn seconds_up(nanos: u64) -> u64 {
    nanos.div_ceil(NANOS_PER_SEC).min(MAX_ADVERTISED_SECS)
}

/// The `Retry-After` a rejection advertises: whole seconds, rounded up, at least 1
/// (and at most [`MAX_ADVERTISED_SECS`]).
pub fn retry_after_secs(decision: &Decision) -> u64 {
    seconds_up(decision.retry_after_nanos()).max(1)
}

/// A `Retry-After` value for a wait of `wait`, by the same rule as
/// [`retry_after_secs`].
pub fn retry_after_value(wait: Duration) -> HeaderValue {
    let nanos = u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX);
    FieldValue::integer(seconds_up(nanos).max(1))
}

/// Writes the fields for `decision` under `policy` into `headers`: `RateLimit-Policy`
/// and `RateLimit` always, **added to the list** a layer inside already wrote (each is
/// one list, one member per policy, on one field line, so nested layers show every
/// policy), and on a rejection `Retry-After` and `Cache-Control: no-store`.
pub fn insert(headers: &mut HeaderMap, decision: &Decision, policy: &Policy) {
    let t = insert_fields(headers, decision, policy);
    if !decision.is_allowed() {
        headers.insert(RETRY_AFTER, FieldValue::integer(t));
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
}

/// Writes only `RateLimit-Policy` and `RateLimit` (what a response that was not
/// refused carries, even when its decision was a rejection, as in shadow mode), and
/// returns the `t` it advertised.
pub fn insert_fields(headers: &mut HeaderMap, decision: &Decision, policy: &Policy) -> u64 {
    add_to_list(headers, RATELIMIT_POLICY, policy.field.clone());
    let t = seconds_to_advertise(decision);
    let mut now = FieldValue::new();
    now.member(&policy.name, decision.remaining(), t);
    add_to_list(headers, RATELIMIT, now.value());
    t
}

/// Adds `member` (one member, or a list of them) to the list field `name`: one field
/// line, the members already there first (what a layer inside wrote), then these.
fn add_to_list(headers: &mut HeaderMap, name: HeaderName, member: HeaderValue) {
    // One lookup: the field is absent on almost every response (no layer inside wrote it).
    let mut entry = match headers.entry(name) {
        http::header::Entry::Vacant(vacant) => {
            vacant.insert(member);
            return;
        }
        http::header::Entry::Occupied(entry) => entry,
    };
    let mut joined = Vec::new();
    for line in entry.iter().chain(std::iter::once(&member)) {
        if !joined.is_empty() {
            joined.extend_from_slice(b", ");
        }
        joined.extend_from_slice(line.as_bytes());
    }
    // Joined from valid field values with ", ": a valid field value.
    let value = HeaderValue::from_bytes(&joined).unwrap_or(member);
    entry.insert(value);
}

/// Writes (appends) the fields of several policies that one request passed through,
/// each field as one list in the given order (`RateLimit: "user";r=4;t=12, "tenant";r=90;t=3`),
/// and, when `refused_by` names one of them, that policy's `Retry-After` and
/// `Cache-Control: no-store`.
pub fn insert_all(
    headers: &mut HeaderMap,
    items: &[(Decision, &Policy)],
    refused_by: Option<usize>,
) {
    let (mut policies, mut now) = (FieldValue::new(), FieldValue::new());
    for (i, (decision, policy)) in items.iter().enumerate() {
        if i > 0 {
            policies.push(b", ");
            now.push(b", ");
        }
        policies.push(policy.field.as_bytes());
        now.member(
            &policy.name,
            decision.remaining(),
            seconds_to_advertise(decision),
        );
    }
    add_to_list(headers, RATELIMIT_POLICY, policies.value());
    add_to_list(headers, RATELIMIT, now.value());
    if let Some(&(decision, _)) = refused_by.and_then(|i| items.get(i)) {
        headers.insert(
            RETRY_AFTER,
            FieldValue::integer(retry_after_secs(&decision)),
        );
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
}

/// `X-RateLimit-Limit`.
pub const X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
/// `X-RateLimit-Remaining`.
pub const X_RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
/// `X-RateLimit-Reset`.
pub const X_RATELIMIT_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

/// Writes the legacy fields many clients still read: `X-RateLimit-Limit` (the policy's
/// quota), `X-RateLimit-Remaining`, and `X-RateLimit-Reset` as **delta-seconds** (the
/// same `t` as `RateLimit`: seconds until full again, or on a rejection until the
/// request fits), not a Unix time.
pub fn insert_legacy(headers: &mut HeaderMap, decision: &Decision, policy: &Policy) {
    headers.insert(X_RATELIMIT_LIMIT, FieldValue::integer(policy.quota));
    headers.insert(
        X_RATELIMIT_REMAINING,
        FieldValue::integer(decision.remaining()),
    );
    headers.insert(
        X_RATELIMIT_RESET,
        FieldValue::integer(seconds_to_advertise(decision)),
    );
}

/// `t`: seconds until full again, or on a rejection the retry-after (at least 1).
fn seconds_to_advertise(decision: &Decision) -> u64 {
    if decision.is_allowed() {
        seconds_up(decision.reset_after_nanos())
    } else {
        retry_after_secs(decision)
    }
}

/// One item of a `RateLimit` field as a client reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remaining {
    /// The policy's name.
    pub policy: String,
    /// Units left (`r`).
    pub remaining: u64,
    /// Seconds until the policy is full again, or on a 429 until one more unit fits
    /// (`t`), at most [`MAX_ADVERTISED_SECS`].
    pub reset_secs: u64,
}

/// The most items [`parse_ratelimit`] reads from one field: a server sends one per
/// policy, and a client need not read a hostile list without end.
pub const MAX_FIELD_ITEMS: usize = 16;

/// Reads a `RateLimit` field (`"per-ip";r=4;t=12, "daily";r=90;t=3600`) the way
/// [`insert`] writes it: a list of string items with integer `r` and `t` parameters
/// (other parameters are skipped, as the draft asks). `None` for anything malformed,
/// or more than [`MAX_FIELD_ITEMS`] items; `t` above [`MAX_ADVERTISED_SECS`] is
/// lowered to it, so no value read can overflow a client's clock.
///
/// ```
/// let v = http::HeaderValue::from_static(r#""per-ip";r=4;t=12"#);
/// let items = portero_http::headers::parse_ratelimit(&v).unwrap();
/// assert_eq!((items[0].policy.as_str(), items[0].remaining, items[0].reset_secs), ("per-ip", 4, 12));
/// ```
pub fn parse_ratelimit(value: &HeaderValue) -> Option<Vec<Remaining>> {
    let text = value.to_str().ok()?;
    let mut items = Vec::new();
    for item in text.split(',') {
        if items.len() == MAX_FIELD_ITEMS {
            return None;
        }
        let mut parts = item.trim().split(';');
        let name = parts.next()?.strip_prefix('"')?.strip_suffix('"')?;
        if !is_token(name) {
            return None;
        }
        let (mut r, mut t) = (None, None);
        for param in parts {
            let (key, number) = param.trim().split_once('=')?;
            let slot = match key {
                "r" => &mut r,
                "t" => &mut t,
                _ => continue,
            };
            if number.is_empty() || number.len() > 15 || !number.bytes().all(|b| b.is_ascii_digit())
            {
                return None; // the draft's integers have at most 15 digits
            }
            *slot = Some(number.parse::<u64>().ok()?);
        }
        items.push(Remaining {
            policy: name.to_owned(),
            remaining: r?,
            reset_secs: t?.min(MAX_ADVERTISED_SECS),
        });
    }
    Some(items)
}

#[cfg(test)]
mod tests {
    use super::*;
    use portero::{ManualClock, RateLimiter};

    #[test]
    fn a_quota_whose_interval_rounds_up_keeps_its_window() {
        // 3 per 2 s: T = 666,666,667 ns rounded up, B·T = 2,000,000,001 ns.
        let q = Quota::new(3, Duration::from_secs(2)).unwrap();
        let p = Policy::for_quota("per-client", &q).unwrap();
        assert_eq!((p.quota(), p.window().as_secs()), (3, 2));
        let q = Quota::new(7, Duration::from_secs(3))
            .unwrap()
            .with_burst(2)
            .unwrap();
        // B·period / limit = 6/7 s: one second, rounded up.
        assert_eq!(Policy::for_quota("x", &q).unwrap().window().as_secs(), 1);
    }

    #[test]
    fn names_must_be_tokens() {
        assert!(Policy::new("per-ip", 5, 60).is_ok());
        assert!(Policy::new("*", 5, 60).is_ok());
        for bad in ["", "1abc", "a b", "quo\"te", "semi;colon", "ñ"] {
            assert_eq!(
                Policy::new(bad, 5, 60),
                Err(PolicyError::BadName(bad.to_owned()))
            );
        }
        assert_eq!(Policy::new("a", 5, 0), Err(PolicyError::ZeroWindow));
    }

    #[test]
    fn a_rejection_rounds_retry_after_up_and_forbids_caching() {
        let quota = Quota::per_minute(5).unwrap();
        let clock = ManualClock::new();
        let limiter = RateLimiter::gcra(quota).with_clock(&clock);
        let policy = Policy::for_quota("per-ip", &quota).unwrap();
        for _ in 0..5 {
            assert!(limiter.check().is_allowed());
        }
        clock.advance(800_000_000); // 0.8 s later: the next unit is due in 11.2 s
        let mut h = HeaderMap::new();
        insert(&mut h, &limiter.check(), &policy);
        assert_eq!(h[RETRY_AFTER], "12");
        assert_eq!(h[RATELIMIT], r#""per-ip";r=0;t=12"#);
        assert_eq!(h[CACHE_CONTROL], "no-store");
        // A retry-after of a few nanoseconds is still one whole second.
        clock.advance(11_199_999_999);
        let mut h = HeaderMap::new();
        insert(&mut h, &limiter.check(), &policy);
        assert_eq!(h[RETRY_AFTER], "1");
    }

    #[test]
    fn no_field_advertises_more_than_a_year() {
        let policy = Policy::new("p", 5, 60).unwrap();
        let never = Decision::new(false, 5, 0, 1, u64::MAX, u64::MAX);
        let mut h = HeaderMap::new();
        insert(&mut h, &never, &policy);
        assert_eq!(h[RETRY_AFTER], "31622400");
        assert_eq!(h[RATELIMIT], r#""p";r=0;t=31622400"#);
        let mut h = HeaderMap::new();
        insert(&mut h, &Decision::new(true, 5, 4, 1, 0, u64::MAX), &policy);
        assert_eq!(h[RATELIMIT], r#""p";r=4;t=31622400"#);
    }

    #[test]
    fn sub_second_periods_advertise_one_second() {
        let quota = Quota::from_nanos(3, 250_000_000).unwrap();
        let p = Policy::for_quota("fast", &quota).unwrap();
        assert_eq!(p.window(), Duration::from_secs(1));
        assert_eq!(p.quota(), 3);
    }
}
