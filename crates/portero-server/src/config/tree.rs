//! The descriptor tree of every domain, built once when the files load, and the
//! lookup of a request's descriptor in it.
//!
//! Matching follows envoyproxy/ratelimit's README: at each level of the request's
//! entries, a rule with the same key and value first, then one whose value is a
//! wildcard the value matches (in the file's order), then one with the key alone (any
//! value: each value its own counter). A descriptor is limited by the rule where its
//! last entry lands, if that rule has a `rate_limit`; one with more entries than the
//! tree has levels is not limited. Keys and values are matched as pairs, not as the
//! joined `key_value` string envoyproxy/ratelimit looks up, so `("a_b", "")` and
//! `("a", "b")` never meet.
//!
//! Invariant: every node index and rule index stored in the tree is in range, and a
//! rule's counter key names exactly the values its counters are kept apart by.

use std::collections::HashMap;

use super::error::ConfigError;
use super::file::{DescriptorEntry, DomainFile};
use super::lease::Lease;
use super::outage::Outage;
use super::shape::Shape;
use super::unit::Unit;

/// How much a rule allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allowance {
    /// `requests_per_unit` per `unit` (0: every request refused), counted as `shape`
    /// says (aligned fixed windows unless the rule names another algorithm).
    Limited {
        /// Requests a unit admits.
        requests_per_unit: u32,
        /// The window's length.
        unit: Unit,
        /// The algorithm.
        shape: Shape,
    },
    /// `unlimited: true`: never refused, never counted.
    Unlimited,
}

/// One `rate_limit` of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// Its place, as envoyproxy/ratelimit names its statistics:
    /// `domain.key_value.key…` (two rules may share one: `a: b_c` and `a_b: c`).
    pub path: String,
    /// Its place, length-prefixed: no two rules share one. What a reload carries a
    /// rule's counters by, and what its Redis keys name.
    pub identity: String,
    /// What it allows.
    pub allowance: Allowance,
    /// Its `name` (empty if none): what another rule's `replaces` names.
    pub name: String,
    /// The names of the rules it replaces when both match one request.
    pub replaces: Vec<String>,
    /// `shadow_mode`: counted, never refusing.
    pub shadow: bool,
    /// `detailed_metric`: statistics per descriptor value, not per rule.
    pub detailed_metric: bool,
    /// Its answer while Redis is away (`None`: the server's default).
    pub when_down: Option<Outage>,
    /// Units an instance borrows from Redis at once (`None`: every request asks).
    pub lease: Option<Lease>,
}

/// A level of the tree.
#[derive(Debug, Default)]
struct Node {
    exact: HashMap<(String, String), usize>,
    wildcards: Vec<Wildcard>,
    any_value: HashMap<String, usize>,
    rule: Option<usize>,
    share_threshold: bool,
    value_to_metric: bool,
}

/// A descriptor whose value holds a `*`: the literal parts between the stars.
#[derive(Debug)]
struct Wildcard {
    key: String,
    pattern: String,
    parts: Vec<String>,
    node: usize,
}

impl Wildcard {
    fn matches(&self, key: &str, value: &str) -> bool {
        if key != self.key {
            return false;
        }
        let (first, last) = (&self.parts[0], &self.parts[self.parts.len() - 1]);
        let fixed: usize = self.parts.iter().map(String::len).sum();
        if value.len() < fixed
            || !value.starts_with(first.as_str())
            || !value.ends_with(last.as_str())
        {
            return false;
        }
        let mut rest = &value[first.len()..value.len() - last.len()];
        for part in &self.parts[1..self.parts.len() - 1] {
            match rest.find(part.as_str()) {
                Some(at) => rest = &rest[at + part.len()..],
                None => return false,
            }
        }
        true
    }
}

/// Every domain's tree.
#[derive(Debug, Default)]
pub struct Tree {
    nodes: Vec<Node>,
    domains: HashMap<String, usize>,
    rules: Vec<Rule>,
}

/// Where a request's descriptor landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matched {
    /// The rule's index ([`Tree::rule`]).
    pub rule: usize,
    /// What keeps this descriptor's counter apart from the rule's others: its values
    /// (a wildcard level that shares its threshold counts as its pattern).
    pub counter: String,
    /// The statistics' name for it: the rule's path, or the descriptor's own values
    /// where the rule asks for them (`detailed_metric`, `value_to_metric`).
    pub metric: String,
}

