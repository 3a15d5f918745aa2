//! The keyed limiter: exact per key, bounded memory under a flood, eviction that never
//! changes a decision, overflow policies, run-time quota changes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use portero::keyed::stack;

use portero::{
    CalendarQuota, FixedWindow, Gcra, KeyedError, KeyedLimiter, ManualClock, Overflow, Quota,
    RateLimiter, SlidingWindowCounter, TokenBucket,
};
use proptest::prelude::*;

const S: u64 = 1_000_000_000;

mod support {
    pub mod quota;
}
use support::quota::quota;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Per key, the keyed limiter decides exactly as one RateLimiter per key, including
    /// across sweeps that drop idle keys.
    #[test]
    fn decides_as_one_limiter_per_key(
        events in prop::collection::vec((0u64..12, 0u64..60, 1u64..=3, any::<bool>()), 1..300),
    ) {
        let q = quota(10, 4);
        let keyed = KeyedLimiter::with_clock(Gcra::new(q), 64, ManualClock::new());
        let mut reference: HashMap<u64, RateLimiter<Gcra, ManualClock>> = HashMap::new();
        let mut now = 0;
        for (key, gap, cost, sweep) in events {
            now += gap * 10_000_000;
            if sweep {
                keyed.sweep_at(now);
            }
            let want = reference
                .entry(key)
                .or_insert_with(|| RateLimiter::gcra(q).with_clock(ManualClock::new()))
                .check_at(now, cost)
                .unwrap();
            let got = keyed.check_at(&key, now, cost).unwrap();
            prop_assert_eq!(got, want);
        }
        prop_assert!(keyed.len() <= 12);
        prop_assert_eq!(keyed.len(), keyed.count_slots());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A table kept full (4 keys, 12 in play, repeated checks of the same keys), under
    /// both overflow policies: every key the table holds is decided exactly as its own
    /// limiter; a key that leaves the table (evicted, or replaced once full) comes back
    /// as new; a key a check just charged is always findable afterwards; and only the
    /// evicting policy ever drops a key that still had units in use.
    #[test]
    fn full_table_decides_as_one_limiter_per_held_key(
        events in prop::collection::vec((0u64..12, 0u64..4, 1u64..=2), 1..300),
        evict in any::<bool>(),
    ) {
        let q = quota(10, 3);
        let policy = if evict { Overflow::EvictSoonestFull } else { Overflow::RejectNewKeys };
        let keyed = KeyedLimiter::with_clock(Gcra::new(q), 4, ManualClock::new()).overflow(policy);
        let mut reference: HashMap<u64, RateLimiter<Gcra, ManualClock>> = HashMap::new();
        let mut now = 0;
        for (key, gap, cost) in events {
            now += gap * 20_000_000;
            let model = reference
                .entry(key)
                .or_insert_with(|| RateLimiter::gcra(q).with_clock(ManualClock::new()));
            match keyed.check_at(&key, now, cost) {
                Ok(got) => {
                    prop_assert_eq!(got, model.check_at(now, cost).unwrap());
                    if got.is_allowed() {
                        prop_assert!(keyed.state_of(&key).is_some(), "key {} not findable", key);
                    }
                }
                Err(KeyedError::KeyTableFull { .. }) => {
                    prop_assert!(!evict, "the evicting policy never refuses");
                    prop_assert!(keyed.state_of(&key).is_none());
                }
                Err(e) => return Err(TestCaseError::fail(e.to_string())),
            }
            // Keys that left the table start again as new.
            let gone: Vec<u64> = reference
                .keys()
                .copied()
                .filter(|k| keyed.state_of(k).is_none())
                .collect();
            for k in gone {
                let full = reference[&k].peek_at(now, 0).unwrap().reset_after_nanos() == 0;
                prop_assert!(evict || full, "key {} dropped while in use", k);
                reference.remove(&k);
            }
            prop_assert!(keyed.len() <= 4);
            prop_assert_eq!(keyed.len(), keyed.count_slots());
        }
    }
}

/// With the evicting policy and a table kept full by a flood, a new key checked 40
/// times at one instant gets exactly its burst, not a fresh quota on every request.
#[test]
fn an_evicting_insert_leaves_the_key_findable() {
    let keyed = KeyedLimiter::with_clock(Gcra::new(quota(1, 5)), 100, ManualClock::new())
        .overflow(Overflow::EvictSoonestFull);
    for flood in 1_000..1_400u64 {
        keyed.check_at(&flood, 0, 1).unwrap();
    }
    assert_eq!(keyed.len(), 100);
    let admitted = (0..40)
        .filter(|_| keyed.check_at(&7u64, 0, 1).unwrap().is_allowed())
        .count();
    assert_eq!(admitted, 5);
}

