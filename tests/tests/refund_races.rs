//! Refunds racing checks on real threads: a stack whose later limit refuses gives the
//! earlier one back while other threads check it, and the exact log gives back while
//! other threads record entries at other times. Nothing given back may be more than
//! was taken (the global limit stays within its bound) or less (the log leaks no unit).
#![cfg(not(target_os = "wasi"))] // threads

use std::sync::Arc;

use portero::keyed::stack;

use portero::{Clock, Gcra, KeyedLimiter, KeyedLog, ManualClock, Quota, RateLimiter};

mod support {
    pub mod quota;
}
use support::quota::over_the_bound;

/// 4 threads run `check_all([global, per-user])` on a clock that moves in bursts (each
/// thread moves it on now and then). Most users are far below their limit and keep
/// the global limit full; one has used up its hour, so every request of its is
/// refused by its own limit and the global unit it took is given back while the other
/// threads check the global limit and the clock jumps. Every stack that got through
/// started at its check's time: replayed in time order on a fresh global limit, every
/// one must be admitted (GCRA's bound, burst + t/T).
#[test]
fn a_stack_under_four_threads_keeps_the_global_limit_within_its_bound() {
    const MS: u64 = 1_000_000;
    let quota = Quota::per_second(1_000).unwrap().with_burst(5).unwrap();
    let clock = Arc::new(ManualClock::starting_at(1_000 * MS));
    let global = Arc::new(RateLimiter::gcra(quota).with_clock(clock.clone()));
    let users = Arc::new(KeyedLimiter::with_clock(
        Gcra::new(Quota::per_second(1_000_000).unwrap()),
        64,
        clock.clone(),
    ));
    let spent = Arc::new(KeyedLimiter::with_clock(
        Gcra::new(Quota::per_hour(1).unwrap()),
        4,
        clock.clone(),
    ));
    assert!(spent.check(&0).is_allowed()); // the hour's one unit, used up
    let threads: Vec<_> = (0..4u64)
        .map(|me| {
            let (clock, global) = (clock.clone(), global.clone());
            let (users, spent) = (users.clone(), spent.clone());
            std::thread::spawn(move || {
                let mut through = Vec::new();
                let mut seed = me.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                for i in 0..40_000u64 {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    if i % 64 == 0 {
                        // A burst of time: up to 3 ms at once.
                        clock.advance(seed % (3 * MS));
                    }
                    let now = clock.now();
                    let user = seed % 3;
                    let (open, refused) = (users.limit_for(&user), spent.limit_for(&0));
                    let own: &dyn stack::Limit = if user == 0 { &refused } else { &open };
                    let limits: [&dyn stack::Limit; 2] = [&*global, own];
                    let s = stack::check_all(&limits, now, 1).unwrap();
                    if s.rejected_by.is_none() {
                        through.push(now);
                    }
                }
                through
            })
        })
        .collect();
    let mut through: Vec<u64> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    let over = over_the_bound(&mut through, quota);
    assert!(through.len() > 1_000, "{} got through", through.len());
    assert_eq!(over, 0, "{over} of {} over the global bound", through.len());
}

/// 8 threads check one key of an exact log and give each admission back, at times
/// that jump back and forth (so most entries are recorded at the key's latest time,
/// not their own): afterwards the key holds nothing.
#[test]
fn the_exact_log_loses_no_unit_to_refunds_under_eight_threads() {
    let log = Arc::new(
        KeyedLog::with_clock(
            Quota::from_nanos(100_000, 30 * 86_400 * 1_000_000_000).unwrap(),
            16,
            ManualClock::new(),
        )
        .unwrap(),
    );
    let threads: Vec<_> = (0..8u64)
        .map(|me| {
            let log = log.clone();
            std::thread::spawn(move || {
                for i in 0..25_000u64 {
                    let now = 1_000_000 + (i * 7 + me * 13) % 5_000;
                    let taken = log.acquire_at(&"victim", now, 1).unwrap();
                    assert!(taken.decision.is_allowed());
                    log.refund(&"victim", taken.admission.unwrap());
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let left = log.peek_at(&"victim", 1_010_000, 0).unwrap().remaining();
    assert_eq!(100_000 - left, 0, "units leaked");
}
