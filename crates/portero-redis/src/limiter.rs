//! [`RedisLimiter`]: connect, check, peek, stack, reset.

use core::fmt;
use core::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use portero::{CheckError, Decision};
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Script, Value};

use crate::algorithm::{redis_keys, user_keys, RedisAlgorithm, RedisQuotaError};
use crate::breakers::Breakers;
use crate::cache::{BlockedKeys, Sent};
use crate::clock::RedisClock;
use crate::outcome::{is_migrating, is_outage, is_stale};
use crate::stack::{StackVerdict, StackedLimit};
use crate::{scripts, RedisCheckError, ServedBy, Verdict, WhenDown};

/// The oldest Redis the script runs on.
const MIN_REDIS_MAJOR: u64 = 5;
const DEFAULT_TIMEOUT: Duration = Duration::from_millis(50);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// A limit whose state lives in Redis, shared by every instance that uses the same
/// key prefix and algorithm. Cloning is cheap and shares the connection.
#[derive(Clone)]
pub struct RedisLimiter {
    link: Link,
    algorithm: RedisAlgorithm,
    // The algorithm's part of every Redis key, written once.
    suffix: Arc<str>,
    script: Arc<Script>,
    prefix: Arc<str>,
    timeout: Duration,
    when_down: WhenDown,
    clock: Arc<RedisClock>,
    errors: Arc<AtomicU64>,
    round_trips: Arc<AtomicU64>,
    cache: Option<Arc<BlockedKeys>>,
    breakers: Option<Arc<Breakers>>,
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

/// One server (reconnecting in the background) or a Cluster (following its slots:
/// `MOVED` and `ASK` are handled by redis-rs's cluster connection).
#[derive(Clone)]
enum Connection {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Single(c) => c.req_packed_command(cmd),
            Self::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Single(c) => c.req_packed_commands(cmd, offset, count),
            Self::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(c) => c.get_db(),
            Self::Cluster(c) => c.get_db(),
        }
    }
}

/// The connection: made at once ([`RedisLimiter::connect`]), or on first use and again
/// after every failed attempt ([`RedisLimiter::connect_lazy`]).
#[derive(Clone)]
struct Link {
    ready: Arc<tokio::sync::OnceCell<Connection>>,
    // How to make it, for a lazy limiter.
    client: Option<redis::Client>,
    // A Cluster runs one script only on keys of one slot, and has a breaker per node.
    cluster: bool,
}

impl Link {
    /// The connection, making it within `budget` if it is not made yet; `None` if it
    /// cannot be had in time (Redis down at start-up: the outage policy answers).
    async fn get(&self, budget: Duration, clock: &RedisClock) -> Option<Connection> {
        if let Some(c) = self.ready.get() {
            return Some(c.clone());
        }
        let client = self.client.clone()?;
        let made = self.ready.get_or_try_init(|| establish(client, clock));
        match tokio::time::timeout(budget, made).await {
            Ok(Ok(c)) => Some(c.clone()),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "portero-redis: cannot connect yet; the outage policy answers");
                None
            }
            Err(_) => None,
        }
    }
}

/// Connects to one server and checks it: Redis 5 or newer, and its clock.
async fn establish(client: redis::Client, clock: &RedisClock) -> Result<Connection, RedisError> {
    // No response timeout on the connection: each check bounds its own wait
    // (`timeout`), so a caller who allows more time gets it.
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(CONNECT_TIMEOUT)
        .set_number_of_retries(1);
    let connection = ConnectionManager::new_with_config(client, config).await?;
    let mut connection = Connection::Single(connection);
    check_server(&mut connection, clock).await?;
    Ok(connection)
}

/// Refuses a server older than Redis 5, and reads its clock once.
async fn check_server(connection: &mut Connection, clock: &RedisClock) -> Result<(), RedisError> {
    let info: String = connection
        .ask_one_node(redis::cmd("INFO").arg("server"))
        .await?;
    check_version(&info)?;
    let sent = clock.local_us();
    let (secs, micros): (u64, u64) = connection.ask_one_node(&redis::cmd("TIME")).await?;
    clock.observe(sent, secs * 1_000_000 + micros);
    Ok(())
}

impl Connection {
    /// A command that concerns no key, on one node (any node of a Cluster).
    async fn ask_one_node<T: redis::FromRedisValue>(&mut self, cmd: &Cmd) -> Result<T, RedisError> {
        match self {
            Self::Single(c) => cmd.query_async(c).await,
            Self::Cluster(c) => {
                let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random);
                redis::from_redis_value(&c.route_command(cmd, route).await?)
            }
        }
    }
}