/// 200,000 distinct keys, each under its own limit, against a 1,000-key table: memory
/// stays at the table's size, and the overflow gets the documented outcome.
#[test]
fn flood_of_keys_stays_at_the_cap() {
    let q = quota(1, 5); // a key stays active for 5 s after one request
    for policy in [Overflow::RejectNewKeys, Overflow::EvictSoonestFull] {
        let keyed =
            KeyedLimiter::with_clock(Gcra::new(q), 1_000, ManualClock::new()).overflow(policy);
        let bytes = keyed.table_bytes();
        // 500 legitimate users, active.
        for user in 0..500u64 {
            assert!(keyed.check_at(&user, 0, 1).unwrap().is_allowed());
        }
        let (mut admitted, mut refused) = (0, 0);
        for attacker in 1_000_000..1_200_000u64 {
            match keyed.check_at(&attacker, 1_000, 1) {
                Ok(d) => {
                    assert!(d.is_allowed());
                    admitted += 1;
                }
                Err(KeyedError::KeyTableFull { max_keys: 1_000 }) => refused += 1,
                Err(e) => panic!("{e}"),
            }
            assert!(keyed.len() <= 1_000);
        }
        assert_eq!(keyed.table_bytes(), bytes, "memory never grows");
        assert!(keyed.count_slots() <= 1_000);
        match policy {
            Overflow::RejectNewKeys => {
                // The table filled up (the cap, less the rare bucket that fills first)
                // and every later new key was refused; the users kept their exact state.
                assert!((450..=500).contains(&admitted), "{admitted}");
                assert_eq!(admitted + refused, 200_000);
                for user in 0..500u64 {
                    assert_eq!(keyed.peek_at(&user, 1_000, 1).unwrap().remaining(), 3);
                }
            }
            Overflow::EvictSoonestFull => assert_eq!(admitted, 200_000),
        }
    }
}

/// A key dropped once it is full again (by a sweep, or replaced by a newcomer) gets
/// exactly the decisions it would have got had it been kept.
#[test]
fn eviction_of_a_full_key_never_changes_a_later_decision() {
    let q = quota(10, 3);
    let keyed = KeyedLimiter::with_clock(TokenBucket::new(q), 1, ManualClock::new());
    let kept = RateLimiter::token_bucket(q).with_clock(ManualClock::new());
    for t in [0, 1, 2] {
        assert_eq!(
            keyed.check_at(&"a", t, 1).unwrap(),
            kept.check_at(t, 1).unwrap()
        );
    }
    // Full again at 0.3 s; "b" replaces "a" in the one-key table.
    assert!(keyed.check_at(&"b", S, 1).unwrap().is_allowed());
    assert_eq!(keyed.state_of(&"a"), None, "a was dropped");
    // "a" comes back: "b" is active (not full) and the table holds 1 key.
    assert_eq!(
        keyed.check_at(&"a", S + 1, 1),
        Err(KeyedError::KeyTableFull { max_keys: 1 })
    );
    // Once "b" is full again, "a" is decided exactly as the kept limiter.
    for t in [2 * S, 2 * S, 2 * S, 2 * S, 2 * S + 100_000_000] {
        assert_eq!(
            keyed.check_at(&"a", t, 1).unwrap(),
            kept.check_at(t, 1).unwrap()
        );
    }
}

