//! One request's decision: its descriptors matched to rules, then decided all or none
//! by portero's stack (`portero::keyed::stack::check_all`: ask every limit, take only
//! when all admit, give back a lost race), then each descriptor's status.
//!
//! Where this answers differently from envoyproxy/ratelimit: a request one rule
//! refuses is charged to no rule (envoyproxy/ratelimit increments every matched
//! counter, so a client refused by one limit still spends the others). Shadow rules
//! are counted apart and never refuse; unlimited rules and descriptors that match no
//! rule are admitted uncounted; a rule another matched rule `replaces` is skipped.

use std::sync::Arc;
use std::time::Duration;

use portero::keyed::stack::{self, Limit};
use portero::{Acquired, Admission, Decision, KeyedError};

use crate::config::tree::Tree;
use crate::config::unit::Unit;
use crate::limits::{Limits, Store, Windows};
use crate::plan::{self, Source, Target};
use crate::stats::Stats;

pub use crate::request::{
    Answer, Code, CurrentLimit, Descriptor, Refusal, Request, Status, MOST_DESCRIPTORS,
    MOST_ENTRIES,
};

/// The statistics' name of the descriptors whose limit override could not be kept
/// (every one of [`MOST_OVERRIDES`](crate::limits::MOST_OVERRIDES) still counting).
pub const OVERRIDES_FULL: &str = "overrides_full";

/// How one descriptor is decided in memory: its plan's target, with the counter
/// found.
enum Plan {
    /// Counted in `windows` under `key`, all or none with the others.
    Stacked {
        windows: Arc<Windows>,
        key: String,
        limit: CurrentLimit,
    },
    /// Counted in `windows` under `key`, never refusing.
    Shadow {
        windows: Arc<Windows>,
        key: String,
        limit: CurrentLimit,
    },
    /// Always refused.
    Refused(CurrentLimit),
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
    match plan::plan(tree, request)? {
        None => Ok(unknown_domain(request)),
        Some(plan) => decide_planned(limits, stats, request, plan, now, shadow),
    }
}

/// Every descriptor of a request to a domain the configuration does not know: OK,
/// unlimited.
pub(crate) fn unknown_domain(request: &Request) -> Answer {
    let statuses = request
        .descriptors
        .iter()
        .map(|_| Status {
            code: Code::Ok,
            limit: None,
            remaining: 0,
            until_reset: None,
            retry_after: None,
        })
        .collect();
    Answer {
        code: Code::Ok,
        statuses,
    }
}

/// Decides `request`, planned as `plan`, with the counters in memory.
pub(crate) fn decide_planned(
    limits: &Limits,
    stats: &Stats,
    request: &Request,
    plan: plan::Plan,
    now: u64,
    shadow: bool,
) -> Result<Answer, Refusal> {
    let mut metrics = plan.metrics;
    let plans: Vec<Plan> = plan
        .targets
        .into_iter()
        .zip(metrics.iter_mut())
        .map(|(target, metric)| in_memory(limits, target, metric, now))
        .collect();
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
    let refused_outright = plans.iter().any(|p| matches!(p, Plan::Refused(_)))
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
    Ok(answer(statuses, over, shadow))
}

/// The answer of `statuses`: over the limit if `over`, unless in global `shadow` mode.
pub(crate) fn answer(statuses: Vec<Status>, over: bool, shadow: bool) -> Answer {
    let code = if over && !shadow {
        Code::OverLimit
    } else {
        Code::Ok
    };
    Answer { code, statuses }
}

