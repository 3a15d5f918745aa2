//! Several limits of one request, each its own [`RedisLimiter`] on one connection,
//! decided by one script call, all or none: if one refuses, none is charged and each
//! says how it stands. This is what portero-http's pipeline sends when a layer has
//! several Redis limits ([`Batch`](portero_http::Batch)): one round trip a request,
//! however many limits.
//!
//! Each part keeps its own algorithm, key prefix, blocked-key cache and outage
//! policy; the call travels with the first part's timeout and breaker. When Redis
//! does not answer in time, every part is answered by its own outage policy, all or
//! none: a local fallback that admitted gives its units back when another part's
//! refuses.

use redis::{ErrorKind, RedisError};

use crate::call::{Call, Mode};
use crate::limiter::RedisLimiter;
use crate::outcome::{RedisCheckError, ServedBy, Verdict};

/// One limit's check, ready to be sent with others.
pub(crate) struct Part {
    pub(crate) limiter: RedisLimiter,
    pub(crate) call: Call,
}

impl Part {
    /// `call` in `limiter`, or the answer when it needs no Redis (a refusal the
    /// blocked-key cache remembers).
    // A large error (a verdict can carry a settlement's keys): only a refusal the
    // cache remembers takes it, once per request, with nothing to settle.
    #[allow(clippy::result_large_err)]
    pub(crate) fn new(limiter: &RedisLimiter, call: Call) -> Result<Self, Verdict> {
        if let Some(refused) = limiter.remembered(&call) {
            return Err(refused);
        }
        Ok(Self {
            limiter: limiter.clone(),
            call,
        })
    }
}

/// Decides `parts` in one script call (on the first part's connection): one verdict
/// each, in order, and the calls sent.
pub(crate) async fn check_parts(
    parts: Vec<Part>,
) -> (Vec<Result<Verdict, RedisCheckError>>, Vec<Call>) {
    let Some(leader) = parts.first().map(|p| p.limiter.clone()) else {
        return (Vec::new(), Vec::new());
    };
    let (owners, calls): (Vec<_>, Vec<_>) = parts.into_iter().map(|p| (p.limiter, p.call)).unzip();
    // One Redis key twice (one limiter used twice with one key) would be decided
    // once and charged twice: such a request's parts go one after the other.
    if crate::stack::refuse_repeated_keys(&calls).is_err() {
        // One answer each: after a refusal the rest are only looked at (the
        // pipeline lists them as they stand and charges nothing more).
        let mut verdicts = Vec::with_capacity(calls.len());
        let mut refused = false;
        for (limiter, call) in owners.iter().zip(&calls) {
            let verdict = if refused {
                limiter.peek_call(call).await
            } else {
                limiter.check_call(call).await
            };
            refused |= is_refusal(&verdict);
            verdicts.push(verdict);
        }
        return (verdicts, calls);
    }
    let sent: Vec<_> = owners.iter().map(RedisLimiter::cache_now).collect();
    let verdicts = match leader.run(&calls, Mode::Check, 0).await {
        Ok(Some(decided)) => owners
            .iter()
            .zip(&calls)
            .zip(decided)
            .zip(sent)
            .map(|(((limiter, call), limited), sent)| {
                let decision = limited.decision;
                if !decision.is_allowed() {
                    let retry = decision.retry_after_nanos();
                    limiter.remember_refusal(&call.keys[0], call.cost, retry, sent);
                }
                Ok(Verdict {
                    taken: crate::call::taken_by(call.algorithm, &limited),
                    ..Verdict::new(decision, ServedBy::Redis)
                })
            })
            .collect(),
        Ok(None) => fallbacks(&owners, &calls),
        Err(e) => {
            // The pipeline stops at the first error; the rest only say why.
            let mut verdicts = vec![Err(e)];
            verdicts.extend((1..calls.len()).map(|_| {
                Err(RedisCheckError::Redis(RedisError::from((
                    ErrorKind::ClientError,
                    "the call carrying this limit failed",
                ))))
            }));
            verdicts
        }
    };
    (verdicts, calls)
}

/// Every part answered by its own outage policy, all or none as the call would have
/// been: if one refuses, what the others' local fallbacks took goes back (each then
/// says how it stands). An answer that is no decision (a full fallback table) is not
/// a refusal: the pipeline's `when_unavailable` decides it, and the others stand.
fn fallbacks(owners: &[RedisLimiter], calls: &[Call]) -> Vec<Result<Verdict, RedisCheckError>> {
    let (mut verdicts, taken): (Vec<_>, Vec<_>) = owners
        .iter()
        .zip(calls)
        .map(|(limiter, call)| {
            match limiter.fallback_taking(call.user_key(), call.cost, &call.algorithm) {
                Ok((verdict, admission)) => (Ok(verdict), admission),
                Err(e) => (Err(e), None),
            }
        })
        .unzip();
    if verdicts.iter().any(is_refusal) {
        for (((limiter, call), verdict), admission) in
            owners.iter().zip(calls).zip(&mut verdicts).zip(taken)
        {
            let Some(admission) = admission else { continue };
            if let Some(decision) = limiter.fallback_refund(call, admission) {
                *verdict = Ok(Verdict::new(decision, ServedBy::Fallback));
            }
        }
    }
    verdicts
}

/// A decision that refuses (an error is no decision).
fn is_refusal(verdict: &Result<Verdict, RedisCheckError>) -> bool {
    matches!(verdict, Ok(v) if !v.decision.is_allowed())
}
