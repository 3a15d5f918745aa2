//! The statistics envoyproxy/ratelimit keeps per rule (or per descriptor, where a rule
//! asks for detail): hits, hits over the limit, near it (past 80 % of the window),
//! within it, and those a shadow rule let through; and how many decisions were made.
//! Rendered in Prometheus' text format.
//!
//! Invariant: at most [`MOST_NAMES`] names are kept, so descriptor values sent in a
//! flood cannot grow the statistics without bound: the hits of a name that finds no
//! room are counted under [`OVERFLOW`].

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::RwLock;

/// The most names counted apart.
pub const MOST_NAMES: usize = 10_000;
/// The longest name kept whole, in bytes: a longer one (descriptor values of any
/// length make names) is cut and ends with a hash of the whole, so statistics cannot
/// grow with the size of the values sent.
pub const MOST_NAME_BYTES: usize = 256;
/// The name that counts what found no room.
pub const OVERFLOW: &str = "overflow";
/// The upper bounds of the decision-latency histogram's buckets, in µs (the last
/// bucket, `+Inf`, takes the rest).
pub const LATENCY_BOUNDS_US: [u64; 10] =
    [25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 50_000];

/// Past this share of a window's limit, hits count as near it.
const NEAR: (u64, u64) = (4, 5);

/// A series of the rendering: its name, its help, and its counter.
type Series = (&'static str, &'static str, fn(&Counters) -> &AtomicU64);

#[derive(Debug, Default)]
struct Counters {
    total_hits: AtomicU64,
    over_limit: AtomicU64,
    near_limit: AtomicU64,
    within_limit: AtomicU64,
    shadow_mode: AtomicU64,
}

/// The server's statistics.
#[derive(Debug, Default)]
pub struct Stats {
    names: RwLock<HashMap<String, Counters>>,
    decisions: AtomicU64,
    errors: AtomicU64,
    redis_unavailable: AtomicU64,
    /// Decisions by latency bucket (not cumulative), and their summed µs.
    latency: [AtomicU64; LATENCY_BOUNDS_US.len() + 1],
    latency_sum_us: AtomicU64,
}

impl Stats {
    /// Counts `hits` of the descriptor named `name`: `over` its limit (a shadow rule's
    /// `shadowed` ones let through), with `used` of `limit` units spent after them.
    pub fn count(&self, name: &str, hits: u64, over: bool, shadowed: bool, used: u64, limit: u64) {
        let bounded = bounded(name);
        let name = bounded.as_ref();
        let near_from = limit * NEAR.0 / NEAR.1;
        let near = if !over && used > near_from {
            hits.min(used - near_from)
        } else {
            0
        };
        let add = |c: &Counters| {
            c.total_hits.fetch_add(hits, Relaxed);
            if over {
                c.over_limit.fetch_add(hits, Relaxed);
            } else {
                c.within_limit.fetch_add(hits, Relaxed);
            }
            c.near_limit.fetch_add(near, Relaxed);
            if shadowed {
                c.shadow_mode.fetch_add(hits, Relaxed);
            }
        };
        {
            let names = self.names.read().unwrap_or_else(|e| e.into_inner());
            if let Some(c) = names.get(name) {
                return add(c);
            }
        }
        let mut names = self.names.write().unwrap_or_else(|e| e.into_inner());
        let key = if names.len() < MOST_NAMES || names.contains_key(name) {
            name
        } else {
            OVERFLOW
        };
        add(names.entry(key.to_string()).or_default());
    }

    /// Counts one decision (`ok`: answered; otherwise refused as malformed).
    pub fn decided(&self, ok: bool) {
        if ok {
            self.decisions.fetch_add(1, Relaxed);
        } else {
            self.errors.fetch_add(1, Relaxed);
        }
    }

    /// Counts one decision's latency (from the request read to the answer made).
    pub fn took(&self, elapsed: std::time::Duration) {
        let us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        let bucket = LATENCY_BOUNDS_US
            .iter()
            .position(|&bound| us <= bound)
            .unwrap_or(LATENCY_BOUNDS_US.len());
        self.latency[bucket].fetch_add(1, Relaxed);
        self.latency_sum_us.fetch_add(us, Relaxed);
    }

    /// Decisions per latency bucket ([`LATENCY_BOUNDS_US`], then the rest).
    pub fn latencies(&self) -> Vec<u64> {
        self.latency.iter().map(|c| c.load(Relaxed)).collect()
    }

