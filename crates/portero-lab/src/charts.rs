//! Every chart the project commits (`docs/*.svg`), drawn from the experiments: the
//! `portero-lab charts DIR` subcommand writes them (`cargo xtask charts` into
//! `docs/`), and a test compares each with the committed file byte for byte.
//!
//! The overload charts put each experiment's headline beside the curve it sits on:
//! the same run with the one parameter that decides it swept, the experiment's own
//! value marked.

use crate::overload::{breaker, goodput, priority, storm, tenants, DEFAULT_SEED, SEC};
use crate::scenario::{self, Scenario};
use crate::sim;
use crate::svg::{self, Panel, Series};

/// One chart: its file name under `docs/` and its SVG text.
#[derive(Debug, Clone)]
pub struct Chart {
    /// The file name, such as `burst.svg`.
    pub file: &'static str,
    /// The SVG document.
    pub svg: String,
}

/// Every committed chart, with the seed the README's figures use.
pub fn all() -> Vec<Chart> {
    let seed = DEFAULT_SEED;
    vec![
        chart("burst.svg", scenario_chart(&scenario::burst())),
        chart("boundary.svg", scenario_chart(&scenario::boundary())),
        chart("goodput.svg", goodput(seed)),
        chart("tenants.svg", tenants(seed)),
        chart("priority.svg", priority(seed)),
        chart("breaker.svg", breaker()),
        chart("storm.svg", storm(seed)),
        chart("planet.svg", planet(seed)),
    ]
}

fn chart(file: &'static str, svg: String) -> Chart {
    Chart { file, svg }
}

/// A rate-limiting scenario through the five algorithms.
pub fn scenario_chart(s: &Scenario) -> String {
    let outcomes =
        sim::simulate(&s.arrivals, s.limit, s.window, &mut |_| {}).expect("a valid scenario");
    svg::render(s, &outcomes)
}

fn secs(ns: u64) -> f64 {
    ns as f64 / SEC as f64
}

/// Goodput per second over the run, and over the line's length.
pub fn goodput(seed: u64) -> String {
    let runs = goodput::run(seed);
    let over_time: Vec<Series> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let points = r
                .goodput
                .iter()
                .enumerate()
                .map(|(s, &g)| (s as f64 + 0.5, f64::from(g)))
                .collect();
            let line = Series::new(r.line.name(), i, points);
            // The two bounded lines overlap at capacity: one dashed keeps both visible.
            if i == 2 {
                line.dashed()
            } else {
                line
            }
        })
        .collect();
    let curve = goodput::queue_curve(seed);
    let pick = |f: fn(&goodput::QueuePoint) -> f64| -> Vec<(f64, f64)> {
        curve.iter().map(|p| (p.queue as f64, f(p))).collect()
    };
    let over_queue = vec![
        Series::new("oldest first", 1, pick(|p| p.oldest)),
        Series::new("newest first", 2, pick(|p| p.newest)),
        Series::new("oldest first, start check", 1, pick(|p| p.oldest_checked)).dashed(),
        Series::new("newest first, start check", 2, pick(|p| p.newest_checked)).dashed(),
    ];
    svg::figure(
        "Goodput: 150/s offered to a service for 100/s, clients giving up after 2 s",
        &format!(
            "simulated time, seed {seed} · start check: a request starts only while its deadline leaves the service time"
        ),
        &[
            Panel {
                heading: format!("Answers in time, second by second (line of {})", goodput::QUEUE),
                x_label: "seconds".into(),
                y_label: "answers in time per second".into(),
                series: over_time,
                marker: None,
            },
            Panel {
                heading: "The same over the line's length (last 30 s)".into(),
                x_label: "requests allowed to wait".into(),
                y_label: "answers in time per second".into(),
                series: over_queue,
                marker: Some((goodput::QUEUE as f64, format!("the experiment: {}", goodput::QUEUE))),
            },
        ],
    )
}

