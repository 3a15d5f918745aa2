//! Settling an admission at its real cost, learned after the request was served
//! (the tokens a model call used): one script call on the admission's own key.
//!
//! Invariant (each algorithm's rule is in `lua/algorithms.lua`): a settlement moves
//! the key toward a twin that was charged the real cost at the start and never past
//! it in the client's favour — units not used come back only while they are still the
//! admission's (a GCRA key's units still ahead of now, a window's count while that
//! window counts, a log entry while it is in the log), units above the estimate are
//! charged past the limit as debt that later requests wait out (an exact
//! `retry_after`). A GCRA key keeps, as portero's core does, the total its
//! settlements gave back, which each admission notes: a settlement gives back only
//! what other give-backs since cannot have taken, in any order. A window's opener
//! given back whole while others count in its window is kept (as in the core). An
//! admission whose key was reset ([`RedisLimiter::reset`]) or expired since gives
//! nothing to the key's new life (each life is told apart by the microsecond of
//! Redis's clock it began at).
//!
//! An admission a lease answered ([`LeasedLimiter`]) settles in that lease first (see
//! its bounds); what it owes beyond the lease is a debit: charged in Redis now, past
//! the limit, whatever window or TAT the key is at.

use portero::Decision;

use crate::call::{LeaseTag, Mode, Taken};
use crate::lease::{InLease, LeasedLimiter};
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
    ///
    /// An admission a [`LeasedLimiter`]'s lease answered settles best there
    /// ([`LeasedLimiter::settle`]); here only its units above the estimate are
    /// charged (what it did not use stays charged).
    pub async fn settle(
        &self,
        taken: Taken,
        real: u64,
    ) -> Result<Option<Decision>, RedisCheckError> {
        if let Some(lease) = &taken.lease {
            return self.debit(lease, real.saturating_sub(taken.cost)).await;
        }
        self.settle_on_axis(taken, real, 0).await
    }

    /// The settlement's script call, at `at_us` on the script's axis (0: Redis's time).
    async fn settle_on_axis(
        &self,
        mut taken: Taken,
        real: u64,
        at_us: u64,
    ) -> Result<Option<Decision>, RedisCheckError> {
        let mark = taken.mark;
        let extra = [
            real.min(MOST_UNITS),
            mark.place,
            taken.at_us,
            mark.noted,
            mark.generation,
        ];
        let call = taken.call();
        let decided = self
            .run_with_extra(
                core::slice::from_ref(&call),
                Mode::Settle,
                at_us,
                self.timeout_of(),
                &extra,
            )
            .await?;
        Ok(decided.map(|d| d[0].decision))
    }
}

impl RedisLimiter {
    /// Charges `units` now, past the limit, on the Redis keys `lease` was leased from
    /// (0: only asks how the key stands), in one script call; `Ok(None)` when Redis did
    /// not answer within the timeout.
    pub(crate) async fn debit(
        &self,
        lease: &LeaseTag,
        units: u64,
    ) -> Result<Option<Decision>, RedisCheckError> {
        let call = crate::call::Call {
            algorithm: lease.algorithm,
            keys: lease.keys.clone(),
            cost: 0,
            user: None,
        };
        self.debit_on_axis(call, units, 0).await
    }

    /// The debit's script call for `units` on `call`'s keys, at `at_us` on the script's
    /// axis (0: Redis's time).
    async fn debit_on_axis(
        &self,
        mut call: crate::call::Call,
        units: u64,
        at_us: u64,
    ) -> Result<Option<Decision>, RedisCheckError> {
        // A debit's units are not bounded by the capacity (a settlement's are not).
        call.cost = units.min(MOST_UNITS);
        let decided = self
            .run_within(
                core::slice::from_ref(&call),
                Mode::Debit,
                at_us,
                self.timeout_of(),
            )
            .await?;
        Ok(decided.map(|d| d[0].decision))
    }
}

impl LeasedLimiter {
    /// Settles an admission of [`check`](Self::check) (its [`Verdict::taken`](crate::Verdict::taken))
    /// at its real cost `real`: one a lease answered in that lease (no round trip, unless
    /// it owes more than the lease has left: the rest is charged in Redis past the
    /// limit), one Redis answered by [`RedisLimiter::settle`]. Returns how the key
    /// stands afterwards (for a settlement in the lease, as the lease sees it);
    /// `Ok(None)` when Redis did not answer in time.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use portero::Quota;
    /// use portero_redis::{LeasedLimiter, RedisAlgorithm, RedisLimiter};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let shared = RedisLimiter::connect("redis://127.0.0.1:6379", RedisAlgorithm::gcra(Quota::per_minute(100_000)?)?).await?;
    /// let tokens = LeasedLimiter::new(shared, 5_000, Duration::from_secs(1), 10_000);
    /// let verdict = tokens.check("tenant-7", 500).await?; // the estimate, from a lease
    /// if let Some(taken) = verdict.taken {
    ///     let after = tokens.settle(taken, 120).await?; // 380 back in the lease
    ///     # let _ = after;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn settle(
        &self,
        taken: Taken,
        real: u64,
    ) -> Result<Option<Decision>, RedisCheckError> {
        let Some(lease) = &taken.lease else {
            return self.limiter().settle(taken, real).await;
        };
        match self.settle_in_lease(lease, taken.cost, real) {
            InLease::Settled(left, full_in) => Ok(Some(self.admitted(left, full_in))),
            InLease::Owed(units) => self.limiter().debit(lease, units).await,
        }
    }
}

/// Test support: checks, settlements and debits decided at `now_us` on the script's
/// time axis instead of Redis's `TIME` (see [`RedisLimiter::decide_at`]), so a test
/// can hold a settled key to its twin at chosen instants. Never used by the limiter.
#[cfg(feature = "testing")]
impl RedisLimiter {
    /// [`check`](Self::check) at `now_us`: the decision, and what it took.
    #[doc(hidden)]
    pub async fn check_taken_at(
        &self,
        key: &str,
        cost: u64,
        now_us: u64,
    ) -> Result<(Decision, Option<Taken>), RedisCheckError> {
        let call = self.default_call(key, cost)?;
        let decided = self
            .run(core::slice::from_ref(&call), Mode::Check, now_us.max(1))
            .await?
            .expect("a test's Redis answers");
        let taken = crate::call::taken_by(call.algorithm, &decided[0]).map(|mut t| {
            t.keys = call.keys;
            t
        });
        Ok((decided[0].decision, taken))
    }

    /// [`settle`](Self::settle) at `now_us`.
    #[doc(hidden)]
    pub async fn settle_at(
        &self,
        taken: Taken,
        real: u64,
        now_us: u64,
    ) -> Result<Decision, RedisCheckError> {
        let decided = self.settle_on_axis(taken, real, now_us.max(1)).await?;
        Ok(decided.expect("a test's Redis answers"))
    }

    /// A debit of `units` of `key` at `now_us`.
    #[doc(hidden)]
    pub async fn debit_at(
        &self,
        key: &str,
        units: u64,
        now_us: u64,
    ) -> Result<Decision, RedisCheckError> {
        let call = self.default_call(key, 0)?;
        let decided = self.debit_on_axis(call, units, now_us.max(1)).await?;
        Ok(decided.expect("a test's Redis answers"))
    }
}
