//! 8 threads × 1,000,000 attempts on a frozen clock: exactly the burst is admitted.
#![cfg(not(target_os = "wasi"))] // threads

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use portero::{Algorithm, Gcra, ManualClock, Quota, RateLimiter, TokenBucket};

const THREADS: u64 = 8;
const ATTEMPTS: u64 = 1_000_000;
const BURST: u64 = 1_000;

fn hammer<A: Algorithm + Send + Sync + 'static>(algorithm: A) -> u64 {
    let clock = ManualClock::starting_at(42_000_000_000);
    let limiter = Arc::new(RateLimiter::with_algorithm_and_clock(algorithm, clock));
    let admitted = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let (limiter, admitted) = (limiter.clone(), admitted.clone());
            std::thread::spawn(move || {
                let mut mine = 0;
                for _ in 0..ATTEMPTS {
                    if limiter.check().is_allowed() {
                        mine += 1;
                    }
                }
                admitted.fetch_add(mine, Ordering::Relaxed);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    admitted.load(Ordering::Relaxed)
}

fn quota() -> Quota {
    Quota::per_second(100).unwrap().with_burst(BURST).unwrap()
}

#[test]
fn gcra_admits_exactly_the_burst_under_8_threads() {
    assert_eq!(hammer(Gcra::new(quota())), BURST);
}

#[test]
fn token_bucket_admits_exactly_the_burst_under_8_threads() {
    assert_eq!(hammer(TokenBucket::new(quota())), BURST);
}

#[test]
fn striped_admits_exactly_the_burst_under_8_threads() {
    let clock = ManualClock::starting_at(42_000_000_000);
    let striped = Arc::new(portero::Striped::with_clock(quota(), 4, clock).unwrap());
    let admitted = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let (striped, admitted) = (striped.clone(), admitted.clone());
            std::thread::spawn(move || {
                let mine = (0..ATTEMPTS)
                    .filter(|_| striped.check().is_allowed())
                    .count();
                admitted.fetch_add(mine as u64, Ordering::Relaxed);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(admitted.load(Ordering::Relaxed), BURST);
}
