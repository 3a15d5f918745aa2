//! The keyed check as a user's plain program times it: 10,000 `u64` keys, every one
//! already held, visited in a uniform random order (65,536 draws, read round and
//! round); the default release profile; no harness. portero's `KeyedLimiter` and
//! governor's keyed limiter (its default `DashMap` store) in turn, five rounds
//! interleaved, the best round's ns per check — with each one's clock, with each
//! one's cached clock (quanta's recent time, kept by governor's upkeep thread every
//! millisecond), and with the time given (portero's `check_at`, governor on its fake
//! clock).
//! `cargo run --release -p portero-benches --example keyed_loop`.

use std::hint::black_box;
use std::time::Instant;

use portero::algorithm::gcra::Gcra;
use portero::KeyedLimiter;
use portero_benches::{governor_open_quota, open_quota, uniform_keys};

const KEYS: u64 = 10_000;
const DRAWS: usize = 1 << 16;
const N: usize = 20_000_000;

/// The best of `rounds` of `N` calls of `one` over `keys`, in ns per call.
fn best_of(best: &mut f64, keys: &[u64], mut one: impl FnMut(u64) -> bool) {
    let t = Instant::now();
    let mut admitted = 0u64;
    for i in 0..N {
        admitted += u64::from(one(keys[i % DRAWS]));
    }
    black_box(admitted);
    *best = best.min(t.elapsed().as_nanos() as f64 / N as f64);
}

fn main() {
    let keys = uniform_keys(KEYS, DRAWS);
    let portero = KeyedLimiter::new(Gcra::new(open_quota()), KEYS as usize);
    let governor = governor::RateLimiter::keyed(governor_open_quota());
    let given = KeyedLimiter::with_clock(
        Gcra::new(open_quota()),
        KEYS as usize,
        portero::ManualClock::new(),
    );
    let upkeep =
        governor::clock::QuantaUpkeepClock::from_interval(std::time::Duration::from_millis(1))
            .expect("one upkeep thread");
    let cached = KeyedLimiter::with_clock(
        Gcra::new(open_quota()),
        KEYS as usize,
        portero::RecentClock::new(),
    );
    let governor_cached = governor::RateLimiter::dashmap_with_clock(governor_open_quota(), upkeep);
    let fake = governor::clock::FakeRelativeClock::default();
    let governor_given = governor::RateLimiter::dashmap_with_clock(governor_open_quota(), fake);
    for k in 0..KEYS {
        portero.check(&k);
        let _ = governor.check_key(&k);
        let _ = given.check_at(&k, 1, 1);
        let _ = governor_given.check_key(&k);
        cached.check(&k);
        let _ = governor_cached.check_key(&k);
    }
    let mut best = [f64::INFINITY; 6];
    for _ in 0..5 {
        best_of(&mut best[0], &keys, |k| portero.check(&k).is_allowed());
        best_of(&mut best[1], &keys, |k| governor.check_key(&k).is_ok());
        best_of(&mut best[2], &keys, |k| {
            given.check_at(&k, 1, 1).is_ok_and(|d| d.is_allowed())
        });
        best_of(&mut best[3], &keys, |k| {
            governor_given.check_key(&k).is_ok()
        });
        best_of(&mut best[4], &keys, |k| cached.check(&k).is_allowed());
        best_of(&mut best[5], &keys, |k| {
            governor_cached.check_key(&k).is_ok()
        });
    }
    let names = [
        "portero check(&key)",
        "governor check_key(&key)",
        "portero check_at(&key, now, 1)",
        "governor check_key, fake clock",
        "portero check, RecentClock",
        "governor check_key, upkeep clock",
    ];
    for (name, ns) in names.iter().zip(best) {
        println!("{name:<32} {ns:>6.2} ns");
    }
    println!(
        "with the clock:     {:.2}x governor's speed",
        best[1] / best[0]
    );
    println!(
        "with the time given: {:.2}x governor's speed",
        best[3] / best[2]
    );
    println!(
        "with cached clocks:  {:.2}x governor's speed",
        best[5] / best[4]
    );
}