impl Tree {
    /// The tree of `files` (each a name, for errors, and its contents).
    pub(crate) fn build(files: &[(String, DomainFile)]) -> Result<Self, ConfigError> {
        let mut tree = Self::default();
        for (name, file) in files {
            let error = |reason: String| ConfigError {
                file: name.clone(),
                reason,
            };
            if file.domain.is_empty() {
                return Err(error("config file cannot have empty domain".into()));
            }
            if tree.domains.contains_key(&file.domain) {
                return Err(error(format!(
                    "duplicate domain '{}' in config file",
                    file.domain
                )));
            }
            let root = tree.node();
            tree.domains.insert(file.domain.clone(), root);
            let identity = format!("{}:{}", file.domain.len(), file.domain);
            tree.load(root, &file.domain, &identity, &file.descriptors)
                .map_err(error)?;
        }
        Ok(tree)
    }

    /// The rule at `index`.
    pub fn rule(&self, index: usize) -> &Rule {
        &self.rules[index]
    }

    /// Every rule, in the files' order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// Whether `domain` has a tree.
    pub fn has_domain(&self, domain: &str) -> bool {
        self.domains.contains_key(domain)
    }

    /// The rule that limits the descriptor of `entries` (key, value) in `domain`.
    pub fn find(&self, domain: &str, entries: &[(String, String)]) -> Option<Matched> {
        let mut node = &self.nodes[*self.domains.get(domain)?];
        let mut counter = String::new();
        let mut metric = String::from(domain);
        let mut detailed = String::from(domain);
        for (i, (key, value)) in entries.iter().enumerate() {
            let (next, shown) = if let Some(&n) = node.exact.get(&(key.clone(), value.clone())) {
                (n, Some(value.as_str()))
            } else if let Some(w) = node.wildcards.iter().find(|w| w.matches(key, value)) {
                let own = &self.nodes[w.node];
                if own.share_threshold {
                    (w.node, Some(w.pattern.as_str()))
                } else if own.value_to_metric {
                    (w.node, Some(value.as_str()))
                } else {
                    (w.node, Some(w.pattern.as_str()))
                }
            } else if let Some(&n) = node.any_value.get(key) {
                let own = &self.nodes[n];
                (n, own.value_to_metric.then_some(value.as_str()))
            } else {
                return None;
            };
            let shared = self.nodes[next].share_threshold;
            let counted = if shared {
                shown.unwrap_or(value)
            } else {
                value
            };
            counter.push_str(&format!("{}:{counted}{}:{key}", counted.len(), key.len()));
            metric.push('.');
            metric.push_str(key);
            if let Some(shown) = shown.filter(|s| !s.is_empty()) {
                metric.push('_');
                metric.push_str(shown);
            }
            detailed.push('.');
            detailed.push_str(key);
            if !value.is_empty() {
                detailed.push('_');
                detailed.push_str(if shared {
                    shown.unwrap_or(value)
                } else {
                    value
                });
            }
            node = &self.nodes[next];
            if i + 1 == entries.len() {
                let rule = node.rule?;
                let metric = if self.rules[rule].detailed_metric {
                    detailed
                } else {
                    metric
                };
                return Some(Matched {
                    rule,
                    counter,
                    metric,
                });
            }
        }
        None
    }

    fn node(&mut self) -> usize {
        self.nodes.push(Node::default());
        self.nodes.len() - 1
    }

    /// Loads `descriptors` under `parent`, whose path is `path` and identity
    /// `identity`.
    fn load(
        &mut self,
        parent: usize,
        path: &str,
        identity: &str,
        descriptors: &[DescriptorEntry],
    ) -> Result<(), String> {
        for d in descriptors {
            if d.key.is_empty() {
                return Err(format!("descriptor under '{path}' has empty key"));
            }
            let composite = if d.value.is_empty() {
                d.key.clone()
            } else {
                format!("{}_{}", d.key, d.value)
            };
            let full = format!("{path}.{composite}");
            let own = format!(
                "{identity}{}:{}{}:{}",
                d.key.len(),
                d.key,
                d.value.len(),
                d.value
            );
            let taken = if d.value.is_empty() {
                self.nodes[parent].any_value.contains_key(&d.key)
            } else {
                self.nodes[parent]
                    .exact
                    .contains_key(&(d.key.clone(), d.value.clone()))
                    || self.nodes[parent]
                        .wildcards
                        .iter()
                        .any(|w| w.key == d.key && w.pattern == d.value)
            };
            if taken {
                return Err(format!("duplicate descriptor composite key '{full}'"));
            }
            let wildcard = d.value.contains('*');
            if d.share_threshold && !wildcard {
                return Err(format!(
                    "share_threshold can only be used with wildcard values (containing '*'), but found key '{full}'"
                ));
            }
            let rule = match &d.rate_limit {
                Some(limit) => Some(self.rule_of(&full, &own, d, limit)?),
                None => None,
            };
            let node = self.node();
            self.nodes[node].rule = rule;
            self.nodes[node].share_threshold = d.share_threshold;
            self.nodes[node].value_to_metric = d.value_to_metric;
            let level = &mut self.nodes[parent];
            if wildcard {
                level.wildcards.push(Wildcard {
                    key: d.key.clone(),
                    pattern: d.value.clone(),
                    parts: d.value.split('*').map(str::to_string).collect(),
                    node,
                });
            } else if d.value.is_empty() {
                level.any_value.insert(d.key.clone(), node);
            } else {
                level.exact.insert((d.key.clone(), d.value.clone()), node);
            }
            self.load(node, &full, &own, &d.descriptors)?;
        }
        Ok(())
    }

