//! The gRPC door: Envoy's `envoy.service.ratelimit.v3.RateLimitService`, translated to
//! and from [`decide`](crate::decide)'s types. A malformed request is answered
//! `INVALID_ARGUMENT` and charges nothing.

use std::sync::Arc;

use envoy_types::pb::envoy::config::core::v3::HeaderValue;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code as PbCode, DescriptorStatus, RateLimit,
};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::{
    RateLimitService, RateLimitServiceServer,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::Duration as PbDuration;

use crate::config::unit::Unit;
use crate::decide::{Answer, Code, Descriptor, Refusal, Request, Status};
use crate::gateway::Gateway;

/// The service, over a shared [`Gateway`].
#[derive(Debug, Clone)]
pub struct Rls(pub Arc<Gateway>);

impl Rls {
    /// The tonic server of this service.
    pub fn server(self) -> RateLimitServiceServer<Self> {
        RateLimitServiceServer::new(self)
    }
}

#[tonic::async_trait]
impl RateLimitService for Rls {
    async fn should_rate_limit(
        &self,
        request: tonic::Request<RateLimitRequest>,
    ) -> Result<tonic::Response<RateLimitResponse>, tonic::Status> {
        let request = match from_proto(request.into_inner()) {
            Ok(r) => r,
            Err(why) => {
                self.0.stats().decided(false);
                return Err(tonic::Status::invalid_argument(why));
            }
        };
        match self.0.decide(&request).await {
            Ok(answer) => {
                let headers = self.0.headers_of(&answer);
                Ok(tonic::Response::new(to_proto(answer, headers)))
            }
            Err(Refusal::Invalid(why)) => Err(tonic::Status::invalid_argument(why)),
        }
    }
}

/// A request as [`decide`](crate::decide) reads it, or why it cannot be.
pub fn from_proto(request: RateLimitRequest) -> Result<Request, String> {
    let default_hits = u64::from(request.hits_addend.max(1));
    let descriptors = request
        .descriptors
        .into_iter()
        .map(|d| descriptor(d, default_hits))
        .collect::<Result<_, _>>()?;
    Ok(Request {
        domain: request.domain,
        descriptors,
    })
}

fn descriptor(d: RateLimitDescriptor, default_hits: u64) -> Result<Descriptor, String> {
    if d.is_negative_hits {
        return Err("negative hits (giving units back) are not supported".into());
    }
    let hits = d.hits_addend.map_or(default_hits, |h| h.value);
    if hits > u64::from(u32::MAX) {
        return Err(format!("hits_addend {hits}: at most {}", u32::MAX));
    }
    let limit = match d.limit {
        Some(l) => Some((
            l.requests_per_unit,
            Unit::from_proto(l.unit)
                .ok_or_else(|| format!("limit override with unknown unit {}", l.unit))?,
        )),
        None => None,
    };
    Ok(Descriptor {
        entries: d.entries.into_iter().map(|e| (e.key, e.value)).collect(),
        limit,
        hits,
    })
}

/// An answer as Envoy reads it, with the `headers` it asks Envoy to add.
pub fn to_proto(answer: Answer, headers: Vec<(String, String)>) -> RateLimitResponse {
    RateLimitResponse {
        overall_code: code(answer.code) as i32,
        statuses: answer.statuses.into_iter().map(status).collect(),
        response_headers_to_add: headers
            .into_iter()
            .map(|(key, value)| HeaderValue {
                key,
                value,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

fn code(c: Code) -> PbCode {
    match c {
        Code::Ok => PbCode::Ok,
        Code::OverLimit => PbCode::OverLimit,
    }
}

fn status(s: Status) -> DescriptorStatus {
    DescriptorStatus {
        code: code(s.code) as i32,
        current_limit: s.limit.map(|l| RateLimit {
            name: l.name,
            requests_per_unit: l.requests_per_unit,
            unit: l.unit.to_proto(),
        }),
        limit_remaining: s.remaining,
        duration_until_reset: s.until_reset.map(|d| PbDuration {
            seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
        }),
        ..Default::default()
    }
}
