//! The planet model's own invariants: the exact object never admits over the rule,
//! remembered refusals admit exactly what the object does, leases stay within their
//! stated bound, and per-isolate limits reach up to one rule per isolate.

use portero_lab::overload::SEC;
use portero_lab::planet::{places, run, Setup, Topology, SPAN};

fn setup(locations: usize, isolates: usize) -> Setup {
    Setup {
        locations,
        isolates,
        keys: 20,
        rate: 200.0,
        seconds: 120,
        limit: 600,
        burst: 20,
        lease_ms: 5_000,
        seed: 7,
    }
}

/// The farthest round trip of `setup`'s locations (ns, rounded up).
fn farthest(setup: &Setup) -> u64 {
    let ms = (0..setup.locations)
        .map(places::round_trip_ms)
        .fold(0.0, f64::max);
    (ms * 1e6).ceil() as u64
}

const SPANS: [u64; 3] = [0, SEC, SPAN];
const PLANETS: [(usize, usize); 3] = [(1, 1), (10, 4), (300, 2)];

#[test]
fn the_exact_object_never_admits_over_the_rule() {
    for (l, i) in PLANETS {
        let s = setup(l, i);
        let exact = run(&s, Topology::Exact);
        // Answers reach the isolates up to a round trip after the object decided.
        for key in 0..s.keys as usize {
            for span in SPANS {
                let most = exact.most_in(key, span);
                let allowed = s.allowance(span + farthest(&s));
                assert!(
                    most <= allowed,
                    "{l}x{i}: key {key}, {most} in {span} ns > {allowed}"
                );
            }
        }
        assert!(
            exact.most_in(0, SPAN) > s.allowance(SPAN) / 2,
            "the hot key is at its limit"
        );
    }
}

#[test]
fn remembered_refusals_admit_exactly_what_the_object_admits() {
    for (l, i) in PLANETS {
        let s = setup(l, i);
        let (exact, remembered) = (run(&s, Topology::Exact), run(&s, Topology::Remembered));
        // The very same admissions, answered at the very same instants.
        assert_eq!(remembered.admitted, exact.admitted, "{l}x{i}");
        assert!(
            remembered.calls < exact.calls,
            "{l}x{i}: refusals answered locally save calls"
        );
    }
}

