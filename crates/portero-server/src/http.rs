//! The HTTP door, as envoyproxy/ratelimit serves it: `POST /json` decides a request
//! written as the protobuf's JSON (200 when admitted, 429 when over the limit, 400
//! when malformed), `GET /healthcheck` answers `OK`, and `GET /metrics` the
//! statistics in Prometheus' text format.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::config::unit::Unit;
use crate::decide::{Answer, Code, Descriptor, Refusal, Request};
use crate::gateway::Gateway;

/// The routes, over a shared [`Gateway`].
pub fn router(gateway: Arc<Gateway>) -> Router {
    Router::new()
        .route("/json", post(decide_json))
        .route("/healthcheck", get(|| async { "OK" }))
        .route("/metrics", get(metrics))
        .with_state(gateway)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonRequest {
    #[serde(default)]
    domain: String,
    #[serde(default)]
    descriptors: Vec<JsonDescriptor>,
    #[serde(default, alias = "hitsAddend")]
    hits_addend: u32,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonDescriptor {
    #[serde(default)]
    entries: Vec<JsonEntry>,
    #[serde(default)]
    limit: Option<JsonLimit>,
    #[serde(default, alias = "hitsAddend")]
    hits_addend: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonEntry {
    #[serde(default)]
    key: String,
    #[serde(default)]
    value: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonLimit {
    #[serde(default, alias = "requestsPerUnit")]
    requests_per_unit: u32,
    #[serde(default)]
    unit: String,
}

async fn decide_json(State(gateway): State<Arc<Gateway>>, body: axum::body::Bytes) -> Response {
    let request = match serde_json::from_slice::<JsonRequest>(&body)
        .map_err(|e| e.to_string())
        .and_then(request_of)
    {
        Ok(r) => r,
        Err(why) => {
            gateway.stats().decided(false);
            return (StatusCode::BAD_REQUEST, why).into_response();
        }
    };
    match gateway.decide(&request) {
        Ok(answer) => {
            let status = match answer.code {
                Code::Ok => StatusCode::OK,
                Code::OverLimit => StatusCode::TOO_MANY_REQUESTS,
            };
            (status, Json(answer_json(&answer))).into_response()
        }
        Err(Refusal::Invalid(why)) => (StatusCode::BAD_REQUEST, why).into_response(),
    }
}

fn request_of(r: JsonRequest) -> Result<Request, String> {
    let default_hits = u64::from(r.hits_addend.max(1));
    let descriptors = r
        .descriptors
        .into_iter()
        .map(|d| {
            let hits = d.hits_addend.unwrap_or(default_hits);
            if hits > u64::from(u32::MAX) {
                return Err(format!("hits_addend {hits}: at most {}", u32::MAX));
            }
            let limit = match d.limit {
                Some(l) => Some((
                    l.requests_per_unit,
                    Unit::from_name(&l.unit)
                        .ok_or_else(|| format!("limit override with unknown unit '{}'", l.unit))?,
                )),
                None => None,
            };
            Ok(Descriptor {
                entries: d.entries.into_iter().map(|e| (e.key, e.value)).collect(),
                limit,
                hits,
            })
        })
        .collect::<Result<_, String>>()?;
    Ok(Request {
        domain: r.domain,
        descriptors,
    })
}

fn code_name(c: Code) -> &'static str {
    match c {
        Code::Ok => "OK",
        Code::OverLimit => "OVER_LIMIT",
    }
}

/// The answer as the protobuf's JSON writes it.
fn answer_json(answer: &Answer) -> Value {
    let statuses: Vec<Value> = answer
        .statuses
        .iter()
        .map(|s| {
            let mut v = json!({ "code": code_name(s.code), "limitRemaining": s.remaining });
            if let Some(l) = &s.limit {
                v["currentLimit"] = json!({
                    "name": l.name,
                    "requestsPerUnit": l.requests_per_unit,
                    "unit": l.unit.name(),
                });
            }
            if let Some(d) = s.until_reset {
                v["durationUntilReset"] = json!(format!("{}s", d.as_secs_f64()));
            }
            v
        })
        .collect();
    json!({ "overallCode": code_name(answer.code), "statuses": statuses })
}

async fn metrics(State(gateway): State<Arc<Gateway>>) -> impl IntoResponse {
    (
        [("content-type", "text/plain; version=0.0.4")],
        gateway.stats().render(),
    )
}
