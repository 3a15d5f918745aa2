//! What the doors hand over to be decided, and what they get back: one request's
//! descriptors, and one status per descriptor. The types are the protocol's (Envoy's
//! `RateLimitRequest` and `RateLimitResponse`) without its encoding.

use std::time::Duration;

use crate::config::shape::Shape;
use crate::config::unit::Unit;

/// A request, as the gRPC and HTTP doors hand it over.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// The domain its descriptors are looked up in.
    pub domain: String,
    /// Its descriptors.
    pub descriptors: Vec<Descriptor>,
}

/// One descriptor of a request.
#[derive(Debug, Clone, Default)]
pub struct Descriptor {
    /// Its (key, value) entries.
    pub entries: Vec<(String, String)>,
    /// A limit the request sets itself, in place of the rule's.
    pub limit: Option<(u32, Unit)>,
    /// The hits it adds (0: only asks).
    pub hits: u64,
}

/// A descriptor's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// Within its limit, or not limited.
    Ok,
    /// Over its limit.
    OverLimit,
}

/// The limit a status reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurrentLimit {
    /// Requests a unit admits.
    pub requests_per_unit: u32,
    /// The unit.
    pub unit: Unit,
    /// The rule's name.
    pub name: String,
    /// How it counts (a request's own limit: the fixed window).
    pub shape: Shape,
}

/// One descriptor's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// Its verdict.
    pub code: Code,
    /// The limit that decided it (`None`: not limited).
    pub limit: Option<CurrentLimit>,
    /// Requests its limit still admits now.
    pub remaining: u32,
    /// Until its count is whole again: the aligned window's end for a fixed window,
    /// the time everything spent takes to come back for the others.
    pub until_reset: Option<Duration>,
    /// Over the limit: until the request's own hits would fit (for a fixed window,
    /// the window's end).
    pub retry_after: Option<Duration>,
}

/// The whole answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// Over the limit if any descriptor is (and no shadow mode overrides it).
    pub code: Code,
    /// One status per descriptor, in the request's order.
    pub statuses: Vec<Status>,
}

/// A request that cannot be decided: nothing was charged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The request is malformed (what is wrong).
    Invalid(String),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Invalid(why) => write!(f, "malformed request: {why}"),
        }
    }
}

impl std::error::Error for Refusal {}

/// The most descriptors one request may carry.
pub const MOST_DESCRIPTORS: usize = 1_000;
/// The most entries one descriptor may carry.
pub const MOST_ENTRIES: usize = 64;
