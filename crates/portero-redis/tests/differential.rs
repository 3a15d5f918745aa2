//! The Lua script decides exactly as portero's in-memory algorithms: random arrival
//! sequences (gaps, costs, peeks) through the script, given the time, and through the
//! core's model on the same clock — allowed, remaining, retry-after and reset must
//! agree to the script's microsecond.

use std::time::Duration;

use portero::SlidingWindowCounter;
use portero::{FixedWindow, Gcra, ManualClock, Placement, Quota, RateLimiter, SlidingLog};
use portero_redis::RedisAlgorithm;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

mod support {
    #[allow(dead_code)] // each test binary uses the helpers it needs
    pub mod local;
}
use support::local::{answering, start_redis, START_US};

/// The core's side: decide `cost` at `now` ns (peek: consume nothing).
type Model = Box<dyn Fn(u64, u64, bool) -> portero::Decision>;

struct Case {
    name: &'static str,
    algorithm: RedisAlgorithm,
    model: fn() -> Model,
    /// Largest gap between arrivals, µs.
    max_gap_us: u64,
    max_cost: u64,
    /// Arrival times on this grid (µs): the core's first-request fixed window rounds a
    /// window's start down to a quantum (`W / 1024` here); on the grid it is exact.
    grid_us: u64,
}

fn rate_limiter<A: portero::Algorithm + 'static>(a: A) -> Model {
    let limiter = RateLimiter::with_algorithm_and_clock(a, ManualClock::new());
    Box::new(move |now, cost, peek| {
        if peek {
            limiter.peek_at(now, cost).unwrap()
        } else {
            limiter.check_at(now, cost).unwrap()
        }
    })
}

/// Every case, with a limiter on `server` for its algorithm.
async fn limiters(server: &portero_redis::LocalRedis) -> Vec<(Case, portero_redis::RedisLimiter)> {
    let mut out = Vec::new();
    for case in cases() {
        let limiter = answering(server, case.algorithm).await;
        out.push((case, limiter));
    }
    out
}

