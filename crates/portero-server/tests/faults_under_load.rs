//! Faults while requests keep coming, against the binary: a configuration reloaded a
//! hundred times (no answer lost, no count of an unchanged rule lost), and Redis
//! killed and started again (every answer meanwhile by the rule's outage policy, every
//! answer to a request sent once Redis is back by Redis).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod support;
use support::server::{clear_of, http, start, KeptAlive};

/// Requests sent by `threads` threads to `/json` at `at` until `stop`: each one's
/// send time and HTTP status.
fn load(
    at: &str,
    body: &'static str,
    threads: usize,
    stop: &Arc<AtomicBool>,
) -> Vec<std::thread::JoinHandle<Vec<(Instant, u16)>>> {
    (0..threads)
        .map(|_| {
            let (at, stop) = (at.to_string(), stop.clone());
            std::thread::spawn(move || {
                let mut seen = Vec::new();
                let mut connection = KeptAlive::to(&at);
                while !stop.load(Ordering::Relaxed) {
                    let sent = Instant::now();
                    seen.push((sent, connection.post("/json", body)));
                }
                seen
            })
        })
        .collect()
}

fn config(tenant_limit: u32) -> String {
    format!(
        "domain: rl
descriptors:
  - key: user
    rate_limit: {{ unit: hour, requests_per_unit: 300 }}
  - key: tenant
    rate_limit: {{ unit: hour, requests_per_unit: {tenant_limit} }}
"
    )
}

/// How many reloads the server has said it made.
fn reloads(said: &Mutex<Vec<String>>) -> usize {
    said.lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains("configuration reloaded"))
        .count()
}

#[test]
fn a_hundred_reloads_under_load_lose_no_answer_and_no_count() {
    clear_of(3_600, 120);
    // Started with a limit no rewrite below writes: every rewrite is a change.
    let server = start("reloads", &config(12), &["--reload-ms", "5"]);
    let stop = Arc::new(AtomicBool::new(false));
    let ask = r#"{"domain":"rl","descriptors":[{"entries":[{"key":"user","value":"alice"}]}]}"#;
    let workers = load(&server.http, ask, 2, &stop);
    for i in 0..100 {
        // The tenant's rule changes every time; the user's never does.
        std::fs::write(&server.file, config(10 + i % 2)).unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while reloads(&server.said) < i as usize + 1 {
            assert!(
                Instant::now() < deadline,
                "reload {i} not made; the server said: {:?}",
                server.said.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    stop.store(true, Ordering::Relaxed);
    let answers: Vec<u16> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .map(|(_, status)| status)
        .collect();
    let admitted = answers.iter().filter(|&&s| s == 200).count();
    let refused = answers.iter().filter(|&&s| s == 429).count();
    assert_eq!(admitted + refused, answers.len(), "every request answered");
    assert!(
        refused > 0,
        "the load outlasted the limit: {admitted} admitted"
    );
    // Exactly the limit: a count lost in any of the 100 swaps would admit more.
    assert_eq!(admitted, 300);
    let said = server.said.lock().unwrap().join("\n");
    assert!(said.contains("2 rules, 1 kept"), "{said}");
}

#[test]
fn redis_killed_and_restarted_under_load() {
    clear_of(3_600, 120);
    let mut redis = portero_redis::LocalRedis::start().expect("redis-server");
    let url = redis.url();
    let port: u16 = url.rsplit(':').next().unwrap().parse().unwrap();
    let file = "domain: rl
descriptors:
  - key: closed
    rate_limit: { unit: hour, requests_per_unit: 1000000, portero: { when_down: closed } }
";
    let server = start(
        "redis-faults",
        file,
        &["--redis", &url, "--redis-timeout-ms", "50"],
    );
    let stop = Arc::new(AtomicBool::new(false));
    let ask = r#"{"domain":"rl","descriptors":[{"entries":[{"key":"closed","value":"c"}]}]}"#;
    let workers = load(&server.http, ask, 2, &stop);
    std::thread::sleep(Duration::from_millis(800));
    let killed = Instant::now();
    redis.stop();
    std::thread::sleep(Duration::from_millis(500));
    let restarting = Instant::now();
    let _back = portero_redis::LocalRedis::start_on(port).expect("redis-server again");
    let back = Instant::now();
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    let answers: Vec<(Instant, u16)> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    let other: Vec<_> = answers
        .iter()
        .filter(|(_, s)| *s != 200 && *s != 429)
        .collect();
    assert!(
        other.is_empty(),
        "answers other than 200 and 429: {other:?}"
    );
    // Sent well before the kill (one sent a moment before may reach Redis after it,
    // and a loaded machine may hold a request a while).
    let before: Vec<u16> = answers
        .iter()
        .filter(|(t, _)| {
            t.checked_add(Duration::from_millis(300))
                .is_some_and(|t| t < killed)
        })
        .map(|a| a.1)
        .collect();
    assert!(
        !before.is_empty() && before.iter().all(|&s| s == 200),
        "Redis decided before: {before:?}"
    );
    // Sent once the kill had been seen (a timeout later) and before the restart:
    // refused, by the rule's policy.
    let away: Vec<u16> = answers
        .iter()
        .filter(|(t, _)| *t > killed + Duration::from_millis(100) && *t < restarting)
        .map(|a| a.1)
        .collect();
    assert!(
        !away.is_empty() && away.iter().all(|&s| s == 429),
        "closed while away: {away:?}"
    );
    // Sent once Redis accepted connections again: every one decided by Redis.
    let after: Vec<u16> = answers
        .iter()
        .filter(|(t, _)| *t > back)
        .map(|a| a.1)
        .collect();
    let refused_after = after.iter().filter(|&&s| s != 200).count();
    assert!(
        !after.is_empty() && refused_after == 0,
        "{refused_after} of {} refused after Redis was back",
        after.len()
    );
    let (_, metrics) = http(&server.http, "GET", "/metrics", "");
    assert!(
        !metrics.contains("portero_ratelimit_redis_unavailable_total 0\n"),
        "{metrics}"
    );
}
