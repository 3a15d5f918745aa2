//! The planet sweep's rows, and their table, JSON and chart.

use serde_json::json;

use super::{places, run, topologies, Outcome, Setup, Topology, ISOLATES, LOCATIONS, SPAN};
use crate::overload::DEFAULT_SEED;
use crate::svg::{figure, Panel, Series};

/// One topology at one (locations, isolates).
#[derive(Debug, Clone)]
pub struct Row {
    /// Locations.
    pub locations: usize,
    /// Isolates per location.
    pub isolates: usize,
    /// The topology.
    pub topology: Topology,
    /// The hottest key's most admissions in any minute ÷ what the rule admits in one.
    pub over: f64,
    /// The most any key was admitted in any minute ÷ what the rule admits in one.
    pub worst: f64,
    /// Median decision latency (ms).
    pub p50_ms: f64,
    /// 99th percentile decision latency (ms).
    pub p99_ms: f64,
    /// 99th percentile decision latency of the hottest key's requests (ms).
    pub hot_p99_ms: f64,
    /// The share of requests that waited on a round trip to the object.
    pub waited: f64,
    /// What the hottest key asked for ÷ what its rule admits (above 1: most of its
    /// requests are refusals, which only the object can give once a remembered one
    /// has run out).
    pub hot_demand: f64,
    /// Object calls per request.
    pub calls: f64,
}

impl Row {
    fn of(setup: &Setup, outcome: &Outcome) -> Self {
        let allowed = setup.allowance(SPAN) as f64;
        let worst = (0..setup.keys as usize)
            .map(|k| outcome.most_in(k, SPAN))
            .max()
            .unwrap_or(0);
        let requests = outcome.latency_ms.len().max(1) as f64;
        Self {
            locations: setup.locations,
            isolates: setup.isolates,
            topology: outcome.topology,
            over: outcome.most_in(0, SPAN) as f64 / allowed,
            worst: worst as f64 / allowed,
            p50_ms: outcome.latency_at(0.5),
            p99_ms: outcome.latency_at(0.99),
            hot_p99_ms: outcome.latency_of(0, 0.99),
            waited: outcome.waited(),
            hot_demand: {
                let asked = outcome.keys.iter().filter(|&&k| k == 0).count() as f64;
                let minutes = setup.seconds as f64 / 60.0;
                asked / minutes / setup.limit as f64
            },
            calls: outcome.calls as f64 / requests,
        }
    }
}

/// Every topology at every (locations, isolates) of the sweep.
pub fn sweep(seed: u64) -> Vec<Row> {
    LOCATIONS
        .iter()
        .flat_map(|&l| ISOLATES.iter().flat_map(move |&i| rows_at(l, i, seed)))
        .collect()
}

/// Every topology at every number of locations, `isolates` per location (the chart's).
pub fn sweep_isolates(isolates: usize, seed: u64) -> Vec<Row> {
    LOCATIONS
        .iter()
        .flat_map(|&l| rows_at(l, isolates, seed))
        .collect()
}

fn rows_at(locations: usize, isolates: usize, seed: u64) -> Vec<Row> {
    let setup = Setup::at(locations, isolates, seed);
    topologies()
        .into_iter()
        .map(|t| Row::of(&setup, &run(&setup, t)))
        .collect()
}

/// The sweep's traffic and rule in words (from [`Setup::at`], so they cannot drift).
pub fn described(seed: u64) -> String {
    let s = Setup::at(1, 1, seed);
    format!(
        "{} requests/s for {} s over {} keys (Zipf 1.1) from L locations (Zipf 1), I isolates each; \
         GCRA {} per minute per key, burst {}; the object at the busiest location; leases of {} s; seed {seed}",
        s.rate, s.seconds, s.keys, s.limit, s.burst, s.lease_ms / 1_000
    )
}

/// The rows as a table, one block per (locations, isolates).
pub fn table(rows: &[Row]) -> String {
    let mut out = String::new();
    let mut last = None;
    for r in rows {
        if last != Some((r.locations, r.isolates)) {
            last = Some((r.locations, r.isolates));
            out.push_str(&format!(
                "\n{} locations x {} isolates (farthest round trip {:.0} ms; the hottest key asks {:.1}x its rule)\n{:<26} {:>8} {:>10} {:>7} {:>7} {:>11} {:>7} {:>10}\n",
                r.locations,
                r.isolates,
                (0..r.locations).map(places::round_trip_ms).fold(0.0, f64::max),
                r.hot_demand,
                "topology",
                "hot key",
                "worst key",
                "p50 ms",
                "p99 ms",
                "hot p99 ms",
                "waited",
                "calls/req"
            ));
        }
        out.push_str(&format!(
            "{:<26} {:>7.2}x {:>9.2}x {:>7.1} {:>7.1} {:>11.1} {:>6.1}% {:>10.3}\n",
            r.topology.name(),
            r.over,
            r.worst,
            r.p50_ms,
            r.p99_ms,
            r.hot_p99_ms,
            100.0 * r.waited,
            r.calls
        ));
    }
    out
}

/// The rows as JSON: `{"rows": [{locations, isolates, topology, over, worst, p50_ms,
/// p99_ms, hot_key_p99_ms, waited_on_round_trip, calls_per_request}, …]}`.
pub fn json(rows: &[Row]) -> serde_json::Value {
    let rows: Vec<_> = rows
        .iter()
        .map(|r| {
            json!({
                "locations": r.locations,
                "isolates": r.isolates,
                "topology": r.topology.name(),
                "over": r.over,
                "worst": r.worst,
                "p50_ms": r.p50_ms,
                "p99_ms": r.p99_ms,
                "hot_key_p99_ms": r.hot_p99_ms,
                "hot_key_demand": r.hot_demand,
                "waited_on_round_trip": r.waited,
                "calls_per_request": r.calls,
            })
        })
        .collect();
    json!({ "rows": rows })
}

/// Two panels over the locations, at `isolates` per location: the hottest key's
/// over-admission, and the p99 decision latency, one line per topology.
pub fn chart(rows: &[Row], isolates: usize) -> String {
    let setup = Setup::at(1, isolates, DEFAULT_SEED);
    let line = |f: fn(&Row) -> f64| -> Vec<Series> {
        topologies()
            .into_iter()
            .enumerate()
            .map(|(color, topology)| {
                let points = rows
                    .iter()
                    .filter(|r| r.isolates == isolates && r.topology == topology)
                    .map(|r| (r.locations as f64, f(r)))
                    .collect();
                Series::new(topology.name(), color, points).dashed_if(topology == Topology::Exact)
            })
            .collect()
    };
    figure(
        "One limit for the planet: what each topology admits, and how long it makes a request wait",
        &format!(
            "simulated · {} req/s, {} keys · GCRA {} per minute per key, burst {} · leases of {} s · {isolates} isolates per location",
            setup.rate,
            setup.keys,
            setup.limit,
            setup.burst,
            setup.lease_ms / 1_000
        ),
        &[
            Panel {
                heading: "The hottest key: most admitted in any minute ÷ what the rule admits".into(),
                x_label: "locations".into(),
                y_label: "× the rule".into(),
                series: line(|r| r.over),
                marker: None,
            },
            Panel {
                heading: "Decision latency, 99th percentile".into(),
                x_label: "locations".into(),
                y_label: "ms".into(),
                series: line(|r| r.p99_ms),
                marker: None,
            },
            Panel {
                heading: "Requests that waited on a round trip to the object".into(),
                x_label: "locations".into(),
                y_label: "% of requests".into(),
                series: line(|r| 100.0 * r.waited),
                marker: None,
            },
        ],
    )
}
