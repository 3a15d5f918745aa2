//! One request's decision: its descriptors matched to rules, then decided all or none
//! by portero's stack (`portero::keyed::stack::check_all`: ask every limit, take only
//! when all admit, give back a lost race), then each descriptor's status.
//!
//! Where this answers differently from envoyproxy/ratelimit: a request one rule
//! refuses is charged to no rule (envoyproxy/ratelimit increments every matched
//! counter, so a client refused by one limit still spends the others). Shadow rules
//! are counted apart and never refuse; unlimited rules and descriptors that match no
//! rule are admitted uncounted; a rule another matched rule `replaces` is skipped.

use std::time::Duration;

use portero::keyed::stack::{self, Limit};
use portero::{Acquired, Admission, Decision, KeyedError};

use crate::config::tree::{Allowance, Tree};
use crate::config::unit::Unit;
use crate::limits::{Limits, Store, Windows};
use crate::stats::Stats;

/// A request, as the gRPC and HTTP doors hand it over.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// The domain its descriptors are looked up in.
    pub domain: String,
    /// Its descriptors.
    pub descriptors: Vec<Descriptor>,
}

/// One descriptor of a request.
#[derive(Debug, Clone, Default)]
pub struct Descriptor {
    /// Its (key, value) entries.
    pub entries: Vec<(String, String)>,
    /// A limit the request sets itself, in place of the rule's.
    pub limit: Option<(u32, Unit)>,
    /// The hits it adds (0: only asks).
    pub hits: u64,
}

/// A descriptor's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// Within its limit, or not limited.
    Ok,
    /// Over its limit.
    OverLimit,
}

/// The limit a status reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurrentLimit {
    /// Requests a window admits.
    pub requests_per_unit: u32,
    /// The window.
    pub unit: Unit,
    /// The rule's name.
    pub name: String,
}

/// One descriptor's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// Its verdict.
    pub code: Code,
    /// The limit that decided it (`None`: not limited).
    pub limit: Option<CurrentLimit>,
    /// Requests its window still admits.
    pub remaining: u32,
    /// Until its window ends.
    pub until_reset: Option<Duration>,
}

/// The whole answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// Over the limit if any descriptor is (and no shadow mode overrides it).
    pub code: Code,
    /// One status per descriptor, in the request's order.
    pub statuses: Vec<Status>,
}

/// A request that cannot be decided: nothing was charged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The request is malformed (what is wrong).
    Invalid(String),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Invalid(why) => write!(f, "malformed request: {why}"),
        }
    }
}

impl std::error::Error for Refusal {}

/// The statistics' name of the descriptors whose limit override could not be kept
/// (every one of [`MOST_OVERRIDES`](crate::limits::MOST_OVERRIDES) still counting).
pub const OVERRIDES_FULL: &str = "overrides_full";

/// The most descriptors one request may carry.
pub const MOST_DESCRIPTORS: usize = 1_000;
/// The most entries one descriptor may carry.
pub const MOST_ENTRIES: usize = 64;

/// How one descriptor is decided.
enum Plan {
    /// Counted in `windows` under `key`, all or none with the others.
    Stacked {
        windows: std::sync::Arc<Windows>,
        key: String,
        limit: CurrentLimit,
        unit: Unit,
    },
    /// Counted in `windows` under `key`, never refusing.
    Shadow {
        windows: std::sync::Arc<Windows>,
        key: String,
        limit: CurrentLimit,
        unit: Unit,
    },
    /// Always refused.
    Refused { limit: CurrentLimit, unit: Unit },
    /// Admitted, uncounted (no rule, unlimited, replaced, an override that cannot
    /// be kept), reporting `remaining`.
    Free(u32),
}

/// One key of a rule's windows at its own cost, as one limit of the stack.
struct Priced<'a> {
    windows: &'a Windows,
    key: &'a String,
    cost: u64,
}

