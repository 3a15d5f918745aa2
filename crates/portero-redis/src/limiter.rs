//! [`RedisLimiter`]: connect, options, and the public checks (check, peek, stack,
//! reset). One round trip to the script is `round_trip.rs`; what answers when Redis
//! cannot is `fallback.rs`; the connection is `connection.rs`.

use core::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use portero::{CheckError, Decision};
use redis::cluster::ClusterClient;
use redis::{ErrorKind, RedisError, Script};

use crate::algorithm::{redis_keys, user_keys, RedisAlgorithm, RedisQuotaError};
use crate::breakers::Breakers;
use crate::cache::{BlockedKeys, Sent};
use crate::call::{Call, Mode};
use crate::clock::RedisClock;
use crate::connection::{check_server, establish, Connection, Link, CONNECT_TIMEOUT};
use crate::outcome::{RedisCheckError, ServedBy, Verdict, WhenDown};
use crate::scripts;
use crate::stack::{StackVerdict, StackedLimit};

const DEFAULT_TIMEOUT: Duration = Duration::from_millis(50);

/// A limit whose state lives in Redis, shared by every instance that uses the same
/// key prefix and algorithm. Cloning is cheap and shares the connection.
#[derive(Clone)]
pub struct RedisLimiter {
    pub(crate) link: Link,
    pub(crate) algorithm: RedisAlgorithm,
    // The algorithm's part of every Redis key, written once.
    pub(crate) suffix: Arc<str>,
    pub(crate) script: Arc<Script>,
    pub(crate) prefix: Arc<str>,
    pub(crate) timeout: Duration,
    pub(crate) when_down: WhenDown,
    pub(crate) clock: Arc<RedisClock>,
    pub(crate) errors: Arc<AtomicU64>,
    pub(crate) round_trips: Arc<AtomicU64>,
    pub(crate) cache: Option<Arc<BlockedKeys>>,
    pub(crate) breakers: Option<Arc<Breakers>>,
}

impl fmt::Debug for RedisLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisLimiter")
            .field("algorithm", &self.algorithm)
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .field("when_down", &self.when_down)
            .field("breaker", &self.breakers.is_some())
            .finish_non_exhaustive()
    }
}

impl RedisLimiter {
    /// Connects to `url` (e.g. `redis://127.0.0.1:6379`). Fails if Redis cannot be
    /// reached now; afterwards the connection is re-established in the background and
    /// checks that find it down follow [`WhenDown`] (default: [`WhenDown::FailClosed`]).
    /// For a service that must start while Redis is down, see
    /// [`connect_lazy`](Self::connect_lazy).
    pub async fn connect(url: &str, algorithm: RedisAlgorithm) -> Result<Self, RedisError> {
        let clock = RedisClock::new();
        let connection = establish(redis::Client::open(url)?, &clock).await?;
        let link = Link {
            ready: Arc::new(tokio::sync::OnceCell::new_with(Some(connection))),
            client: None,
            cluster: false,
        };
        Ok(Self::with_link(link, clock, algorithm))
    }

    /// Like [`connect`](Self::connect), but returns at once (only a malformed `url` is
    /// an error): the connection is made by the first check that needs it, within that
    /// check's timeout, and tried again by the next check as long as it fails. Until
    /// then every check is answered by the [`WhenDown`] policy, so a service starts
    /// and answers while Redis is down, and shares the limit as soon as it is up.
    ///
    /// ```no_run
    /// use portero::Quota;
    /// use portero_redis::{RedisAlgorithm, RedisLimiter, WhenDown};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = RedisLimiter::connect_lazy("redis://10.0.0.5:6379", RedisAlgorithm::gcra(Quota::per_minute(100)?)?)?
    ///     .when_down(WhenDown::FailOpen);
    /// let verdict = limiter.check("client-42", 1).await?; // Redis down: the policy answers
    /// # let _ = verdict; Ok(()) }
    /// ```
    pub fn connect_lazy(url: &str, algorithm: RedisAlgorithm) -> Result<Self, RedisError> {
        let link = Link {
            ready: Arc::new(tokio::sync::OnceCell::new()),
            client: Some(redis::Client::open(url)?),
            cluster: false,
        };
        Ok(Self::with_link(link, RedisClock::new(), algorithm))
    }

