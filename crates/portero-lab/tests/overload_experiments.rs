//! The overload experiments' numbers: exact where the run is deterministic, bounds over
//! several random draws where it is random.

use portero_lab::overload::{breaker, goodput, little, storm, tenants, DEFAULT_SEED};

const DRAWS: [u64; 4] = [DEFAULT_SEED, 1, 2, 3];

#[test]
fn goodput_collapses_without_a_bound_and_holds_at_capacity_with_one() {
    for seed in DRAWS {
        let runs = goodput::run(seed);
        let unbounded = &runs[0];
        assert_eq!(unbounded.line, goodput::Line::Unbounded);
        assert!(
            unbounded.goodput_second_half() < 1.0,
            "seed {seed}: near zero"
        );
        assert_eq!(unbounded.refused, 0, "an unbounded line refuses nothing");
        for bounded in &runs[1..] {
            let g = bounded.goodput_second_half();
            assert!(g >= 95.0, "seed {seed}: {} at {g}/s", bounded.line.name());
            assert!(bounded.refused > 0);
        }
        // Both lines keep the server busy: throughput is not what differs.
        assert!(unbounded.served.abs_diff(runs[1].served) <= 10);
    }
    let chart = portero_lab::svg::lines(
        "t",
        "x",
        "y",
        &[("a", vec![1.0, 2.0]), ("b", vec![0.0, 3.0])],
    );
    assert_eq!(chart.matches("<polyline").count(), 2);
}

#[test]
fn fair_shedding_serves_the_small_tenants_in_full() {
    let [random, fair] = tenants::run(DEFAULT_SEED);
    assert_eq!(fair.small.0, fair.small.1, "not one small request refused");
    assert!(
        (45.0..55.0).contains(&random.small_lost_percent()),
        "about half"
    );
    assert!((45.0..55.0).contains(&random.big_lost_percent()));
    assert!(
        fair.big_served_per_second() >= 55.0,
        "the big one keeps the rest"
    );
    for seed in DRAWS {
        let [random, fair] = tenants::run(seed);
        assert!(fair.small_lost_percent() <= 0.1, "seed {seed}");
        assert!(random.small_lost_percent() >= 45.0, "seed {seed}");
    }
}

#[test]
fn a_concurrency_limit_follows_littles_law_and_a_rate_limit_does_not() {
    let runs = little::run();
    let [rate, fixed, adaptive] = [&runs[0], &runs[1], &runs[2]];
    assert_eq!(rate.phases[1].admitted_per_second, 120.0);
    assert!(
        rate.phases[1].line_at_end > 3000,
        "the line grows 60 per second"
    );
    assert_eq!(
        fixed.phases[1].admitted_per_second, 60.0,
        "C / S = 30 / 0.5"
    );
    assert!((fixed.phases[1].mean_latency - 0.5).abs() < 1e-9);
    assert!(fixed.phases[0].admitted_per_second >= 118.0, "C / S = 120");
    // Told neither number: within 10 % of capacity, latency bounded.
    assert!(adaptive.phases[0].admitted_per_second >= 108.0);
    assert!((54.0..=61.0).contains(&adaptive.phases[1].admitted_per_second));
    assert!(adaptive.phases[1].mean_latency <= 1.0);
    assert!(adaptive.phases[1].line_at_end <= 60);
}

#[test]
fn the_breaker_keeps_calls_off_a_dead_dependency_and_recovers_on_the_first_probe() {
    let [without, with] = breaker::run();
    assert_eq!(without.reached_while_down, 3000);
    assert_eq!(without.fallbacks, 0);
    // 5 failures at 10.00-10.08 s, one probe at 40.08 s; the next probe, at 70.08 s,
    // finds it healed.
    assert_eq!(with.reached_while_down, 6);
    assert_eq!(with.fallbacks, 2998);
    assert_eq!(with.recovered_after_ms, 80);
}

#[test]
fn immediate_retries_quadruple_the_load_and_jitter_breaks_up_the_herd() {
    for seed in DRAWS {
        let [immediate, backoff] = storm::amplification(seed);
        assert_eq!(immediate.load_while_down, 400.0);
        assert_eq!(
            immediate.answered, 1000,
            "only requests sent after recovery"
        );
        assert!(backoff.load_while_down <= 320.0, "seed {seed}");
        assert!(backoff.answered >= 1500, "retries land after recovery");
        let herd = storm::herd(seed);
        assert_eq!(herd.peak_without_jitter, 200);
        assert!(
            herd.peak_with_jitter <= 60,
            "seed {seed}: {}",
            herd.peak_with_jitter
        );
    }
}