#[test]
#[cfg(not(target_os = "wasi"))] // threads
fn eight_threads_on_shared_keys_admit_exactly_the_burst_per_key() {
    let keyed = Arc::new(KeyedLimiter::with_clock(
        Gcra::new(quota(100, 50)),
        1_000,
        ManualClock::starting_at(S),
    ));
    let admitted: Arc<Vec<AtomicU64>> = Arc::new((0..64).map(|_| AtomicU64::new(0)).collect());
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let (keyed, admitted) = (keyed.clone(), admitted.clone());
            std::thread::spawn(move || {
                for i in 0..20_000u64 {
                    let key = (i * 7 + t) % 64;
                    if keyed.check(&key).is_allowed() {
                        admitted[key as usize].fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    for (k, a) in admitted.iter().enumerate() {
        assert_eq!(a.load(Ordering::Relaxed), 50, "key {k}");
    }
    assert_eq!(keyed.len(), 64);
}

#[test]
fn reset_peek_and_runtime_quota_change_keep_usage() {
    let keyed = KeyedLimiter::with_clock(Gcra::new(quota(1, 4)), 100, ManualClock::new());
    for _ in 0..3 {
        keyed.check_at(&7u64, 0, 1).unwrap();
    }
    assert_eq!(keyed.peek_at(&7u64, 0, 1).unwrap().remaining(), 0);
    assert_eq!(
        keyed.peek_at(&7u64, 0, 1).unwrap().remaining(),
        0,
        "peek consumes nothing"
    );
    // Raise the burst to 10: the 3 s of debt is kept, so 7 are left.
    keyed.set_algorithm(Gcra::new(quota(1, 10)));
    assert_eq!(keyed.peek_at(&7u64, 0, 1).unwrap().remaining(), 6);
    assert_eq!(keyed.peek_at(&8u64, 0, 1).unwrap().remaining(), 9);
    keyed.reset(&7u64);
    assert_eq!(keyed.state_of(&7u64), None);
    assert_eq!(keyed.peek_at(&7u64, 0, 1).unwrap().remaining(), 9);
}

#[test]
fn stacked_rejection_refunds_the_earlier_limits() {
    let user = KeyedLimiter::with_clock(Gcra::new(quota(10, 10)), 100, ManualClock::new());
    let tenant = KeyedLimiter::with_clock(Gcra::new(quota(10, 3)), 100, ManualClock::new());
    let global = RateLimiter::gcra(quota(10, 100)).with_clock(ManualClock::new());
    let check = |u: &'static str| {
        stack::check_all(
            &[&user.limit_for(&u), &tenant.limit_for(&"acme"), &global],
            0,
            1,
        )
        .unwrap()
    };
    for u in ["ann", "bob", "cy"] {
        assert!(check(u).decision.is_allowed());
    }
    for _ in 0..5 {
        let s = check("ann");
        assert_eq!(s.rejected_by, Some(1));
        assert_eq!(s.decision.retry_after_nanos(), 100_000_000);
    }
    // Five rejected requests cost ann and the global limit nothing.
    assert_eq!(user.peek_at(&"ann", 0, 1).unwrap().remaining(), 8);
    assert_eq!(global.peek_at(0, 1).unwrap().remaining(), 96);
    // The binding decision of an admitted stack is the one with the fewest remaining.
    let s = stack::check_all(&[&user.limit_for(&"dee"), &global], 0, 1).unwrap();
    assert_eq!(s.decision.remaining(), 9);
}

#[test]
fn an_absurd_table_size_is_an_error_not_an_abort() {
    let seeded = portero::keyed::RandomState::with_seeds(1, 2, 3, 4);
    let r = KeyedLimiter::<u64, _, _>::try_with_hasher(
        Gcra::new(quota(1, 1)),
        usize::MAX,
        ManualClock::new(),
        seeded,
    );
    assert!(r.is_err());
}

/// A window limit lowered at run time below what a key already used admits nothing
/// more in that window (the count once wrapped below zero).
#[test]
fn lowering_a_window_limit_at_run_time_admits_nothing_more() {
    let per_sec = |n| Quota::per_second(n).unwrap();
    let fixed = KeyedLimiter::with_clock(
        FixedWindow::new(per_sec(10)).unwrap(),
        10,
        ManualClock::new(),
    );
    let counter = KeyedLimiter::with_clock(
        SlidingWindowCounter::new(per_sec(10)).unwrap(),
        10,
        ManualClock::new(),
    );
    let daily =
        KeyedLimiter::with_clock(CalendarQuota::per_day(10).unwrap(), 10, ManualClock::new());
    for _ in 0..8 {
        assert!(fixed.check_at(&1u64, 0, 1).unwrap().is_allowed());
        assert!(counter.check_at(&1u64, 0, 1).unwrap().is_allowed());
        assert!(daily.check_at(&1u64, 0, 1).unwrap().is_allowed());
    }
    fixed.set_algorithm(FixedWindow::new(per_sec(5)).unwrap());
    counter.set_algorithm(SlidingWindowCounter::new(per_sec(5)).unwrap());
    daily.set_algorithm(CalendarQuota::per_day(5).unwrap());
    for _ in 0..3 {
        let d = fixed.check_at(&1u64, 1, 1).unwrap();
        assert!(!d.is_allowed());
        assert_eq!(d.remaining(), 0);
        assert!(!counter.check_at(&1u64, 1, 1).unwrap().is_allowed());
        assert!(!daily.check_at(&1u64, 1, 1).unwrap().is_allowed());
    }
}

/// A new key refused by a full table is told to come back in one second, not in
/// `u64::MAX` ns (which became `Retry-After: 18446744074`, 584 years).
#[test]
fn a_full_table_asks_for_one_second() {
    let keyed = KeyedLimiter::with_clock(Gcra::new(quota(1, 5)), 1, ManualClock::new());
    assert!(keyed.check_at(&1u64, 0, 1).unwrap().is_allowed());
    let d = keyed.check(&2u64);
    assert!(!d.is_allowed());
    assert_eq!(d.limit(), 5);
    assert_eq!(d.retry_after_nanos(), portero::DENY_FOR_NANOS);
    assert_eq!(d.reset_after_nanos(), portero::DENY_FOR_NANOS);
}

/// `check()` cannot return an error: past the supported time range it denies (the
/// full table's answer), for a held key and for a new one, and admits nothing.
#[test]
fn check_past_the_time_range_denies_held_and_new_keys() {
    let keyed = KeyedLimiter::with_clock(Gcra::new(quota(1, 5)), 10, ManualClock::new());
    assert!(keyed.check(&1u64).is_allowed());
    keyed.clock().set(u64::MAX);
    for key in [1u64, 2] {
        let d = keyed.check(&key);
        assert!(!d.is_allowed(), "key {key}");
        assert_eq!(d.retry_after_nanos(), portero::DENY_FOR_NANOS);
    }
    assert_eq!(keyed.len(), 1);
}

/// `EvictSoonestFull` always tracks a newcomer, also when both of its buckets are
/// empty while the table is at its cap (its keys sit in other buckets): the soonest
/// full key of a nearby bucket makes room. The table is packed first so that all 100
/// keys sit in its first 13 buckets (keys landing elsewhere are reset), leaving 10 of
/// 23 buckets empty at the cap; before, a newcomer whose two buckets were both among
/// them was refused (in the flood test: about once in 20,000 inserts).
#[test]
fn evict_soonest_full_tracks_every_newcomer_even_when_its_buckets_are_empty() {
    use portero::keyed::RandomState;
    use portero::SlotHint;
    let q = quota(1, 5);
    let keyed = KeyedLimiter::with_hasher(
        Gcra::new(q),
        100,
        ManualClock::new(),
        RandomState::with_seeds(1, 2, 3, 4),
    )
    .overflow(Overflow::EvictSoonestFull);
    let bucket_of = |key: u64| {
        let mut hint = SlotHint::NONE;
        let d = keyed.check_hinted_at(keyed.fingerprint_of(&key), &mut hint, 0, 1);
        assert!(matches!(d, Ok(d) if d.is_allowed()));
        hint.to_bits() / 8
    };
    let mut key = 0u64;
    while keyed.len() < 100 {
        key += 1;
        if bucket_of(key) >= 13 {
            keyed.reset(&key);
        }
        assert!(key < 100_000, "the first 13 buckets hold 104 slots");
    }
    let mut refused = 0;
    for newcomer in 1_000_000..1_002_000u64 {
        match keyed.check_at(&newcomer, 0, 1) {
            Ok(d) => assert!(d.is_allowed()),
            Err(KeyedError::KeyTableFull { .. }) => refused += 1,
            Err(e) => panic!("{e}"),
        }
        assert!(keyed.len() <= 100);
    }
    assert_eq!(refused, 0, "every newcomer is tracked");
}

/// Found by an outside harness, against the keyed `charge`'s docs (now corrected): a
/// charge never opens a window placed by its first request, in a table as in one
/// limiter — a key with no window open is charged nothing and stays unheld.
#[test]
fn a_charge_never_opens_a_first_request_window_in_a_table() {
    use portero::{FixedWindow, Placement};
    let window =
        FixedWindow::with_placement(Quota::per_second(4).unwrap(), Placement::FirstRequest)
            .unwrap();
    let table = KeyedLimiter::with_clock(window, 100, ManualClock::new());
    let after = table
        .charge_fingerprint_at(table.fingerprint_of(&1u32), 10_000_000_000, 3)
        .unwrap();
    assert_eq!(after.remaining(), 4);
    assert_eq!(table.state_of(&1u32), None);
    // Once a request opened the window, a charge counts in it.
    assert!(table
        .check_at(&1u32, 10_000_000_000, 1)
        .unwrap()
        .is_allowed());
    let after = table
        .charge_fingerprint_at(table.fingerprint_of(&1u32), 10_000_000_000, 2)
        .unwrap();
    assert_eq!(after.remaining(), 1, "3 of 4 counted");
}
