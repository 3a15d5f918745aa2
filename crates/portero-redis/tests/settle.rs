//! Settling in Redis: an admission checked on an estimate and settled at its real
//! cost leaves the key where a twin key charged the real cost at the start stands
//! (every algorithm, quiet and under load), a cost above the estimate goes into debt
//! with an exact wait, and a settlement never gives back what is no longer the
//! request's.

use std::time::Duration;

use portero::Quota;
use portero_redis::{RedisAlgorithm, RedisLimiter};

mod support {
    #[allow(dead_code)] // each test binary uses the helpers it needs
    pub mod local;
}
use support::local::*;

/// The four algorithms at 100 units a day: no unit drains back while a test runs.
fn algorithms() -> Vec<(&'static str, RedisAlgorithm)> {
    let day = Duration::from_secs(86_400);
    vec![
        (
            "gcra",
            RedisAlgorithm::gcra(Quota::per_day(100).unwrap()).unwrap(),
        ),
        (
            "fixed window",
            RedisAlgorithm::fixed_window(100, day).unwrap(),
        ),
        (
            "sliding counter",
            RedisAlgorithm::sliding_counter(100, day).unwrap(),
        ),
        (
            "sliding log",
            RedisAlgorithm::sliding_log(100, day).unwrap(),
        ),
    ]
}

async fn remaining(limiter: &RedisLimiter, key: &str) -> u64 {
    limiter.peek(key, 0).await.unwrap().decision.remaining()
}

/// Settles `estimate` at `real` on `key`; the decision afterwards.
async fn settled(limiter: &RedisLimiter, key: &str, estimate: u64, real: u64) -> portero::Decision {
    let verdict = limiter.check(key, estimate).await.unwrap();
    assert!(verdict.decision.is_allowed(), "{key}: {estimate} admitted");
    let taken = verdict.taken.expect("an admission by Redis can be settled");
    assert_eq!(taken.cost(), estimate);
    limiter
        .settle(taken, real)
        .await
        .unwrap()
        .expect("Redis answers")
}

/// Estimates and real costs, both ways, against a twin charged the real cost: the
/// remaining units agree after every settlement, and the settlement's own answer says
/// the same.
#[tokio::test]
async fn a_settled_key_stands_where_its_twin_charged_the_real_cost_stands() {
    let server = start_redis();
    let steps = [(10, 4), (5, 5), (1, 9), (20, 0), (8, 30), (3, 1)];
    for (name, algorithm) in algorithms() {
        let limiter = answering(&server, algorithm).await;
        for (i, &(estimate, real)) in steps.iter().enumerate() {
            let after = settled(&limiter, "settled", estimate, real).await;
            assert!(admits(&limiter, "twin", real).await || real == 0);
            let (left, twin) = (
                remaining(&limiter, "settled").await,
                remaining(&limiter, "twin").await,
            );
            assert_eq!(
                left, twin,
                "{name}, step {i} ({estimate} settled at {real})"
            );
            assert_eq!(
                after.remaining(),
                left,
                "{name}, step {i}: the settlement's answer"
            );
        }
        println!(
            "{name}: {} left, as the twin",
            remaining(&limiter, "settled").await
        );
    }
}

/// A real cost above what is left charges the key past its limit: the next request is
/// refused, and a GCRA key says exactly how long its debt lasts.
#[tokio::test]
async fn a_cost_above_the_estimate_goes_into_debt_with_an_exact_wait() {
    let server = start_redis();
    for (name, algorithm) in algorithms() {
        let limiter = answering(&server, algorithm).await;
        let after = settled(&limiter, "debtor", 10, 130).await;
        assert_eq!(after.remaining(), 0, "{name}");
        assert!(!after.is_allowed(), "{name}: 130 of 100 used, in debt");
        assert!(!admits(&limiter, "debtor", 1).await, "{name}");
        if name == "gcra" {
            // 30 units of debt beyond the 100, at 864 s a unit (a request of one unit
            // waits 864 s more: its own check says so).
            let wait = after.retry_after().as_secs();
            assert!(
                (30 * 864 - 2..=30 * 864).contains(&wait),
                "gcra waits {wait} s"
            );
        }
    }
}

