//! Giving back in Redis by the core's rule, on the script's own clock: settlements in
//! any order with no time passing leave exactly the twin; a settlement never gives
//! back what other give-backs since may have taken (the GCRA ledger); a window's
//! opener given back whole while others count is kept; and an admission from an
//! earlier life of its key gives nothing to the new one.

use std::time::Duration;

use portero::Quota;
use portero_redis::{RedisAlgorithm, RedisLimiter, Taken};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

mod support {
    #[allow(dead_code)] // each test binary uses the helpers it needs
    pub mod local;
}
use support::local::{answering, start_redis, would_admit as admits, START_US};

/// GCRA at 100 per second (T = 10 ms), a burst of 200.
const T_US: u64 = 10_000;

fn gcra() -> RedisAlgorithm {
    RedisAlgorithm::gcra(Quota::per_second(100).unwrap().with_burst(200).unwrap()).unwrap()
}

async fn take(limiter: &RedisLimiter, key: &str, cost: u64, now: u64) -> Taken {
    let (decision, taken) = limiter.check_taken_at(key, cost, now).await.unwrap();
    assert!(decision.is_allowed(), "{key}: {cost} at {now}");
    taken.expect("an admission of units")
}

/// The largest cost `key` admits at `now` (peeking).
async fn admissible(limiter: &RedisLimiter, key: &str, now: u64, most: u64) -> u64 {
    let (mut lo, mut hi) = (0, most);
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if admits(limiter, key, mid, now).await {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo
}

/// Sixteen admissions of 10 settled at 3, in reverse, in order and in random orders,
/// all at the instant they were taken: each key then admits exactly what a twin
/// charged 3 each at the start admits, now and later (the ledger alone kept 42 of the
/// 112 units in reverse order).
#[tokio::test]
async fn settlements_in_any_order_with_no_time_passing_leave_exactly_the_twin() {
    let server = start_redis();
    let limiter = answering(&server, gcra()).await;
    let mut rng = StdRng::seed_from_u64(54);
    let now = START_US;
    for (case, order) in ["reverse", "forward", "random", "random", "random"]
        .into_iter()
        .enumerate()
    {
        let (a, b) = (format!("order-a-{case}"), format!("order-b-{case}"));
        let mut taken = Vec::new();
        for _ in 0..16 {
            taken.push(take(&limiter, &a, 10, now).await);
            take(&limiter, &b, 3, now).await;
        }
        match order {
            "reverse" => taken.reverse(),
            "random" => taken.shuffle(&mut rng),
            _ => {}
        }
        for one in taken {
            limiter.settle_at(one, 3, now).await.unwrap();
        }
        for later in [0, 5 * T_US, 100 * T_US] {
            assert_eq!(
                admissible(&limiter, &a, now + later, 200).await,
                admissible(&limiter, &b, now + later, 200).await,
                "{order}: A and its twin at +{later} µs"
            );
        }
    }
}

/// Y and X admitted together; Y given back at once; Z comes when the key is idle and
/// starts its own slot; then X settles at 0. What Y's give-back moved lay ahead of X,
/// so nothing of X is still ahead: X gives back nothing, and the key admits what a
/// twin that saw only Z admits. Before the ledger, X gave back half its slot: at
/// +20 ms the key admitted the whole burst where the twin refused it.
#[tokio::test]
async fn a_settlement_never_gives_back_what_an_earlier_give_back_took() {
    let server = start_redis();
    let limiter = answering(&server, gcra()).await;
    let (a, b) = ("taken-a", "taken-b");
    let t0 = START_US;
    let y = take(&limiter, a, 1, t0).await;
    let x = take(&limiter, a, 1, t0).await;
    limiter.settle_at(y, 0, t0).await.unwrap();
    take(&limiter, a, 1, t0 + 15_000).await; // Z
    take(&limiter, b, 1, t0 + 15_000).await; // the twin's Z
    limiter.settle_at(x, 0, t0 + 15_000).await.unwrap();
    for at in [15_000, 20_000, 24_000, 25_000] {
        for cost in [199, 200] {
            assert_eq!(
                admits(&limiter, a, cost, t0 + at).await,
                admits(&limiter, b, cost, t0 + at).await,
                "{cost} at +{at} µs"
            );
        }
    }
}

/// A fixed window's opener, given back whole while another request counts in its
/// window, is kept (as in portero's core): the key stands exactly as the twin that
/// saw it (given back, it left the window where it opened it with one unit free: a
/// twin that never saw the opener opened its window at the second request, and no
/// placement is safe against every such twin). Alone in its window, the opener's
/// give-back removes the window: exact.
#[tokio::test]
async fn a_window_opener_given_back_while_others_count_is_kept() {
    let server = start_redis();
    let w = 10_000_000; // 10 s
    let limiter = answering(
        &server,
        RedisAlgorithm::fixed_window(2, Duration::from_micros(w)).unwrap(),
    )
    .await;
    let t0 = START_US;
    let (a, saw) = ("opener-a", "opener-saw");
    let x = take(&limiter, a, 1, t0).await;
    take(&limiter, saw, 1, t0).await;
    take(&limiter, a, 1, t0 + 1).await; // Y
    take(&limiter, saw, 1, t0 + 1).await;
    limiter.settle_at(x, 0, t0 + 1).await.unwrap();
    for at in [1, w - 1, w, w + 1] {
        assert_eq!(
            admits(&limiter, a, 1, t0 + at).await,
            admits(&limiter, saw, 1, t0 + at).await,
            "kept: A is the twin that saw the opener, at +{at} µs"
        );
    }

    // Alone in its window: given back, the window goes, and the next request opens
    // its own (it was left where the opener opened it: a fresh window at +w).
    let alone = take(&limiter, "alone", 2, t0).await;
    limiter.settle_at(alone, 0, t0 + 1).await.unwrap();
    take(&limiter, "alone", 2, t0 + 2).await;
    assert!(
        !admits(&limiter, "alone", 1, t0 + w + 1).await,
        "the window opened at +2 µs, not at the given-back opener's instant"
    );
}

/// An admission whose key was reset since gives nothing to the key's new life
/// (GCRA and the sliding counter keep the key's generation; the windows and the log
/// find it by its own time): the new life stands where a twin that only saw its own
/// requests stands.
#[tokio::test]
async fn a_reset_key_gets_nothing_back() {
    let server = start_redis();
    let window = Duration::from_secs(10);
    for (name, algorithm) in [
        ("gcra", gcra()),
        (
            "sliding counter",
            RedisAlgorithm::sliding_counter(200, window).unwrap(),
        ),
        (
            "fixed window",
            RedisAlgorithm::fixed_window(200, window).unwrap(),
        ),
        (
            "sliding log",
            RedisAlgorithm::sliding_log(200, window).unwrap(),
        ),
    ] {
        let limiter = answering(&server, algorithm).await;
        // The new life a microsecond later, and (found by an outside harness: a
        // plain `DEL` let them share a generation) in the same microsecond.
        for (gap, life) in [(1, "later"), (0, "same")] {
            let (a, b) = (
                format!("reset-a-{name}-{life}"),
                format!("reset-b-{name}-{life}"),
            );
            let old = take(&limiter, &a, 50, START_US).await;
            limiter.reset(&a).await.unwrap();
            take(&limiter, &a, 150, START_US + gap).await;
            take(&limiter, &b, 150, START_US + gap).await;
            limiter.settle_at(old, 0, START_US + gap).await.unwrap();
            assert_eq!(
                admissible(&limiter, &a, START_US + gap, 200).await,
                admissible(&limiter, &b, START_US + gap, 200).await,
                "{name}, new life {life}: the old life's admission gave to the new one"
            );
        }
    }
}

/// A settlement's charge cut short at the 2^51 µs cap drops units the TAT no longer
/// holds; an admission from before then gave back what was no longer counted (as in
/// the core, found by an outside harness there). Now the key's generation moves on:
/// the earlier admission gives nothing back, and the key stands as its twin.
#[tokio::test]
async fn a_charge_cut_short_at_the_cap_leaves_nothing_for_an_earlier_admission() {
    let server = start_redis();
    // T = 2^49 µs, a burst of 4: a span of 2^51 µs, the most debt a charge leaves.
    let t_ns = (1u64 << 49) * 1_000;
    let limiter = answering(
        &server,
        RedisAlgorithm::gcra(Quota::from_nanos(1, t_ns).unwrap().with_burst(4).unwrap()).unwrap(),
    )
    .await;
    let t0 = START_US;
    let x = take(&limiter, "cap-a", 1, t0).await; // real 0
    let y = take(&limiter, "cap-a", 1, t0).await; // real 4: capped
    take(&limiter, "cap-b", 4, t0).await; // the twin: 4 at once, exactly at the cap
    limiter.settle_at(y, 4, t0).await.unwrap();
    limiter.settle_at(x, 0, t0).await.unwrap();
    assert_eq!(
        admits(&limiter, "cap-a", 1, t0).await,
        admits(&limiter, "cap-b", 1, t0).await,
        "A admits what its twin refuses"
    );
}

/// 200 admissions at one instant, 195 of them given back in random order (requests a
/// later limit refused, their give-backs landing as the runtime schedules them): the
/// key stands exactly where the 5 kept leave it. With a log of 32 runs the places
/// given back out of order merged and 1 to 4 units stayed kept.
#[tokio::test]
async fn two_hundred_given_back_in_random_order_leave_exactly_the_twin() {
    let server = start_redis();
    let algorithm = RedisAlgorithm::gcra(Quota::per_hour(300).unwrap()).unwrap();
    let limiter = answering(&server, algorithm).await;
    let mut rng = StdRng::seed_from_u64(7);
    for case in 0..5 {
        let key = format!("scrambled-{case}");
        let mut taken = Vec::new();
        for _ in 0..200 {
            taken.push(take(&limiter, &key, 1, START_US).await);
        }
        let mut back = taken.split_off(5);
        back.shuffle(&mut rng);
        for one in back {
            limiter.settle_at(one, 0, START_US).await.unwrap();
        }
        assert_eq!(
            admissible(&limiter, &key, START_US, 300).await,
            295,
            "case {case}"
        );
    }
}

/// 64 admissions of 8 in flight, the script's clock passing 5 ms (half a unit) between
/// events, each settled at a random real cost below its estimate in random order:
/// what the key still holds beyond its twin (charged each real cost at the start),
/// over all the units given back, summed over 20 runs — at most 1 %, as in memory.
#[tokio::test]
async fn with_time_passing_and_64_in_flight_at_least_99_percent_comes_back() {
    let server = start_redis();
    let algorithm =
        RedisAlgorithm::gcra(Quota::per_second(100).unwrap().with_burst(1_000).unwrap()).unwrap();
    let limiter = answering(&server, algorithm).await;
    let mut rng = StdRng::seed_from_u64(64);
    let (mut kept, mut back) = (0u64, 0u64);
    for run in 0..20 {
        let (a, b) = (format!("flight-a-{run}"), format!("flight-b-{run}"));
        let mut now = START_US + run * 3_600_000_000;
        let mut flight: Vec<(Taken, u64)> = Vec::new();
        let mut admitted = 0;
        while admitted < 64 || !flight.is_empty() {
            now += T_US / 2;
            if admitted < 64 && (flight.is_empty() || rng.random_range(0..2) == 0) {
                let real = rng.random_range(0..8);
                flight.push((take(&limiter, &a, 8, now).await, real));
                let twin = take(&limiter, &b, 8, now).await;
                limiter.settle_at(twin, real, now).await.unwrap();
                back += 8 - real;
                admitted += 1;
            } else {
                let which = rng.random_range(0..flight.len());
                let (one, real) = flight.swap_remove(which);
                limiter.settle_at(one, real, now).await.unwrap();
            }
        }
        let (mine, theirs) = (
            admissible(&limiter, &a, now, 1_000).await,
            admissible(&limiter, &b, now, 1_000).await,
        );
        assert!(mine <= theirs, "run {run}: never looser than the twin");
        kept += theirs - mine;
    }
    let share = 100.0 * (back - kept) as f64 / back as f64;
    println!("Redis: {kept} of {back} give-back units kept, {share:.2} % back");
    assert!(kept * 100 <= back, "{kept} of {back} kept");
}
