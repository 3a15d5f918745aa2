//! The overload experiments' numbers: exact where the run is deterministic, bounds over
//! several random draws where it is random; and the curves each headline sits on.

use portero_lab::overload::{
    breaker, goodput, little, priority, storm, tenants, DEFAULT_SEED, SEC,
};

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
}

#[test]
fn past_the_clients_patience_only_the_start_check_keeps_an_oldest_first_line_in_time() {
    // 100/s for 2 s: a line of 200 is as long as the clients wait.
    let patience_line = (goodput::PATIENCE / goodput::SERVICE * goodput::WORKERS) as usize;
    for seed in DRAWS {
        let curve = goodput::queue_curve(seed);
        for p in &curve {
            let checked = [p.oldest_checked, p.newest_checked, p.newest];
            if p.queue >= 10 {
                // Newest first, or any line that starts only what can finish in time.
                assert!(checked.iter().all(|&g| g >= 95.0), "seed {seed}: {p:?}");
            }
            if p.queue > 0 && p.queue < patience_line * 3 / 4 {
                // Short enough that nobody queued waits past their patience.
                assert!(p.oldest >= 95.0, "seed {seed}: {p:?}");
            }
            if p.queue >= patience_line * 5 / 4 {
                // Every request started has waited about its whole patience: too late.
                assert!(p.oldest <= 1.0, "seed {seed}: {p:?}");
            }
        }
        // No line at all refuses requests a worker would have freed up for soon.
        assert!(curve[0].oldest < 95.0, "seed {seed}");
        let at = |q: usize| curve.iter().find(|p| p.queue == q).unwrap();
        assert_eq!(
            at(goodput::QUEUE).oldest,
            goodput::run(seed)[1].goodput_second_half(),
            "the curve passes through the headline"
        );
    }
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
fn the_small_tenants_zero_rests_on_the_reserve() {
    for seed in DRAWS {
        let [random, fair] = tenants::run(seed);
        let curve = tenants::reserve_curve(seed);
        let at = |r: u32| curve.iter().find(|(k, _)| *k == r).unwrap().1;
        // No reserve: the fair share admits whoever comes while a slot is free, exactly
        // as the plain limit does (same arrivals, same service times).
        assert_eq!(
            (at(0).small, at(0).big),
            (random.small, random.big),
            "seed {seed}"
        );
        assert_eq!(at(tenants::RESERVE).small, fair.small, "seed {seed}");
        // One slot is not enough for 30 tenants' bursts; ten is.
        assert!(at(1).small_lost_percent() >= 5.0, "seed {seed}");
        for (reserve, run) in &curve {
            if *reserve >= tenants::RESERVE {
                assert!(
                    run.small_lost_percent() <= 0.1,
                    "seed {seed}, reserve {reserve}"
                );
            }
        }
        // Past that, each slot of reserve is about one request per second the big
        // tenant no longer gets (1 s per request).
        let slope = (at(10).big_served_per_second() - at(30).big_served_per_second()) / 20.0;
        assert!((0.8..1.2).contains(&slope), "seed {seed}: {slope}");
    }
}

#[test]
fn critical_work_is_served_in_full_and_sheddable_work_refused_first() {
    for seed in DRAWS {
        let [plain, by] = priority::run(seed);
        assert_eq!(
            plain.classes.map(|c| c.0),
            by.classes.map(|c| c.0),
            "same arrivals"
        );
        assert!(by.lost_percent(0) <= 0.1, "seed {seed}: critical {by:?}");
        assert!(by.lost_percent(2) > by.lost_percent(1), "seed {seed}");
        assert!(by.lost_percent(1) > by.lost_percent(0), "seed {seed}");
        assert!(by.lost_percent(2) >= 90.0, "seed {seed}: sheddable first");
        // A plain limit does not look at the class: each loses about the same third.
        for i in 0..3 {
            let lost = plain.lost_percent(i);
            assert!(
                (28.0..40.0).contains(&lost),
                "seed {seed}: class {i} {lost}"
            );
        }
        // The price: the slots above a class's ceiling stay empty when only that class
        // wants them, so fewer requests are served.
        assert!(by.throughput() < plain.throughput(), "seed {seed}");
        assert!(
            by.throughput() <= 91.0,
            "seed {seed}: only critical work uses the last 10"
        );
        assert!(plain.throughput() >= 95.0, "seed {seed}");
    }
    let curve = priority::load_curve(DEFAULT_SEED);
    for [plain, by] in &curve {
        let at = plain.offered;
        assert!(by.lost_percent(2) >= by.lost_percent(1), "{at}/s");
        assert!(by.lost_percent(1) >= by.lost_percent(0), "{at}/s");
        if at <= 300.0 {
            assert_eq!(
                by.classes[0].0, by.classes[0].1,
                "{at}/s: every checkout served"
            );
        }
        if at <= 40.0 {
            assert_eq!(
                plain.classes.map(|c| c.0),
                plain.classes.map(|c| c.1),
                "{at}/s"
            );
        }
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
fn recovery_waits_for_the_next_probe_whenever_the_dependency_heals() {
    let step = breaker::OUTAGE_STEP;
    for open in breaker::OPEN_PERIODS {
        let open_ns = open.as_nanos() as u64;
        let curve = breaker::recovery_curve(open);
        assert_eq!(curve.len() as u64, breaker::LONGEST_OUTAGE / step);
        for &(outage, recovery) in &curve {
            // Never more than one open period: the next probe comes within it.
            assert!(
                recovery <= open_ns,
                "open {open:?}, outage {outage}: {recovery}"
            );
        }
        // A heal at a random moment waits about half an open period.
        let mean = breaker::mean_recovery(&curve);
        assert!(
            mean.abs_diff(open_ns / 2) <= open_ns / 20,
            "open {open:?}: {mean}"
        );
    }
    // The headline sits on an edge: healing 100 ms later misses the probe at 70.08 s
    // and waits for the next one, 30 s later.
    let curve = breaker::recovery_curve(breaker::OPEN_FOR);
    let at = |o: u64| curve.iter().find(|(k, _)| *k == o).unwrap().1;
    let own = breaker::DOWN_UNTIL - breaker::DOWN_FROM;
    assert_eq!(at(own), breaker::run()[1].recovered_after);
    assert_eq!(
        at(own + step),
        breaker::OPEN_FOR.as_nanos() as u64 + at(own) - step
    );
}

#[test]
fn calls_that_hang_until_a_timeout_reach_the_dead_dependency_until_the_first_ones_fail() {
    let rate = breaker::RATE;
    for (timeout, without, with) in breaker::timeout_curve() {
        // Every call of the first `timeout` is let through before the first failure
        // is known; then up to four more, while the failures come in, and the probes.
        let hung = rate * timeout / SEC;
        assert_eq!(with.most_hanging, hung, "{timeout}");
        assert_eq!(without.most_hanging, hung, "{timeout}");
        assert!(with.reached_while_down >= hung + u64::from(breaker::FAILURES) - 1);
        assert!(with.reached_while_down <= hung + u64::from(breaker::FAILURES) + 2);
        assert_eq!(without.reached_while_down, 3000);
        // A hung probe delays the next one by its timeout.
        let open = breaker::OPEN_FOR.as_nanos() as u64;
        assert!(with.recovered_after <= open + timeout, "{timeout}");
    }
}

#[test]
fn backoff_cuts_the_storm_by_as_much_as_its_first_waits_are_long() {
    for seed in DRAWS {
        let [immediate, backoff] = storm::amplification(seed);
        let curve = storm::base_curve(seed);
        let at = |ms: u128| curve.iter().find(|p| p.0.as_millis() == ms).unwrap();
        assert_eq!(at(1000).1.load_while_down, backoff.load_while_down);
        for (base, after, ignored) in &curve {
            // Reading Retry-After pushes every retry a second later: less load while
            // the server refuses, more requests answered once it is back.
            assert!(
                after.load_while_down < ignored.load_while_down,
                "{seed} {base:?}"
            );
            assert!(after.answered > ignored.answered, "{seed} {base:?}");
            assert!(ignored.load_while_down < immediate.load_while_down);
        }
        for honours in [true, false] {
            let load = |ms| {
                let p = at(ms);
                if honours { p.1 } else { p.2 }.load_while_down
            };
            assert!(load(3000) < load(1000), "{seed} {honours}");
            assert!(load(1000) < load(100), "{seed} {honours}");
        }
        // Short waits that ignore Retry-After keep most of the storm.
        let quick = storm::backing_off(storm::Client::QUICK, seed);
        assert!(
            quick.load_while_down >= 0.9 * immediate.load_while_down,
            "{seed}"
        );
        assert!(
            quick.load_while_down > backoff.load_while_down + 50.0,
            "{seed}"
        );
    }
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

#[test]
fn waiting_for_a_turn_makes_no_call_over_the_quota_and_delivers_at_its_rate() {
    use portero_lab::overload::outbound::{self, Strategy};
    let [wait, naive, jittered] = outbound::run(portero_lab::overload::DEFAULT_SEED);
    assert_eq!(wait.strategy, Strategy::Wait);
    assert_eq!(wait.over_quota, 0, "no call the provider refuses");
    assert_eq!(
        wait.waits.len() as u64,
        outbound::TASKS * outbound::MESSAGES
    );
    assert!(wait.delivered_per_second >= 99.0 && wait.delivered_per_second <= 101.0);
    assert!(
        wait.wait_at(1.0) < 10.0,
        "the last one within 1,000 / 100 s"
    );
    for retry in [&naive, &jittered] {
        assert!(
            retry.over_quota > 1_000,
            "{:?}: {}",
            retry.strategy,
            retry.over_quota
        );
        assert!(retry.delivered_per_second < wait.delivered_per_second);
        assert!(retry.wait_at(0.99) > wait.wait_at(0.99));
    }
}

#[test]
fn waiting_in_line_uses_the_turns_callers_give_up_and_keeps_a_providers_window() {
    use portero_lab::overload::outbound_waits::{self as ow, Timing, Waiting};
    for seed in [portero_lab::overload::DEFAULT_SEED, 1, 7] {
        let [book, line, retry] = ow::patience(seed);
        assert_eq!(
            (book.waiting, line.waiting, retry.waiting),
            (Waiting::Book, Waiting::Line, Waiting::Retry)
        );
        assert!(
            book.admitted * 5 < book.turns,
            "seed {seed}: bookings used {}",
            book.admitted
        );
        assert!(
            book.newcomer_wait > 10.0,
            "seed {seed}: {}",
            book.newcomer_wait
        );
        assert!(
            line.admitted * 10 >= line.turns * 9,
            "seed {seed}: {}",
            line.admitted
        );
        assert!(line.admitted <= line.turns, "never over the schedule");
        assert_eq!(line.overtaken, 0, "first come, first served");
        assert!(
            line.newcomer_wait <= 0.01,
            "seed {seed}: {}",
            line.newcomer_wait
        );
        assert!(
            retry.overtaken > retry.admitted / 2,
            "seed {seed}: no order"
        );
        let [rate, burst_one, window] = ow::window(seed);
        assert_eq!(
            (rate.timing, burst_one.timing, window.timing),
            (Timing::Rate, Timing::RateBurstOne, Timing::Window)
        );
        assert_eq!(window.refused, 0);
        assert!(window.busiest_second <= ow::N);
        assert!(
            window.delivered_per_second >= 19.0,
            "{}",
            window.delivered_per_second
        );
        assert!(rate.refused > 0 && burst_one.refused > 0, "seed {seed}");
    }
}
