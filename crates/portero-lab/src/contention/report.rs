//! The study's rows as a table, as JSON, and as a chart (the lab's chart code).

use serde_json::{json, Value};

use super::study::{Row, Study};
use super::subjects::Subject;
use crate::svg::{self, Panel, Series};

/// The table: one line per (subject, threads); a thread count above this machine's
/// cores is marked `*` and explained under the table.
pub fn table(rows: &[Row]) -> String {
    let cores = super::study::cores();
    let mut out = format!(
        "{:<28} {:>7} {:>10} {:>17} {:>7} {:>8} {:>8} {:>9}  {}\n",
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
            "{:<28} {:>7} {:>10.1} {:>8.1}-{:<8.1} {:>6.0}% {:>8.0} {:>8.0} {:>9.0}  {}\n",
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

/// Throughput and p99 over threads, one line per subject.
pub fn chart(rows: &[Row], machine: &str) -> String {
    let mut subjects: Vec<Subject> = Vec::new();
    for r in rows {
        if !subjects.contains(&r.subject) {
            subjects.push(r.subject);
        }
    }
    let series = |y: fn(&Row) -> f64| -> Vec<Series> {
        subjects
            .iter()
            .enumerate()
            .map(|(i, &s)| {
                let points = rows
                    .iter()
                    .filter(|r| r.subject == s)
                    .map(|r| (r.threads as f64, y(r)))
                    .collect();
                Series::new(s.name(), i, points).dashed_if(s == Subject::FloorCas)
            })
            .collect()
    };
    svg::figure(
        "Contention: T threads on one limiter",
        &format!("{machine} · median of the timed runs; p99 of single checks"),
        &[
            Panel {
                heading: "Throughput".into(),
                x_label: "threads".into(),
                y_label: "million checks per second".into(),
                series: series(Row::median_mops),
                marker: None,
            },
            Panel {
                heading: "Latency of one check".into(),
                x_label: "threads".into(),
                y_label: "p99, ns".into(),
                series: series(|r| r.latency_ns[1]),
                marker: None,
            },
        ],
    )
}
