//! Weighted costs as bytes, and the leaky queue as a shaper with real waits.
#![cfg(not(target_os = "wasi"))] // tokio's test clock and real waits

use std::sync::Arc;
use std::time::{Duration, Instant};

use portero::{LeakyQueue, ManualClock, Quota, RateLimiter, StdClock, TokenBucket};

mod support {
    #[allow(dead_code)] // each test binary uses the helpers it needs
    pub mod tokio_clock;
}
use support::tokio_clock::{assert_jittered, keyed_on_tokio_clock};

/// The guide's byte-shaping example: bucket B = 16 MB, tokens at R = 2 MB/s, a link
/// of M = 10 MB/s. From a full bucket the host sends at full speed for B / (M − R) =
/// 2 s, then at R.
#[test]
fn full_bucket_sends_at_link_speed_for_two_seconds_then_at_r() {
    const MB: u64 = 1_000_000;
    let quota = Quota::per_second(2 * MB)
        .unwrap()
        .with_burst(16 * MB)
        .unwrap();
    let bucket = RateLimiter::with_algorithm_and_clock(TokenBucket::new(quota), ManualClock::new());
    // The link sends 1 KB every 100 µs (10 MB/s) whenever the bucket lets it.
    let (chunk, tick) = (1_000u64, 100_000u64);
    let mut now = 0;
    let mut sent = Vec::new(); // (time, bytes sent so far)
    let mut total = 0;
    let mut first_wait = None;
    while now <= 6_000_000_000 {
        let d = bucket.check_at(now, chunk).unwrap();
        if d.is_allowed() {
            total += chunk;
            sent.push((now, total));
            now += tick;
        } else {
            first_wait.get_or_insert(now);
            now += d.retry_after_nanos().max(1);
        }
    }
    let first_wait = first_wait.expect("the bucket ran dry");
    // Full speed until 2 s (to within one 100 µs tick), i.e. 20 MB sent at 10 MB/s.
    assert!(
        first_wait.abs_diff(2_000_000_000) <= tick,
        "ran dry at {first_wait} ns"
    );
    // Then exactly R: between 3 s and 6 s, 6 MB (to within one chunk).
    let at = |t: u64| sent.iter().rev().find(|(s, _)| *s <= t).unwrap().1;
    let steady = at(6_000_000_000) - at(3_000_000_000);
    assert!(steady.abs_diff(6 * MB) <= chunk, "{steady} bytes in 3 s");
}

/// Turns are handed out in arrival order, `T` apart, and nobody leaves early.
#[test]
fn blocking_waiters_leave_in_arrival_order_and_never_early() {
    // T = 500 ms: long beside a loaded machine's delays, so that the five arrivals all
    // come before the queue's first turn and the fifth finds it full.
    let quota = Quota::per_second(2).unwrap().with_burst(4).unwrap();
    let queue = Arc::new(RateLimiter::with_algorithm_and_clock(
        LeakyQueue::new(quota),
        StdClock::new(),
    ));
    let start = Instant::now();
    let mut handles = Vec::new();
    for _ in 0..5 {
        let q = queue.clone();
        // Arrivals are sequential: each thread has joined before the next one starts.
        let (tx, rx) = std::sync::mpsc::channel();
        handles.push(std::thread::spawn(move || {
            let before = Instant::now();
            let d = q.check_n(1).unwrap();
            tx.send(()).unwrap();
            if d.is_allowed() {
                std::thread::sleep(d.delay());
            }
            (d, before.elapsed(), before)
        }));
        rx.recv().unwrap();
    }
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let admitted: Vec<_> = results.iter().filter(|r| r.0.is_allowed()).collect();
    assert_eq!(admitted.len(), 4, "the fifth finds the queue full");
    assert!(!results[4].0.is_allowed());
    // Departure deadlines strictly increase in arrival order, 500 ms apart (to within
    // what a thread preempted between reading the clock and its check loses).
    let deadlines: Vec<Duration> = admitted
        .iter()
        .map(|(d, _, before)| before.duration_since(start) + d.delay())
        .collect();
    for w in deadlines.windows(2) {
        let gap = w[1].saturating_sub(w[0]);
        assert!(gap >= Duration::from_millis(480), "gap {gap:?}");
    }
    for (d, waited, _) in &admitted {
        assert!(*waited >= d.delay(), "left before its turn");
    }
    // The blocking helper itself.
    let q2 = RateLimiter::with_algorithm_and_clock(LeakyQueue::new(quota), StdClock::new());
    let t = Instant::now();
    q2.acquire_blocking(1).unwrap();
    q2.acquire_blocking(1).unwrap();
    assert!(t.elapsed() >= Duration::from_millis(1_000));
}