impl Limit for Priced<'_> {
    fn acquire_at(&self, now: u64, _: u64) -> Result<Acquired, KeyedError> {
        self.windows.acquire_at(self.key, now, self.cost)
    }
    fn refund(&self, admission: Admission) {
        self.windows.refund(self.key, admission);
    }
    fn peek_at(&self, now: u64, _: u64) -> Result<Option<Decision>, KeyedError> {
        Ok(Some(self.windows.peek_at(self.key, now, self.cost)?))
    }
}

/// Decides `request` at `now` (ns since the Unix epoch) against `tree` and its
/// `limits`, counting into `stats`; `shadow` is the global shadow mode.
pub fn decide(
    tree: &Tree,
    limits: &Limits,
    stats: &Stats,
    request: &Request,
    now: u64,
    shadow: bool,
) -> Result<Answer, Refusal> {
    check_shape(request)?;
    // A domain the configuration does not know limits nothing, overrides included
    // (as envoyproxy/ratelimit looks the domain up first).
    if !tree.has_domain(&request.domain) {
        let statuses = request
            .descriptors
            .iter()
            .map(|_| Status {
                code: Code::Ok,
                limit: None,
                remaining: 0,
                until_reset: None,
            })
            .collect();
        return Ok(Answer {
            code: Code::Ok,
            statuses,
        });
    }
    let mut plans = Vec::with_capacity(request.descriptors.len());
    let mut metrics = Vec::with_capacity(request.descriptors.len());
    let mut matched = Vec::with_capacity(request.descriptors.len());
    for d in &request.descriptors {
        matched.push(tree.find(&request.domain, &d.entries));
    }
    // Names replaced by a rule that matched this request.
    let replaced: Vec<&str> = matched
        .iter()
        .flatten()
        .flat_map(|m| tree.rule(m.rule).replaces.iter().map(String::as_str))
        .collect();
    for (d, m) in request.descriptors.iter().zip(&matched) {
        let (plan, metric) = plan_of(tree, limits, &request.domain, d, m.as_ref(), &replaced, now)?;
        plans.push(plan);
        metrics.push(metric);
    }
    // Descriptors that land on one counter (the same value twice, values a shared
    // wildcard joins) are one limit of the stack at their summed cost: checked apart,
    // each would fit where together they do not.
    let mut counters: Vec<Priced<'_>> = Vec::new();
    let mut counter_of = vec![usize::MAX; plans.len()];
    for (i, (p, d)) in plans.iter().zip(&request.descriptors).enumerate() {
        if let Plan::Stacked { windows, key, .. } = p {
            let same = counters
                .iter()
                .position(|c| std::ptr::eq(c.windows, &**windows) && c.key == key);
            counter_of[i] = match same {
                Some(c) => {
                    counters[c].cost = counters[c].cost.saturating_add(d.hits);
                    c
                }
                None => {
                    counters.push(Priced {
                        windows,
                        key,
                        cost: d.hits,
                    });
                    counters.len() - 1
                }
            };
        }
    }
    // A counter asked for more than a window ever admits is refused, nothing charged.
    let refused_outright = plans.iter().any(|p| matches!(p, Plan::Refused { .. }))
        || counters
            .iter()
            .any(|c| c.windows.peek_at(c.key, now, c.cost).is_err());
    let stacked: Vec<&dyn Limit> = counters.iter().map(|p| p as &dyn Limit).collect();
    let admitted = !refused_outright
        && match stack::check_all(&stacked, now, 1) {
            Ok(s) => s.decision.is_allowed(),
            Err(e) => return Err(Refusal::Invalid(e.to_string())),
        };
    let mut statuses = Vec::with_capacity(plans.len());
    // Refused by the stack is over the limit, whatever each descriptor's own look.
    let mut over = !admitted;
    for (i, ((plan, d), metric)) in plans
        .iter()
        .zip(&request.descriptors)
        .zip(&metrics)
        .enumerate()
    {
        let together = counters.get(counter_of[i]).map_or(d.hits, |c| c.cost);
        let status = status_of(plan, d, together, now, admitted, stats, metric.as_deref());
        over |= status.code == Code::OverLimit;
        statuses.push(status);
    }
    let code = if over && !shadow {
        Code::OverLimit
    } else {
        Code::Ok
    };
    Ok(Answer { code, statuses })
}

