//! The contention study behind `portero-lab contention`: T threads check one limiter
//! (or one keyed table) as fast as they can, for every subject a user choosing a
//! limiter compares, over a sweep of thread counts. For each (subject, threads): the
//! throughput of several timed runs after a warm-up (median and spread), the latency
//! of single checks (p50, p99, p99.9 from a histogram, the timer's own cost taken
//! out), the scaling efficiency (throughput at T ÷ (T × one thread's)), and the
//! admission audit: a run on a quota the subject must enforce (a third of what
//! it reached in a short run just before), every key's admissions held to `burst + ⌊t/T⌋` for the run's
//! span `t`, with no slack. A faster limiter that admits one unit more than its
//! quota is wrong, and the study says so (and exits non-zero).
//!
//! The parts: this module (running the study), `study` (what it measures and its
//! rows), `subjects` (what is measured; `peers` the estimator and the service's limiter),
//! `threads` (pinning and timing the threads), `report` (tables, JSON, the chart).

pub mod checker;
pub mod peers;
pub mod report;
pub mod study;
pub mod subjects;
pub mod threads;

pub use study::{Audit, Row, Study};
pub use subjects::Subject;

/// Runs `study`, calling `progress` before each (subject, threads).
pub fn run(study: &Study, mut progress: impl FnMut(Subject, usize)) -> Vec<Row> {
    let mut rows = Vec::new();
    for &subject in &study.subjects {
        let mut single = None;
        for &t in &study.threads {
            progress(subject, t);
            let measured = threads::measure(subject, t, study);
            let median = measured.mops[measured.mops.len() / 2];
            let one = *single.get_or_insert(if t == 1 { median } else { f64::NAN });
            let efficiency = median / (t as f64 * one);
            rows.push(Row {
                subject,
                threads: t,
                mops: measured.mops,
                latency_ns: measured.latency_ns,
                efficiency,
                audit: measured.audit,
            });
        }
    }
    rows
}