/// One limit as the script sees it: its algorithm, its two keys, its cost.
pub(crate) struct Call {
    pub(crate) algorithm: RedisAlgorithm,
    pub(crate) keys: [String; 2],
    pub(crate) cost: u64,
    /// Where the user key's text lies in `keys[0]`, for the outage policy (`None`:
    /// the shared no-key bucket).
    pub(crate) user: Option<Range<usize>>,
}

impl Call {
    /// The user key's text (`None`: the shared no-key bucket).
    pub(crate) fn user_key(&self) -> Option<&str> {
        self.keys[0].get(self.user.clone()?)
    }
}

/// What the script decided, per limit: the decision in the limit's own terms, and
/// the units it took.
type Decided = Vec<(Decision, u64)>;

/// What the script is asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Decide every limit, charge all if all admit.
    Check = 0,
    /// Decide, charge nothing.
    Peek = 1,
    /// One limit: take the most units that fit, up to the cost.
    Lease = 2,
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
        self.check_call(call).await
    }

    /// `cost` units from the one bucket that checks **without a key** share (an HTTP
    /// request with no client id): stored under a Redis key that no user key can
    /// name (`prefix{*}:…`, where a user key's is `prefix{length:key}:…`), and while
    /// Redis is away decided by a local fallback's own shared bucket.
    pub async fn check_anonymous(&self, cost: u64) -> Result<Verdict, RedisCheckError> {
        let call = self.anonymous_call(cost)?;
        self.check_call(call).await
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
        Some(Verdict {
            decision: Decision::rejected(call.algorithm.capacity(), 0, wait, wait),
            served_by: ServedBy::Cache,
        })
    }

    /// Checks one prepared call.
    pub(crate) async fn check_call(&self, call: Call) -> Result<Verdict, RedisCheckError> {
        let (cost, algorithm) = (call.cost, &call.algorithm);
        if let Some(verdict) = self.remembered(&call) {
            return Ok(verdict);
        }
        let sent = self.cache_now();
        match self
            .run(std::slice::from_ref(&call), Mode::Check, 0)
            .await?
        {
            Some(decided) => {
                let decision = decided[0].0;
                if !decision.is_allowed() {
                    let retry = decision.retry_after_nanos();
                    self.remember_refusal(&call.keys[0], cost, retry, sent);
                }
                Ok(Verdict {
                    decision,
                    served_by: ServedBy::Redis,
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
        self.peek_call(call).await
    }

    /// [`peek`](Self::peek) for a prepared call.
    pub(crate) async fn peek_call(&self, call: Call) -> Result<Verdict, RedisCheckError> {
        match self.run(std::slice::from_ref(&call), Mode::Peek, 0).await? {
            Some(decided) => Ok(Verdict {
                decision: decided[0].0,
                served_by: ServedBy::Redis,
            }),
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
                decided.into_iter().map(|(d, _)| d).collect(),
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
        let Some(mut connection) = self.link.get(self.timeout, &self.clock).await else {
            return Err(RedisError::from((
                ErrorKind::IoError,
                "Redis not reachable: the key was not reset",
            )));
        };
        let keys = redis_keys(&self.prefix, key, algorithm);
        if let Some(cache) = &self.cache {
            // Before Redis forgets it: a check between the two must not be answered
            // by a refusal that no longer holds.
            cache.forget(&keys[0]);
        }
        let used = if algorithm.uses_second_key() { 2 } else { 1 };
        redis::cmd("DEL")
            .arg(&keys[..used])
            .query_async(&mut connection)
            .await
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
        Ok(decided.expect("a test's Redis answers")[0].0)
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

    /// Runs the script; `None` when Redis did not decide in time (the caller's outage
    /// policy decides).
    pub(crate) async fn run(
        &self,
        calls: &[Call],
        mode: Mode,
        at_us: u64,
    ) -> Result<Option<Decided>, RedisCheckError> {
        self.run_within(calls, mode, at_us, self.timeout).await
    }

    /// [`run`](Self::run) with `budget` instead of the limiter's timeout (a caller
    /// that already spent part of it).
    pub(crate) async fn run_within(
        &self,
        calls: &[Call],
        mode: Mode,
        at_us: u64,
        budget: Duration,
    ) -> Result<Option<Decided>, RedisCheckError> {
        let mut invocation = self.script.prepare_invoke();
        for call in calls {
            invocation.key(&call.keys[0]);
            if call.algorithm.uses_second_key() {
                invocation.key(&call.keys[1]);
            }
        }
        // An open breaker: Redis (on a Cluster, the node of these keys) kept timing
        // out, so the outage policy answers now.
        let mut guard = match &self.breakers {
            Some(breakers) => {
                let key = calls.first().map_or("", |c| c.keys[0].as_str());
                let (breaker, read_map) = breakers.of(key);
                if read_map.is_some() {
                    self.read_slot_map(breakers.clone());
                }
                match breaker.try_call_owned() {
                    Ok(call) => BreakerGuard(Some(call)),
                    Err(_) => return Ok(None),
                }
            }
            None => BreakerGuard(None),
        };
        let started = tokio::time::Instant::now();
        let Some(mut connection) = self.link.get(budget, &self.clock).await else {
            guard.failed();
            return Ok(None); // not connected yet: the outage policy answers
        };
        let budget = budget.saturating_sub(started.elapsed());
        // The deadline on Redis's clock, once the connection is made: a lazy
        // limiter learns that clock while connecting (before, its first check's
        // deadline lay in Redis's past and the outage policy answered it).
        let sent = self.clock.local_us();
        let deadline = if at_us == 0 {
            self.clock.redis_time_in(sent, budget)
        } else {
            0
        };
        invocation.arg(deadline).arg(at_us).arg(mode as u8);
        for call in calls {
            invocation
                .arg(&call.algorithm.script_args()[..])
                .arg(call.cost);
        }
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        // A slot being migrated answers TRYAGAIN (or an ASK the client could not
        // follow) for a moment: ask again, within the same timeout and the same
        // deadline on Redis's clock, rather than answer with the outage policy.
        //
        // A connection that went stale with an old server (Redis was restarted) fails
        // at once, and the connection manager reconnects on that failure: one more
        // try, within the same timeout, is decided by the server that is there now.
        // Once only: a Redis that is really down fails that try at once too.
        let attempts = async {
            let mut pause = Duration::from_millis(2);
            let mut stale = true;
            loop {
                match invocation.invoke_async::<Vec<i64>>(&mut connection).await {
                    Err(e) if is_migrating(&e) => {
                        tokio::time::sleep(pause).await;
                        pause = (pause * 2).min(Duration::from_millis(50));
                    }
                    Err(e) if stale && is_stale(&e) => stale = false,
                    answer => return answer,
                }
            }
        };
        let answer = tokio::time::timeout(budget, attempts).await;
        let reply = match answer {
            Ok(Ok(reply)) => {
                guard.answered();
                reply
            }
            Ok(Err(e)) if !is_outage(&e) => {
                guard.answered();
                return Err(self.error(calls, e));
            }
            // Timed out, or Redis unreachable, loading or failing over.
            _ => {
                guard.failed();
                return Ok(None);
            }
        };
        let number = |i: usize| reply.get(i).map(|&v| u64::try_from(v).unwrap_or(0));
        let (Some(status), Some(now)) = (number(0), number(1)) else {
            return Err(self.error(calls, bad_reply()));
        };
        if at_us == 0 {
            self.clock.observe(sent, now);
        }
        if status == 2 {
            return Ok(None); // too late on Redis's clock: nothing was charged
        }
        let mut decided = Vec::with_capacity(calls.len());
        for (i, call) in calls.iter().enumerate() {
            let field = |j: usize| number(2 + 5 * i + j);
            let (Some(outcome), Some(remaining), Some(retry_us), Some(reset_us), Some(taken)) =
                (field(0), field(1), field(2), field(3), field(4))
            else {
                return Err(self.error(calls, bad_reply()));
            };
            let decision = Decision::new(
                outcome == 1,
                call.algorithm.capacity(),
                remaining,
                1,
                retry_us.saturating_mul(1_000),
                reset_us.saturating_mul(1_000),
            );
            decided.push((decision, taken));
        }
        Ok(Some(decided))
    }

    /// Reads the Cluster's slot map in the background (the caller holds the read
    /// turn of [`Breakers::of`]); without a connection yet, the turn ends unused.
    fn read_slot_map(&self, breakers: Arc<Breakers>) {
        let connection = self.link.ready.get().cloned();
        tokio::spawn(async move {
            let Breakers::PerNode(nodes) = &*breakers else {
                return;
            };
            let answer = match connection {
                Some(mut c) => {
                    let mut slots = redis::cmd("CLUSTER");
                    slots.arg("SLOTS");
                    let ask = c.ask_one_node::<Value>(&slots);
                    tokio::time::timeout(Duration::from_secs(1), ask)
                        .await
                        .unwrap_or_else(|_| {
                            Err(RedisError::from((ErrorKind::IoError, "timed out")))
                        })
                }
                None => Err(RedisError::from((ErrorKind::IoError, "not connected"))),
            };
            nodes.learn(answer);
        });
    }

    fn error(&self, calls: &[Call], e: RedisError) -> RedisCheckError {
        self.errors.fetch_add(1, Ordering::Relaxed);
        let key = calls.first().map_or("", |c| c.keys[0].as_str());
        tracing::error!(key = %key, error = %e, "portero-redis: Redis answered a check with an error");
        RedisCheckError::Redis(e)
    }

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
        let verdict = Verdict {
            decision,
            served_by: ServedBy::Fallback,
        };
        Ok((verdict, admission))
    }

    /// Gives back what this limiter's local fallback took for `call` (the outage
    /// policy admitted it, a later limit of its batch refused), and says how the key
    /// stands; `None` for the policies that take nothing.
    #[cfg(feature = "tower")]
    pub(crate) fn fallback_refund(
        &self,
        call: &Call,
        admission: &portero::Admission,
    ) -> Option<Decision> {
        let WhenDown::Local(local) = &self.when_down else {
            return None;
        };
        let fingerprint = match call.user_key() {
            Some(key) => local.fingerprint_of(key),
            None => local.anonymous_fingerprint(),
        };
        local.refund_fingerprint(fingerprint, admission);
        let now = portero::Clock::now(local.clock()).max(admission.at());
        local.peek_fingerprint_at(fingerprint, now, 0).ok()
    }

    fn fallback_peek(&self, key: &str, cost: u64) -> Result<Verdict, RedisCheckError> {
        if let WhenDown::Local(local) = &self.when_down {
            let now = portero::Clock::now(local.clock());
            return Ok(Verdict {
                decision: local.peek_at(key, now, cost)?,
                served_by: ServedBy::Fallback,
            });
        }
        self.fallback(key, cost, &self.algorithm)
    }
}

/// A breaker call for one script call: a reply (even an error reply) is a success,
/// no answer in time a failure, and a caller's cancellation neither (abandoned, so a
/// client that gives up early cannot keep a hanging Redis's breaker closed).
struct BreakerGuard(Option<portero::BreakerCall<'static, portero::DefaultClock>>);

impl BreakerGuard {
    fn failed(&mut self) {
        if let Some(call) = self.0.take() {
            call.failure();
        }
    }

    fn answered(&mut self) {
        if let Some(call) = self.0.take() {
            call.success();
        }
    }
}

impl Drop for BreakerGuard {
    fn drop(&mut self) {
        if let Some(call) = self.0.take() {
            call.abandon();
        }
    }
}

fn bad_reply() -> RedisError {
    RedisError::from((
        ErrorKind::TypeError,
        "unexpected reply from the limits script",
    ))
}

/// Refuses servers older than Redis 5 (from `INFO server`'s `redis_version`).
fn check_version(info: &str) -> Result<(), RedisError> {
    let version = info
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .map(str::trim)
        .unwrap_or("");
    let major = version
        .split('.')
        .next()
        .and_then(|m| m.parse::<u64>().ok());
    match major {
        Some(m) if m >= MIN_REDIS_MAJOR => Ok(()),
        _ => Err(RedisError::from((
            ErrorKind::ClientError,
            "portero-redis needs Redis 5.0 or newer",
            format!("the server reports version {version:?}"),
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_before_redis_5_are_refused_by_name() {
        let info = |v: &str| format!("# Server\r\nredis_version:{v}\r\nredis_mode:standalone\r\n");
        assert!(check_version(&info("7.0.15")).is_ok());
        assert!(check_version(&info("5.0.0")).is_ok());
        for old in ["4.0.14", "3.2.12", "garbage", ""] {
            let e = check_version(&info(old)).unwrap_err();
            assert!(e.to_string().contains("Redis 5.0 or newer"), "{e}");
        }
        assert!(check_version("no version here").is_err());
    }
}
