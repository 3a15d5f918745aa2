//! The answers a layer gives by itself, built in one place for every layer and store:
//! 429 for a client over its limit, 503 for a server over its capacity, 413 for a
//! request no limit could admit, 500 for a limit that could not be checked — each
//! with a small JSON body of the same shape.

use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderValue, Response, StatusCode};
use portero::Decision;

use crate::headers::{self, Policy};

/// The body of every 429 this crate answers.
pub const TOO_MANY_REQUESTS_BODY: &str = r#"{"error":"rate limit exceeded"}"#;

/// 429 Too Many Requests for `decision` under `policy`: the `RateLimit` fields,
/// `Retry-After` (whole seconds, rounded up, at least 1), `Cache-Control: no-store`
/// (see [`headers::insert`]) and [`TOO_MANY_REQUESTS_BODY`] as `application/json`.
pub fn too_many_requests<B: From<&'static str>>(
    decision: &Decision,
    policy: &Policy,
) -> Response<B> {
    let mut response = rate_limited();
    headers::insert(response.headers_mut(), decision, policy);
    response
}

/// A 429's status, `Content-Type` and body, without the fields.
pub(crate) fn rate_limited<B: From<&'static str>>() -> Response<B> {
    json(StatusCode::TOO_MANY_REQUESTS, TOO_MANY_REQUESTS_BODY)
}

/// `status` with `body` as `application/json`: what every answer here starts from.
fn json<B: From<&'static str>>(status: StatusCode, body: &'static str) -> Response<B> {
    let mut response = Response::new(B::from(body));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// 429 for several limits: every applied policy's fields as one list each, the
/// `Retry-After` of the one that refused (`items[refused_by]`), and the JSON body.
pub fn too_many_requests_for<B: From<&'static str>>(
    items: &[(Decision, &Policy)],
    refused_by: usize,
) -> Response<B> {
    let mut response = rate_limited();
    headers::insert_all(response.headers_mut(), items, Some(refused_by));
    response
}

/// The body of a 413 for a request that costs more than its limit could ever admit.
pub const TOO_COSTLY_BODY: &str = r#"{"error":"request costs more than the limit allows"}"#;

/// 413 Content Too Large for a request whose cost is above the limit's capacity:
/// waiting would not help, so there is no `Retry-After` (a 429 would invite retries).
pub fn too_costly<B: From<&'static str>>() -> Response<B> {
    json(StatusCode::PAYLOAD_TOO_LARGE, TOO_COSTLY_BODY)
}

/// The body of the 503 of a shed request (the overload layers; the same shape as the
/// 429's).
pub const SERVICE_UNAVAILABLE_BODY: &str = r#"{"error":"service overloaded"}"#;

/// 503 Service Unavailable with `Retry-After: retry_after` (a value from
/// [`headers::retry_after_value`]) and [`SERVICE_UNAVAILABLE_BODY`] as
/// `application/json`, so a client reads every refusal the same way.
pub fn service_unavailable<B: From<&'static str>>(retry_after: &HeaderValue) -> Response<B> {
    let mut response = json(StatusCode::SERVICE_UNAVAILABLE, SERVICE_UNAVAILABLE_BODY);
    response
        .headers_mut()
        .insert(RETRY_AFTER, retry_after.clone());
    response
}

/// The body of the 503 a limit answers when its shared store did not answer and its
/// outage policy refuses without deciding (fail closed): the limit is unavailable,
/// not the service overloaded and not the client over its limit.
pub const LIMIT_UNAVAILABLE_BODY: &str = r#"{"error":"rate limit unavailable"}"#;

/// 503 Service Unavailable with `Retry-After: retry_after` and
/// [`LIMIT_UNAVAILABLE_BODY`] as `application/json`.
pub fn limit_unavailable<B: From<&'static str>>(retry_after: &HeaderValue) -> Response<B> {
    let mut response = json(StatusCode::SERVICE_UNAVAILABLE, LIMIT_UNAVAILABLE_BODY);
    response
        .headers_mut()
        .insert(RETRY_AFTER, retry_after.clone());
    response
}

/// The body of a 500 for a limit that could not decide: the key could not be told
/// (no peer address recorded) or its store failed. Never an admission, never a 429
/// (the client did nothing wrong).
pub const LIMIT_FAILED_BODY: &str = r#"{"error":"rate limit could not be checked"}"#;

/// 500 Internal Server Error with [`LIMIT_FAILED_BODY`] as `application/json`.
pub fn limit_failed<B: From<&'static str>>() -> Response<B> {
    json(StatusCode::INTERNAL_SERVER_ERROR, LIMIT_FAILED_BODY)
}
