//! The server's state: the configuration's tree, the counters behind its rules and
//! the statistics, shared by the gRPC and HTTP doors, which both decide through
//! [`Gateway::decide`].

use std::time::{SystemTime, UNIX_EPOCH};

use crate::config::tree::Tree;
use crate::decide::{self, Answer, Refusal, Request};
use crate::limits::Limits;
use crate::stats::Stats;

/// What both doors decide with.
#[derive(Debug)]
pub struct Gateway {
    tree: Tree,
    limits: Limits,
    stats: Stats,
    shadow: bool,
}

impl Gateway {
    /// A gateway for `tree`, each rule keeping at most `max_keys` descriptor values;
    /// `shadow` answers OK to everything (global shadow mode), counting as usual.
    pub fn new(tree: Tree, max_keys: usize, shadow: bool) -> Self {
        let limits = Limits::new(&tree, max_keys);
        Self {
            tree,
            limits,
            stats: Stats::default(),
            shadow,
        }
    }

    /// Decides `request` now (the system clock, ns since the Unix epoch).
    pub fn decide(&self, request: &Request) -> Result<Answer, Refusal> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        self.decide_at(request, now)
    }

    /// Decides `request` at `now` (ns since the Unix epoch).
    pub fn decide_at(&self, request: &Request, now: u64) -> Result<Answer, Refusal> {
        let answer = decide::decide(
            &self.tree,
            &self.limits,
            &self.stats,
            request,
            now,
            self.shadow,
        );
        self.stats.decided(answer.is_ok());
        answer
    }

    /// The statistics.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The configuration's tree.
    pub fn tree(&self) -> &Tree {
        &self.tree
    }
}