#[test]
fn leases_stay_within_their_bound() {
    for (l, i) in PLANETS {
        let s = setup(l, i);
        let trip = farthest(&s);
        let leases = [1, 10, 50].map(|batch| (Topology::Leases { batch }, batch, batch - 1));
        // Fetched ahead, an isolate holds the next lease too: up to 2b - 1 units.
        let ahead = [10, 50].map(|batch| (Topology::Prefetch { batch }, batch, 2 * batch - 1));
        for (topology, batch, most_held) in leases.into_iter().chain(ahead) {
            let leased = run(&s, topology);
            assert!(
                leased.oldest_spend_ns < s.lease_ms * 1_000_000,
                "a unit spent after its lease's life"
            );
            for key in 0..s.keys as usize {
                let holders = leased.lease_holders[key];
                for span in SPANS {
                    let most = leased.most_in(key, span);
                    let held = s.allowance(span + trip) + holders * most_held;
                    let lived = s.allowance(span + trip.max(s.lease_ms * 1_000_000));
                    assert!(
                        most <= held.min(lived),
                        "{l}x{i}, batch {batch}, key {key}: {most} in {span} ns > min({held}, {lived})"
                    );
                }
            }
            if topology == (Topology::Leases { batch: 1 }) {
                // Exact: within the rule itself in every span (answers reach the
                // isolates up to a round trip after the object decided).
                for key in 0..s.keys as usize {
                    for span in SPANS {
                        let most = leased.most_in(key, span);
                        assert!(
                            most <= s.allowance(span + trip),
                            "batch 1, key {key}: {most}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn per_isolate_limits_reach_one_rule_per_isolate() {
    // One key flooded everywhere: each of the 16 isolates admits its own rule.
    let mut s = setup(4, 4);
    (s.keys, s.rate, s.seconds) = (1, 2_000.0, 90);
    let per_isolate = run(&s, Topology::PerIsolate);
    let most = per_isolate.most_in(0, SPAN);
    let seen = per_isolate.seen_by[0];
    assert_eq!(seen, 16);
    assert!(most <= seen * s.allowance(SPAN), "{most} > {seen} rules");
    assert!(
        most * 10 >= 9 * seen * s.allowance(SPAN),
        "{most}: nearly {seen} rules"
    );
    assert!(run(&s, Topology::Exact).most_in(0, SPAN) <= s.allowance(SPAN + farthest(&s)));
}

#[test]
fn leases_answer_at_local_latency_where_the_object_is_far() {
    // A hot key below its limit (200 per second of 1,000): leases of 10 answer 9 in 10.
    let s = Setup {
        keys: 1,
        limit: 60_000,
        burst: 1_000,
        ..setup(10, 1)
    };
    let (exact, leased) = (
        run(&s, Topology::Exact),
        run(&s, Topology::Leases { batch: 10 }),
    );
    assert_eq!(
        leased.latency_at(0.5),
        0.0,
        "the median request is answered in its isolate"
    );
    assert!(
        exact.latency_at(0.5) > 50.0,
        "{} ms: most requests are far from the object",
        exact.latency_at(0.5)
    );
    assert!(
        leased.calls * 5 < exact.calls,
        "{} calls vs {}",
        leased.calls,
        exact.calls
    );
    assert_eq!(leased.total(), exact.total(), "and it admits the same");
    // The same seed, the same run.
    assert_eq!(run(&s, Topology::Exact).admitted, exact.admitted);
}

#[test]
fn prefetch_takes_the_round_trip_off_a_busy_keys_slowest_requests() {
    // A hot key below its limit (200 per second of 1,000), 10 locations x 2 isolates:
    // leases alone make every tenth request wait for the next lease; fetched ahead,
    // the next lease is there when the one held runs dry.
    let s = Setup {
        keys: 1,
        limit: 60_000,
        burst: 1_000,
        ..setup(10, 2)
    };
    let (leased, ahead) = (
        run(&s, Topology::Leases { batch: 10 }),
        run(&s, Topology::Prefetch { batch: 10 }),
    );
    println!(
        "leases of 10: hot p99 {:.1} ms, waited {:.1} %; + prefetch: {:.1} ms, {:.1} %",
        leased.latency_of(0, 0.99),
        100.0 * leased.waited(),
        ahead.latency_of(0, 0.99),
        100.0 * ahead.waited()
    );
    assert!(leased.latency_of(0, 0.99) > 50.0);
    assert!(
        ahead.latency_of(0, 0.99) <= 10.0,
        "{}",
        ahead.latency_of(0, 0.99)
    );
    assert!(ahead.waited() < leased.waited() / 5.0);
    assert_eq!(ahead.total(), leased.total(), "and it admits the same");
}

#[test]
fn prefetch_answers_a_key_over_its_limit_in_its_isolate_too() {
    // The sweep's 30 locations x 4 isolates, the hottest key asking 2.8x its rule: once
    // the object found the key at its limit, an isolate refuses it locally while its
    // next lease is fetched off the path, instead of sending each request across the
    // planet to be refused there.
    let s = Setup::at(30, 4, 2026);
    let (leased, ahead) = (
        run(&s, Topology::Leases { batch: 10 }),
        run(&s, Topology::Prefetch { batch: 10 }),
    );
    let (slow, fast) = (leased.latency_of(0, 0.99), ahead.latency_of(0, 0.99));
    println!(
        "the hottest key's p99: leases of 10 {slow:.1} ms, with prefetch {fast:.1} ms; units of ended leases given back: {} and {}",
        leased.given_back, ahead.given_back
    );
    assert!(slow > 100.0, "{slow}");
    assert!(fast <= 10.0, "{fast}");
    // What the key got in its best minute: at least 97% of its rule (units a far
    // isolate leased and spent too late, or not at all, are the rest).
    let most = ahead.most_in(0, SPAN);
    assert!(
        most * 100 >= 97 * s.allowance(SPAN),
        "{most} of {}",
        s.allowance(SPAN)
    );
}
