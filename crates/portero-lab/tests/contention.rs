//! The contention study end to end on this machine (two threads, short runs): every
//! subject measured, its JSON parses with every figure, its chart renders, and the
//! admission audit holds for every limiter — and catches one that admits more than
//! its quota.

use std::sync::Arc;
use std::time::Duration;

use portero::{Gcra, Quota, RateLimiter};
use portero_lab::contention::subjects::{AnyChecker, Checker};
use portero_lab::contention::{self, report, threads, Study, Subject};

#[test]
fn the_study_runs_end_to_end_and_every_audit_holds_at_a_quota_that_bites() {
    let study = Study {
        threads: vec![1, 2],
        runs: 2,
        duration: Duration::from_millis(30),
        samples: 300,
        subjects: Subject::ALL.to_vec(),
    };
    let rows = contention::run(&study, |_, _| {});
    assert_eq!(rows.len(), Subject::ALL.len() * 2);
    for r in &rows {
        // The estimator is reported, not held to exactness (see `Subject::exact`).
        assert!(
            r.audit.holds() || !r.subject.exact(),
            "{} x {}: {:?}",
            r.subject.name(),
            r.threads,
            r.audit
        );
        assert!(r.median_mops() > 0.0 && r.latency_ns[0] >= 1.0);
        assert!(r.latency_ns[0] <= r.latency_ns[1] && r.latency_ns[1] <= r.latency_ns[2]);
        if r.subject == Subject::FloorCas {
            assert!(r.audit.quota.is_none());
            continue;
        }
        // Every limiter is audited where its quota bites (an audit that every check
        // passes proves nothing): a good share refused, and the busiest key at (or
        // just under) what one key may admit — wherever the keys repeat within the
        // run (a million keys in 30 ms of a debug build are each checked about once).
        if r.audit.checks < 4 * r.audit.keys as u64 {
            continue;
        }
        // (The share refused depends on how fast the audit run goes against the timed
        // runs, which a loaded machine changes; that something was refused does not.)
        assert!(
            r.audit.admitted < r.audit.checks,
            "{} x {} refused nothing: {:?}",
            r.subject.name(),
            r.threads,
            r.audit
        );
        let allowed = r.audit.allowed.unwrap();
        assert!(
            r.audit.largest * 10 >= allowed * 7,
            "{} x {}: the busiest key stayed far below its quota: {:?}",
            r.subject.name(),
            r.threads,
            r.audit
        );
    }
    let json = report::json(&study, &rows, "test machine", threads::pinning_works()).to_string();
    let back: serde_json::Value = serde_json::from_str(&json).expect("the JSON parses");
    assert_eq!(back["rows"].as_array().unwrap().len(), rows.len());
    for (row, measured) in back["rows"].as_array().unwrap().iter().zip(&rows) {
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
        // The JSON says what the audit found: held, for every exact limiter (the
        // estimator may over-admit, and then says so).
        assert_eq!(row["audit"]["holds"], measured.audit.holds(), "{row}");
        assert!(measured.audit.holds() || !measured.subject.exact(), "{row}");
    }
    let svg = report::chart(&rows, "test machine");
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    for s in Subject::ALL {
        assert!(svg.contains(s.name()), "{} in the legend", s.name());
    }
    // Small multiples on a log2 thread axis: ticks at 1 and 2, a dot per measurement,
    // the core count marked, and every label inside the picture.
    assert!(
        svg.contains(">1</text>") && svg.contains(">2</text>"),
        "log2 ticks"
    );
    assert!(
        svg.matches("<circle").count() >= rows.len(),
        "a dot per measurement"
    );
    assert!(svg.contains(&format!("{} cores", contention::study::cores())));
    labels_fit(&svg);
    let table = report::table(&rows);
    assert!(table.contains("ok") && table.contains("refused"), "{table}");
    // The closing line comes from the figures: a subject of each family, at 2 threads.
    let verdict = report::verdict(&rows).expect("a verdict");
    assert!(verdict.contains("at 2 threads"), "{verdict}");
    assert!(
        verdict.contains("one hot global limit: ") && verdict.contains("keyed limits"),
        "{verdict}"
    );
    assert!(
        Subject::ALL.iter().any(|s| verdict.contains(s.name())),
        "{verdict}"
    );
}

/// A GCRA whose burst is one unit more than the quota it claims: under two threads
/// it admits `burst + 1 + ⌊t/T⌋`, one unit over, and the audit must say so.
struct OneMore(RateLimiter<Gcra>, Quota);

