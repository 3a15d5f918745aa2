//! The experiments' tables (`docs/guide.md`), reproduced exactly, through the library and through the CLI.

use std::process::Command;

use portero_lab::scenario;
use portero_lab::sim::{simulate, Outcome};

fn maxima(outcomes: &[Outcome]) -> Vec<(&'static str, u64)> {
    outcomes.iter().map(|o| (o.name, o.max_in_window)).collect()
}

#[test]
fn burst_table_is_the_guides() {
    let s = scenario::burst();
    assert_eq!(s.arrivals.len(), 80);
    let out = simulate(&s.arrivals, s.limit, s.window, &mut |_| {}).unwrap();
    assert_eq!(
        maxima(&out),
        [
            ("fixed-window", 20),
            ("sliding-log", 10),
            ("sliding-window-counter", 11),
            ("token-bucket", 19),
            ("leaky-queue", 10),
        ]
    );
}

#[test]
fn boundary_table_is_the_guides() {
    let s = scenario::boundary();
    let out = simulate(&s.arrivals, s.limit, s.window, &mut |_| {}).unwrap();
    let m = maxima(&out);
    assert_eq!(
        &m[..3],
        [
            ("fixed-window", 200),
            ("sliding-log", 100),
            ("sliding-window-counter", 101)
        ]
    );
}

fn lab(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_portero-lab"))
        .args(args)
        .output()
        .expect("run portero-lab")
}

#[test]
fn json_from_a_file_has_the_stable_shape() {
    let dir = std::env::temp_dir().join(format!("portero-lab-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("arrivals.txt");
    // Any order, decimals: 12 requests around the boundary at 1 s, limit 5.
    let times = "1.05\n0.91\n0.92\n0.93\n0.94\n0.95\n0.96\n1.0\n1.01\n1.02\n1.03\n1.04\n";
    std::fs::write(&file, times).unwrap();
    let svg = dir.join("chart.svg");
    let out = lab(&[
        "burst",
        "--arrivals",
        file.to_str().unwrap(),
        "--limit",
        "5",
        "--window",
        "1",
        "--json",
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let keys = [
        "fixed-window",
        "sliding-log",
        "sliding-window-counter",
        "token-bucket",
        "leaky-queue",
    ];
    assert_eq!(v.as_object().unwrap().len(), 5);
    for k in keys {
        assert!(v[k]["admitted"].is_u64(), "{k}");
        assert!(v[k]["max_in_window"].is_u64(), "{k}");
    }
    assert_eq!(v["fixed-window"]["admitted"], 10);
    assert_eq!(v["fixed-window"]["max_in_window"], 10);
    assert_eq!(v["sliding-log"]["max_in_window"], 5);
    let chart = std::fs::read_to_string(&svg).unwrap();
    assert!(chart.starts_with("<svg") && chart.contains("sliding window counter"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_input_gets_clear_errors() {
    let dir = std::env::temp_dir().join(format!("portero-lab-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bad.txt");
    std::fs::write(&file, "0.5\nsoon\n").unwrap();
    let f = file.to_str().unwrap();
    let out = lab(&["burst", "--arrivals", f, "--limit", "5", "--window", "1"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 2") && err.contains("soon"), "{err}");

    std::fs::write(&file, "0.5\n").unwrap();
    let out = lab(&["burst", "--arrivals", f, "--limit", "0", "--window", "1"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("at least 1"));
    let out = lab(&["burst", "--arrivals", f, "--limit", "5", "--window", "-1"]);
    assert!(!out.status.success());
    let out = lab(&[
        "burst",
        "--arrivals",
        "/nonexistent/x",
        "--limit",
        "5",
        "--window",
        "1",
    ]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn quiz_answers_by_running() {
    let out = lab(&["quiz"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("20 of 20 accepted"), "{text}");
    assert!(text.contains("12:00:30 request is rejected"), "{text}");
    assert!(text.contains("never more than 10 in any 60 s"), "{text}");
}