/// A log entry is rewritten at its real cost: the sorted set holds `time:seq:real`.
#[tokio::test]
async fn the_log_entry_is_rewritten_at_its_real_cost_and_removed_at_zero() {
    let server = start_redis();
    let limiter = answering(&server, algorithms()[3].1).await;
    settled(&limiter, "log", 7, 2).await;
    let entries: Vec<String> =
        query(&server, &["ZRANGE", &limiter.key_for("log"), "0", "-1"]).await;
    assert_eq!(entries.len(), 1);
    assert!(entries[0].ends_with(":2"), "{entries:?}");
    settled(&limiter, "log", 7, 0).await;
    let entries: Vec<String> =
        query(&server, &["ZRANGE", &limiter.key_for("log"), "0", "-1"]).await;
    assert_eq!(
        entries.len(),
        1,
        "the entry settled at 0 is gone: {entries:?}"
    );
    assert_eq!(remaining(&limiter, "log").await, 98);
}

/// Sixty-four admissions in flight at once on one key, each given back by its own
/// task, in whatever order they land: every unit comes back (under load too), but a
/// fixed window's opener, and none more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_settlements_at_once_give_back_every_unused_unit_and_no_more() {
    let server = start_redis();
    for (name, algorithm) in algorithms() {
        let limiter = answering(&server, algorithm).await;
        let tasks: Vec<_> = (0..64)
            .map(|_| {
                let limiter = limiter.clone();
                tokio::spawn(async move {
                    let verdict = limiter.check("busy", 1).await.unwrap();
                    let taken = verdict.taken?;
                    limiter.settle(taken, 0).await.unwrap()?;
                    Some(())
                })
            })
            .collect();
        let mut settled = 0;
        for task in tasks {
            settled += u64::from(task.await.unwrap().is_some());
        }
        assert_eq!(settled, 64, "{name}: 64 admitted and settled");
        // A fixed window's opener, given back while others count in its window, is
        // kept (the twin that never saw it opened its window elsewhere): at most
        // its one unit stays.
        let kept = 100 - remaining(&limiter, "busy").await;
        let most = u64::from(name == "fixed window");
        assert!(kept <= most, "{name}: {kept} kept of 64");
    }
}

/// A settlement for an admission whose key was reset and used again gives back
/// nothing of the window's new count it never was part of, and a window that ended
/// takes no charge (its twin's units ended with it).
#[tokio::test]
async fn a_window_settles_only_in_the_window_the_admission_counted_in() {
    let server = start_redis();
    // Windows of 2 s: long beside a loaded machine's delays, so that the two checks
    // share one window and the two settlements land in the next.
    let algorithm = RedisAlgorithm::fixed_window(10, Duration::from_secs(2)).unwrap();
    let limiter = answering(&server, algorithm).await;
    let early = limiter.check("w", 5).await.unwrap().taken.unwrap();
    let late = limiter.check("w", 1).await.unwrap().taken.unwrap();
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    assert!(admits(&limiter, "w", 4).await, "a new window");
    let after = limiter.settle(early, 0).await.unwrap().unwrap();
    assert_eq!(after.remaining(), 6, "the new window's 4 stay");
    let after = limiter.settle(late, 10).await.unwrap().unwrap();
    assert_eq!(
        after.remaining(),
        6,
        "the old window's charge is not the new one's"
    );
}

/// A settlement runs on the admission's own Redis keys, whatever limiter settles it: a
/// `Taken` of one key cannot give units back to another, nor to the same user key
/// under another prefix.
#[tokio::test]
async fn a_settlement_touches_only_the_key_its_admission_was_taken_from() {
    let server = start_redis();
    for (name, algorithm) in algorithms() {
        let limiter = answering(&server, algorithm).await;
        let other = answering(&server, algorithm).await.prefix("other").unwrap();
        assert!(admits(&limiter, "y", 60).await);
        assert!(admits(&other, "x", 60).await);
        let taken = limiter.check("x", 30).await.unwrap().taken.unwrap();
        // Settled through the other limiter: still "x" under the first prefix.
        other.settle(taken, 0).await.unwrap().unwrap();
        assert_eq!(
            remaining(&limiter, "x").await,
            100,
            "{name}: its own key back"
        );
        assert_eq!(
            remaining(&limiter, "y").await,
            40,
            "{name}: another key untouched"
        );
        assert_eq!(
            remaining(&other, "x").await,
            40,
            "{name}: another prefix untouched"
        );
    }
}
