//! The study's rows as a table, as JSON, and as a chart (the lab's chart code).

use serde_json::{json, Value};

use super::study::{Row, Study};
use super::subjects::Subject;
use crate::svg::{self, Panel, Series};

/// The table: one line per (subject, threads); a thread count above this machine's
/// cores is marked `*` and explained under the table.
pub fn table(rows: &[Row]) -> String {
    let cores = super::study::cores();
    // As wide as the longest subject's name.
    let w = Subject::ALL
        .iter()
        .map(|s| s.name().len())
        .max()
        .unwrap_or(0);
    let mut out = format!(
        "{:<w$} {:>7} {:>10} {:>17} {:>7} {:>8} {:>8} {:>9}  {}\n",
        "subject",
        "threads",
        "Mops/s",
        "runs (min-max)",
        "effic.",
        "p50 ns",
        "p99 ns",
        "p99.9 ns",
        "audit run: quota per key; largest key admitted / allowed; refused"
    );
    for r in rows {
        let (lo, hi) = (r.mops[0], r.mops[r.mops.len() - 1]);
        let audit = audit_cell(&r.audit);
        let threads = if r.threads > cores {
            format!("{}*", r.threads)
        } else {
            r.threads.to_string()
        };
        out.push_str(&format!(
            "{:<w$} {:>7} {:>10.1} {:>8.1}-{:<8.1} {:>6.0}% {:>8.0} {:>8.0} {:>9.0}  {}\n",
            r.subject.name(),
            threads,
            r.median_mops(),
            lo,
            hi,
            100.0 * r.efficiency,
            r.latency_ns[0],
            r.latency_ns[1],
            r.latency_ns[2],
            audit
        ));
    }
    if rows.iter().any(|r| r.threads > cores) {
        out.push_str(&format!(
            "* more threads than this machine's {cores} cores (--oversubscribe): they take turns on the cores, \
             so these rows measure the OS's scheduler as much as the subject\n"
        ));
    }
    out
}

/// The audit column: the quota each key was held to, the largest key's admissions
/// against what one key may admit, and the share refused.
fn audit_cell(a: &super::study::Audit) -> String {
    let (Some(q), Some(allowed)) = (a.quota, a.allowed) else {
        return format!("no quota ({} admitted)", a.admitted);
    };
    let verdict = if a.holds() {
        "ok".to_string()
    } else {
        format!("OVER in {} of {} keys", a.over, a.keys)
    };
    format!(
        "{}/s b{} x {} key{}; {} / {} {verdict}; {:.0}% refused",
        q.limit(),
        q.burst(),
        a.keys,
        if a.keys == 1 { "" } else { "s" },
        a.largest,
        allowed,
        100.0 * a.refused_share()
    )
}

/// What the table means for this machine, from its own figures: the fastest subject
/// whose audit held, at the most threads measured, for one hot global limit and for
/// keyed limits (`None` when the rows have neither).
pub fn verdict(rows: &[Row]) -> Option<String> {
    let most = rows.iter().map(|r| r.threads).max()?;
    let best = |family: &[Subject]| {
        rows.iter()
            .filter(|r| {
                r.threads == most
                    && family.contains(&r.subject)
                    && r.subject.exact()
                    && r.audit.holds()
            })
            .max_by(|a, b| a.median_mops().total_cmp(&b.median_mops()))
    };
    let hot = [
        Subject::GcraAdmit,
        Subject::KeyedHot,
        Subject::Striped,
        Subject::GovernorDirect,
        Subject::Mutex,
    ];
    let keyed = [
        Subject::Keyed10kUniform,
        Subject::Keyed10kZipf,
        Subject::Governor10kUniform,
        Subject::Pingora10kUniform,
        Subject::Limitador10kUniform,
    ];
    let say = |what: &str, r: Option<&Row>| {
        r.map(|r| {
            format!(
                "{what}: {} ({:.1} Mops/s)",
                r.subject.name(),
                r.median_mops()
            )
        })
    };
    let parts: Vec<String> = [
        say("one hot global limit", best(&hot)),
        say("keyed limits (10,000 keys)", best(&keyed)),
    ]
    .into_iter()
    .flatten()
    .collect();
    (!parts.is_empty()).then(|| {
        format!(
            "On this machine, at {most} thread{}, the fastest that held its quota — {}.",
            if most == 1 { "" } else { "s" },
            parts.join("; ")
        )
    })
}

