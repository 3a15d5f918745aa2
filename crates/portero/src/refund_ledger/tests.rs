//! The ledger's arithmetic, pinned: its total's two halves, its turns, what the log
//! of places tells a refund, and the sweeps a refund reads past.

use super::RefundLedger;
use crate::admission::Admission;
use crate::refund_log::RunLog;

const TWO_64: u128 = 1 << 64;

#[test]
fn the_ledger_adds_what_refunds_moved_carrying_into_its_high_half() {
    let ledger = RefundLedger::new();
    let before = ledger.note();
    assert_eq!(before.total, 0);
    assert!(ledger.placed(&before), "no refund since");
    ledger.refunding(|total| {
        assert_eq!(total, 0);
        // A note taken while a refund runs is never placed.
        let during = ledger.note();
        assert!(!ledger.placed(&during));
        ((), u64::MAX)
    });
    assert!(!ledger.placed(&before), "a refund ran");
    ledger.refunding(|total| {
        assert_eq!(total, u128::from(u64::MAX));
        ((), 5)
    });
    assert_eq!(ledger.noted(), TWO_64 + 4);
    let after = ledger.note();
    ledger.refunding(|_| ((), 0));
    assert_eq!(ledger.noted(), TWO_64 + 4, "nothing moved: nothing added");
    assert!(!ledger.placed(&after), "still a turn taken");
    let others = [RefundLedger::new(), RefundLedger::new()];
    RefundLedger::all_back(&others, || {});
    for l in &others {
        assert_eq!(l.noted(), u128::from(u64::MAX));
        assert_eq!(l.note().turn % 2, 0, "the turn is over");
    }
}

#[test]
fn a_refund_subtracts_only_what_was_given_back_behind_its_place() {
    let ledger = RefundLedger::new();
    let log: RunLog = RunLog::new();
    let owner = 9;
    // X holds [1000, 2000), Y after it [2000, 3000), both placed at a total of 0.
    let x = Admission::of_word(0, 1, 1_000, 2_000, 0).placed_if(true);
    let y = Admission::of_word(0, 1, 2_000, 3_000, 0).placed_if(true);
    ledger.giving_back(&log, (owner, |_| false), &y, |seen| {
        assert_eq!((seen.total, seen.behind), (0, 0), "nothing since Y");
        ((), 600)
    });
    assert_eq!(
        log.behind(owner, 2_000),
        600,
        "Y's give-back is logged at its place"
    );
    ledger.giving_back(&log, (owner, |_| false), &x, |seen| {
        assert_eq!((seen.total, seen.behind), (600, 600), "Y lay behind X");
        ((), 0)
    });
    // Not placed: nothing known to lie behind. Nothing given back: nothing logged.
    let z = Admission::of_word(0, 1, 1_000, 2_000, 0);
    ledger.giving_back(&log, (owner, |_| false), &z, |seen| {
        assert_eq!((seen.total, seen.behind), (600, 0));
        ((), 0)
    });
    assert_eq!(log.behind(owner, 0), 600);
    // Another owner's log says nothing.
    assert_eq!(log.behind(owner + 1, 0), 0);
}

#[test]
fn sweeps_since_a_note_are_read_past_only_when_every_mark_since_was_one() {
    let ledger = RefundLedger::new();
    ledger.refunding(|_| ((), 40));
    let noted = Some(ledger.note().total);
    assert_eq!(noted, Some(40));
    // A sweep that dropped nothing marks nothing.
    assert!(!ledger.sweeping(7, || (false, false)));
    assert_eq!(ledger.noted(), 40);
    ledger.sweeping(5, || ((), true));
    ledger.sweeping(9, || ((), true));
    ledger.refunding(|_| ((), 3));
    let total = ledger.noted();
    assert_eq!(total, 2 * TWO_64 + 43);
    let mut told = None;
    let read = ledger.past_sweeps(noted, total, |t| {
        told = Some(t);
        true
    });
    assert_eq!(
        (read, told),
        (43, Some(9)),
        "both sweeps read past, at the latest's time"
    );
    // The key may have been among those swept: the sweeps count.
    assert_eq!(ledger.past_sweeps(noted, total, |_| false), total);
    // Nothing noted, or noted after the sweeps: as it is.
    assert_eq!(ledger.past_sweeps(None, total, |_| true), total);
    assert_eq!(ledger.past_sweeps(Some(total), total, |_| true), total);
    // A mark that is not a sweep since (everything) ends the run.
    ledger.refunding(|_| ((), u64::MAX));
    let total = ledger.noted();
    assert_eq!(ledger.past_sweeps(noted, total, |_| true), total);
    // A new run: only the sweeps since the note, if all marks since were sweeps.
    let noted = Some(total);
    ledger.sweeping(11, || ((), true));
    let total = ledger.noted();
    assert_eq!(ledger.past_sweeps(noted, total, |_| true), total - TWO_64);
    // More marks than the run holds (a note from before the everything): as it is.
    let before_everything = Some(43);
    assert_eq!(
        ledger.past_sweeps(before_everything, total, |_| true),
        total
    );
}

#[test]
fn a_carry_into_the_high_half_ends_the_run_of_sweeps() {
    let ledger = RefundLedger::new();
    ledger.refunding(|_| ((), u64::MAX - 1)); // everything: no run yet
    let noted = ledger.noted();
    ledger.sweeping(1, || ((), true));
    let swept = ledger.noted();
    assert_eq!(ledger.past_sweeps(Some(noted), swept, |_| true), noted);
    ledger.refunding(|_| ((), 5)); // carries
    let total = ledger.noted();
    assert_eq!(total, noted + 2 * TWO_64 + 5 - TWO_64);
    // Two marks since the note, the last a carry: not read past.
    assert_eq!(ledger.past_sweeps(Some(noted), total, |_| true), total);
    // A low half below the noted one (the carry wrapped it): as it is.
    let after = Some(swept);
    assert_eq!(ledger.past_sweeps(after, total, |_| true), total);
}

#[test]
fn origins_are_the_ledgers_own_and_the_keys() {
    let (a, b) = (RefundLedger::new(), RefundLedger::new());
    assert_ne!(a.origin(1), b.origin(1), "two ledgers");
    assert_ne!(a.origin(1), a.origin(2), "two keys");
    assert!(
        a.origin(0) > 1 && b.origin(0) > 1,
        "stamped, never the any-origin"
    );
    let stamped = Admission::new(0, 1).taken_from(a.origin(7));
    assert!(stamped.is_from(a.origin(7)) && !stamped.is_from(b.origin(7)));
}

#[test]
fn a_refund_that_gave_nothing_back_takes_no_room_in_the_log() {
    let ledger = RefundLedger::new();
    let log: RunLog = RunLog::new();
    let owner = 3;
    let placed = |from: u64, to: u64| Admission::of_word(0, 1, from, to, 0).placed_if(true);
    // Sixteen refunds that gave nothing back: one just below where Y lies, the others
    // far above it.
    let nothing =
        core::iter::once((110, 111)).chain((0..15).map(|k| (300 + 100 * k, 301 + 100 * k)));
    for (from, to) in nothing {
        ledger.giving_back(&log, (owner, |_| false), &placed(from, to), |_| ((), 0));
    }
    // Y, at [150, 160), gives back 5; X ended at 115, before Y's place.
    ledger.giving_back(&log, (owner, |_| false), &placed(150, 160), |_| ((), 5));
    ledger.giving_back(&log, (owner, |_| false), &placed(105, 115), |seen| {
        assert_eq!(seen.behind, 5, "Y lay behind X, whatever the log holds");
        ((), 0)
    });
}
