//! The contention study end to end on this machine (two threads, short runs): every
//! subject measured, its JSON parses with every figure, its chart renders, and the
//! admission audit holds for every limiter — and catches one that admits more than
//! its quota.

use std::sync::Arc;
use std::time::Duration;

use portero_lab::contention::subjects::{gcra_allowance, tight_quota, AnyChecker, Checker};
use portero_lab::contention::{self, report, threads, Study, Subject};

#[test]
fn the_study_runs_end_to_end_and_every_audit_holds() {
    let study = Study {
        threads: vec![1, 2],
        runs: 2,
        duration: Duration::from_millis(15),
        samples: 300,
        subjects: Subject::ALL.to_vec(),
    };
    let rows = contention::run(&study, |_, _| {});
    assert_eq!(rows.len(), Subject::ALL.len() * 2);
    for r in &rows {
        assert!(
            r.audit.holds(),
            "{} x {}: {:?}",
            r.subject.name(),
            r.threads,
            r.audit
        );
        assert!(r.median_mops() > 0.0 && r.latency_ns[0] >= 1.0);
        assert!(r.latency_ns[0] <= r.latency_ns[1] && r.latency_ns[1] <= r.latency_ns[2]);
    }
    // The tight quota is where the audit bites: nearly every check refused, and what
    // was admitted is what the quota allows, not more.
    let tight = rows
        .iter()
        .find(|r| r.subject == Subject::GcraReject && r.threads == 2)
        .unwrap();
    assert!(tight.audit.admitted >= 100 && tight.audit.admitted <= tight.audit.allowed.unwrap());
    assert!(tight.audit.checks > 10 * tight.audit.admitted);
    let json = report::json(&study, &rows, "test machine", threads::pinning_works()).to_string();
    let back: serde_json::Value = serde_json::from_str(&json).expect("the JSON parses");
    assert_eq!(back["rows"].as_array().unwrap().len(), rows.len());
    for row in back["rows"].as_array().unwrap() {
        for field in [
            "subject",
            "threads",
            "mops",
            "efficiency",
            "latency_ns",
            "audit",
        ] {
            assert!(
                !row[field].is_null() || field == "efficiency",
                "{field} in {row}"
            );
        }
        assert_eq!(row["audit"]["holds"], true);
    }
    let svg = report::chart(&rows, "test machine");
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    for s in Subject::ALL {
        assert!(svg.contains(s.name()), "{} in the legend", s.name());
    }
    assert!(report::table(&rows).contains("ok"));
}

/// A limiter that admits every check while claiming the tight quota: the audit says
/// it is over (a faster limiter that admits more is wrong).
struct Liar;

impl Checker for Liar {
    fn check(&self, _: usize, _: usize) -> bool {
        true
    }
    fn allowed(&self, elapsed: Duration) -> Option<u64> {
        Some(gcra_allowance(&tight_quota(), 1, elapsed))
    }
}

#[test]
fn the_audit_catches_a_limiter_that_admits_more_than_its_quota() {
    let liar: Arc<dyn AnyChecker> = Arc::new(Liar);
    let (audit, _) = threads::audited(&liar, 2, Duration::from_millis(10));
    assert!(!audit.holds(), "{audit:?}");
    assert!(report::table(&[]).contains("audit"));
    let honest = contention::subjects::fresh(Subject::GcraReject, 2);
    let (audit, _) = threads::audited(&honest, 2, Duration::from_millis(10));
    assert!(audit.holds(), "{audit:?}");
}

/// More threads than cores: refused unless asked, and then marked in the table.
#[test]
fn more_threads_than_cores_are_refused_unless_asked_and_then_marked() {
    let cores = contention::study::cores();
    let run = |extra: &[&str]| {
        let many = (cores + 1).to_string();
        let mut args = vec![
            "contention",
            "--threads",
            &many,
            "--subjects",
            "floor",
            "--runs",
            "1",
        ];
        args.extend_from_slice(&["--duration-ms", "5", "--samples", "10"]);
        args.extend_from_slice(extra);
        std::process::Command::new(env!("CARGO_BIN_EXE_portero-lab"))
            .args(&args)
            .output()
            .expect("the lab runs")
    };
    let refused = run(&[]);
    assert!(
        !refused.status.success(),
        "oversubscription ran without being asked"
    );
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--oversubscribe"));
    let asked = run(&["--oversubscribe"]);
    assert!(
        asked.status.success(),
        "{}",
        String::from_utf8_lossy(&asked.stderr)
    );
    let table = String::from_utf8_lossy(&asked.stdout);
    assert!(table.contains(&format!("{}*", cores + 1)), "{table}");
    assert!(
        table.contains("more threads than this machine's"),
        "{table}"
    );
}