/// Fair shedding over the size of its reserve.
pub fn tenants(seed: u64) -> String {
    let [random, _] = tenants::run(seed);
    let curve = tenants::reserve_curve(seed);
    // A panel per measure: fair shedding over the size of the reserve, against random
    // shedding, which keeps no reserve (one value, drawn across).
    let panel = |heading: &str, y_label: &str, measure: fn(&tenants::Run) -> f64| {
        let fair = curve
            .iter()
            .map(|(r, run)| (f64::from(*r), measure(run)))
            .collect();
        let plain = measure(&random);
        let across = vec![
            (f64::from(*tenants::RESERVES.start()), plain),
            (f64::from(*tenants::RESERVES.end()), plain),
        ];
        Panel {
            heading: heading.into(),
            x_label: "slots kept for tenants below their share (reserve)".into(),
            y_label: y_label.into(),
            series: vec![
                Series::new("fair", 1, fair),
                Series::new("random", 0, across).dashed(),
            ],
            marker: Some((
                f64::from(tenants::RESERVE),
                format!("the experiment: {}", tenants::RESERVE),
            )),
        }
    };
    svg::figure(
        "Tenants: 30 small tenants at 1/s and one at 170/s share 100 slots",
        &format!(
            "simulated time, seed {seed} · fair shedding (FairShare) against random shedding (a plain limit)"
        ),
        &[
            panel(
                "What the small tenants lose",
                "small tenants' requests refused, %",
                tenants::Run::small_lost_percent,
            ),
            panel(
                "What the big tenant keeps",
                "big tenant's requests served per second",
                tenants::Run::big_served_per_second,
            ),
        ],
    )
}

/// Each class's losses over the offered load, by priority against a plain limit.
pub fn priority(seed: u64) -> String {
    let curve = priority::load_curve(seed);
    let mut series: Vec<Series> = priority::CLASSES
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let points = curve
                .iter()
                .map(|[_, by]| (by.offered, by.lost_percent(i)))
                .collect();
            Series::new(format!("{}, by priority", c.name), i, points)
        })
        .collect();
    // A plain limit does not look at the class: one line for all three (the critical
    // one's, drawn).
    series.push(
        Series::new(
            "any class, plain limit",
            5,
            curve
                .iter()
                .map(|[plain, _]| (plain.offered, plain.lost_percent(0)))
                .collect(),
        )
        .dashed(),
    );
    let throughput = |k: usize| -> Vec<(f64, f64)> {
        curve
            .iter()
            .map(|runs| (runs[k].offered, runs[k].throughput()))
            .collect()
    };
    let marker = Some((
        priority::OFFERED,
        format!("the experiment: {}/s", priority::OFFERED),
    ));
    svg::figure(
        "Priority: three classes through one service for 100/s",
        &format!(
            "simulated time, seed {seed} · LoadShedLayer::by_priority over PriorityLimit::three_classes(100) against LoadShedLayer::new (plain limit of 100)"
        ),
        &[
            Panel {
                heading: "Requests refused per class (a tenth critical, six tenths default, three tenths sheddable)"
                    .into(),
                x_label: "requests offered per second".into(),
                y_label: "refused, % of the class".into(),
                series,
                marker: marker.clone(),
            },
            Panel {
                heading: "What it costs: requests served per second, all classes".into(),
                x_label: "requests offered per second".into(),
                y_label: "served per second".into(),
                series: vec![
                    Series::new("by priority", 1, throughput(1)),
                    Series::new("plain limit", 5, throughput(0)).dashed(),
                ],
                marker,
            },
        ],
    )
}

