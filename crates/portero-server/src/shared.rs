//! The counters in Redis, shared by every instance that names the same Redis: each
//! rule's counters as its algorithm's script ([`Shape::in_redis`]: aligned windows
//! unless the rule names another), a request's counted
//! descriptors checked all or none in one script call
//! ([`RedisLimiter::check_all`]), so a second instance sees every count the first
//! made.
//!
//! A rule with a lease ([`Lease`]) is spent from this instance's lease of its counter
//! (`portero_redis::LeasedLimiter`: a round trip per batch); the request's other
//! counters are then checked in one script call, and when any refuses, the units
//! the leases gave are given back to them. A leased counter's status reports what
//! its lease holds.
//!
//! While Redis does not answer within the timeout (or answers with an error), each
//! rule answers by its [`Outage`] policy (`rate_limit.portero.when_down`, else the
//! server's): open rules admit, closed rules refuse, local rules count in this
//! instance's memory ([`decide`](mod@crate::decide)). The first check after Redis is back
//! is decided by Redis again.
//!
//! Keys: `prefix{length:r<length:identity><values>}:<algorithm and its limit>` (e.g.
//! `…:fixed-window:aligned:<limit>:<µs>us`) for a rule, with `o` and the descriptor's
//! entries for a limit a request sets, so two rules, a rule and an override, or one
//! rule before and after its limit or algorithm changed never share a key. Each key
//! expires when nothing in it counts any more.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use portero::Decision;
use portero_redis::{
    LeasedLimiter, RedisAlgorithm, RedisCheckError, RedisLimiter, ServedBy, StackedLimit, Taken,
};

use crate::config::lease::Lease;
use crate::config::outage::Outage;
#[cfg(doc)]
use crate::config::shape::Shape;
use crate::config::tree::Tree;
use crate::decide::{self, Answer, Code, CurrentLimit, Refusal, Request, Standing, Status};
use crate::limits::Limits;
use crate::plan::{Counted, Plan, Source, Target};
use crate::stats::Stats;

/// Redis, and what a rule without its own policy answers while Redis is away.
#[derive(Debug, Clone)]
pub struct Shared {
    limiter: RedisLimiter,
    when_down: Outage,
    /// A Redis Cluster: one script runs on the keys of one slot only.
    cluster: bool,
    /// This instance's leases, one limiter for each algorithm and lease the rules
    /// name (its keys name the rule): as many as the configurations had.
    leases: Arc<Mutex<HashMap<(RedisAlgorithm, Lease), LeasedLimiter>>>,
}

/// The most counters one leased limiter holds a lease for at once (beyond, each
/// request asks Redis).
pub const MOST_LEASED_KEYS: usize = 10_000;

impl Shared {
    /// Redis at `url` (connected by the first check that needs it, so the server
    /// starts while Redis is down), keys under `prefix`, each check waiting at most
    /// `timeout` before the outage policies answer.
    pub fn new(
        url: &str,
        prefix: &str,
        timeout: Duration,
        when_down: Outage,
    ) -> Result<Self, String> {
        let limiter = RedisLimiter::connect_lazy(url, any_quota()?)
            .map_err(|e| format!("Redis at {url}: {e}"))?;
        Self::of(limiter, prefix, timeout, when_down, false)
    }

    /// The store of `limiter`, its keys under `prefix`, waiting at most `timeout`.
    fn of(
        limiter: RedisLimiter,
        prefix: &str,
        timeout: Duration,
        when_down: Outage,
        cluster: bool,
    ) -> Result<Self, String> {
        let limiter = limiter
            .prefix(prefix)
            .map_err(|e| e.to_string())?
            .timeout(timeout);
        Ok(Self {
            limiter,
            when_down,
            cluster,
            leases: Arc::default(),
        })
    }

    /// Script calls sent to Redis so far (checks, leases, give-backs).
    pub fn round_trips(&self) -> u64 {
        self.limiter.round_trips()
    }

    /// The leased limiter of `algorithm` and `lease`.
    fn leased(&self, algorithm: RedisAlgorithm, lease: Lease) -> LeasedLimiter {
        let mut leases = self.leases.lock().unwrap_or_else(|e| e.into_inner());
        leases
            .entry((algorithm, lease))
            .or_insert_with(|| {
                let limiter = self.limiter.clone().with_algorithm(algorithm);
                LeasedLimiter::new(limiter, lease.batch, lease.lasts, MOST_LEASED_KEYS)
            })
            .clone()
    }

