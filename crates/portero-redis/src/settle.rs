//! Settling an admission at its real cost, learned after the request was served
//! (the tokens a model call used): one script call on the admission's own key.
//!
//! Invariant (each algorithm's rule is in `lua/algorithms.lua`): a settlement moves
//! the key toward a twin that was charged the real cost at the start and never past
//! it in the client's favour — units not used come back only while they are still the
//! admission's (a GCRA key's units still ahead of now, a window's count while that
//! window counts, a log entry while it is in the log), units above the estimate are
//! charged past the limit as debt that later requests wait out (an exact
//! `retry_after`). An admission's key reset since ([`RedisLimiter::reset`]) may give
//! back to the fresh key what the old one held, at most the estimate.

use portero::Decision;

use crate::call::{Mode, Taken};
use crate::limiter::RedisLimiter;
use crate::outcome::RedisCheckError;

/// The most units a settlement charges (beyond it Lua's doubles stop being exact).
const MOST_UNITS: u64 = 1 << 50;

impl RedisLimiter {
    /// Settles what `taken` (an admission by [`check`](Self::check),
    /// [`check_with`](Self::check_with) or [`check_anonymous`](Self::check_anonymous))
    /// took at its real cost `real`, on the admission's own key: units not used go
    /// back while they are still the admission's, units above the estimate are
    /// charged past the limit (the key then waits its debt out). Returns how the key
    /// stands afterwards; `Ok(None)` when Redis did not answer within the timeout (the
    /// estimate stands).
    ///
    /// ```no_run
    /// use portero::Quota;
    /// use portero_redis::{RedisAlgorithm, RedisLimiter};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let tokens = RedisLimiter::connect("redis://127.0.0.1:6379", RedisAlgorithm::gcra(Quota::per_minute(10_000)?)?).await?;
    /// let verdict = tokens.check("key-7", 500).await?; // the estimate
    /// if let Some(taken) = verdict.taken {
    ///     // ... the model call used 1,938 tokens:
    ///     let after = tokens.settle(taken, 1_938).await?;
    ///     # let _ = after;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn settle(
        &self,
        mut taken: Taken,
        real: u64,
    ) -> Result<Option<Decision>, RedisCheckError> {
        let extra = [real.min(MOST_UNITS), taken.mark, taken.at_us];
        let call = taken.call();
        let decided = self
            .run_with_extra(
                core::slice::from_ref(&call),
                Mode::Settle,
                0,
                self.timeout_of(),
                &extra,
            )
            .await?;
        Ok(decided.map(|d| d[0].decision))
    }
}
