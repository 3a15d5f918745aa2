//! The server's state: the configuration's tree, the counters behind its rules and
//! the statistics, shared by the gRPC and HTTP doors, which both decide through
//! [`Gateway::decide`].
//!
//! Invariant: a request is decided entirely on one configuration (a snapshot taken
//! when it starts); a reload builds the new tree and its counters beside the old and
//! swaps them in at once, carrying over the counters of every rule whose place and
//! allowance did not change, so a reload under load loses no count of those.

use std::sync::{Arc, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::config::tree::Tree;
use crate::decide::{self, Answer, Refusal, Request};
use crate::headers::HeaderStyle;
use crate::limits::Limits;
use crate::plan;
use crate::shared::{self, Shared};
use crate::stats::Stats;

/// What both doors decide with.
#[derive(Debug)]
pub struct Gateway {
    current: RwLock<Arc<Snapshot>>,
    stats: Stats,
    shadow: bool,
    max_keys: usize,
    shared: Option<Shared>,
    headers: HeaderStyle,
}

/// One configuration and its counters.
#[derive(Debug)]
struct Snapshot {
    tree: Tree,
    limits: Limits,
}

impl Gateway {
    /// A gateway for `tree`, each rule keeping at most `max_keys` descriptor values;
    /// `shadow` answers OK to everything (global shadow mode), counting as usual.
    ///
    /// # Panics
    ///
    /// When memory cannot hold the rules' tables: [`try_new`](Self::try_new) says so
    /// instead.
    pub fn new(tree: Tree, max_keys: usize, shadow: bool) -> Self {
        Self::try_new(tree, max_keys, shadow).unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`new`](Self::new), or why memory cannot hold the rules' tables (each is
    /// allocated whole when the configuration loads: about 31 bytes a key).
    pub fn try_new(tree: Tree, max_keys: usize, shadow: bool) -> Result<Self, String> {
        let limits = Limits::new(&tree, max_keys).map_err(|e| e.to_string())?;
        Ok(Self {
            current: RwLock::new(Arc::new(Snapshot { tree, limits })),
            stats: Stats::default(),
            shadow,
            max_keys,
            shared: None,
            headers: HeaderStyle::default(),
        })
    }

    /// Answers carry the headers of `style` for Envoy to add to its response.
    pub fn with_headers(mut self, style: HeaderStyle) -> Self {
        self.headers = style;
        self
    }

    /// The headers `answer` asks Envoy to add to its response.
    pub fn headers_of(&self, answer: &Answer) -> Vec<(String, String)> {
        self.headers.of(answer)
    }

    /// Counts in Redis (`shared`) instead of this process's memory: every instance
    /// naming the same Redis shares every limit. The memory counters stay for the
    /// rules whose outage policy is `local`.
    pub fn with_redis(mut self, shared: Shared) -> Self {
        self.shared = Some(shared);
        self
    }

    /// Replaces the configuration with `tree`; returns how many of its rules kept
    /// their counters (same place, same allowance), or why memory cannot hold the new
    /// rules' tables (the configuration in use then stays).
    pub fn reload(&self, tree: Tree) -> Result<usize, String> {
        let old = self.snapshot();
        let (limits, kept) = Limits::carried(&tree, &old.tree, &old.limits, self.max_keys)
            .map_err(|e| e.to_string())?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) =
            Arc::new(Snapshot { tree, limits });
        Ok(kept)
    }

    fn snapshot(&self) -> Arc<Snapshot> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// How many rules the configuration holds.
    pub fn rules(&self) -> usize {
        self.snapshot().tree.rules().len()
    }

    /// Decides `request` now (the system clock, ns since the Unix epoch), in Redis
    /// if the gateway has it, else in memory.
    pub async fn decide(&self, request: &Request) -> Result<Answer, Refusal> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        let started = std::time::Instant::now();
        let Some(shared) = &self.shared else {
            let answer = self.decide_at(request, now);
            self.stats.took(started.elapsed());
            return answer;
        };
        let now_config = self.snapshot();
        let answer = match plan::plan(&now_config.tree, request) {
            Ok(None) => Ok(decide::unknown_domain(request)),
            Ok(Some(plan)) => {
                shared::decide_shared(
                    shared,
                    &now_config.tree,
                    &now_config.limits,
                    &self.stats,
                    request,
                    plan,
                    now,
                    self.shadow,
                )
                .await
            }
            Err(e) => Err(e),
        };
        self.stats.decided(answer.is_ok());
        self.stats.took(started.elapsed());
        answer
    }

    /// Decides `request` at `now` (ns since the Unix epoch) with the counters in this
    /// process's memory, whatever the store (the time is the caller's: tests, and
    /// every decision of a gateway without Redis).
    pub fn decide_at(&self, request: &Request, now: u64) -> Result<Answer, Refusal> {
        let now_config = self.snapshot();
        let answer = decide::decide(
            &now_config.tree,
            &now_config.limits,
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
}