/// The memory counters of `target`; an override that cannot be kept is admitted
/// uncounted, said in the statistics under [`OVERRIDES_FULL`] (`metric`).
fn in_memory(limits: &Limits, target: Target, metric: &mut Option<String>, now: u64) -> Plan {
    match target {
        Target::Free(remaining) => Plan::Free(remaining),
        Target::Refused(limit) => Plan::Refused(limit),
        Target::Counted(c) => {
            let store = match c.source {
                Source::Rule(i) => Ok(limits.rule(i).clone()),
                Source::Override(per_unit, unit) => limits.overridden(per_unit, unit, now),
            };
            match store {
                Ok(Store::Windows(windows)) if c.shadow => Plan::Shadow {
                    windows,
                    key: c.key,
                    limit: c.limit,
                },
                Ok(Store::Windows(windows)) => Plan::Stacked {
                    windows,
                    key: c.key,
                    limit: c.limit,
                },
                Ok(Store::Unlimited) => Plan::Free(u32::MAX),
                Ok(Store::Refuse) => Plan::Refused(c.limit),
                // Every kept override still counting: this one is not limited (said in
                // the statistics), and the request's other descriptors are decided as
                // usual — not an error, which Envoy would answer by letting everything by.
                Err(_) => {
                    *metric = Some(OVERRIDES_FULL.to_string());
                    Plan::Free(0)
                }
            }
        }
    }
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
    match plan {
        Plan::Free(remaining) => free_status(*remaining, d.hits, stats, metric),
        Plan::Refused(limit) => {
            let standing = Standing::nothing(limit, now);
            counted_status(limit, true, false, standing, d.hits, stats, metric)
        }
        Plan::Stacked {
            windows,
            key,
            limit,
        } => {
            // Admitted: the units were taken. Not: nothing was taken, and this
            // descriptor's own cost tells whether it was one of those refusing.
            let asked = (!admitted)
                .then(|| windows.peek_at(key, now, together).ok())
                .flatten();
            let over = !admitted && !asked.is_some_and(|s| s.is_allowed());
            let standing = Standing::read(limit, now, windows.peek_at(key, now, 0).ok(), asked);
            counted_status(limit, over, false, standing, d.hits, stats, metric)
        }
        Plan::Shadow {
            windows,
            key,
            limit,
        } => {
            let taken = windows.check_at(key, now, d.hits).ok();
            let over = !taken.is_some_and(|t| t.is_allowed());
            let standing = Standing::read(limit, now, windows.peek_at(key, now, 0).ok(), taken);
            counted_status(limit, over, true, standing, d.hits, stats, metric)
        }
    }
}

/// The status of a descriptor admitted uncounted, reporting `remaining`.
pub(crate) fn free_status(
    remaining: u32,
    hits: u64,
    stats: &Stats,
    metric: Option<&str>,
) -> Status {
    if let Some(metric) = metric {
        stats.count(metric, hits, false, false, 0, 0);
    }
    Status {
        code: Code::Ok,
        limit: None,
        remaining,
        until_reset: None,
        retry_after: None,
    }
}

/// How a counter stands once the request is decided: the units it has left, how long
/// until it is whole again, and how long until the request's own hits would fit.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Standing {
    left: u64,
    until_reset: Duration,
    retry_after: Duration,
}

impl Standing {
    /// A limit that admits nothing now or ever for these hits (a limit of 0, more
    /// hits than it holds): its window's end, as envoyproxy/ratelimit says.
    pub(crate) fn nothing(limit: &CurrentLimit, now: u64) -> Self {
        let end = window_end(limit.unit, now);
        Self {
            left: 0,
            until_reset: end,
            retry_after: end,
        }
    }

    /// A counter of `limit` as `at_rest` (a look for no units, after the decision)
    /// shows it, `asked` its answer for the request's hits (whether it refused them,
    /// and when they would fit; `None` for hits it can never hold at once, which are
    /// asked back after one unit of time). A fixed window is whole again when its
    /// aligned window ends; the other algorithms when what was spent has come back.
    pub(crate) fn read(
        limit: &CurrentLimit,
        now: u64,
        at_rest: Option<Decision>,
        asked: Option<Decision>,
    ) -> Self {
        let Some(at_rest) = at_rest else {
            return Self::nothing(limit, now);
        };
        let until_reset = if limit.shape.resets_on_the_window() {
            window_end(limit.unit, now)
        } else {
            at_rest.reset_after()
        };
        let retry_after = match asked {
            Some(d) if !d.is_allowed() => d.retry_after(),
            Some(_) => until_reset,
            None => Duration::from_secs(limit.unit.seconds()),
        };
        Self {
            left: at_rest.remaining(),
            until_reset,
            retry_after,
        }
    }
}

/// The status of `hits` counted against `limit` (`over` it or not; a `shadow` rule
/// never refuses), its counter standing as `standing` says, counted in `stats`.
pub(crate) fn counted_status(
    limit: &CurrentLimit,
    over: bool,
    shadow: bool,
    standing: Standing,
    hits: u64,
    stats: &Stats,
    metric: Option<&str>,
) -> Status {
    let left = standing.left;
    if let Some(metric) = metric {
        let cap = u64::from(limit.requests_per_unit);
        stats.count(
            metric,
            hits,
            over,
            over && shadow,
            cap.saturating_sub(left),
            cap,
        );
    }
    Status {
        code: if over && !shadow {
            Code::OverLimit
        } else {
            Code::Ok
        },
        limit: Some(limit.clone()),
        remaining: u32::try_from(left).unwrap_or(u32::MAX),
        until_reset: Some(standing.until_reset),
        retry_after: (over && !shadow).then_some(standing.retry_after),
    }
}

/// Until the aligned window of `unit` that holds `now` ends.
pub(crate) fn window_end(unit: Unit, now: u64) -> Duration {
    let length = unit.seconds() * 1_000_000_000;
    Duration::from_nanos(length - now % length)
}
