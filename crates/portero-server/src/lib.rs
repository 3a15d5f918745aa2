//! portero as Envoy's rate-limit service.
//!
//! Envoy (and Istio, Envoy Gateway, Gloo, Contour, Emissary) asks an external service
//! over gRPC, for every request, whether its descriptors are over their limits
//! (`envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`). This crate is
//! that service: configured by envoyproxy/ratelimit's YAML files as they are, it
//! decides with portero's keyed limiters, all or none across a request's
//! descriptors: in memory, with a bounded table per rule, or in Redis, shared by every
//! instance, with each rule's answer while Redis is away.
//!
//! - [`config`] reads the files into a tree of rules, refusing a malformed file with
//!   its name and the reason;
//! - one plan per request (what each descriptor is counted against), decided in memory
//!   by [`decide`](mod@decide) or in Redis by [`shared`];
//! - [`gateway`] holds the configuration, its counters and [`stats`], and is what both
//!   doors call; [`headers`] are those an answer asks Envoy to add;
//! - [`rls`] is the gRPC door, [`http`] envoyproxy/ratelimit's HTTP side (`/json`,
//!   `/healthcheck`, `/metrics`).
//!
//! ```
//! use portero_server::config;
//! use portero_server::decide::{Code, Descriptor, Request};
//! use portero_server::gateway::Gateway;
//!
//! let file = "domain: messaging\ndescriptors:\n  - key: to_number\n    rate_limit:\n      unit: day\n      requests_per_unit: 2\n";
//! let tree = config::from_texts(&[("messaging.yaml".into(), file.into())])?;
//! let gateway = Gateway::new(tree, 1_000, false);
//! let one = Request {
//!     domain: "messaging".into(),
//!     descriptors: vec![Descriptor { entries: vec![("to_number".into(), "2061111111".into())], limit: None, hits: 1 }],
//! };
//! let now = 1_800_000_000 * 1_000_000_000;
//! assert_eq!(gateway.decide_at(&one, now)?.code, Code::Ok);
//! assert_eq!(gateway.decide_at(&one, now)?.code, Code::Ok);
//! assert_eq!(gateway.decide_at(&one, now)?.code, Code::OverLimit);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

pub mod config;
pub mod decide;
pub mod gateway;
pub mod headers;
pub mod http;
pub mod limits;
mod plan;
mod request;
pub mod rls;
pub mod shared;
pub mod stats;
