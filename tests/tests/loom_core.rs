//! loom models: concurrent checks on one limiter are linearizable.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p portero-tests --test loom_core --release`
//! (`cargo xtask loom` does it with its own target dir and bounded preemptions).
//!
//! Each model races 2–3 threads on one limiter and then checks that the outcome is one
//! that a *serial* run produces for some order of the same requests: the same
//! decision for every request and the same final state. That rules out lost updates
//! (a lost update leaves a state no serial order reaches) and over-admission, and the
//! all-rejected models check that a rejection never changes the state.
#![cfg(loom)]

use loom::sync::Arc;
use loom::thread;
use portero::{
    Algorithm, FixedWindow, Gcra, LeakyQueue, ManualClock, Placement, Quota, RateLimiter,
    SlidingWindowCounter, TokenBucket,
};

/// Permutations of 0..n (n ≤ 3).
fn orders(n: usize) -> Vec<Vec<usize>> {
    match n {
        2 => vec![vec![0, 1], vec![1, 0]],
        3 => vec![
            vec![0, 1, 2],
            vec![0, 2, 1],
            vec![1, 0, 2],
            vec![1, 2, 0],
            vec![2, 0, 1],
            vec![2, 1, 0],
        ],
        _ => unreachable!(),
    }
}

/// Races `requests` (time, cost) from one thread each, after `warmup` ran serially;
/// asserts the result is linearizable and returns the number admitted.
fn race<A>(
    algorithm: A,
    warmup: &'static [(u64, u64)],
    requests: &'static [(u64, u64)],
) -> Vec<usize>
where
    A: Algorithm + Clone + Send + Sync + 'static,
{
    let admitted_counts = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let counts = admitted_counts.clone();
    loom::model(move || {
        let lim = Arc::new(RateLimiter::with_algorithm_and_clock(
            algorithm.clone(),
            ManualClock::new(),
        ));
        for &(now, cost) in warmup {
            lim.check_at(now, cost).unwrap();
        }
        let start = lim.raw_state();
        let handles: Vec<_> = requests
            .iter()
            .map(|&(now, cost)| {
                let lim = lim.clone();
                thread::spawn(move || lim.check_at(now, cost).unwrap().is_allowed())
            })
            .collect();
        let got: Vec<bool> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let end = lim.raw_state();

        let serial = orders(requests.len()).into_iter().any(|order| {
            let mut state = start;
            let mut decisions = vec![false; requests.len()];
            for i in order {
                let (now, cost) = requests[i];
                let t = algorithm.decide(state, now, cost).unwrap();
                decisions[i] = t.decision.is_allowed();
                if let Some(next) = t.next {
                    state = next;
                }
            }
            decisions == got && state == end
        });
        assert!(
            serial,
            "not linearizable: decisions {got:?}, state {start} -> {end}"
        );
        if got.iter().all(|a| !a) {
            assert_eq!(start, end, "a rejection changed the state");
        }
        counts
            .lock()
            .unwrap()
            .push(got.iter().filter(|a| **a).count());
    });
    let v = admitted_counts.lock().unwrap().clone();
    v
}

fn quota(burst: u64) -> Quota {
    Quota::from_nanos(1, 10).unwrap().with_burst(burst).unwrap()
}

#[test]
fn gcra_frozen_clock_three_threads_race_for_two_slots() {
    let counts = race(Gcra::new(quota(2)), &[], &[(100, 1), (100, 1), (100, 1)]);
    assert!(counts.iter().all(|&c| c == 2), "{counts:?}");
}

#[test]
fn token_bucket_frozen_clock_three_threads_race_for_two_slots() {
    let counts = race(
        TokenBucket::new(quota(2)),
        &[],
        &[(100, 1), (100, 1), (100, 1)],
    );
    assert!(counts.iter().all(|&c| c == 2), "{counts:?}");
}

#[test]
fn gcra_advancing_clock_weighted() {
    advancing_clock_weighted(Gcra::new(quota(3)));
}

#[test]
fn token_bucket_advancing_clock_weighted() {
    advancing_clock_weighted(TokenBucket::new(quota(3)));
}

/// Empty at t=100; one unit returns every 10 ns. Outcomes depend on the order, and
/// each must be a serial one.
fn advancing_clock_weighted<A>(algorithm: A)
where
    A: Algorithm + Clone + Send + Sync + 'static,
{
    let counts = race(algorithm, &[(100, 3)], &[(105, 1), (110, 1), (120, 2)]);
    assert!(counts.iter().all(|&c| (1..=2).contains(&c)), "{counts:?}");
}

#[test]
fn rejections_never_write() {
    let counts = race(
        Gcra::new(quota(2)),
        &[(100, 2)],
        &[(100, 1), (101, 2), (109, 1)],
    );
    assert!(counts.iter().all(|&c| c == 0));
    let counts = race(
        TokenBucket::new(quota(2)),
        &[(100, 2)],
        &[(100, 1), (101, 2), (109, 1)],
    );
    assert!(counts.iter().all(|&c| c == 0));
}

fn window(limit: u64) -> Quota {
    Quota::from_nanos(limit, 100).unwrap()
}

#[test]
fn fixed_window_frozen_clock_three_threads_race_for_two_slots() {
    let counts = race(
        FixedWindow::new(window(2)).unwrap(),
        &[],
        &[(150, 1), (150, 1), (150, 1)],
    );
    assert!(counts.iter().all(|&c| c == 2), "{counts:?}");
}

#[test]
fn fixed_window_across_a_boundary() {
    // Window [100, 200) is full; racing requests straddle the boundary at 200.
    let counts = race(
        FixedWindow::new(window(2)).unwrap(),
        &[(150, 2)],
        &[(199, 1), (200, 1), (201, 2)],
    );
    assert!(counts.iter().all(|&c| (1..=2).contains(&c)), "{counts:?}");
}

#[test]
fn fixed_window_first_request_and_excess_counting() {
    let fw = FixedWindow::with_placement(window(2), Placement::FirstRequest)
        .unwrap()
        .count_excess()
        .unwrap();
    // Rejections write the excess here; the outcome must still be serial.
    // The window [150, 250) has one slot left; 250 opens a new window.
    let counts = race(fw, &[(150, 1)], &[(160, 1), (170, 1), (250, 1)]);
    assert!(counts.iter().all(|&c| (2..=3).contains(&c)), "{counts:?}");
}

#[test]
fn sliding_counter_frozen_and_across_a_boundary() {
    let sc = SlidingWindowCounter::new(window(2)).unwrap();
    let counts = race(sc, &[], &[(150, 1), (150, 1), (150, 1)]);
    assert!(counts.iter().all(|&c| c == 2), "{counts:?}");
    let counts = race(sc, &[(150, 2)], &[(199, 1), (230, 1), (290, 1)]);
    assert!(counts.iter().all(|&c| c <= 2), "{counts:?}");
}

#[test]
fn leaky_queue_three_threads_take_two_slots() {
    let q = LeakyQueue::new(quota(2));
    let counts = race(q, &[], &[(100, 1), (100, 1), (100, 1)]);
    assert!(counts.iter().all(|&c| c == 2), "{counts:?}");
}
