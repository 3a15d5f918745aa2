//! The server as Envoy meets it: the binary started on loopback ports of its own, a
//! gRPC client nobody here wrote (Python's grpcio with Envoy's protos as the gRPC
//! project publishes them) calling `ShouldRateLimit` over the socket, and the HTTP
//! side (`/json`, `/healthcheck`, `/metrics`) read by hand. The client comes from
//! `cargo xtask setup` (`.venv-grpc`); without it the test fails and says so.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

mod support;
use support::server::{clear_of, http, start, workspace, Server};

const CONFIG: &str = "domain: rl\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: minute\n      requests_per_unit: 3\n  - key: tenant\n    rate_limit:\n      unit: hour\n      requests_per_unit: 1\n";

fn python() -> PathBuf {
    let python = workspace().join(".venv-grpc/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run `cargo xtask setup` (it installs grpcio and xds-protos there)",
        python.display()
    );
    python
}

#[test]
fn envoy_s_client_over_grpc_and_the_http_side() {
    let server = start("client", CONFIG, &[]);
    let calls = scenario(&server);
    assert_eq!(
        calls[0]["headers"],
        serde_json::json!([]),
        "none unless asked"
    );
}

/// Asked for both kinds of headers, answers carry them to Envoy: the refusal of
/// alice's fourth call says how long to wait.
#[test]
fn envoy_s_client_reads_the_headers_to_add() {
    let server = start("headers", CONFIG, &["--response-headers", "both"]);
    let calls = scenario(&server);
    let headers = |i: usize| -> Vec<(String, String)> {
        serde_json::from_value(calls[i]["headers"].clone()).unwrap()
    };
    let first = headers(0);
    let named = |list: &[(String, String)], name: &str| {
        list.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    assert_eq!(named(&first, "RateLimit-Limit").as_deref(), Some("3"));
    assert_eq!(named(&first, "RateLimit-Remaining").as_deref(), Some("2"));
    assert_eq!(
        named(&first, "RateLimit-Policy").as_deref(),
        Some("\"d0\";q=3;w=60")
    );
    let refused = headers(3);
    assert_eq!(named(&refused, "RateLimit-Remaining").as_deref(), Some("0"));
    let wait: u64 = named(&refused, "Retry-After").unwrap().parse().unwrap();
    assert!((1..=60).contains(&wait), "{refused:?}");
}

/// The same scenario with the counters in Redis; and a second instance on the same
/// Redis sees every count the first made.
#[test]
fn envoy_s_client_with_the_counters_in_redis() {
    let redis = portero_redis::LocalRedis::start().expect("redis-server");
    let url = redis.url();
    let server = start("redis", CONFIG, &["--redis", &url]);
    let _ = scenario(&server);
    let second = start("second", CONFIG, &["--redis", &url]);
    let ask = r#"{"domain":"rl","descriptors":[{"entries":[{"key":"user","value":"frank"}]}]}"#;
    let (status, body) = http(&second.http, "POST", "/json", ask);
    // frank spent 2 of 3 on the first instance: this one takes the last.
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["statuses"][0]["limitRemaining"], 0, "{body}");
    assert_eq!(http(&second.http, "POST", "/json", ask).0, 429);
    assert_eq!(http(&server.http, "POST", "/json", ask).0, 429);
    let (_, metrics) = http(&server.http, "GET", "/metrics", "");
    assert!(
        metrics.contains("portero_ratelimit_redis_unavailable_total 0"),
        "{metrics}"
    );
}