impl Checker for OneMore {
    fn check(&self, _: usize, _: usize) -> bool {
        self.0.check().is_allowed()
    }
    fn quota(&self) -> Option<Quota> {
        Some(self.1)
    }
}

#[test]
fn the_audit_catches_a_limiter_that_admits_one_unit_more_than_its_quota() {
    // One a second, burst 5, for 30 ms: the honest limiter admits 5, the liar 6.
    let claimed = Quota::per_second(1).unwrap().with_burst(5).unwrap();
    let generous = claimed.with_burst(6).unwrap();
    let liar: Arc<dyn AnyChecker> = Arc::new(OneMore(RateLimiter::gcra(generous), claimed));
    let audit = threads::audit(&liar, 2, Duration::from_millis(30));
    assert_eq!((audit.largest, audit.allowed), (6, Some(5)), "{audit:?}");
    assert!(!audit.holds(), "{audit:?}");
    assert!(report::table(&[]).contains("audit"));
    let honest: Arc<dyn AnyChecker> = Arc::new(OneMore(RateLimiter::gcra(claimed), claimed));
    let audit = threads::audit(&honest, 2, Duration::from_millis(30));
    assert!(audit.holds() && audit.largest == 5, "{audit:?}");
}

/// A keyed subject is audited per key: one key over its quota fails the run even
/// when the keys together stay far below the sum of their quotas.
#[test]
fn a_keyed_audit_holds_each_key_to_its_own_quota() {
    let q = Quota::per_second(1).unwrap().with_burst(3).unwrap();
    let keyed = contention::subjects::fresh(Subject::Keyed10kZipf, 2, Some(q));
    let audit = threads::audit(&keyed, 2, Duration::from_millis(30));
    assert!(audit.holds(), "{audit:?}");
    assert_eq!(
        (audit.keys, audit.largest, audit.allowed),
        (10_000, 3, Some(3))
    );
    assert!(audit.admitted < 3 * 10_000);
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

/// Every left-anchored label of `svg` ends inside its width (the lab's own measure of
/// text width).
fn labels_fit(svg: &str) {
    let attr = |tag: &str, name: &str| -> Option<f64> {
        let start = tag.find(&format!(" {name}=\""))? + name.len() + 3;
        tag[start..start + tag[start..].find('"')?].parse().ok()
    };
    let width = attr(&svg[..svg.find('>').unwrap()], "width").expect("a width");
    let mut rest = svg;
    while let Some(i) = rest.find("<text ") {
        let tag_end = i + rest[i..].find('>').unwrap();
        let close = tag_end + rest[tag_end..].find("</text>").unwrap();
        let (tag, content) = (&rest[i..tag_end], &rest[tag_end + 1..close]);
        let size = attr(tag, "font-size").unwrap_or(13.0);
        let bold = tag.contains("font-weight=\"bold\"");
        if tag.contains("text-anchor=\"start\"") {
            let x = attr(tag, "x").unwrap();
            let end = x + portero_lab::svg::text_width(content, size, bold);
            assert!(
                end <= width,
                "{content:?} ends at {end:.0} in a chart {width} wide"
            );
        }
        rest = &rest[close..];
    }
}

/// The windowed peers are held to their own rule, per key: a window of `burst` per key
/// (`pingora-limits` an estimator, `limitador` a service's limiter), 30 ms runs well
/// inside one window — each key admits at most 3 and the busiest exactly 3; a peer
/// that admits one more per window would fail (the audit compares each key with the
/// window's allowance, as the GCRA liar above shows for a schedule).
#[test]
fn the_windowed_peers_are_audited_per_key_against_their_window() {
    let q = Quota::per_second(1).unwrap().with_burst(3).unwrap();
    for subject in [Subject::Pingora10kUniform, Subject::Limitador10kUniform] {
        let peer = contention::subjects::fresh(subject, 2, Some(q));
        let audit = threads::audit(&peer, 2, Duration::from_millis(30));
        assert_eq!(
            (audit.keys, audit.allowed),
            (10_000, Some(3)),
            "{}",
            subject.name()
        );
        if subject.exact() {
            assert!(audit.holds(), "{}: {audit:?}", subject.name());
            assert_eq!(audit.largest, 3, "{}", subject.name());
        } else {
            // The estimator: two concurrent checks of one key can both read the same
            // count, so it is reported rather than held (`Subject::exact`).
            assert!(audit.largest >= 3, "{audit:?}");
        }
    }
}