    /// Connects to a Redis Cluster through any of its nodes (`redis://host:port`
    /// each). Each check runs on the node that owns its key's slot; a stack's keys must
    /// share a slot ([`StackedLimit::in_slot_of`]).
    pub async fn connect_cluster(
        nodes: &[&str],
        algorithm: RedisAlgorithm,
    ) -> Result<Self, RedisError> {
        let client = ClusterClient::builder(nodes.iter().copied())
            .connection_timeout(CONNECT_TIMEOUT)
            .build()?;
        let connection = client.get_async_connection().await?;
        Self::with_connection(Connection::Cluster(connection), algorithm).await
    }

    async fn with_connection(
        mut connection: Connection,
        algorithm: RedisAlgorithm,
    ) -> Result<Self, RedisError> {
        let clock = RedisClock::new();
        check_server(&mut connection, &clock).await?;
        let cluster = matches!(connection, Connection::Cluster(_));
        let link = Link {
            ready: Arc::new(tokio::sync::OnceCell::new_with(Some(connection))),
            client: None,
            cluster,
        };
        Ok(Self::with_link(link, clock, algorithm))
    }

    fn with_link(link: Link, clock: RedisClock, algorithm: RedisAlgorithm) -> Self {
        Self {
            link,
            algorithm,
            suffix: Arc::from(algorithm.key_suffix()),
            script: Arc::new(Script::new(scripts::LIMITS)),
            prefix: Arc::from("portero:"),
            timeout: DEFAULT_TIMEOUT,
            when_down: WhenDown::FailClosed,
            clock: Arc::new(clock),
            errors: Arc::new(AtomicU64::new(0)),
            round_trips: Arc::new(AtomicU64::new(0)),
            cache: None,
            breakers: None,
        }
    }

    /// This limiter's connection (and clock, timeout, breaker, prefix, outage
    /// policy and blocked-key cache) for a limit of another `algorithm`: a tenant
    /// limit beside a user limit. Limits that share a connection are decided in one
    /// call when they are in one [`LimitLayer`](portero_http::LimitLayer) (feature
    /// `tower`); that call waits the first limit's timeout and goes through its
    /// breaker. A [`WhenDown::Local`] fallback counts under its own quota: give
    /// this limit one of its own with [`when_down`](Self::when_down).
    ///
    /// ```no_run
    /// use portero::Quota;
    /// use portero_redis::{RedisAlgorithm, RedisLimiter};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let per_user = RedisLimiter::connect("redis://10.0.0.5:6379", RedisAlgorithm::gcra(Quota::per_minute(100)?)?).await?;
    /// let per_tenant = per_user.clone().with_algorithm(RedisAlgorithm::gcra(Quota::per_minute(5_000)?)?);
    /// assert_ne!(per_user.key_for("acme"), per_tenant.key_for("acme")); // apart in Redis
    /// # Ok(()) }
    /// ```
    pub fn with_algorithm(mut self, algorithm: RedisAlgorithm) -> Self {
        self.algorithm = algorithm;
        self.suffix = Arc::from(algorithm.key_suffix());
        self
    }

    /// Starts every key with `prefix` (default `portero:`), e.g. to keep one
    /// service's limits apart from another's. Keys never collide across limiters
    /// whatever the prefixes (see [`key_for`](Self::key_for)), but a prefix may not
    /// contain `{` or `}`.
    pub fn prefix(mut self, prefix: &str) -> Result<Self, RedisQuotaError> {
        if prefix.contains(['{', '}']) {
            return Err(RedisQuotaError::PrefixHasBrace);
        }
        self.prefix = Arc::from(prefix);
        Ok(self)
    }

    /// The Redis key that holds `key`'s state:
    /// `prefix{length:key}:algorithm:quota` (the sliding log adds a second key with
    /// `:n` appended). The user key is length-prefixed, so no user key can reach
    /// into the algorithm or quota part, and a prefix without braces cannot reach
    /// into the user key; the `{…}` hash tag puts all of one user's keys in one
    /// Redis Cluster slot.
    pub fn key_for(&self, key: &str) -> String {
        let [main, _] = redis_keys(&self.prefix, key, &self.algorithm);
        main
    }

