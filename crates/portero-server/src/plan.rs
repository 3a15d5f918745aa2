//! What each descriptor of a request is decided by, whatever store counts it: the
//! rule it matched (or the limit it brought), the counter it lands on, and its
//! statistics' name. Both stores ([`decide`](crate::decide) in memory,
//! [`shared`](crate::shared) in Redis) decide from this one plan, so matching,
//! `replaces`, overrides and shadow mode mean the same in both.

use crate::config::lease::Lease;
use crate::config::outage::Outage;
use crate::config::shape::Shape;
use crate::config::tree::{Allowance, Matched, Tree};
use crate::config::unit::Unit;
use crate::request::{CurrentLimit, Descriptor, Refusal, Request, MOST_DESCRIPTORS, MOST_ENTRIES};

/// Which counters a descriptor's counter is one of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// Rule `0` of the tree.
    Rule(usize),
    /// A limit the request set itself: `requests_per_unit` per `unit`.
    Override(u32, Unit),
}

/// A descriptor counted against a limit.
#[derive(Debug, Clone)]
pub(crate) struct Counted {
    pub(crate) source: Source,
    /// What keeps its counter apart from the others of `source`.
    pub(crate) key: String,
    pub(crate) limit: CurrentLimit,
    /// Counted, never refusing.
    pub(crate) shadow: bool,
    /// Its answer while Redis is away (`None`: the server's default).
    pub(crate) when_down: Option<Outage>,
    /// The rule's lease, where Redis decides.
    pub(crate) lease: Option<Lease>,
}

/// How one descriptor is decided.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    /// Against a counter.
    Counted(Counted),
    /// Always refused (a limit of 0, more hits than a window ever admits).
    Refused(CurrentLimit),
    /// Admitted, uncounted (no rule, unlimited, replaced), reporting `remaining`.
    Free(u32),
}

/// Every descriptor's target and statistics' name, in the request's order.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub(crate) targets: Vec<Target>,
    pub(crate) metrics: Vec<Option<String>>,
}

/// The plan of `request` in `tree`; `None` for a domain the tree does not know,
/// which limits nothing, overrides included (as envoyproxy/ratelimit looks the
/// domain up first).
pub(crate) fn plan(tree: &Tree, request: &Request) -> Result<Option<Plan>, Refusal> {
    check_shape(request)?;
    if !tree.has_domain(&request.domain) {
        return Ok(None);
    }
    let matched: Vec<Option<Matched>> = request
        .descriptors
        .iter()
        .map(|d| tree.find(&request.domain, &d.entries))
        .collect();
    // Names replaced by a rule that matched this request.
    let replaced: Vec<&str> = matched
        .iter()
        .flatten()
        .flat_map(|m| tree.rule(m.rule).replaces.iter().map(String::as_str))
        .collect();
    let (targets, metrics) = request
        .descriptors
        .iter()
        .zip(&matched)
        .map(|(d, m)| target_of(tree, &request.domain, d, m.as_ref(), &replaced))
        .unzip();
    Ok(Some(Plan { targets, metrics }))
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
    for d in &request.descriptors {
        if let Some(why) = d.limit.and_then(|(per_unit, unit)| unit.refuses(per_unit)) {
            return Err(Refusal::Invalid(format!("a descriptor's limit: {why}")));
        }
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
fn target_of(
    tree: &Tree,
    domain: &str,
    d: &Descriptor,
    m: Option<&Matched>,
    replaced: &[&str],
) -> (Target, Option<String>) {
    if let Some((requests_per_unit, unit)) = d.limit {
        // A limit the request sets applies whether or not a rule matched, with no
        // shadow mode (as envoyproxy/ratelimit does); its counter is the descriptor's.
        let limit = CurrentLimit {
            requests_per_unit,
            unit,
            name: String::new(),
            shape: Shape::FixedWindow,
        };
        let metric = Some(key_name(domain, &d.entries));
        if requests_per_unit == 0 || d.hits > u64::from(requests_per_unit) {
            return (Target::Refused(limit), metric);
        }
        let counted = Counted {
            source: Source::Override(requests_per_unit, unit),
            key: entries_key(domain, &d.entries),
            limit,
            shadow: false,
            when_down: None,
            lease: None,
        };
        return (Target::Counted(counted), metric);
    }
    let Some(m) = m else {
        return (Target::Free(0), None);
    };
    let rule = tree.rule(m.rule);
    let metric = Some(m.metric.clone());
    if !rule.name.is_empty() && replaced.contains(&rule.name.as_str()) {
        return (Target::Free(0), metric);
    }
    let Allowance::Limited {
        requests_per_unit,
        unit,
        shape,
    } = rule.allowance
    else {
        // Unlimited: everything remains.
        return (Target::Free(u32::MAX), metric);
    };
    let limit = CurrentLimit {
        requests_per_unit,
        unit,
        name: rule.name.clone(),
        shape,
    };
    if requests_per_unit == 0 {
        // Nothing to count: a shadow rule lets everything by, any other refuses.
        let target = if rule.shadow {
            Target::Free(0)
        } else {
            Target::Refused(limit)
        };
        return (target, metric);
    }
    if d.hits > shape.capacity(requests_per_unit) && !rule.shadow && shape.resets_on_the_window() {
        // More than a window ever admits: refused, nothing charged anywhere, reported
        // as envoyproxy/ratelimit reports it (nothing left, until the window ends).
        // Other algorithms read their counter for the figures (the stack refuses a
        // cost beyond the capacity all the same).
        return (Target::Refused(limit), metric);
    }
    let counted = Counted {
        source: Source::Rule(m.rule),
        key: m.counter.clone(),
        limit,
        shadow: rule.shadow,
        when_down: rule.when_down,
        lease: rule.lease,
    };
    (Target::Counted(counted), metric)
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