/// The 1-minute load average (`/proc/loadavg`), where the OS tells it: a study run on a
/// machine busy with something else reads low, and this says so.
pub fn load_average() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// Every figure, for `--json`: the study's settings, the machine, and each row.
pub fn json(study: &Study, rows: &[Row], machine: &str, pinned: bool) -> Value {
    json!({
        "machine": machine,
        "cores": super::study::cores(),
        "pinned": pinned,
        "runs": study.runs,
        "duration_ms": study.duration.as_millis() as u64,
        "latency_samples_per_thread": study.samples,
        "rows": rows.iter().map(|r| json!({
            "subject": r.subject.name(),
            "threads": r.threads,
            "oversubscribed": r.threads > super::study::cores(),
            "mops": { "median": r.median_mops(), "runs": r.mops },
            "efficiency": r.efficiency,
            "latency_ns": { "p50": r.latency_ns[0], "p99": r.latency_ns[1], "p999": r.latency_ns[2] },
            "audit": {
                "quota_per_second": r.audit.quota.map(|q| q.limit()),
                "burst": r.audit.quota.map(|q| q.burst()),
                "keys": r.audit.keys,
                "checks": r.audit.checks,
                "admitted": r.audit.admitted,
                "largest_key_admitted": r.audit.largest,
                "allowed_per_key": r.audit.allowed,
                "keys_over": r.audit.over,
                "holds": r.audit.holds(),
            },
        })).collect::<Vec<_>>(),
    })
}

/// The chart's families: one limit shared by every thread, a limit per key over a
/// table, and every thread on one key; portero beside its peers in each.
const FAMILIES: [(&str, &[Subject]); 3] = [
    (
        "One limit shared by every thread",
        &[
            Subject::FloorCas,
            Subject::GcraAdmit,
            Subject::GcraReject,
            Subject::Striped,
            Subject::GovernorDirect,
            Subject::Mutex,
        ],
    ),
    (
        "A limit per key (10,000 and 1,000,000 keys)",
        &[
            Subject::Keyed10kUniform,
            Subject::Keyed10kZipf,
            Subject::Keyed1mUniform,
            Subject::Keyed1mZipf,
            Subject::Governor10kUniform,
            Subject::Pingora10kUniform,
            Subject::Limitador10kUniform,
        ],
    ),
    (
        "Every thread on one key",
        &[
            Subject::FloorCas,
            Subject::KeyedHot,
            Subject::GcraAdmit,
            Subject::GovernorDirect,
        ],
    ),
];

/// Small multiples: throughput, then p99, for each family of subjects, over a log2
/// thread axis (a dot per measurement, the machine's core count marked; thread counts
/// past it are oversubscribed).
pub fn chart(rows: &[Row], machine: &str) -> String {
    let cores = super::study::cores();
    let color = |s: Subject| Subject::ALL.iter().position(|&x| x == s).unwrap_or(0);
    let series = |family: &[Subject], y: fn(&Row) -> f64| -> Vec<Series> {
        family
            .iter()
            .filter(|&&s| rows.iter().any(|r| r.subject == s))
            .map(|&s| {
                let points = rows
                    .iter()
                    .filter(|r| r.subject == s)
                    .map(|r| (r.threads as f64, y(r)))
                    .collect();
                Series::new(s.name(), color(s), points)
                    .dashed_if(s == Subject::FloorCas)
                    .dotted()
            })
            .collect()
    };
    let mark = Some((cores as f64, format!("{cores} cores")));
    let mut panels = Vec::new();
    for (y_label, y) in [
        (
            "million checks per second",
            Row::median_mops as fn(&Row) -> f64,
        ),
        ("p99 of one check, ns", |r: &Row| r.latency_ns[1]),
    ] {
        for (heading, family) in FAMILIES {
            let lines = series(family, y);
            if lines.is_empty() {
                continue;
            }
            let what = if y_label.starts_with("million") {
                "throughput"
            } else {
                "latency"
            };
            panels.push(Panel {
                heading: format!("{heading}: {what}"),
                x_label: "threads (log2)".into(),
                y_label: y_label.into(),
                series: lines,
                marker: mark.clone(),
            });
        }
    }
    svg::figure_log2_x(
        "Contention: T threads on one limiter",
        &format!(
            "{machine} · median of the timed runs; p99 of single checks; the core count marked"
        ),
        &panels,
    )
}