    /// Counts a check that Redis did not decide (away, too slow, or answering with
    /// an error): the outage policies answered it.
    pub fn redis_unavailable(&self) {
        self.redis_unavailable.fetch_add(1, Relaxed);
    }

    /// How many checks Redis did not decide.
    pub fn redis_unavailable_total(&self) -> u64 {
        self.redis_unavailable.load(Relaxed)
    }

    /// The hits counted for `name`: total, over, near, within, shadow.
    pub fn of(&self, name: &str) -> Option<[u64; 5]> {
        let names = self.names.read().unwrap_or_else(|e| e.into_inner());
        names.get(bounded(name).as_ref()).map(|c| {
            [
                c.total_hits.load(Relaxed),
                c.over_limit.load(Relaxed),
                c.near_limit.load(Relaxed),
                c.within_limit.load(Relaxed),
                c.shadow_mode.load(Relaxed),
            ]
        })
    }

    /// Everything, in Prometheus' text format.
    pub fn render(&self) -> String {
        let names = self.names.read().unwrap_or_else(|e| e.into_inner());
        let mut sorted: Vec<_> = names.iter().collect();
        sorted.sort_by(|a, b| a.0.cmp(b.0));
        let mut out = String::new();
        let series: [Series; 5] = [
            ("total_hits", "hits", |c| &c.total_hits),
            ("over_limit", "hits over the limit", |c| &c.over_limit),
            ("near_limit", "hits past 80 % of the limit", |c| {
                &c.near_limit
            }),
            ("within_limit", "hits within the limit", |c| &c.within_limit),
            (
                "shadow_mode",
                "hits over a shadow rule's limit, let through",
                |c| &c.shadow_mode,
            ),
        ];
        for (metric, help, field) in series {
            let _ = writeln!(out, "# HELP portero_ratelimit_{metric} {help}, by rule");
            let _ = writeln!(out, "# TYPE portero_ratelimit_{metric} counter");
            for (name, c) in &sorted {
                let _ = writeln!(
                    out,
                    "portero_ratelimit_{metric}{{key=\"{}\"}} {}",
                    escaped(name),
                    field(c).load(Relaxed)
                );
            }
        }
        let _ = writeln!(
            out,
            "# HELP portero_ratelimit_decisions_total requests decided"
        );
        let _ = writeln!(out, "# TYPE portero_ratelimit_decisions_total counter");
        let _ = writeln!(
            out,
            "portero_ratelimit_decisions_total{{result=\"answered\"}} {}",
            self.decisions.load(Relaxed)
        );
        let _ = writeln!(
            out,
            "portero_ratelimit_decisions_total{{result=\"malformed\"}} {}",
            self.errors.load(Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP portero_ratelimit_redis_unavailable_total checks the outage policies answered (Redis away, slow or erring)"
        );
        let _ = writeln!(
            out,
            "# TYPE portero_ratelimit_redis_unavailable_total counter"
        );
        let _ = writeln!(
            out,
            "portero_ratelimit_redis_unavailable_total {}",
            self.redis_unavailable.load(Relaxed)
        );
        self.render_latency(&mut out);
        out
    }

    /// The decision-latency histogram, cumulative as Prometheus reads it.
    fn render_latency(&self, out: &mut String) {
        let name = "portero_ratelimit_decision_seconds";
        let _ = writeln!(out, "# HELP {name} time to decide a request");
        let _ = writeln!(out, "# TYPE {name} histogram");
        let mut seen = 0;
        for (i, bound) in LATENCY_BOUNDS_US.iter().enumerate() {
            seen += self.latency[i].load(Relaxed);
            let le = *bound as f64 / 1e6;
            let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {seen}");
        }
        seen += self.latency[LATENCY_BOUNDS_US.len()].load(Relaxed);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {seen}");
        let sum = self.latency_sum_us.load(Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum {sum}");
        let _ = writeln!(out, "{name}_count {seen}");
    }
}

/// `name`, or for one longer than [`MOST_NAME_BYTES`] its start and a hash of the
/// whole (the same every run: a fixed SipHash key).
pub fn bounded(name: &str) -> std::borrow::Cow<'_, str> {
    use std::hash::{Hash, Hasher};
    if name.len() <= MOST_NAME_BYTES {
        return std::borrow::Cow::Borrowed(name);
    }
    let mut cut = MOST_NAME_BYTES - 24;
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    name.hash(&mut h);
    std::borrow::Cow::Owned(format!("{}…#{:016x}", &name[..cut], h.finish()))
}

/// A label value as Prometheus' text format writes it.
fn escaped(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
