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
    hits_addend: Option<Number>,
}

/// A number as the protobuf's JSON may write it: as a number, or (64-bit ones
/// always) as a string of digits.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Number {
    Plain(u64),
    Text(String),
}

impl Number {
    fn value(&self, field: &str) -> Result<u64, String> {
        match self {
            Self::Plain(n) => Ok(*n),
            // Digits only: Rust's parser also reads a leading `+`, which the
            // protobuf's JSON does not write.
            Self::Text(t) if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) => t
                .parse()
                .map_err(|_| format!("{field}: beyond 2^64 - 1: {t:?}")),
            Self::Text(t) => Err(format!("{field}: not a whole number: {t:?}")),
        }
    }
}

/// A unit as the protobuf's JSON may write it: its name, or its number.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum UnitField {
    Name(String),
    Number(i32),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonDescriptor {
    #[serde(default)]
    entries: Vec<JsonEntry>,
    #[serde(default)]
    limit: Option<JsonLimit>,
    #[serde(default, alias = "hitsAddend")]
    hits_addend: Option<Number>,
    #[serde(default, alias = "isNegativeHits")]
    is_negative_hits: bool,
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
    unit: Option<UnitField>,
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
    match gateway.decide(&request).await {
        Ok(answer) => {
            let status = match answer.code {
                Code::Ok => StatusCode::OK,
                Code::OverLimit => StatusCode::TOO_MANY_REQUESTS,
            };
            let headers = gateway.headers_of(&answer);
            (status, Json(answer_json(&answer, &headers))).into_response()
        }
        Err(Refusal::Invalid(why)) => (StatusCode::BAD_REQUEST, why).into_response(),
    }
}

fn request_of(r: JsonRequest) -> Result<Request, String> {
    let request_hits = r.hits_addend.map_or(Ok(0), |n| n.value("hits_addend"))?;
    if request_hits > u64::from(u32::MAX) {
        return Err(format!("hits_addend {request_hits}: at most {}", u32::MAX));
    }
    let default_hits = request_hits.max(1);
    let descriptors = r
        .descriptors
        .into_iter()
        .map(|d| {
            if d.is_negative_hits {
                return Err("negative hits (giving units back) are not supported".to_string());
            }
            let hits = match &d.hits_addend {
                Some(n) => n.value("hits_addend")?,
                None => default_hits,
            };
            if hits > u64::from(u32::MAX) {
                return Err(format!("hits_addend {hits}: at most {}", u32::MAX));
            }
            let limit = match d.limit {
                Some(l) => {
                    let unit = match &l.unit {
                        Some(UnitField::Name(name)) => Unit::from_name(name),
                        Some(UnitField::Number(n)) => Unit::from_proto(*n),
                        None => None,
                    };
                    Some((
                        l.requests_per_unit,
                        unit.ok_or_else(|| {
                            format!("limit override with unknown unit {:?}", l.unit)
                        })?,
                    ))
                }
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
fn answer_json(answer: &Answer, headers: &[(String, String)]) -> Value {
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
    let mut out = json!({ "overallCode": code_name(answer.code), "statuses": statuses });
    if !headers.is_empty() {
        let headers: Vec<Value> = headers
            .iter()
            .map(|(key, value)| json!({ "key": key, "value": value }))
            .collect();
        out["responseHeadersToAdd"] = json!(headers);
    }
    out
}

async fn metrics(State(gateway): State<Arc<Gateway>>) -> impl IntoResponse {
    (
        [("content-type", "text/plain; version=0.0.4")],
        gateway.stats().render(),
    )
}