#[tokio::test(start_paused = true)]
async fn async_waiters_leave_in_arrival_order() {
    let quota = Quota::per_second(10).unwrap().with_burst(5).unwrap();
    let queue = Arc::new(RateLimiter::with_algorithm_and_clock(
        LeakyQueue::new(quota),
        ManualClock::new(),
    ));
    let start = tokio::time::Instant::now();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut tasks = Vec::new();
    for i in 0..6 {
        let (q, tx) = (queue.clone(), tx.clone());
        let d = q.check_n(0).unwrap(); // zero cost: always admitted, never queued
        assert!(d.is_allowed() && d.delay().is_zero());
        tasks.push(tokio::spawn(async move {
            let d = q.acquire(1).await.unwrap();
            tx.send((i, d.is_allowed(), start.elapsed())).unwrap();
        }));
        tokio::task::yield_now().await; // let task i join before i + 1
    }
    drop(tx);
    for t in tasks {
        t.await.unwrap();
    }
    let mut order = Vec::new();
    while let Some(x) = rx.recv().await {
        order.push(x);
    }
    let admitted: Vec<_> = order
        .iter()
        .filter(|x| x.1)
        .map(|x| (x.0, x.2.as_millis()))
        .collect();
    assert_eq!(admitted, [(0, 100), (1, 200), (2, 300), (3, 400), (4, 500)]);
    assert!(order.iter().any(|x| x.0 == 5 && !x.1));
}

/// 50 tasks wait their turn on one GCRA limiter (10 per second, burst 1) through
/// reservations: each wakes exactly at its slot, the k-th booked at k × 100 ms — none
/// starves behind the others (tokio's paused clock, so the instants are exact). The
/// last one, cancelled while it waits, gives its slot back to the next booking.
#[tokio::test(start_paused = true)]
async fn waiters_are_served_first_come_first_served_at_exact_instants() {
    let quota = Quota::per_second(10).unwrap().with_burst(1).unwrap();
    let limiter = Arc::new(RateLimiter::gcra(quota).with_clock(ManualClock::new()));
    let start = tokio::time::Instant::now();
    let tasks: Vec<_> = (0..51)
        .map(|_| {
            let l = limiter.clone();
            tokio::spawn(async move {
                let r = l.reserve_at(0, 1, Duration::from_secs(60)).unwrap();
                let slot = r.ready_at();
                r.ready().await;
                (slot, tokio::time::Instant::now() - start)
            })
        })
        .collect();
    tokio::task::yield_now().await; // every task books before any wakes
    let last = tasks.last().unwrap();
    last.abort();
    let mut slots = Vec::new();
    for t in tasks.into_iter().take(50) {
        let (slot, woke) = t.await.unwrap();
        assert_eq!(woke, Duration::from_nanos(slot), "woke exactly at its slot");
        slots.push(slot);
    }
    let want: Vec<u64> = (0..50).map(|k| k * 100_000_000).collect();
    assert_eq!(slots, want, "first come, first served");
    let next = limiter.reserve_at(0, 1, Duration::from_secs(60)).unwrap();
    assert_eq!(
        next.ready_at(),
        5_000_000_000,
        "the cancelled slot came back"
    );
}

/// A keyed wait under tokio's paused clock: a key at its limit is admitted once its
/// refusal's retry-after has passed (the first try after it, not a busy poll), a
/// dropped wait takes nothing, a cost that can never fit is an error at once, and a
/// wait beyond `max_wait` gives up.
#[tokio::test(start_paused = true)]
async fn a_keyed_wait_sleeps_the_retry_after_and_takes_nothing_when_dropped() {
    use portero::{Gcra, WaitError};
    let quota = Quota::per_second(10).unwrap().with_burst(1).unwrap();
    // Real time on tokio's clock: the limiter reads the same paused instant.
    let keyed = keyed_on_tokio_clock(Gcra::new(quota), 100);
    let (long, none) = (Duration::from_secs(5), Duration::ZERO);
    assert!(keyed
        .until_key_ready(&"k", 1, long, none)
        .await
        .unwrap()
        .is_allowed());
    let start = tokio::time::Instant::now();
    assert!(keyed
        .until_key_ready(&"k", 1, long, none)
        .await
        .unwrap()
        .is_allowed());
    assert_eq!(
        start.elapsed(),
        Duration::from_millis(100),
        "exactly the retry-after"
    );
    let dropped = tokio::time::timeout(
        Duration::from_millis(50),
        keyed.until_key_ready(&"k", 1, long, none),
    );
    assert!(dropped.await.is_err());
    let start = tokio::time::Instant::now();
    keyed.until_key_ready(&"k", 1, long, none).await.unwrap();
    assert_eq!(
        start.elapsed(),
        Duration::from_millis(50),
        "the dropped wait took nothing"
    );
    assert!(matches!(
        keyed.until_key_ready(&"k", 2, long, none).await,
        Err(WaitError::Keyed(_))
    ));
    assert!(matches!(
        keyed
            .until_key_ready(&"k", 1, Duration::from_millis(10), none)
            .await,
        Err(WaitError::TooLong { .. })
    ));
    // With jitter the wake-up lands within [retry-after, retry-after + jitter].
    let start = tokio::time::Instant::now();
    keyed.until_key_ready(&"j", 1, long, none).await.unwrap();
    keyed
        .until_key_ready(&"j", 1, long, Duration::from_millis(30))
        .await
        .unwrap();
    assert_jittered(start.elapsed(), 100, 30);
}
