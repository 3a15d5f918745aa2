//! The keyed sliding log: exactly the textbook sliding log per key (a property test
//! against a `Vec` of timestamps per key, with time jumping back), bounded memory under
//! a flood of keys, reclaiming only logs that have entirely expired, hostile inputs,
//! refunds in stacks, and threads racing on one key.

use std::collections::HashMap;
use std::sync::{Arc, Barrier};

use portero::keyed::stack;
use portero::keyed::RandomState;
use portero::{
    Acquired, Admission, CheckError, Decision, KeyedError, KeyedLog, KeyedLogError, ManualClock,
    Quota, RateLimiter, MAX_LOG_ENTRIES, MAX_SPAN_NANOS, MAX_TIME_NANOS,
};
use proptest::prelude::*;

const S: u64 = 1_000_000_000;

fn log(limit: u64, window: u64, max_keys: usize) -> KeyedLog<u64, ManualClock> {
    KeyedLog::with_hasher(
        Quota::from_nanos(limit, window).unwrap(),
        max_keys,
        ManualClock::new(),
        RandomState::with_seeds(7, 11, 13, 17),
    )
    .unwrap()
}

/// The textbook sliding log, one `Vec` of unit timestamps per key, never pruned: a
/// request at `t` (the latest time the key has seen, if later) counts the units in
/// `(t − W, t]`.
struct Model {
    limit: u64,
    window: u64,
    keys: HashMap<u64, (Vec<u64>, u64)>,
}

impl Model {
    fn new(limit: u64, window: u64) -> Self {
        Self {
            limit,
            window,
            keys: HashMap::new(),
        }
    }

    /// The decision for `key` at `now`, changing nothing; and the time it is made at.
    fn decide(&self, key: u64, now: u64, cost: u64) -> Result<(Decision, u64), CheckError> {
        if now > MAX_TIME_NANOS {
            return Err(CheckError::TimeOutOfRange { now });
        }
        if cost > self.limit {
            return Err(CheckError::CostExceedsCapacity {
                cost,
                capacity: self.limit,
            });
        }
        let (entries, seen) = self.keys.get(&key).cloned().unwrap_or_default();
        let t = now.max(seen);
        let (l, w) = (self.limit, self.window);
        // In the window: later than t − W (in u128: no wrap to reason about).
        let mut live: Vec<u64> = entries
            .into_iter()
            .filter(|&e| e as u128 + w as u128 > t as u128)
            .collect();
        live.sort_unstable();
        let used = live.len() as u64;
        let reset = live.last().map_or(0, |&e| e + w - t);
        let d = if used + cost <= l {
            Decision::admitted(l, l - used - cost, if cost > 0 { w } else { reset })
        } else {
            let need = (used + cost - l) as usize;
            Decision::rejected(l, l - used, live[need - 1] + w - t, reset)
        };
        Ok((d, t))
    }

    fn check(&mut self, key: u64, now: u64, cost: u64) -> Result<Decision, KeyedError> {
        let (d, t) = self.decide(key, now, cost)?;
        if cost > 0 {
            let (entries, seen) = self.keys.entry(key).or_default();
            *seen = t;
            if d.is_allowed() {
                entries.extend(std::iter::repeat_n(t, cost as usize));
            }
        }
        Ok(d)
    }

    fn refund(&mut self, key: u64, now: u64, cost: u64) {
        if let Some((entries, _)) = self.keys.get_mut(&key) {
            for _ in 0..cost {
                match entries.iter().position(|&e| e == now) {
                    Some(i) => {
                        entries.remove(i);
                    }
                    None => break,
                }
            }
        }
    }

    /// Keys other than `except` with a unit still in the window at `now`.
    fn live_keys(&self, now: u64, except: u64) -> usize {
        self.keys
            .iter()
            .filter(|(k, (entries, _))| {
                **k != except && entries.iter().any(|&e| e + self.window > now)
            })
            .count()
    }
}

/// Key 5 stands for the shared no-key log.
const ANON: u64 = 5;

fn check(
    l: &KeyedLog<u64, ManualClock>,
    key: u64,
    now: u64,
    cost: u64,
) -> Result<Decision, KeyedError> {
    if key == ANON {
        l.check_anonymous_at(now, cost)
    } else {
        l.check_at(&key, now, cost)
    }
}