/// Recovery over the heal time, and calls reaching the dead dependency over the call
/// timeout.
pub fn breaker() -> String {
    let recovery: Vec<Series> = breaker::OPEN_PERIODS
        .iter()
        .enumerate()
        .map(|(i, &open)| {
            let points = breaker::recovery_curve(open)
                .into_iter()
                .map(|(outage, r)| (secs(outage), secs(r)))
                .collect();
            Series::new(format!("open {} s", open.as_secs()), i, points)
        })
        .collect();
    let timeouts = breaker::timeout_curve();
    let reached = |f: fn(&(u64, breaker::Run, breaker::Run)) -> u64| -> Vec<(f64, f64)> {
        timeouts.iter().map(|p| (secs(p.0), f(p) as f64)).collect()
    };
    svg::figure(
        "Breaker: a dependency down from 10 s, called 50 times a second",
        "simulated time · breaker: 5 failures in a row open it, one probe per open period",
        &[
            Panel {
                heading: "Recovery: from the heal to the first call through".into(),
                x_label: "how long the dependency was down, s".into(),
                y_label: "recovered after the heal, s".into(),
                series: recovery,
                marker: Some((
                    secs(breaker::DOWN_UNTIL - breaker::DOWN_FROM),
                    "the experiment: 60 s".into(),
                )),
            },
            Panel {
                heading: "Calls that reach the dead dependency, when each hangs until a timeout"
                    .into(),
                x_label: "call timeout, s (0: a failure answers at once)".into(),
                y_label: "calls reaching it during the 60 s outage".into(),
                series: vec![
                    Series::new("breaker, open 30 s", 1, reached(|p| p.2.reached_while_down)),
                    Series::new("no breaker", 0, reached(|p| p.1.reached_while_down)).dashed(),
                ],
                marker: Some((0.0, "the experiment: 0".into())),
            },
        ],
    )
}

/// The load while the server is down, and the requests answered, over the backoff
/// base.
pub fn storm(seed: u64) -> String {
    let [immediate, _] = storm::amplification(seed);
    let curve = storm::base_curve(seed);
    let pick = |f: &dyn Fn(
        &(
            std::time::Duration,
            storm::Amplification,
            storm::Amplification,
        ),
    ) -> f64| {
        curve
            .iter()
            .map(|p| (p.0.as_secs_f64(), f(p)))
            .collect::<Vec<_>>()
    };
    let ends = |v: f64| {
        vec![
            (storm::BASE_STEP.as_secs_f64(), v),
            (storm::LONGEST_BASE.as_secs_f64(), v),
        ]
    };
    let marker = Some((
        storm::Client::EXPERIMENT.base.as_secs_f64(),
        "the experiment: 1 s".to_string(),
    ));
    svg::figure(
        "Storm: 100/s to a server refusing everything for 10 s, 3 retries each",
        &format!(
            "simulated time, seed {seed} · backoff with full jitter, cap 30 s; the server sends Retry-After: 1"
        ),
        &[
            Panel {
                heading: "Load on the server while it refuses".into(),
                x_label: "backoff base (first retry's ceiling), s".into(),
                y_label: "requests per second, first 10 s".into(),
                series: vec![
                    Series::new("after Retry-After", 1, pick(&|p| p.1.load_while_down)),
                    Series::new("Retry-After ignored", 2, pick(&|p| p.2.load_while_down)),
                    Series::new("immediate retries", 0, ends(immediate.load_while_down)).dashed(),
                ],
                marker: marker.clone(),
            },
            Panel {
                heading: "Requests answered in the end (of 2,000)".into(),
                x_label: "backoff base (first retry's ceiling), s".into(),
                y_label: "requests answered".into(),
                series: vec![
                    Series::new("after Retry-After", 1, pick(&|p| p.1.answered as f64)),
                    Series::new("Retry-After ignored", 2, pick(&|p| p.2.answered as f64)),
                    Series::new("immediate retries", 0, ends(immediate.answered as f64)).dashed(),
                ],
                marker,
            },
        ],
    )
}

/// The planet sweep at 4 isolates per location: over-admission and p99 latency.
pub fn planet(seed: u64) -> String {
    crate::planet::report::chart(&crate::planet::report::sweep_isolates(4, seed), 4)
}