fn check_shape(request: &Request) -> Result<(), Refusal> {
    if request.domain.is_empty() {
        return Err(Refusal::Invalid(
            "rate limit domain must not be empty".into(),
        ));
    }
    if request.descriptors.is_empty() {
        return Err(Refusal::Invalid(
            "rate limit descriptor list must not be empty".into(),
        ));
    }
    if request.descriptors.len() > MOST_DESCRIPTORS {
        return Err(Refusal::Invalid(format!(
            "{} descriptors: at most {MOST_DESCRIPTORS} in one request",
            request.descriptors.len()
        )));
    }
    if let Some(d) = request
        .descriptors
        .iter()
        .find(|d| d.entries.len() > MOST_ENTRIES)
    {
        return Err(Refusal::Invalid(format!(
            "a descriptor of {} entries: at most {MOST_ENTRIES}",
            d.entries.len()
        )));
    }
    Ok(())
}

/// How descriptor `d`, matched as `m`, is decided, and its statistics' name.
fn plan_of(
    tree: &Tree,
    limits: &Limits,
    domain: &str,
    d: &Descriptor,
    m: Option<&crate::config::tree::Matched>,
    replaced: &[&str],
    now: u64,
) -> Result<(Plan, Option<String>), Refusal> {
    if let Some((requests_per_unit, unit)) = d.limit {
        // A limit the request sets applies whether or not a rule matched, with no
        // shadow mode (as envoyproxy/ratelimit does); its counter is the descriptor's.
        let limit = CurrentLimit {
            requests_per_unit,
            unit,
            name: String::new(),
        };
        let key = entries_key(domain, &d.entries);
        let metric = Some(key_name(domain, &d.entries));
        return Ok(match limits.overridden(requests_per_unit, unit, now) {
            Ok(Store::Windows(_)) if d.hits > u64::from(requests_per_unit) => {
                (Plan::Refused { limit, unit }, metric)
            }
            Ok(Store::Windows(windows)) => (
                Plan::Stacked {
                    windows,
                    key,
                    limit,
                    unit,
                },
                metric,
            ),
            Ok(_) => (Plan::Refused { limit, unit }, metric),
            // Every kept override still counting: this one is not limited (said in
            // the statistics), and the request's other descriptors are decided as
            // usual — not an error, which Envoy would answer by letting everything by.
            Err(_) => (Plan::Free(0), Some(OVERRIDES_FULL.to_string())),
        });
    }
    let Some(m) = m else {
        return Ok((Plan::Free(0), None));
    };
    let rule = tree.rule(m.rule);
    let metric = Some(m.metric.clone());
    if !rule.name.is_empty() && replaced.contains(&rule.name.as_str()) {
        return Ok((Plan::Free(0), metric));
    }
    let Allowance::Limited {
        requests_per_unit,
        unit,
    } = rule.allowance
    else {
        // Unlimited: everything remains.
        return Ok((Plan::Free(u32::MAX), metric));
    };
    let limit = CurrentLimit {
        requests_per_unit,
        unit,
        name: rule.name.clone(),
    };
    if d.hits > u64::from(requests_per_unit) && !rule.shadow {
        // More than a window ever admits: refused, nothing charged anywhere.
        return Ok((Plan::Refused { limit, unit }, metric));
    }
    Ok(match limits.rule(m.rule) {
        Store::Windows(windows) if rule.shadow => (
            Plan::Shadow {
                windows: windows.clone(),
                key: m.counter.clone(),
                limit,
                unit,
            },
            metric,
        ),
        Store::Windows(windows) => (
            Plan::Stacked {
                windows: windows.clone(),
                key: m.counter.clone(),
                limit,
                unit,
            },
            metric,
        ),
        _ if rule.shadow => (Plan::Free(0), metric),
        _ => (Plan::Refused { limit, unit }, metric),
    })
}