fn fp(l: &KeyedLog<u64, ManualClock>, key: u64) -> portero::Fingerprint {
    if key == ANON {
        l.anonymous_fingerprint()
    } else {
        l.fingerprint_of(&key)
    }
}

/// Times that mostly move forward, sometimes jump back.
fn times() -> impl Strategy<Value = (bool, u64)> {
    (prop::bool::weighted(0.1), 0u64..300)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Every answer (allowed, remaining, retry-after, reset-after, errors) equals the
    /// textbook log's, over checks, peeks, refunds and resets of six keys (one the
    /// shared no-key log), with time jumping back now and then.
    #[test]
    fn decides_exactly_as_the_textbook_log(
        limit in 1u64..=6,
        window in 6u64..=400,
        ops in prop::collection::vec((0u64..6, times(), 0u64..=7, 0u8..10), 1..300),
    ) {
        let l = log(limit, window, 8);
        let mut model = Model::new(limit, window);
        let mut now = 1_000u64;
        for (key, (back, step), cost, op) in ops {
            now = if back { now.saturating_sub(step) } else { now + step };
            match op {
                0..=5 => {
                    prop_assert_eq!(check(&l, key, now, cost), model.check(key, now, cost));
                }
                6 => {
                    let want = model.decide(key, now, cost).map(|(d, _)| d);
                    prop_assert_eq!(l.peek_fingerprint_at(fp(&l, key), now, cost), want);
                }
                7 | 8 => {
                    // A check, then (an all-or-none stack refused) its refund: the
                    // admission names the time its entries were recorded at, which
                    // is the key's latest when time went back.
                    let at = model.decide(key, now, cost).map(|(_, t)| t);
                    let got = l.acquire_fingerprint_at(fp(&l, key), now, cost);
                    prop_assert_eq!(got.as_ref().map(|a| a.decision).map_err(Clone::clone), model.check(key, now, cost));
                    if let Ok(Acquired { admission: Some(admission), .. }) = got {
                        prop_assert_eq!(Ok(admission.at()), at);
                        let at = admission.at();
                        l.refund_fingerprint(fp(&l, key), admission);
                        model.refund(key, at, cost);
                    }
                }
                _ => {
                    if key == ANON {
                        continue;
                    }
                    l.reset(&key);
                    model.keys.remove(&key);
                }
            }
            let after = l.peek_fingerprint_at(fp(&l, key), now, 0);
            prop_assert_eq!(after, model.decide(key, now, 0).map(|(d, _)| d));
        }
        prop_assert!(l.len() <= 6);
    }

    /// A table of 3 keys with 8 in play, time moving forward: a check is refused for a
    /// full table only when 3 other keys still have units in the window (the newcomer's
    /// own old log, if any, has expired); every other answer is the textbook log's, so
    /// reclaiming expired logs never changes a decision.
    #[test]
    fn a_full_table_refuses_only_when_no_log_has_expired(
        window in 10u64..=200,
        ops in prop::collection::vec((0u64..8, 0u64..60, 1u64..=2), 1..300),
    ) {
        let l = log(2, window, 3);
        let mut model = Model::new(2, window);
        let mut now = 0;
        for (key, step, cost) in ops {
            now += step;
            match l.check_at(&key, now, cost) {
                Err(KeyedError::KeyTableFull { max_keys }) => {
                    prop_assert_eq!(max_keys, 3);
                    prop_assert!(model.live_keys(now, key) >= 3);
                    prop_assert_eq!(model.decide(key, now, 0).unwrap().0.remaining(), 2);
                }
                got => prop_assert_eq!(got, model.check(key, now, cost)),
            }
            prop_assert!(l.len() <= 3);
        }
    }
}

