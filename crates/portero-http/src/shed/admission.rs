//! What a shedding layer asks before calling the inner service: may this request take
//! a slot? One implementation per kind of limit, so the layer, its service and its
//! future are written once.

use std::sync::Arc;
use std::time::Duration;

// tokio's clock: the same as std's in production, and paused with tokio's test clock.
use tokio::time::Instant;

use http::Request;
use portero::{
    AdaptiveConcurrency, AdaptivePermit, ConcurrencyLimit, OwnedPermit, Priority, PriorityLimit,
};

use crate::fair::{FairPermit, FairShare};

/// Decides, before the inner service runs, whether a request may take a slot.
pub trait Admission<B> {
    /// Held while the request is served; dropped early if the request is cancelled.
    type Permit: Completion;
    /// A slot for `request`, or `None` to answer 503 at once.
    fn admit(&self, request: &Request<B>) -> Option<Self::Permit>;
}

/// A slot held for one request.
pub trait Completion {
    /// The inner service answered (a cancelled request drops the permit instead).
    fn complete(self);
}

impl Completion for OwnedPermit {
    fn complete(self) {}
}

impl Completion for FairPermit {
    fn complete(self) {}
}

/// A fixed concurrency limit: the first `C` in flight, whatever they are.
impl<B> Admission<B> for Arc<ConcurrencyLimit> {
    type Permit = OwnedPermit;

    fn admit(&self, _: &Request<B>) -> Option<OwnedPermit> {
        self.try_acquire_owned().ok()
    }
}

/// Lower priorities refused first: `classify` names each request's class.
#[derive(Debug, Clone)]
pub struct ByPriority<F> {
    pub(super) limit: Arc<PriorityLimit>,
    pub(super) classify: F,
}

impl<B, F: Fn(&Request<B>) -> Priority> Admission<B> for ByPriority<F> {
    type Permit = OwnedPermit;

    fn admit(&self, request: &Request<B>) -> Option<OwnedPermit> {
        self.limit.try_acquire((self.classify)(request)).ok()
    }
}

/// Tenants above their fair share refused first: `tenant` names each request's
/// verified tenant; requests without one count as one tenant and never get the
/// reserve ([`FairShare::try_acquire_anonymous`]).
#[derive(Debug, Clone)]
pub struct ByTenant<F> {
    pub(super) share: Arc<FairShare>,
    pub(super) tenant: F,
}

impl<B, K: std::hash::Hash, F: Fn(&Request<B>) -> Option<K>> Admission<B> for ByTenant<F> {
    type Permit = FairPermit;

    fn admit(&self, request: &Request<B>) -> Option<FairPermit> {
        match (self.tenant)(request) {
            Some(key) => self.share.try_acquire(&key),
            None => self.share.try_acquire_anonymous(),
        }
    }
}

/// A limit that follows the latency it measures.
impl<B> Admission<B> for Arc<AdaptiveConcurrency> {
    type Permit = TimedPermit;

    fn admit(&self, _: &Request<B>) -> Option<TimedPermit> {
        let permit = self.try_acquire_owned().ok()?;
        Some(TimedPermit {
            permit: Some(permit),
            started: Instant::now(),
        })
    }
}

/// An [`AdaptivePermit`] with the time its request started. A request dropped before
/// the inner service answered (its client gave up) is reported as cancelled after the
/// time it ran: a slow sample, so a service slower than its clients' patience still
/// lowers the limit.
#[derive(Debug)]
pub struct TimedPermit {
    permit: Option<AdaptivePermit>,
    started: Instant,
}

impl Completion for TimedPermit {
    fn complete(mut self) {
        let latency: Duration = self.started.elapsed();
        if let Some(permit) = self.permit.take() {
            permit.completed(latency);
        }
    }
}

impl Drop for TimedPermit {
    fn drop(&mut self) {
        if let Some(permit) = self.permit.take() {
            permit.cancelled(self.started.elapsed());
        }
    }
}