fn cases() -> Vec<Case> {
    let window = Duration::from_millis(500);
    vec![
        Case {
            name: "gcra",
            algorithm: RedisAlgorithm::gcra(Quota::per_second(20).unwrap().with_burst(5).unwrap())
                .unwrap(),
            model: || {
                rate_limiter(Gcra::new(
                    Quota::per_second(20).unwrap().with_burst(5).unwrap(),
                ))
            },
            max_gap_us: 120_000,
            max_cost: 3,
            grid_us: 1,
        },
        Case {
            name: "sliding-window-counter",
            algorithm: RedisAlgorithm::sliding_counter(6, window).unwrap(),
            model: || {
                rate_limiter(
                    SlidingWindowCounter::new(Quota::new(6, Duration::from_millis(500)).unwrap())
                        .unwrap(),
                )
            },
            max_gap_us: 200_000,
            max_cost: 3,
            grid_us: 1,
        },
        Case {
            name: "fixed-window",
            algorithm: RedisAlgorithm::fixed_window(6, Duration::from_millis(512)).unwrap(),
            model: || {
                let q = Quota::new(6, Duration::from_millis(512)).unwrap();
                rate_limiter(FixedWindow::with_placement(q, Placement::FirstRequest).unwrap())
            },
            max_gap_us: 200_000,
            max_cost: 3,
            grid_us: 1_000,
        },
        Case {
            // Windows of 500 ms on the epoch: the same boundaries in both.
            name: "aligned-window",
            algorithm: RedisAlgorithm::aligned_window(6, window).unwrap(),
            model: || {
                let q = Quota::new(6, Duration::from_millis(500)).unwrap();
                rate_limiter(FixedWindow::with_placement(q, Placement::Aligned).unwrap())
            },
            max_gap_us: 200_000,
            max_cost: 3,
            grid_us: 1,
        },
        Case {
            name: "sliding-log",
            algorithm: RedisAlgorithm::sliding_log(6, window).unwrap(),
            model: || {
                let log = SlidingLog::with_clock(
                    Quota::new(6, Duration::from_millis(500)).unwrap(),
                    ManualClock::new(),
                );
                Box::new(move |now, cost, peek| {
                    if peek {
                        log.peek_at(now, cost).unwrap()
                    } else {
                        log.check_at(now, cost).unwrap()
                    }
                })
            },
            max_gap_us: 200_000,
            max_cost: 3,
            grid_us: 1,
        },
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_script_decides_exactly_as_the_core_on_random_arrivals() {
    let server = start_redis();
    let mut mismatches = Vec::new();
    for (case, limiter) in limiters(&server).await {
        for seq in 0..20u64 {
            let mut rng = StdRng::seed_from_u64(seq);
            let model = (case.model)();
            let key = format!("{}-{seq}", case.name);
            let grid = case.grid_us;
            let mut now_us = START_US + rng.random_range(0..1_000_000) / grid * grid;
            for step in 0..60 {
                // Mostly bursts, sometimes a pause longer than the window.
                now_us += if rng.random_bool(0.1) {
                    rng.random_range(0..15 * case.max_gap_us)
                } else {
                    rng.random_range(0..case.max_gap_us)
                } / grid
                    * grid;
                let cost = rng.random_range(0..=case.max_cost);
                let peek = rng.random_bool(0.15);
                let lua = limiter.decide_at(&key, cost, peek, now_us).await.unwrap();
                let core = model(now_us * 1_000, cost, peek);
                // DIFF_TRACE=gcra-3 prints one sequence step by step.
                if std::env::var("DIFF_TRACE").is_ok_and(|v| v == format!("{}-{seq}", case.name)) {
                    eprintln!(
                        "{step} t={} cost {cost} peek {peek}\n  lua {lua:?}\n  core {core:?}",
                        now_us - START_US
                    );
                }
                // The script counts whole µs: its waits are the core's, rounded up.
                let as_us = |ns: u64| ns.div_ceil(1_000);
                let same = lua.is_allowed() == core.is_allowed()
                    && lua.remaining() == core.remaining()
                    && as_us(lua.retry_after_nanos()) == as_us(core.retry_after_nanos())
                    && as_us(lua.reset_after_nanos()) == as_us(core.reset_after_nanos());
                if !same {
                    mismatches.push(format!(
                        "{} seq {seq} step {step} (cost {cost}, peek {peek}): lua {:?} core {:?}",
                        case.name, lua, core
                    ));
                    break; // the sequences diverge from here
                }
            }
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} mismatches:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}

/// One rule for `remaining` in the scripts too: after every step of random arrivals,
/// a peek of `remaining` units is admitted and one of `remaining + 1` is not (the
/// sliding window counter once reported one unit less whenever its estimate was
/// fractional: 240 while a check of 241 was admitted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remaining_is_the_largest_cost_the_script_admits() {
    let server = start_redis();
    let mut wrong = Vec::new();
    for (case, limiter) in limiters(&server).await {
        let capacity = case.algorithm.capacity();
        for seq in 0..10u64 {
            let mut rng = StdRng::seed_from_u64(100 + seq);
            let key = format!("remaining-{}-{seq}", case.name);
            let grid = case.grid_us;
            let mut now_us = START_US + rng.random_range(0..1_000_000) / grid * grid;
            for step in 0..40 {
                now_us += rng.random_range(0..case.max_gap_us) / grid * grid;
                let cost = rng.random_range(1..=case.max_cost);
                let d = limiter.decide_at(&key, cost, false, now_us).await.unwrap();
                let left = limiter
                    .decide_at(&key, 0, true, now_us)
                    .await
                    .unwrap()
                    .remaining();
                let fits = |c| limiter.decide_at(&key, c, true, now_us);
                let low = left == 0 || fits(left).await.unwrap().is_allowed();
                let high = left >= capacity || !fits(left + 1).await.unwrap().is_allowed();
                if !(low && high && d.remaining() <= capacity) {
                    wrong.push(format!(
                        "{} seq {seq} step {step}: remaining {left}",
                        case.name
                    ));
                    break;
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