#[test]
fn memory_is_fixed_under_a_flood_and_expired_logs_make_room() {
    let l: KeyedLog<u64, ManualClock> = KeyedLog::with_hasher(
        Quota::per_minute(5).unwrap(),
        1_000,
        ManualClock::new(),
        RandomState::with_seeds(1, 2, 3, 4),
    )
    .unwrap();
    let bytes = l.table_bytes();
    // ≈ 8·L + 40 bytes a key, whatever comes.
    assert!(bytes <= 1_000 * (8 * 5 + 40) + 4096, "{bytes} bytes");
    assert_eq!(l.shards(), 1);
    // The first 1,000 keys at t = 0..10 s get in, the other 99,000 are refused.
    let mut refused = 0;
    for k in 0..100_000u64 {
        match l.check_at(&k, k * 100_000, 1) {
            Ok(d) => assert!(d.is_allowed() && k < 1_000),
            Err(KeyedError::KeyTableFull { max_keys: 1_000 }) => refused += 1,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(refused, 99_000);
    assert_eq!(l.len(), 1_000);
    assert_eq!(l.table_bytes(), bytes);
    // The keys held keep their exact logs: key 0 has 4 units left.
    assert_eq!(l.check_at(&0, 20 * S, 1).unwrap().remaining(), 3);
    // A cost-0 check of a newcomer takes nothing, so needs no room.
    assert!(l.check_at(&u64::MAX, 20 * S, 0).unwrap().is_allowed());
    // Key k's unit is at k · 0.1 ms. At 60.05 s the logs of keys 1..=500 have
    // entirely expired (key 0 still has its unit at 20 s): exactly 500 newcomers fit.
    let t = 60 * S + 50_000_000;
    for k in 200_000..200_500u64 {
        assert!(l.check_at(&k, t, 1).unwrap().is_allowed(), "newcomer {k}");
    }
    assert_eq!(l.len(), 1_000);
    assert_eq!(
        l.check_at(&300_000, t, 1),
        Err(KeyedError::KeyTableFull { max_keys: 1_000 })
    );
    // Key 0 was not reclaimed: its log still has a unit in the window.
    assert_eq!(l.peek_at(&0, t, 0).unwrap().remaining(), 4);
    // Once every unit has expired, 1,000 newcomers make room for themselves.
    let later = 3 * 60 * S;
    for k in 400_000..401_000u64 {
        assert!(l.check_at(&k, later, 1).unwrap().is_allowed());
    }
    assert_eq!(l.len(), 1_000);
    assert_eq!(l.table_bytes(), bytes);
    // A sweep drops every expired log.
    assert_eq!(l.sweep_at(5 * 60 * S), 1_000);
    assert!(l.is_empty());
}

#[test]
fn a_sharded_table_stays_within_max_keys_under_a_flood() {
    let l = log(3, 10 * S, 8_192);
    assert_eq!(l.shards(), 8);
    let bytes = l.table_bytes();
    let mut admitted = 0;
    for k in 0..100_000u64 {
        match l.check_at(&k, k, 1) {
            Ok(d) => {
                assert!(d.is_allowed());
                admitted += 1;
            }
            Err(e) => assert_eq!(e, KeyedError::KeyTableFull { max_keys: 8_192 }),
        }
    }
    assert_eq!(l.len(), admitted);
    assert!(admitted <= 8_192);
    // Every shard full: a newcomer to any shard is refused until logs expire.
    assert_eq!(admitted, 8_192);
    assert_eq!(l.table_bytes(), bytes);
    assert!(l.check_at(&u64::MAX, 20 * S, 1).unwrap().is_allowed());
}

#[test]
fn a_key_table_fills_to_its_cap_with_one_shard() {
    let l = log(1, 100, 2_047);
    assert_eq!(l.shards(), 1);
    for k in 0..2_047u64 {
        assert!(l.check_at(&k, 0, 1).unwrap().is_allowed());
    }
    assert_eq!(
        l.check_at(&5_000, 99, 1),
        Err(KeyedError::KeyTableFull { max_keys: 2_047 })
    );
    assert!(l.check_at(&5_000, 100, 1).unwrap().is_allowed());
}

#[test]
fn hostile_inputs_neither_overflow_nor_consume() {
    // The longest window at the latest time: t + W stays within a u64.
    let l = log(2, MAX_SPAN_NANOS, 4);
    let d = l.check_at(&1, MAX_TIME_NANOS, 2).unwrap();
    assert!(d.is_allowed());
    assert_eq!(d.reset_after_nanos(), MAX_SPAN_NANOS);
    let no = l.check_at(&1, MAX_TIME_NANOS, 1).unwrap();
    assert!(!no.is_allowed());
    assert_eq!(no.retry_after_nanos(), MAX_SPAN_NANOS);
    // Past the supported range: an error, nothing consumed.
    for now in [MAX_TIME_NANOS + 1, u64::MAX] {
        assert_eq!(
            l.check_at(&2, now, 1),
            Err(KeyedError::Check(CheckError::TimeOutOfRange { now }))
        );
        assert_eq!(
            l.peek_at(&2, now, 1),
            Err(CheckError::TimeOutOfRange { now })
        );
    }
    // Time going back is read as the latest time seen: nothing expires early.
    let no = l.check_at(&1, 0, 1).unwrap();
    assert!(!no.is_allowed());
    assert_eq!(no.retry_after_nanos(), MAX_SPAN_NANOS);
    assert_eq!(l.len(), 1);

    let l = log(3, 100, 1);
    // Cost 0: admitted, nothing recorded, no key taken.
    let free = l.check_at(&1, 10, 0).unwrap();
    assert!(free.is_allowed());
    assert_eq!((free.remaining(), free.reset_after_nanos()), (3, 0));
    assert!(l.is_empty());
    // Costs above the limit: an error at once, whatever the state.
    for cost in [4, u64::MAX] {
        assert_eq!(
            l.check_at(&1, 10, cost),
            Err(KeyedError::Check(CheckError::CostExceedsCapacity {
                cost,
                capacity: 3
            }))
        );
    }
    assert!(l.is_empty());
    assert!(l.check_at(&1, 10, 3).unwrap().is_allowed());
    // A full table still answers cost 0 and peeks for a newcomer.
    assert!(l.check_at(&2, 20, 0).unwrap().is_allowed());
    assert_eq!(l.peek_at(&2, 20, 3).unwrap().remaining(), 0);
    assert_eq!(
        l.check_at(&2, 20, 1),
        Err(KeyedError::KeyTableFull { max_keys: 1 })
    );
    assert!(!l.check(&2).is_allowed());
    // A refund of a time with no entries, or of a key not held, does nothing.
    l.refund(&1, Admission::new(11, 3));
    l.refund(&2, Admission::new(10, 3));
    assert_eq!(l.peek_at(&1, 20, 0).unwrap().remaining(), 0);
}

#[test]
fn impossible_tables_are_refused_at_construction() {
    let build = |limit: u64, max_keys: usize| {
        KeyedLog::<u64, ManualClock>::with_hasher(
            Quota::from_nanos(limit, u64::MAX >> 3).unwrap(),
            max_keys,
            ManualClock::new(),
            RandomState::new(),
        )
        .map(|_| ())
    };
    assert_eq!(build(5, 0), Err(KeyedLogError::NoKeys));
    let over = (MAX_LOG_ENTRIES / 1_024 + 1) as usize;
    assert_eq!(
        build(1_024, over),
        Err(KeyedLogError::TooManyEntries {
            max_keys: over,
            limit: 1_024
        })
    );
    assert_eq!(
        build(u64::MAX >> 3, usize::MAX),
        Err(KeyedLogError::TooManyEntries {
            max_keys: usize::MAX,
            limit: u64::MAX >> 3
        })
    );
    assert!(build(64, 1_000).is_ok());
    assert!(KeyedLogError::NoKeys
        .to_string()
        .contains("at least one key"));
    // A limit of 0 never gets this far.
    assert!(Quota::per_second(0).is_err());
}

#[test]
fn a_refused_stack_gives_the_log_its_units_back() {
    let logins = log(5, 60 * S, 100);
    let global = RateLimiter::gcra(Quota::per_second(1).unwrap()).with_clock(ManualClock::new());
    let a = logins.limit_for(&1);
    let first = stack::check_all(&[&a, &global], 0, 1).unwrap();
    assert_eq!(first.rejected_by, None);
    let second = stack::check_all(&[&a, &global], 0, 1).unwrap();
    assert_eq!(second.rejected_by, Some(1));
    // Only the first attempt is charged.
    assert_eq!(logins.peek_at(&1, 0, 0).unwrap().remaining(), 4);
}

#[test]
fn the_clock_driven_calls_use_the_clock() {
    let l = KeyedLog::with_clock(Quota::per_second(2).unwrap(), 10, ManualClock::new()).unwrap();
    assert!(l.check(&"a").is_allowed());
    l.clock().advance(S / 2);
    assert!(l.check_n(&"a", 1).unwrap().is_allowed());
    let no = l.check(&"a");
    assert!(!no.is_allowed());
    assert_eq!(no.retry_after_nanos(), S / 2);
    assert!(l.check_anonymous_n(2).unwrap().is_allowed());
    assert!(!l.check_anonymous_n(1).unwrap().is_allowed());
    l.reset(&"a");
    assert!(l.check(&"a").is_allowed());
    assert_eq!(l.len(), 2);
    assert_eq!(l.sweep(), 0);
    l.clock().advance(S);
    assert_eq!(l.sweep(), 2);
}

/// Threads race on one key in phases half a window apart (a barrier between them):
/// any window covers two phases, which together admit exactly the limit — never more.
#[cfg(not(target_os = "wasi"))]
#[test]
fn threads_on_one_key_never_admit_more_than_the_limit_in_a_window() {
    const THREADS: usize = 8;
    const PHASES: u64 = 200;
    let l = Arc::new(log(10, 100, 16));
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let (l, barrier) = (l.clone(), barrier.clone());
            std::thread::spawn(move || {
                let mut admitted = vec![0u64; PHASES as usize];
                for p in 0..PHASES {
                    barrier.wait();
                    for _ in 0..4 {
                        if l.check_at(&42, p * 50, 1).unwrap().is_allowed() {
                            admitted[p as usize] += 1;
                        }
                    }
                }
                admitted
            })
        })
        .collect();
    let mut per_phase = vec![0u64; PHASES as usize];
    for h in handles {
        for (p, n) in h.join().unwrap().into_iter().enumerate() {
            per_phase[p] += n;
        }
    }
    assert_eq!(per_phase[0], 10);
    for p in 1..PHASES as usize {
        assert_eq!(
            per_phase[p - 1] + per_phase[p],
            10,
            "phases {} and {p}",
            p - 1
        );
    }
}