/// Envoy's client's scenario against `server`, then the HTTP side; the client's calls.
fn scenario(server: &Server) -> Vec<Value> {
    let python = python();
    clear_of(60, 10);
    let out = Command::new(&python)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/outside/rls_client.py"))
        .arg(&server.grpc)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let calls: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let verdict = |i: usize| {
        (
            calls[i]["overall"].as_str().unwrap_or("-").to_string(),
            calls[i]["statuses"][0][1].as_u64(),
        )
    };
    // Three a minute for alice, then over; each status carries the limit and the reset.
    for (i, left) in [2, 1, 0].into_iter().enumerate() {
        assert_eq!(
            verdict(i),
            ("OK".into(), Some(left)),
            "call {i}: {}",
            calls[i]
        );
    }
    assert_eq!(verdict(3), ("OVER_LIMIT".into(), Some(0)));
    assert_eq!(calls[0]["statuses"][0][2], 3);
    assert_eq!(calls[0]["statuses"][0][3], "MINUTE");
    let reset = calls[0]["statuses"][0][4].as_u64().unwrap();
    assert!(reset <= 60, "{reset}");
    // Malformed: an empty domain, 10,000 descriptors, a huge hits_addend.
    for i in [4, 5, 6] {
        assert_eq!(
            calls[i]["error"], "INVALID_ARGUMENT",
            "call {i}: {}",
            calls[i]
        );
    }
    // ... and nothing was charged: bob still has 3, minus this one.
    assert_eq!(verdict(7), ("OK".into(), Some(2)));
    // hits_addend 2 for the request; 0 for a descriptor only asks.
    assert_eq!(verdict(8), ("OK".into(), Some(1)));
    assert_eq!(verdict(9), ("OK".into(), Some(1)));
    // An unknown domain is not limited.
    assert_eq!(calls[10]["overall"], "OK");
    assert_eq!(calls[10]["statuses"][0][2], Value::Null);
    // All or none: dave and the tenant pass (the tenant's one an hour taken); erin is
    // refused by the tenant, and her own limit is not charged.
    assert_eq!(calls[11]["overall"], "OK");
    assert_eq!(calls[12]["overall"], "OVER_LIMIT");
    assert_eq!(calls[12]["statuses"][0][0], "OK");
    assert_eq!(
        calls[12]["statuses"][0][1], 3,
        "erin uncharged: {}",
        calls[12]
    );
    assert_eq!(calls[12]["statuses"][1][0], "OVER_LIMIT");

    // The HTTP side shares the same counters.
    let ask = r#"{"domain":"rl","descriptors":[{"entries":[{"key":"user","value":"alice"}]}]}"#;
    let (status, body) = http(&server.http, "POST", "/json", ask);
    assert_eq!(status, 429, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["overallCode"], "OVER_LIMIT");
    assert_eq!(answer["statuses"][0]["currentLimit"]["requestsPerUnit"], 3);
    let fresh = r#"{"domain":"rl","descriptors":[{"entries":[{"key":"user","value":"frank"}]}],"hitsAddend":2}"#;
    let (status, body) = http(&server.http, "POST", "/json", fresh);
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["statuses"][0]["limitRemaining"],
        1
    );
    // The protobuf's JSON as other clients write it: a 64-bit number as a string,
    // an enum as its number; a negative hit refused as said.
    let as_proto = r#"{"domain":"rl","descriptors":[{"entries":[{"key":"user","value":"gina"}],"hitsAddend":"2"}]}"#;
    let (status, body) = http(&server.http, "POST", "/json", as_proto);
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["statuses"][0]["limitRemaining"],
        1
    );
    let numbered = r#"{"domain":"rl","descriptors":[{"entries":[{"key":"o","value":"x"}],"limit":{"requestsPerUnit":5,"unit":2}}]}"#;
    let (status, body) = http(&server.http, "POST", "/json", numbered);
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["statuses"][0]["currentLimit"]["unit"],
        "MINUTE"
    );
    // A number written with a sign is not the protobuf's JSON.
    let signed = r#"{"domain":"rl","descriptors":[{"entries":[{"key":"user","value":"gina"}],"hitsAddend":"+2"}]}"#;
    let (status, body) = http(&server.http, "POST", "/json", signed);
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("not a whole number"), "{body}");
    let negative = r#"{"domain":"rl","descriptors":[{"entries":[{"key":"user","value":"gina"}],"isNegativeHits":true}]}"#;
    let (status, body) = http(&server.http, "POST", "/json", negative);
    assert_eq!(status, 400);
    assert!(body.contains("negative hits"), "{body}");
    assert_eq!(http(&server.http, "POST", "/json", "{not json").0, 400);
    assert_eq!(
        http(
            &server.http,
            "POST",
            "/json",
            r#"{"domain":"","descriptors":[]}"#
        )
        .0,
        400
    );
    assert_eq!(
        http(&server.http, "GET", "/healthcheck", ""),
        (200, "OK".into())
    );
    let (status, metrics) = http(&server.http, "GET", "/metrics", "");
    assert_eq!(status, 200);
    assert!(
        metrics.contains("portero_ratelimit_over_limit{key=\"rl.user\"} 2"),
        "{metrics}"
    );
    assert!(
        metrics.contains("portero_ratelimit_decisions_total{result=\"malformed\"} 7"),
        "{metrics}"
    );
    // Every answered decision's latency is in the histogram.
    let figure = |prefix: &str| -> u64 {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(prefix))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {prefix} in {metrics}"))
    };
    let answered = figure("portero_ratelimit_decisions_total{result=\"answered\"} ");
    let timed = figure("portero_ratelimit_decision_seconds_count ");
    assert!(answered > 0 && timed >= answered, "{metrics}");
    assert_eq!(
        figure("portero_ratelimit_decision_seconds_bucket{le=\"+Inf\"} "),
        timed
    );
    calls
}

