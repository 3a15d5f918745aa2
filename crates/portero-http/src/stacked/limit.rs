//! One limit of a stack: a keyed limiter, the policy it advertises, the key it counts
//! requests under, and the routes it applies to.

use std::hash::Hash;
use std::sync::Arc;

use http::Request;
use portero::{Algorithm, Clock, Decision, KeyedError, KeyedLimiter};

use crate::headers::Policy;

/// What a stack needs of each limit (object-safe, so limits of different key and
/// algorithm types stack).
pub(crate) trait RequestLimit<B>: Send + Sync {
    /// Whether this limit applies to `request` (its route).
    fn applies(&self, request: &Request<B>) -> bool;
    /// Takes `cost` units for `request`'s key (requests without a key share one bucket),
    /// returning the decision and a token to refund it with.
    fn acquire(&self, request: &Request<B>, cost: u64) -> (Result<Decision, KeyedError>, Refund);
    /// The policy advertised.
    fn policy(&self) -> &Arc<Policy>;
}

/// How to give back what [`RequestLimit::acquire`] took: the key's fingerprint is not
/// kept, so the refund closure holds what it needs. It returns the key's decision as
/// it stands after the refund (what a refused request must report, not the numbers
/// from before the units went back).
pub(crate) type Refund = Option<Box<dyn FnOnce() -> Option<Decision> + Send>>;

pub(crate) struct KeyedEntry<K, A: Copy, C, F, R> {
    pub(crate) limiter: Arc<KeyedLimiter<K, A, C>>,
    pub(crate) policy: Arc<Policy>,
    pub(crate) key: F,
    pub(crate) route: R,
}

impl<B, K, A, C, F, R> RequestLimit<B> for KeyedEntry<K, A, C, F, R>
where
    K: Hash + Send + Sync + 'static,
    A: Algorithm + Copy + Send + Sync + 'static,
    C: Clock + Send + Sync + 'static,
    F: Fn(&Request<B>) -> Option<K> + Send + Sync,
    R: Fn(&Request<B>) -> bool + Send + Sync,
{
    fn applies(&self, request: &Request<B>) -> bool {
        (self.route)(request)
    }

    fn acquire(&self, request: &Request<B>, cost: u64) -> (Result<Decision, KeyedError>, Refund) {
        let now = self.limiter.clock().now();
        let limiter = self.limiter.clone();
        match (self.key)(request) {
            Some(key) => {
                let d = limiter.check_at(&key, now, cost);
                let refund: Refund = Some(Box::new(move || {
                    limiter.refund_at(&key, now, cost);
                    limiter.peek_at(&key, now, 0).ok()
                }));
                (d, refund)
            }
            // No key: the shared bucket, which a refund cannot name (it stays charged:
            // stricter, never looser).
            None => (limiter.check_anonymous_at(now, cost), None),
        }
    }

    fn policy(&self) -> &Arc<Policy> {
        &self.policy
    }
}