    /// Every counter of `stacked` decided, all or none: those with a lease
    /// (`leases[i]`) from it, then the others in one script call ([`check_scripted`]);
    /// when one refuses, what the leases gave is given back to them. `None`: Redis did
    /// not decide — nothing is left charged that could be given back.
    ///
    /// [`check_scripted`]: Self::check_scripted
    async fn check_all(
        &self,
        stacked: &[StackedLimit<'_>],
        leases: &[Option<Lease>],
        stats: &Stats,
    ) -> Result<Option<Vec<Decision>>, Refusal> {
        if leases.iter().all(Option::is_none) {
            return self.check_scripted(stacked, stats).await;
        }
        let mut decisions: Vec<Option<Decision>> = vec![None; stacked.len()];
        let mut taken: Vec<(usize, LeasedLimiter, Taken)> = Vec::new();
        let mut refused = false;
        for (i, (limit, lease)) in stacked.iter().zip(leases).enumerate() {
            // A counter only read (no units) is read from Redis below: a lease
            // would borrow a batch for nothing.
            let Some(lease) = lease.filter(|_| limit.cost > 0) else {
                continue;
            };
            if refused {
                break;
            }
            let leased = self.leased(limit.algorithm, lease);
            match leased.check(limit.key, limit.cost).await {
                Ok(v) if v.served_by != ServedBy::Fallback => {
                    refused = !v.decision.is_allowed();
                    decisions[i] = Some(v.decision);
                    if let Some(t) = v.taken {
                        taken.push((i, leased, t));
                    }
                }
                Ok(_) | Err(RedisCheckError::Redis(_) | RedisCheckError::LocalTableFull { .. }) => {
                    stats.redis_unavailable();
                    give_back_leased(taken, &mut decisions).await;
                    return Ok(None);
                }
                Err(e) => {
                    give_back_leased(taken, &mut decisions).await;
                    return Err(Refusal::Invalid(e.to_string()));
                }
            }
        }
        // The others in one call: only read (no units) once a lease refused.
        let others: Vec<usize> = (0..stacked.len())
            .filter(|&i| leases[i].is_none() || stacked[i].cost == 0)
            .collect();
        if !others.is_empty() {
            let asked: Vec<StackedLimit<'_>> = others
                .iter()
                .map(|&i| {
                    let l = &stacked[i];
                    StackedLimit::new(l.algorithm, l.key, if refused { 0 } else { l.cost })
                })
                .collect();
            match self.check_scripted(&asked, stats).await {
                Ok(Some(answers)) => {
                    refused |= !answers.iter().all(Decision::is_allowed);
                    for (&i, d) in others.iter().zip(answers) {
                        decisions[i] = Some(d);
                    }
                }
                undecided => {
                    give_back_leased(taken, &mut decisions).await;
                    return undecided;
                }
            }
        }
        if refused {
            give_back_leased(taken, &mut decisions).await;
        }
        // Leased counters never asked (a lease before them refused): how they stand.
        let mut all = Vec::with_capacity(stacked.len());
        for (limit, decision) in stacked.iter().zip(decisions) {
            let decision = match decision {
                Some(d) => d,
                None => {
                    self.limiter
                        .check_with(limit.key, 0, &limit.algorithm)
                        .await
                        .map_err(|e| Refusal::Invalid(e.to_string()))?
                        .decision
                }
            };
            all.push(decision);
        }
        Ok(Some(all))
    }

    /// A Redis Cluster through any of its `nodes` (`redis://host:port` each): each
    /// counter's key lives in its own slot, so a request's counters are checked one
    /// call each and, when one refuses, the others' units are given back (by
    /// portero's refund rule, settling each admission at 0) — all or none, as on one
    /// server, at one round trip a counter. Fails if no node answers now.
    pub async fn cluster(
        nodes: &[&str],
        prefix: &str,
        timeout: Duration,
        when_down: Outage,
    ) -> Result<Self, String> {
        let limiter = RedisLimiter::connect_cluster(nodes, any_quota()?)
            .await
            .map_err(|e| format!("Redis Cluster at {nodes:?}: {e}"))?;
        Self::of(limiter, prefix, timeout, when_down, true)
    }

    /// Every counter of `stacked` decided, all or none: in one script call, or on a
    /// Cluster one call each with the admitted ones given back when one refuses.
    /// `None`: Redis did not decide (away, too slow, erring) — nothing is left
    /// charged that could be given back.
    async fn check_scripted(
        &self,
        stacked: &[StackedLimit<'_>],
        stats: &Stats,
    ) -> Result<Option<Vec<portero::Decision>>, Refusal> {
        if !self.cluster || stacked.len() < 2 {
            return match self.limiter.check_all(stacked).await {
                Ok(v) if v.served_by == ServedBy::Redis => Ok(Some(v.decisions)),
                Ok(_) | Err(RedisCheckError::Redis(_) | RedisCheckError::LocalTableFull { .. }) => {
                    stats.redis_unavailable();
                    Ok(None)
                }
                Err(e) => Err(Refusal::Invalid(e.to_string())),
            };
        }
        let mut decisions = Vec::with_capacity(stacked.len());
        let mut taken = Vec::new();
        let mut decided = true;
        for limit in stacked {
            match self
                .limiter
                .check_with(limit.key, limit.cost, &limit.algorithm)
                .await
            {
                Ok(v) if v.served_by == ServedBy::Redis => {
                    let refused = !v.decision.is_allowed();
                    decisions.push(v.decision);
                    if let Some(t) = v.taken {
                        taken.push((decisions.len() - 1, t));
                    }
                    if refused {
                        break;
                    }
                }
                Ok(_) | Err(RedisCheckError::Redis(_) | RedisCheckError::LocalTableFull { .. }) => {
                    stats.redis_unavailable();
                    decided = false;
                    break;
                }
                Err(e) => {
                    self.give_back(taken, &mut decisions).await;
                    return Err(Refusal::Invalid(e.to_string()));
                }
            }
        }
        let all =
            decided && decisions.len() == stacked.len() && decisions.iter().all(|d| d.is_allowed());
        if !all {
            self.give_back(taken, &mut decisions).await;
        }
        if !decided {
            return Ok(None);
        }
        // Those never asked (after the refusal) are read, for their standing (a check
        // of no units takes nothing).
        for limit in &stacked[decisions.len()..] {
            let read = self
                .limiter
                .check_with(limit.key, 0, &limit.algorithm)
                .await;
            match read {
                Ok(v) => decisions.push(v.decision),
                Err(e) => return Err(Refusal::Invalid(e.to_string())),
            }
        }
        Ok(Some(decisions))
    }

    /// Gives back what `taken` admitted (each settled at 0), each decision then how
    /// its key stands.
    async fn give_back(
        &self,
        taken: Vec<(usize, portero_redis::Taken)>,
        decisions: &mut [portero::Decision],
    ) {
        for (i, t) in taken {
            if let Ok(Some(after)) = self.limiter.settle(t, 0).await {
                decisions[i] = after;
            }
        }
    }
}

/// Gives back to its lease what each of `taken` admitted (settled at 0), each
/// decision then how its lease stands.
async fn give_back_leased(
    taken: Vec<(usize, LeasedLimiter, Taken)>,
    decisions: &mut [Option<Decision>],
) {
    for (i, leased, t) in taken {
        if let Ok(Some(after)) = leased.settle(t, 0).await {
            decisions[i] = Some(after);
        }
    }
}

/// The limiter's own quota, never used: every check names its own rule's algorithm.
fn any_quota() -> Result<RedisAlgorithm, String> {
    RedisAlgorithm::aligned_window(1, Duration::from_secs(1)).map_err(|e| e.to_string())
}

/// One counter of the stack: its Redis key, its algorithm, what it is asked for.
struct Priced {
    key: String,
    algorithm: RedisAlgorithm,
    cost: u64,
    lease: Option<Lease>,
}

/// Decides `request`, planned as `plan` in `tree`, in Redis; by the outage policies
/// (with `limits` for the local ones) when Redis is away.
#[allow(clippy::too_many_arguments)] // the one decision, and everything it reads
pub(crate) async fn decide_shared(
    shared: &Shared,
    tree: &Tree,
    limits: &Limits,
    stats: &Stats,
    request: &Request,
    plan: Plan,
    now: u64,
    shadow: bool,
) -> Result<Answer, Refusal> {
    // Descriptors on one counter are one limit of the stack at their summed cost.
    let mut counters: Vec<Priced> = Vec::new();
    let mut counter_of = vec![usize::MAX; plan.targets.len()];
    for (i, (target, d)) in plan.targets.iter().zip(&request.descriptors).enumerate() {
        let Target::Counted(c) = target else { continue };
        if c.shadow {
            continue;
        }
        let key = redis_key(tree, c);
        counter_of[i] = match counters.iter().position(|p| p.key == key) {
            Some(at) => {
                counters[at].cost = counters[at].cost.saturating_add(d.hits);
                at
            }
            None => {
                counters.push(Priced {
                    key,
                    algorithm: algorithm_of(&c.limit)?,
                    cost: d.hits,
                    lease: c.lease,
                });
                counters.len() - 1
            }
        };
    }
    // A counter asked for more than it ever admits at once, or a rule that refuses
    // everything: refused, nothing charged (the counters are only read).
    let refused_outright = plan.targets.iter().any(|t| matches!(t, Target::Refused(_)))
        || counters.iter().any(|p| p.cost > p.algorithm.capacity());
    let stacked: Vec<StackedLimit<'_>> = counters
        .iter()
        .map(|p| {
            StackedLimit::new(
                p.algorithm,
                &p.key,
                if refused_outright { 0 } else { p.cost },
            )
        })
        .collect();
    let decisions = if stacked.is_empty() {
        Vec::new()
    } else {
        let leases: Vec<Option<Lease>> = counters.iter().map(|p| p.lease).collect();
        match shared.check_all(&stacked, &leases, stats).await? {
            Some(decisions) => decisions,
            None => {
                let plan = outage_plan(plan, shared.when_down);
                return decide::decide_planned(limits, stats, request, plan, now, shadow);
            }
        }
    };
    let admitted = !refused_outright && decisions.iter().all(|d| d.is_allowed());
    let mut over = !admitted;
    let mut statuses = Vec::with_capacity(plan.targets.len());
    for (i, ((target, d), metric)) in plan
        .targets
        .iter()
        .zip(&request.descriptors)
        .zip(&plan.metrics)
        .enumerate()
    {
        let metric = metric.as_deref();
        let status = match target {
            Target::Free(remaining) => decide::free_status(*remaining, d.hits, stats, metric),
            Target::Refused(limit) => {
                let standing = Standing::nothing(limit, now);
                decide::counted_status(limit, true, false, standing, d.hits, stats, metric)
            }
            Target::Counted(c) if c.shadow => {
                shadow_status(shared, tree, c, d.hits, now, stats, metric).await
            }
            Target::Counted(c) => {
                let p = &counters[counter_of[i]];
                let decision = &decisions[counter_of[i]];
                // A counter that was only read (refused outright, or on a Cluster
                // after another refused) or given back reports how it stands for no
                // units: its own cost tells whether it is one of those refusing.
                let own_over = !decision.is_allowed() || p.cost > decision.remaining();
                let over = !admitted && own_over;
                // Hits it can never hold at once have no instant they fit.
                let asked = (p.cost <= p.algorithm.capacity()).then_some(*decision);
                let standing = Standing::read(&c.limit, now, Some(*decision), asked);
                decide::counted_status(&c.limit, over, false, standing, d.hits, stats, metric)
            }
        };
        over |= status.code == Code::OverLimit;
        statuses.push(status);
    }
    Ok(decide::answer(statuses, over, shadow))
}

/// A shadow rule's status: counted in Redis on its own, never refusing. While Redis
/// is away it is not counted.
async fn shadow_status(
    shared: &Shared,
    tree: &Tree,
    c: &Counted,
    hits: u64,
    now: u64,
    stats: &Stats,
    metric: Option<&str>,
) -> Status {
    let key = redis_key(tree, c);
    let Ok(algorithm) = algorithm_of(&c.limit) else {
        let standing = Standing::nothing(&c.limit, now);
        return decide::counted_status(&c.limit, true, true, standing, hits, stats, metric);
    };
    // More hits than it ever admits at once: over, nothing counted (the key only read).
    let too_many = hits > algorithm.capacity();
    let one = [StackedLimit::new(
        algorithm,
        &key,
        if too_many { 0 } else { hits },
    )];
    let (over, standing) = match shared.limiter.check_all(&one).await {
        Ok(v) if v.served_by == ServedBy::Redis => {
            let decision = v.decisions.first().copied();
            let standing = Standing::read(&c.limit, now, decision, decision);
            (too_many || !v.is_allowed(), standing)
        }
        _ => {
            stats.redis_unavailable();
            (false, Standing::nothing(&c.limit, now))
        }
    };
    decide::counted_status(&c.limit, over, true, standing, hits, stats, metric)
}

/// `plan` as the outage policies answer it: an open rule admits uncounted, a closed
/// one refuses, a local one counts in memory (a shadow rule never refuses).
fn outage_plan(mut plan: Plan, default: Outage) -> Plan {
    for target in &mut plan.targets {
        let Target::Counted(c) = target else { continue };
        match c.when_down.unwrap_or(default) {
            Outage::Local => {}
            Outage::Closed if !c.shadow => *target = Target::Refused(c.limit.clone()),
            Outage::Open | Outage::Closed => *target = Target::Free(0),
        }
    }
    plan
}

/// The Redis key of a counter (see the module's documentation).
fn redis_key(tree: &Tree, c: &Counted) -> String {
    match c.source {
        Source::Rule(i) => {
            let place = &tree.rule(i).identity;
            format!("r{}:{place}{}", place.len(), c.key)
        }
        Source::Override(..) => format!("o{}", c.key),
    }
}

/// A rule's counters in Redis.
fn algorithm_of(limit: &CurrentLimit) -> Result<RedisAlgorithm, Refusal> {
    limit
        .shape
        .in_redis(limit.requests_per_unit, limit.unit)
        .map_err(Refusal::Invalid)
}