    /// How many checks Redis answered with an error ([`RedisCheckError::Redis`]).
    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }

    /// How long a check waits for Redis before the outage policy decides.
    ///
    /// The script is sent with a deadline of `timeout` from now on Redis's clock and
    /// does nothing past it. A request the outage policy answered can still be
    /// charged in Redis only if its script started within the last stretch of the
    /// timeout that its answer needed to travel back, plus the error of the clock
    /// estimate (half the round trip of the answer it came from): a fraction of a
    /// millisecond on one network, never a stalled queue of scripts.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Stops waiting for a Redis that keeps timing out: once `failures_in_a_row`
    /// script calls in a row got no answer in time (a timeout, a refused or dropped
    /// connection, no connection yet), checks skip Redis for `open_for` and the outage
    /// policy answers them at once; then one check probes Redis (waiting at most the
    /// timeout) and its answer closes the breaker or opens it again. Shared by clones.
    ///
    /// Bound: while Redis is away, at most `failures_in_a_row` checks (plus those
    /// already in flight when it trips) wait the full [`timeout`](Self::timeout), and
    /// afterwards one per `open_for`; every other check is answered by the outage
    /// policy without waiting. A check cancelled by its caller counts neither way (a
    /// cancelled probe leaves the breaker half-open until the probe timeout, the
    /// limiter's timeout, then counts as failed). Errors Redis answers with are
    /// answers, not failures.
    ///
    /// On a Cluster ([`connect_cluster`](Self::connect_cluster)) each node has a
    /// breaker of its own, found by the slot of a check's keys: while one primary is
    /// away, its keys' checks stop waiting after `failures_in_a_row` failures, and the
    /// other nodes' keys are still decided by Redis; the slot map is read again (at
    /// most every 100 ms) while a node's breaker is open, so a replica promoted in its
    /// place is used as soon as the Cluster reports it. With Redis's default
    /// `cluster-require-full-coverage yes`, every node refuses every key
    /// (`CLUSTERDOWN`) while some slot has no live primary — for a failover's moment,
    /// or until a dead primary without a replica is back — and those refusals count as
    /// failures on every node's breaker; set it to `no` to keep the live nodes' keys
    /// decided meanwhile.
    pub fn breaker(
        mut self,
        failures_in_a_row: u32,
        open_for: Duration,
    ) -> Result<Self, portero::BreakerError> {
        let probe = self.timeout.max(Duration::from_millis(1));
        let breakers = Breakers::new(self.link.cluster, failures_in_a_row, open_for, probe)?;
        self.breakers = Some(Arc::new(breakers));
        Ok(self)
    }

    /// Whether the outage policy refuses without deciding.
    #[cfg(feature = "tower")]
    pub(crate) fn fails_closed(&self) -> bool {
        matches!(self.when_down, WhenDown::FailClosed)
    }

    /// The outage policy.
    pub fn when_down(mut self, policy: WhenDown) -> Self {
        self.when_down = policy;
        self
    }

    /// Answers keys that Redis has just refused locally until their refusal ends,
    /// without a round trip ([`ServedBy::Cache`]), remembering at most `max_keys`.
    /// Checks of one limiter share it (clones included).
    ///
    /// Bound: the cache only refuses — every admission still comes from Redis — and
    /// it never refuses a request that Redis would admit at that moment, unless
    /// another instance gave units back meanwhile (its reset; this limiter's own
    /// [`reset`](Self::reset) clears the key here first). A refusal lasts from the
    /// request's *send* (Redis decided later), and only costs at least the refused one
    /// are refused (compared exactly below 2^23 units, against a floor rounded up
    /// above).
    pub fn blocked_key_cache(mut self, max_keys: usize) -> Self {
        self.cache = Some(Arc::new(BlockedKeys::new(max_keys)));
        self
    }

    /// The script's SHA1, the name `EVALSHA` calls it by (for `SCRIPT EXISTS` checks,
    /// or to benchmark the script with `redis-benchmark`).
    pub fn script_sha(&self) -> &str {
        self.script.get_hash()
    }

    /// Script calls sent to Redis so far (by this limiter and its clones).
    pub fn round_trips(&self) -> u64 {
        self.round_trips.load(Ordering::Relaxed)
    }

    /// Checks `cost` units for `key`, taking them if admitted (all or nothing).
    ///
    /// A cost above the algorithm's capacity is an error, decided before Redis is
    /// asked. Redis being down is not an error: the [`WhenDown`] policy decides and
    /// the verdict says so.
    pub async fn check(&self, key: &str, cost: u64) -> Result<Verdict, RedisCheckError> {
        self.check_with(key, cost, &self.algorithm).await
    }

    /// [`check`](Self::check) under another quota for this call: per-key tiers (a
    /// free and a paid plan) without a limiter per tier. The quota is part of the
    /// Redis key, so a key that changes tier starts its new quota fresh.
    pub async fn check_with(
        &self,
        key: &str,
        cost: u64,
        algorithm: &RedisAlgorithm,
    ) -> Result<Verdict, RedisCheckError> {
        let call = self.call(key, cost, algorithm)?;
        let verdict = self.check_call(&call).await?;
        Ok(with_keys(verdict, call.keys))
    }

    /// `cost` units from the one bucket that checks **without a key** share (an HTTP
    /// request with no client id): stored under a Redis key that no user key can
    /// name (`prefix{*}:…`, where a user key's is `prefix{length:key}:…`), and while
    /// Redis is away decided by a local fallback's own shared bucket.
    pub async fn check_anonymous(&self, cost: u64) -> Result<Verdict, RedisCheckError> {
        let call = self.anonymous_call(cost)?;
        let verdict = self.check_call(&call).await?;
        Ok(with_keys(verdict, call.keys))
    }

    /// The call for `cost` units of the shared no-key bucket.
    pub(crate) fn anonymous_call(&self, cost: u64) -> Result<Call, RedisCheckError> {
        let algorithm = self.algorithm;
        let capacity = algorithm.capacity();
        if cost > capacity {
            return Err(CheckError::CostExceedsCapacity { cost, capacity }.into());
        }
        Ok(Call {
            algorithm,
            keys: crate::algorithm::anonymous_keys(&self.prefix, &algorithm),
            cost,
            user: None,
        })
    }

    /// The refusal the blocked-key cache remembers for `call`, if any: answered
    /// without asking Redis.
    pub(crate) fn remembered(&self, call: &Call) -> Option<Verdict> {
        let wait = self.cached_refusal(&call.keys[0], call.cost)?;
        Some(Verdict::new(
            Decision::rejected(call.algorithm.capacity(), 0, wait, wait),
            ServedBy::Cache,
        ))
    }

    /// Checks one prepared call.
    pub(crate) async fn check_call(&self, call: &Call) -> Result<Verdict, RedisCheckError> {
        let (cost, algorithm) = (call.cost, &call.algorithm);
        if let Some(verdict) = self.remembered(call) {
            return Ok(verdict);
        }
        let sent = self.cache_now();
        match self.run(std::slice::from_ref(call), Mode::Check, 0).await? {
            Some(decided) => {
                let decision = decided[0].decision;
                if !decision.is_allowed() {
                    let retry = decision.retry_after_nanos();
                    self.remember_refusal(&call.keys[0], cost, retry, sent);
                }
                Ok(Verdict {
                    taken: crate::call::taken_by(call.algorithm, &decided[0]),
                    ..Verdict::new(decision, ServedBy::Redis)
                })
            }
            None => self.fallback_for(call.user_key(), cost, algorithm),
        }
    }

    /// Waits until `cost` units of `key` are admitted, at most `max_wait` in all.
    /// Between tries it sleeps the `retry_after` Redis itself computed (never polling
    /// Redis faster than the limit can admit); each try takes nothing unless admitted,
    /// so a dropped wait takes nothing. The last verdict is returned, admitted or not
    /// (refused: the next try would come after `max_wait`); a cost above the
    /// capacity is an error at once. Answers from the outage policy end the wait too
    /// (`served_by` says so).
    pub async fn until_ready(
        &self,
        key: &str,
        cost: u64,
        max_wait: Duration,
    ) -> Result<Verdict, RedisCheckError> {
        crate::outcome::retry_until_admitted(max_wait, || self.check(key, cost)).await
    }

    /// What [`check`](Self::check) would answer for `cost` units now, taking nothing
    /// (cost 0: how many are left and when the key is full again). When Redis does not
    /// answer in time the outage policy answers, but a local fallback is only asked,
    /// never charged.
    pub async fn peek(&self, key: &str, cost: u64) -> Result<Verdict, RedisCheckError> {
        let call = self.call(key, cost, &self.algorithm)?;
        self.peek_call(&call).await
    }

    /// [`peek`](Self::peek) for a prepared call.
    pub(crate) async fn peek_call(&self, call: &Call) -> Result<Verdict, RedisCheckError> {
        match self.run(std::slice::from_ref(call), Mode::Peek, 0).await? {
            Some(decided) => Ok(Verdict::new(decided[0].decision, ServedBy::Redis)),
            None => match call.user_key() {
                Some(key) => self.fallback_peek(key, call.cost),
                // The no-key bucket's fallback is only asked, as any peek's.
                None => self.fallback_for(None, 0, &call.algorithm),
            },
        }
    }

    /// Checks several limits — per user, per tenant, global, any algorithms — in one
    /// script call, all or none: if any refuses, nothing is charged anywhere. See
    /// [`StackedLimit`] for where the keys live (and what that means in a Cluster).
    pub async fn check_all(
        &self,
        limits: &[StackedLimit<'_>],
    ) -> Result<StackVerdict, RedisCheckError> {
        let calls = limits
            .iter()
            .map(|l| l.call(&self.prefix))
            .collect::<Result<Vec<_>, _>>()?;
        crate::stack::refuse_repeated_keys(&calls)?;
        match self.run(&calls, Mode::Check, 0).await? {
            Some(decided) => Ok(StackVerdict::new(
                decided.into_iter().map(|l| l.decision).collect(),
                ServedBy::Redis,
            )),
            None => {
                let first = limits.first().map(|l| (l.key, l.cost, &l.algorithm));
                let decisions = match first {
                    Some((key, cost, algorithm)) => {
                        let d = self.fallback(key, cost, algorithm)?.decision;
                        vec![d; limits.len()]
                    }
                    None => Vec::new(),
                };
                Ok(StackVerdict::new(decisions, ServedBy::Fallback))
            }
        }
    }

    /// Forgets `key` in Redis: its next request finds a full limit.
    pub async fn reset(&self, key: &str) -> Result<(), RedisError> {
        self.reset_with(key, &self.algorithm).await
    }

    /// [`reset`](Self::reset) under the quota a [`check_with`](Self::check_with) used.
    pub async fn reset_with(
        &self,
        key: &str,
        algorithm: &RedisAlgorithm,
    ) -> Result<(), RedisError> {
        let keys = redis_keys(&self.prefix, key, algorithm);
        self.delete(&keys, algorithm).await
    }

    /// Deletes a key's Redis keys (`keys` as the calls name them).
    pub(crate) async fn delete(
        &self,
        keys: &[String; 2],
        algorithm: &RedisAlgorithm,
    ) -> Result<(), RedisError> {
        let Some(mut connection) = self.link.get(self.timeout, &self.clock).await else {
            return Err(RedisError::from((
                ErrorKind::IoError,
                "Redis not reachable: the key was not reset",
            )));
        };
        if let Some(cache) = &self.cache {
            // Before Redis forgets it: a check between the two must not be answered
            // by a refusal that no longer holds.
            cache.forget(&keys[0]);
        }
        let used = if algorithm.uses_second_key() { 2 } else { 1 };
        let delete = async {
            if algorithm.has_generation() {
                // Dropped, its generation kept a moment (see `scripts::RESET`).
                let reset = Script::new(scripts::RESET);
                reset
                    .key(&keys[0])
                    .invoke_async::<()>(&mut connection)
                    .await
            } else {
                redis::cmd("DEL")
                    .arg(&keys[..used])
                    .query_async(&mut connection)
                    .await
            }
        };
        // Within the limiter's timeout: a Redis that hangs must not hang the caller.
        match tokio::time::timeout(self.timeout, delete).await {
            Ok(answer) => answer,
            Err(_) => Err(RedisError::from((
                ErrorKind::IoError,
                "Redis did not answer in time: the key was not reset",
            ))),
        }
    }

    /// Test support: [`check`](Self::check) or [`peek`](Self::peek) decided at
    /// `now_us` on the script's time axis instead of Redis's `TIME`, so a test can run
    /// the script and portero's in-memory model on one clock. Never used by the
    /// checks above.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub async fn decide_at(
        &self,
        key: &str,
        cost: u64,
        peek: bool,
        now_us: u64,
    ) -> Result<Decision, RedisCheckError> {
        let call = self.call(key, cost, &self.algorithm)?;
        let mode = if peek { Mode::Peek } else { Mode::Check };
        let decided = self.run(&[call], mode, now_us.max(1)).await?;
        Ok(decided.expect("a test's Redis answers")[0].decision)
    }

    /// How long a check may wait for Redis.
    /// Which connection this limiter's calls travel on (equal for its clones), and
    /// whether one call may carry several limits' keys (not in a Cluster, where a
    /// script's keys must share a slot).
    #[cfg(feature = "tower")]
    pub(crate) fn channel(&self) -> (usize, bool) {
        (Arc::as_ptr(&self.link.ready) as usize, !self.link.cluster)
    }

    pub(crate) fn timeout_of(&self) -> Duration {
        self.timeout
    }

    /// The limiter's own algorithm.
    pub(crate) fn algorithm(&self) -> &RedisAlgorithm {
        &self.algorithm
    }

    /// The limiter's own algorithm's capacity.
    pub(crate) fn capacity(&self) -> u64 {
        self.algorithm.capacity()
    }

    /// A call of `cost` units of `key` under the limiter's own algorithm.
    pub(crate) fn default_call(&self, key: &str, cost: u64) -> Result<Call, RedisCheckError> {
        self.call(key, cost, &self.algorithm)
    }

    /// How long the blocked-key cache still refuses `cost` units of a Redis key.
    pub(crate) fn cached_refusal(&self, redis_key: &str, cost: u64) -> Option<u64> {
        self.cache.as_deref()?.refused_for(redis_key, cost)
    }

    /// What the blocked-key cache (if any) needs to know of a send: read just before.
    pub(crate) fn cache_now(&self) -> Option<Sent> {
        self.cache.as_deref().map(BlockedKeys::sent)
    }

    /// Tells the blocked-key cache (if any) that Redis refused `cost` units, in
    /// answer to a request sent at `sent` ([`cache_now`](Self::cache_now)).
    pub(crate) fn remember_refusal(
        &self,
        redis_key: &str,
        cost: u64,
        retry_after_ns: u64,
        sent: Option<Sent>,
    ) {
        if let (Some(cache), Some(sent)) = (&self.cache, sent) {
            cache.block(redis_key, cost, retry_after_ns, sent);
        }
    }

    pub(crate) fn call(
        &self,
        key: &str,
        cost: u64,
        algorithm: &RedisAlgorithm,
    ) -> Result<Call, RedisCheckError> {
        if *algorithm == self.algorithm {
            return self.call_writing(|out| out.push_str(key), cost);
        }
        let capacity = algorithm.capacity();
        if cost > capacity {
            return Err(CheckError::CostExceedsCapacity { cost, capacity }.into());
        }
        let suffix = algorithm.key_suffix();
        let (keys, user) = user_keys(&self.prefix, &suffix, algorithm, |out| out.push_str(key));
        Ok(Call {
            algorithm: *algorithm,
            keys,
            cost,
            user: Some(user),
        })
    }

    /// A call of `cost` units under the limiter's own algorithm for the user key
    /// `write` writes, straight into the Redis key (no text of its own).
    pub(crate) fn call_writing(
        &self,
        write: impl FnOnce(&mut String),
        cost: u64,
    ) -> Result<Call, RedisCheckError> {
        let algorithm = self.algorithm;
        let capacity = algorithm.capacity();
        if cost > capacity {
            return Err(CheckError::CostExceedsCapacity { cost, capacity }.into());
        }
        let (keys, user) = user_keys(&self.prefix, &self.suffix, &algorithm, write);
        Ok(Call {
            algorithm,
            keys,
            cost,
            user: Some(user),
        })
    }
}

/// `verdict` with its admission's keys: those of the call it was checked by.
fn with_keys(mut verdict: Verdict, keys: [String; 2]) -> Verdict {
    if let Some(taken) = verdict.taken.as_mut() {
        taken.keys = keys;
    }
    verdict
}
