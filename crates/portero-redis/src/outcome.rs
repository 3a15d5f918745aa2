//! What a check answers: the verdict and who gave it, the outage policy, the errors,
//! and which Redis errors count as an outage.

use core::fmt;
use std::sync::Arc;

use portero::{CheckError, Decision, Gcra, KeyedError, KeyedLimiter};
use redis::{ErrorKind, RedisError};

/// What a check does when Redis does not answer in time (down, unreachable, slow).
#[derive(Debug, Clone)]
pub enum WhenDown {
    /// Admit: availability over protection.
    FailOpen,
    /// Deny, with `Retry-After` of one second: protection over availability.
    FailClosed,
    /// Decide with a limiter in this instance's memory — an approximate limit (give
    /// it the quota divided by the number of instances) for the time Redis is away.
    Local(Arc<KeyedLimiter<str, Gcra>>),
}

/// Who decided a check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServedBy {
    /// The shared state in Redis.
    Redis,
    /// The [`WhenDown`] policy, because Redis did not answer in time.
    Fallback,
    /// The blocked-key cache: Redis refused this key moments ago and its refusal still
    /// holds ([`RedisLimiter::blocked_key_cache`](crate::RedisLimiter::blocked_key_cache)).
    Cache,
    /// Units leased from Redis earlier and spent here ([`LeasedLimiter`](crate::LeasedLimiter)).
    Lease,
}

/// A decision, and who made it (neither `Copy` nor `Clone`: its [`Taken`](crate::call::Taken)
/// settles one admission once).
#[derive(Debug, PartialEq, Eq)]
pub struct Verdict {
    /// The decision (times converted from Redis's microseconds to nanoseconds).
    pub decision: Decision,
    /// Redis, or the outage policy.
    pub served_by: ServedBy,
    /// What an admission by Redis or by a lease took, to settle it later at its real
    /// cost ([`RedisLimiter::settle`](crate::RedisLimiter::settle),
    /// [`LeasedLimiter::settle`](crate::LeasedLimiter::settle)); `None` for anything
    /// else (a refusal, an answer of the outage policy, a stack).
    pub taken: Option<crate::call::Taken>,
}

impl Verdict {
    /// A verdict with nothing to settle.
    pub(crate) fn new(decision: Decision, served_by: ServedBy) -> Self {
        Self {
            decision,
            served_by,
            taken: None,
        }
    }
}

/// Why a check could not be decided.
#[derive(Debug)]
#[non_exhaustive]
pub enum RedisCheckError {
    /// Bad input, found before Redis was asked (a cost above the capacity).
    Check(CheckError),
    /// The [`WhenDown::Local`] fallback's table was full: a new key it could not
    /// track (the layer denies it for a second).
    LocalTableFull {
        /// The local table's key cap.
        max_keys: u64,
    },
    /// Redis answered, with an error: a key holding another type, a script error, a
    /// reply of the wrong shape. Not an outage: the outage policy does not apply.
    Redis(RedisError),
    /// One Redis key twice in one stack (it would be decided once, charged twice).
    RepeatedKey {
        /// The key.
        key: String,
    },
}

impl fmt::Display for RedisCheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Check(e) => e.fmt(f),
            Self::LocalTableFull { max_keys } => write!(
                f,
                "Redis did not answer and the local fallback's table is full ({max_keys} keys)"
            ),
            Self::Redis(e) => write!(f, "Redis answered with an error: {e}"),
            Self::RepeatedKey { key } => {
                write!(f, "the Redis key {key} appears twice in one stack")
            }
        }
    }
}

impl std::error::Error for RedisCheckError {}

impl From<CheckError> for RedisCheckError {
    fn from(e: CheckError) -> Self {
        Self::Check(e)
    }
}

impl From<KeyedError> for RedisCheckError {
    fn from(e: KeyedError) -> Self {
        match e {
            KeyedError::Check(e) => Self::Check(e),
            KeyedError::KeyTableFull { max_keys } => Self::LocalTableFull { max_keys },
            // KeyedError is non-exhaustive: a future variant is still a local refusal.
            _ => Self::LocalTableFull { max_keys: 0 },
        }
    }
}

/// A slot in the middle of a Cluster migration: the same call succeeds shortly.
/// `MOVED` too: while the nodes learn a slot's new owner one by one, two of them can
/// send the client back and forth until its redirections run out (seen once in 12
/// runs of the migration test, as an error answer).
pub(crate) fn is_migrating(e: &RedisError) -> bool {
    matches!(
        e.kind(),
        ErrorKind::TryAgain | ErrorKind::Ask | ErrorKind::Moved
    )
}

/// Whether an error comes from a connection to a server that is gone (the socket
/// dropped or reset): worth one more try on the connection the manager makes again.
/// Not a refused connection: that is a Redis down now, answered by the outage policy
/// at once.
pub(crate) fn is_stale(e: &RedisError) -> bool {
    e.is_connection_dropped() && !e.is_connection_refusal()
}

/// Whether an error means Redis is away (the outage policy decides) rather than an
/// answer (a wrong-type key, a script error: returned as errors).
pub(crate) fn is_outage(e: &RedisError) -> bool {
    e.is_io_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || matches!(
            e.kind(),
            ErrorKind::BusyLoadingError
                | ErrorKind::TryAgain
                | ErrorKind::ClusterDown
                | ErrorKind::MasterDown
                | ErrorKind::ReadOnly
                | ErrorKind::ClusterConnectionNotFound
        )
        // A long script holds the server: it will answer, just not in time.
        || e.code() == Some("BUSY")
}

/// Retries `try_once` until it admits, an outage policy answers, or the next try would
/// come after `max_wait` (counted from the first): between tries it sleeps the
/// refusal's own retry-after (at least a millisecond), so it never polls Redis faster
/// than the limit can admit. The last verdict is returned, admitted or not.
pub(crate) async fn retry_until_admitted<F, Fut>(
    max_wait: std::time::Duration,
    mut try_once: F,
) -> Result<Verdict, RedisCheckError>
where
    F: FnMut() -> Fut,
    Fut: core::future::Future<Output = Result<Verdict, RedisCheckError>>,
{
    let started = tokio::time::Instant::now();
    loop {
        let verdict = try_once().await?;
        let retry = verdict
            .decision
            .retry_after()
            .max(std::time::Duration::from_millis(1));
        if verdict.decision.is_allowed()
            || verdict.served_by == ServedBy::Fallback
            || started.elapsed().saturating_add(retry) > max_wait
        {
            return Ok(verdict);
        }
        tokio::time::sleep(retry).await;
    }
}
