//! A sweep that drops a neighbour's idle key leaves a key's give-back whole. Keys of
//! a table share refund ledgers (one per few buckets); a sweep tells the ledger of
//! each key it drops that the word went back by everything, and that told every
//! other key of the ledger the same: a first-request window's opener given back
//! with nothing since on its own key was then kept (its window stayed, and the key
//! admitted what the twin that never saw it refuses, in 11 of 64 tables of an
//! outside harness), and a GCRA admission gave nothing back.

use portero::{FixedWindow, Gcra, KeyedLimiter, ManualClock, Placement, Quota};

const S: u64 = 1_000_000_000;
/// A table this small has one ledger: every key is every other's neighbour.
const KEYS: usize = 64;

fn first_request_window() -> FixedWindow {
    FixedWindow::with_placement(
        Quota::new(2, core::time::Duration::from_secs(10)).unwrap(),
        Placement::FirstRequest,
    )
    .unwrap()
}

/// What `key` answers at each of `times`, one request each.
fn answers<A: portero::Algorithm + Copy>(
    limiter: &KeyedLimiter<u64, A, &ManualClock>,
    clock: &ManualClock,
    key: u64,
    times: &[u64],
) -> Vec<bool> {
    times
        .iter()
        .map(|&t| {
            clock.set(t);
            limiter.check(&key).is_allowed()
        })
        .collect()
}

#[test]
fn an_opener_given_back_after_a_neighbours_sweep_is_undone_exactly() {
    let times = [21 * S, 21 * S, 21 * S, 30 * S + S / 2, 31 * S + S / 2];
    for neighbour in 1..=8u64 {
        let (clock, twin_clock) = (ManualClock::new(), ManualClock::new());
        let limiter = KeyedLimiter::with_clock(first_request_window(), KEYS, &clock);
        let twin = KeyedLimiter::with_clock(first_request_window(), KEYS, &twin_clock);
        // The neighbour's window opens at 0 and is over by 10 s; both see it.
        assert!(limiter.check(&neighbour).is_allowed() && twin.check(&neighbour).is_allowed());
        // At 20 s the key's first request opens its window; only the limiter sees it.
        clock.set(20 * S);
        let opener = limiter
            .acquire_at(&0, 20 * S, 1)
            .unwrap()
            .admission
            .unwrap();
        clock.set(21 * S);
        twin_clock.set(21 * S);
        assert_eq!(limiter.sweep(), 1, "the neighbour, idle since 10 s");
        assert_eq!(twin.sweep(), 1);
        limiter.refund(&0, opener);
        assert_eq!(
            answers(&limiter, &clock, 0, &times),
            answers(&twin, &twin_clock, 0, &times),
            "neighbour {neighbour}: the key answers as the twin that never saw its opener"
        );
    }
}

#[test]
fn a_gcra_admission_given_back_after_a_neighbours_sweep_gives_back_all_of_it() {
    let gcra = || Gcra::new(Quota::per_second(1).unwrap().with_burst(4).unwrap());
    let (clock, twin_clock) = (ManualClock::new(), ManualClock::new());
    let limiter = KeyedLimiter::with_clock(gcra(), KEYS, &clock);
    let twin = KeyedLimiter::with_clock(gcra(), KEYS, &twin_clock);
    assert!(limiter.check(&7).is_allowed() && twin.check(&7).is_allowed());
    clock.set(10 * S);
    twin_clock.set(10 * S);
    for _ in 0..2 {
        assert!(limiter.check(&0).is_allowed() && twin.check(&0).is_allowed());
    }
    let taken = limiter
        .acquire_at(&0, 10 * S, 2)
        .unwrap()
        .admission
        .unwrap();
    assert_eq!(limiter.sweep(), 1, "key 7, idle since 1 s");
    assert_eq!(twin.sweep(), 1);
    limiter.refund(&0, taken);
    let at_once = [10 * S; 4];
    let twins = answers(&twin, &twin_clock, 0, &at_once);
    assert_eq!(twins, [true, true, false, false]);
    assert_eq!(
        answers(&limiter, &clock, 0, &at_once),
        twins,
        "the 2 units back"
    );
}

/// The other side of the mark: the key itself swept, and back with the very word
/// its old admission wrote (the time given went back past the sweep), gets nothing
/// of that admission back.
#[test]
fn a_key_swept_itself_gets_nothing_back_of_an_admission_before_the_sweep() {
    let gcra = || Gcra::new(Quota::per_second(1).unwrap().with_burst(4).unwrap());
    let (clock, twin_clock) = (ManualClock::new(), ManualClock::new());
    let limiter = KeyedLimiter::with_clock(gcra(), KEYS, &clock);
    let twin = KeyedLimiter::with_clock(gcra(), KEYS, &twin_clock);
    let old = limiter.acquire_at(&0, 0, 1).unwrap().admission.unwrap();
    assert_eq!(limiter.sweep_at(2 * S), 1, "the key itself, idle at 2 s");
    // Back at 0 s: its word is again the one the old admission wrote.
    assert!(limiter.check_at(&0, 0, 1).unwrap().is_allowed());
    assert!(twin.check_at(&0, 0, 1).unwrap().is_allowed());
    limiter.refund_fingerprint_at(limiter.fingerprint_of(&0), old, 0);
    let at_once = [0; 4];
    assert_eq!(
        answers(&limiter, &clock, 0, &at_once),
        answers(&twin, &twin_clock, 0, &at_once),
        "the new life's unit is not given back for the old"
    );
}