#[test]
fn a_malformed_file_keeps_the_server_from_starting_and_says_why() {
    let dir = std::env::temp_dir().join(format!("portero-server-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bad.yaml");
    std::fs::write(
        &file,
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: fortnight\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_portero-server"))
        .args([
            "--config",
            file.to_str().unwrap(),
            "--grpc",
            "127.0.0.1:0",
            "--http",
            "127.0.0.1:0",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("bad.yaml") && said.contains("invalid rate limit unit 'fortnight'"),
        "{said}"
    );
}

/// The remaining of `user` (admitting one more) over `/json`, and whether the
/// `tenant` descriptor is limited.
fn alice_and_tenant(server: &Server) -> (u64, bool) {
    let ask = r#"{"domain":"rl","descriptors":[{"entries":[{"key":"user","value":"alice"}]},{"entries":[{"key":"team","value":"t"}]}]}"#;
    let (_, body) = http(&server.http, "POST", "/json", ask);
    let answer: Value = serde_json::from_str(&body).unwrap();
    (
        answer["statuses"][0]["limitRemaining"].as_u64().unwrap(),
        answer["statuses"][1].get("currentLimit").is_some(),
    )
}

#[test]
fn a_changed_file_is_reloaded_keeping_the_counters_of_unchanged_rules() {
    let server = start("reload", CONFIG, &["--reload-ms", "50"]);
    assert_eq!(alice_and_tenant(&server), (2, false));
    // A rule added; alice's is unchanged and keeps her count.
    std::fs::write(
        &server.file,
        format!("{CONFIG}  - key: team\n    rate_limit:\n      unit: hour\n      requests_per_unit: 100\n"),
    )
    .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !server
        .said
        .lock()
        .unwrap()
        .iter()
        .any(|l| l.contains("reloaded"))
    {
        assert!(std::time::Instant::now() < deadline, "no reload");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(server
        .said
        .lock()
        .unwrap()
        .iter()
        .any(|l| l.contains("3 rules, 2 kept")));
    assert_eq!(
        alice_and_tenant(&server),
        (1, true),
        "alice's count carried over"
    );
    // A broken file is refused, said, and the last good configuration stays.
    std::fs::write(
        &server.file,
        "domain: rl\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: fortnight\n",
    )
    .unwrap();
    while !server
        .said
        .lock()
        .unwrap()
        .iter()
        .any(|l| l.contains("fortnight"))
    {
        assert!(std::time::Instant::now() < deadline, "no refusal");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let said = server.said.lock().unwrap().join("\n");
    assert!(
        said.contains("rl.yaml") && said.contains("invalid rate limit unit 'fortnight'"),
        "{said}"
    );
    assert_eq!(alice_and_tenant(&server), (0, true));
}
