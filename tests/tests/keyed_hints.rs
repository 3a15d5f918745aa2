//! Slot hints: a check that looks first where the caller last saw its key decides
//! exactly as a check that looks the key up, whatever the hint says.

use std::collections::HashMap;

use portero::keyed::RandomState;
use portero::{Gcra, KeyedLimiter, ManualClock, Overflow, Quota, SlotHint};
use proptest::prelude::*;

type Table = KeyedLimiter<u64, Gcra, ManualClock>;

/// Two tables with one seed: their keys land in the same slots.
fn twins(evict: bool) -> (Table, Table) {
    let q = Quota::per_second(10).unwrap().with_burst(3).unwrap();
    let policy = if evict {
        Overflow::EvictSoonestFull
    } else {
        Overflow::RejectNewKeys
    };
    let table = || {
        let seed = RandomState::with_seeds(1, 2, 3, 4);
        KeyedLimiter::with_hasher(Gcra::new(q), 4, ManualClock::new(), seed).overflow(policy)
    };
    (table(), table())
}

/// What the hinted check is handed: the key's own last hint, a hint another key left
/// (a slot this key may have lost to it), a made-up number, or none.
#[derive(Debug, Clone)]
enum Given {
    Own,
    Other(u64),
    MadeUp(u32),
    None,
}

fn given() -> impl Strategy<Value = Given> {
    prop_oneof![
        4 => Just(Given::Own),
        2 => (0u64..12).prop_map(Given::Other),
        1 => any::<u32>().prop_map(Given::MadeUp),
        1 => Just(Given::None),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A table kept full (4 keys, 12 in play, keys evicted, replaced and reset): every
    /// hinted check decides as the same check looked up on a twin table, and leaves
    /// every key's state as the twin's. A hint that skipped the fingerprint compare
    /// would decide on another key's state here.
    #[test]
    fn a_hint_never_changes_a_decision(
        events in prop::collection::vec((0u64..12, 0u64..4, 0u64..=2, given(), any::<bool>()), 1..300),
        evict in any::<bool>(),
    ) {
        let (looked_up, hinted) = twins(evict);
        let mut hints: HashMap<u64, SlotHint> = HashMap::new();
        let mut now = 0;
        for (key, gap, cost, given, reset) in events {
            now += gap * 20_000_000;
            if reset && key % 3 == 0 {
                looked_up.reset(&key);
                hinted.reset(&key);
            }
            let mut hint = match given {
                Given::Own => hints.get(&key).copied().unwrap_or_default(),
                Given::Other(k) => hints.get(&k).copied().unwrap_or_default(),
                Given::MadeUp(bits) => SlotHint::from_bits(bits),
                Given::None => SlotHint::NONE,
            };
            let want = looked_up.check_at(&key, now, cost);
            let got = hinted.check_hinted_at(hinted.fingerprint_of(&key), &mut hint, now, cost);
            prop_assert_eq!(&got, &want);
            // The hint left behind names the key's slot exactly when the key is held.
            prop_assert_eq!(hint != SlotHint::NONE, hinted.state_of(&key).is_some());
            hints.insert(key, hint);
            for k in 0..12 {
                prop_assert_eq!(hinted.state_of(&k), looked_up.state_of(&k), "key {}", k);
            }
        }
    }
}

/// A hint names a slot; a check through it is one lookup fewer, and the slot is the
/// key's: the hint a check leaves is where the next check finds the key.
#[test]
fn the_hint_left_behind_is_used_next_time() {
    let (_, table) = twins(false);
    let alice = table.fingerprint_of(&7);
    let mut hint = SlotHint::NONE;
    assert!(table
        .check_hinted_at(alice, &mut hint, 0, 1)
        .unwrap()
        .is_allowed());
    let first = hint;
    assert_ne!(first, SlotHint::NONE);
    for _ in 0..2 {
        assert!(table
            .check_hinted_at(alice, &mut hint, 0, 1)
            .unwrap()
            .is_allowed());
        assert_eq!(hint, first, "a hit keeps the hint");
    }
    // The burst (3) is used up, through the hint as through a lookup.
    assert!(!table
        .check_hinted_at(alice, &mut hint, 0, 1)
        .unwrap()
        .is_allowed());
    assert!(!table.check_at(&7, 0, 1).unwrap().is_allowed());
}
