//! What answers when Redis cannot: the outage policy ([`WhenDown`]) applied to one
//! check, a local fallback's refund, and a peek.

use portero::{CheckError, Decision};

use crate::algorithm::RedisAlgorithm;
use crate::limiter::RedisLimiter;
use crate::outcome::{RedisCheckError, ServedBy, Verdict, WhenDown};

impl RedisLimiter {
    /// The outage policy's answer for `cost` units of `key`.
    pub(crate) fn fallback(
        &self,
        key: &str,
        cost: u64,
        algorithm: &RedisAlgorithm,
    ) -> Result<Verdict, RedisCheckError> {
        self.fallback_for(Some(key), cost, algorithm)
    }

    /// [`fallback`](Self::fallback), `None` for the shared no-key bucket.
    pub(crate) fn fallback_for(
        &self,
        key: Option<&str>,
        cost: u64,
        algorithm: &RedisAlgorithm,
    ) -> Result<Verdict, RedisCheckError> {
        self.fallback_taking(key, cost, algorithm).map(|(v, _)| v)
    }

    /// [`fallback_for`](Self::fallback_for), and what a local fallback took (for
    /// [`fallback_refund`](Self::fallback_refund)).
    pub(crate) fn fallback_taking(
        &self,
        key: Option<&str>,
        cost: u64,
        algorithm: &RedisAlgorithm,
    ) -> Result<(Verdict, Option<portero::Admission>), RedisCheckError> {
        let capacity = algorithm.capacity();
        let (decision, admission) = match (&self.when_down, key) {
            (WhenDown::FailOpen, _) => (Decision::admitted(capacity, capacity - cost, 0), None),
            (WhenDown::FailClosed, _) => {
                (Decision::deny_for(capacity, portero::DENY_FOR_NANOS), None)
            }
            (WhenDown::Local(local), key) => {
                let fingerprint = match key {
                    Some(key) => local.fingerprint_of(key),
                    None => local.anonymous_fingerprint(),
                };
                let now = portero::Clock::now(local.clock());
                match local.acquire_fingerprint_at(fingerprint, now, cost) {
                    // More than the fallback's own burst, which the shared limit
                    // could admit: refused while Redis is away, not never.
                    Err(portero::KeyedError::Check(CheckError::CostExceedsCapacity {
                        capacity,
                        ..
                    })) => (Decision::deny_for(capacity, portero::DENY_FOR_NANOS), None),
                    other => {
                        let taken = other?;
                        (taken.decision, taken.admission)
                    }
                }
            }
        };
        let verdict = Verdict::new(decision, ServedBy::Fallback);
        Ok((verdict, admission))
    }

    /// Gives back what this limiter's local fallback took for `call` (the outage
    /// policy admitted it, a later limit of its batch refused), and says how the key
    /// stands; `None` for the policies that take nothing.
    #[cfg(feature = "tower")]
    pub(crate) fn fallback_refund(
        &self,
        call: &crate::call::Call,
        admission: portero::Admission,
    ) -> Option<Decision> {
        let WhenDown::Local(local) = &self.when_down else {
            return None;
        };
        let fingerprint = match call.user_key() {
            Some(key) => local.fingerprint_of(key),
            None => local.anonymous_fingerprint(),
        };
        let now = portero::Clock::now(local.clock()).max(admission.at());
        local.refund_fingerprint(fingerprint, admission);
        local.peek_fingerprint_at(fingerprint, now, 0).ok()
    }

    pub(crate) fn fallback_peek(&self, key: &str, cost: u64) -> Result<Verdict, RedisCheckError> {
        if let WhenDown::Local(local) = &self.when_down {
            let now = portero::Clock::now(local.clock());
            return Ok(Verdict::new(
                local.peek_at(key, now, cost)?,
                ServedBy::Fallback,
            ));
        }
        self.fallback(key, cost, &self.algorithm)
    }
}
