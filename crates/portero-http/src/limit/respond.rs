//! What the pipeline writes: the fields of every applied limit on a forwarded
//! response, and the answer to a refused request (built by [`crate::answer`]).

use http::header::{HeaderName, HeaderValue};
use http::{HeaderMap, Response};

use super::options::OutageAnswer;
use super::procedure::{AppliedList, Procedure, Refusal};
use crate::answer::{limit_failed, limit_unavailable, rate_limited, too_costly};
use crate::headers;
use crate::observe;

/// `RateLimit-Source`: `fallback` on a response an outage policy's fallback decided,
/// `unavailable` on one its shared store could not decide and no fallback did (fail
/// closed).
///
/// ```
/// # let response = http::Response::new(());
/// let fallback = response.headers().get(portero_http::RATELIMIT_SOURCE).is_some_and(|v| v == "fallback");
/// assert!(!fallback); // a shared store decided (or no limit applied)
/// ```
pub const RATELIMIT_SOURCE: HeaderName = HeaderName::from_static("ratelimit-source");

/// Writes the applied limits' fields (appended) and, when `refused_by` names one,
/// its `Retry-After`; the legacy fields if asked; `RateLimit-Source: fallback` if a
/// fallback decided any of them.
pub(crate) fn write_fields<B>(
    plan: &Procedure<B>,
    applied: &AppliedList,
    refused_by: Option<usize>,
    fields: &mut HeaderMap,
) {
    let applied = applied.as_slice();
    if applied.is_empty() {
        return;
    }
    // The refusing limit's numbers for the legacy fields, else the tightest.
    let legacy_of = refused_by.unwrap_or_else(|| {
        (0..applied.len())
            .min_by_key(|&i| applied[i].decision.remaining())
            .unwrap_or(0)
    });
    if let [one] = applied {
        let policy = plan.policy_of(one);
        match refused_by {
            Some(_) => headers::insert(fields, &one.decision, policy),
            None => {
                headers::insert_fields(fields, &one.decision, policy);
            }
        }
    } else {
        let (items, refused) = plan.in_declared_order(applied, refused_by);
        headers::insert_all(fields, &items, refused);
    }
    if plan.legacy {
        let a = &applied[legacy_of];
        // A layer inside may have written them already (a refusal, or a tighter
        // limit): the legacy fields name one limit, so keep the one with fewer left.
        let inner = fields
            .get(headers::X_RATELIMIT_REMAINING)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if inner.is_none_or(|left| a.decision.remaining() < left) {
            headers::insert_legacy(fields, &a.decision, plan.policy_of(a));
        }
    }
    if let Some(a) = applied.iter().find(|a| a.source.is_outage_policy()) {
        fields.insert(
            RATELIMIT_SOURCE,
            HeaderValue::from_static(a.source.as_str()),
        );
    }
}

/// The answer to a request the pipeline refused.
pub(crate) fn refuse<B, ResB>(
    plan: &Procedure<B>,
    applied: &AppliedList,
    why: Refusal,
) -> Response<ResB>
where
    ResB: From<&'static str> + From<String>,
{
    match why {
        Refusal::Limited {
            refused_by,
            outage: true,
        } if plan.outage_answer == OutageAnswer::ServiceUnavailable => {
            let a = &applied.as_slice()[refused_by];
            let wait = headers::retry_after_value(a.decision.retry_after());
            let mut response = limit_unavailable(&wait);
            if a.source.is_outage_policy() {
                let fields = response.headers_mut();
                fields.insert(
                    RATELIMIT_SOURCE,
                    HeaderValue::from_static(a.source.as_str()),
                );
            }
            response
        }
        Refusal::Limited { refused_by, .. } => {
            let mut response = match &plan.refusal {
                Some(refusal) => {
                    let a = &applied.as_slice()[refused_by];
                    refusal(&a.decision, plan.policy_of(a)).map(ResB::from)
                }
                None => rate_limited(),
            };
            write_fields(plan, applied, Some(refused_by), response.headers_mut());
            response
        }
        Refusal::TooCostly => too_costly(),
        Refusal::KeyFailed(e) => {
            observe::failed("key", &e);
            limit_failed()
        }
        Refusal::StoreFailed(e) => {
            observe::failed("store", &e);
            limit_failed()
        }
    }
}