    fn rule_of(
        &mut self,
        path: &str,
        identity: &str,
        d: &DescriptorEntry,
        limit: &super::file::RateLimitEntry,
    ) -> Result<usize, String> {
        let unit = Unit::from_name(&limit.unit);
        let allowance = match (limit.unlimited, unit) {
            (true, Some(_)) => {
                return Err(format!(
                    "'{path}': should not specify rate limit unit when unlimited"
                ))
            }
            (true, None) => {
                let p = limit.portero.as_ref();
                let shaped = p.is_some_and(|p| {
                    p.algorithm.is_some()
                        || p.burst.is_some()
                        || p.lease.is_some()
                        || p.lease_ms.is_some()
                });
                if shaped {
                    return Err(format!(
                        "'{path}': unlimited counts nothing: algorithm, burst and lease do not apply"
                    ));
                }
                Allowance::Unlimited
            }
            (false, Some(unit)) => {
                if let Some(why) = unit.refuses(limit.requests_per_unit) {
                    return Err(format!("'{path}': {why}"));
                }
                let portero = limit.portero.as_ref();
                let shape = Shape::read(
                    portero.and_then(|p| p.algorithm.as_deref()),
                    portero.and_then(|p| p.burst),
                    limit.requests_per_unit,
                )
                .map_err(|why| format!("'{path}': {why}"))?;
                if limit.requests_per_unit > 0 {
                    // Counted alike in memory and in Redis, or refused now.
                    shape
                        .in_memory(limit.requests_per_unit, unit)
                        .and_then(|_| shape.in_redis(limit.requests_per_unit, unit))
                        .map_err(|why| format!("'{path}': {why}"))?;
                }
                Allowance::Limited {
                    requests_per_unit: limit.requests_per_unit,
                    unit,
                    shape,
                }
            }
            (false, None) => {
                return Err(format!(
                    "'{path}': invalid rate limit unit '{}'",
                    limit.unit
                ))
            }
        };
        for r in &limit.replaces {
            if r.name.is_empty() {
                return Err(format!("'{path}': should not have an empty replaces entry"));
            }
            if r.name == limit.name {
                return Err(format!(
                    "'{path}': replaces should not contain name of same descriptor"
                ));
            }
        }
        let portero = limit.portero.as_ref();
        let capacity = match allowance {
            Allowance::Limited {
                requests_per_unit,
                shape,
                ..
            } => shape.capacity(requests_per_unit),
            Allowance::Unlimited => 0,
        };
        let lease = Lease::read(
            portero.and_then(|p| p.lease),
            portero.and_then(|p| p.lease_ms),
            capacity,
        )
        .map_err(|why| format!("'{path}': {why}"))?;
        let when_down = match portero.and_then(|p| p.when_down.as_deref()) {
            None => None,
            Some(name) => Some(Outage::from_name(name).ok_or_else(|| {
                format!("'{path}': when_down '{name}': expected {}", Outage::NAMES)
            })?),
        };
        self.rules.push(Rule {
            path: path.to_string(),
            identity: identity.to_string(),
            allowance,
            name: limit.name.clone(),
            replaces: limit.replaces.iter().map(|r| r.name.clone()).collect(),
            shadow: d.shadow_mode,
            detailed_metric: d.detailed_metric,
            when_down,
            lease,
        });
        Ok(self.rules.len() - 1)
    }
}