/// Free-running threads on a handful of keys with a shared clock moving forward:
/// afterwards every key's log is consistent (at most the limit in the window) and the
/// table never held more than its cap.
#[cfg(not(target_os = "wasi"))]
#[test]
fn free_running_threads_leave_consistent_logs() {
    let l = Arc::new(log(3, 1_000, 4));
    let handles: Vec<_> = (0..4u64)
        .map(|i| {
            let l = l.clone();
            std::thread::spawn(move || {
                let mut admitted = 0u64;
                for n in 0..5_000u64 {
                    let key = (n + i) % 6;
                    match l.check_at(&key, n * 10, 1 + n % 3) {
                        Ok(d) if d.is_allowed() => admitted += 1,
                        Ok(_) | Err(KeyedError::KeyTableFull { .. }) => {}
                        Err(e) => panic!("{e}"),
                    }
                    assert!(l.len() <= 4);
                }
                admitted
            })
        })
        .collect();
    let admitted: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert!(admitted > 0);
    for key in 0..6u64 {
        let d = l.peek_at(&key, 50_000, 0).unwrap();
        assert!(d.remaining() <= 3);
    }
}

// The log's own edges: an entry exactly `W` old, and keys deleted from its index.
#[test]
fn entry_exactly_w_old_has_expired() {
    let l = log(1, 100, 4);
    assert!(l.check_at(&1, 0, 1).unwrap().is_allowed());
    assert!(!l.check_at(&1, 99, 1).unwrap().is_allowed());
    assert!(l.check_at(&1, 100, 1).unwrap().is_allowed());
}

#[test]
fn index_deletion_keeps_every_other_key_findable() {
    // One shard; many keys in and out, so probe runs form and break.
    let l = log(2, 1_000, 64);
    for round in 0..20u64 {
        for k in 0..64 {
            assert!(l.check_at(&(round * 1000 + k), round * 10, 1).is_ok());
        }
        for k in (0..64).step_by(3) {
            l.reset(&(round * 1000 + k));
        }
        for k in 0..64 {
            let held = l.peek_at(&(round * 1000 + k), round * 10, 0).unwrap();
            let want = if k % 3 == 0 { 2 } else { 1 };
            assert_eq!(held.remaining(), want, "round {round} key {k}");
        }
        // Expire everything: the next round's keys reclaim the slots.
        for k in 0..64 {
            l.reset(&(round * 1000 + k));
        }
        assert_eq!(l.len(), 0);
    }
}