/// A descriptor's status once the stack decided (`admitted`), counted in `stats`;
/// `together` is what its counter was asked for in all (its own hits, and those of
/// the request's other descriptors on the same counter).
fn status_of(
    plan: &Plan,
    d: &Descriptor,
    together: u64,
    now: u64,
    admitted: bool,
    stats: &Stats,
    metric: Option<&str>,
) -> Status {
    let hits = d.hits;
    let count = |over: bool, shadowed: bool, used: u64, limit: u64| {
        if let Some(metric) = metric {
            stats.count(metric, hits, over, shadowed, used, limit);
        }
    };
    match plan {
        Plan::Free(remaining) => {
            if let Some(metric) = metric {
                stats.count(metric, hits, false, false, 0, 0);
            }
            Status {
                code: Code::Ok,
                limit: None,
                remaining: *remaining,
                until_reset: None,
            }
        }
        Plan::Refused { limit, unit } => {
            count(true, false, 0, 0);
            Status {
                code: Code::OverLimit,
                limit: Some(limit.clone()),
                remaining: 0,
                until_reset: Some(until_reset(*unit, now)),
            }
        }
        Plan::Stacked {
            windows,
            key,
            limit,
            unit,
        } => {
            // Admitted: the units were taken. Not: nothing was taken, and this
            // descriptor's own cost tells whether it was one of those refusing.
            let over = !admitted
                && !windows
                    .peek_at(key, now, together)
                    .is_ok_and(|s| s.is_allowed());
            let left = windows.peek_at(key, now, 0).map_or(0, |s| s.remaining());
            let cap = u64::from(limit.requests_per_unit);
            count(over, false, cap.saturating_sub(left), cap);
            Status {
                code: if over { Code::OverLimit } else { Code::Ok },
                limit: Some(limit.clone()),
                remaining: u32::try_from(left).unwrap_or(u32::MAX),
                until_reset: Some(until_reset(*unit, now)),
            }
        }
        Plan::Shadow {
            windows,
            key,
            limit,
            unit,
        } => {
            let taken = windows.check_at(key, now, hits);
            let over = !taken.is_ok_and(|t| t.is_allowed());
            let left = windows.peek_at(key, now, 0).map_or(0, |s| s.remaining());
            let cap = u64::from(limit.requests_per_unit);
            count(over, over, cap.saturating_sub(left), cap);
            Status {
                code: Code::Ok,
                limit: Some(limit.clone()),
                remaining: u32::try_from(left).unwrap_or(u32::MAX),
                until_reset: Some(until_reset(*unit, now)),
            }
        }
    }
}

/// Until the aligned window of `unit` that holds `now` ends.
fn until_reset(unit: Unit, now: u64) -> Duration {
    let length = unit.seconds() * 1_000_000_000;
    Duration::from_nanos(length - now % length)
}

/// A counter key for a descriptor's own entries (length-prefixed: no two meet).
fn entries_key(domain: &str, entries: &[(String, String)]) -> String {
    let mut key = format!("{}:{domain}", domain.len());
    for (k, v) in entries {
        key.push_str(&format!("{}:{k}{}:{v}", k.len(), v.len()));
    }
    key
}

/// envoyproxy/ratelimit's name for a descriptor: `domain.key_value…`.
fn key_name(domain: &str, entries: &[(String, String)]) -> String {
    let mut name = domain.to_string();
    for (k, v) in entries {
        name.push('.');
        name.push_str(k);
        if !v.is_empty() {
            name.push('_');
            name.push_str(v);
        }
    }
    name
}
