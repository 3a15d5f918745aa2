//! The ledger's arithmetic, pinned value by value: every tag an admission carries,
//! what a refund reads of its ledger, and the schedule's give-back and charge. The
//! twin tests (`tests/tests/settle_*.rs`) show the rule holds; these say which
//! number each step must produce, so that a slip in one bit cannot hide behind a
//! rule that only gives back less.

use super::{
    origin_of, quota_charge, quota_refund, schedule_refund, Admission, Seen, Settlement,
    ANY_ORIGIN, MAX_DEBT_NANOS, UNKNOWN,
};
use crate::quota::Quota;

const TWO_64: u128 = 1 << 64;

/// An admission at 100 of 10 units that found the word at 1,000 and wrote 2,000,
/// with the ledger at `noted`.
fn noted(noted: u128) -> Admission {
    Admission::of_word(100, 10, 1_000, 2_000, noted)
}

/// `admission` as a refund sees it when the ledger stands at `total`, `behind` of it
/// given back from slots behind the admission's.
fn seen(admission: &Admission, total: u128, behind: u128) -> Admission {
    admission.seen_at(Some(Seen { total, behind }))
}

#[test]
fn a_noted_total_comes_back_whole_up_to_the_largest_the_tag_holds() {
    // The largest high half a tag holds: 4·high + NOTED + 3 within a u64.
    let top = (u64::MAX - 11) / 4;
    for total in [0, 1, 7, u128::from(u64::MAX), TWO_64, (7 << 64) + 9] {
        assert_eq!(noted(total).noted_total(), Some(total), "{total}");
    }
    let largest = (u128::from(top) << 64) + 5;
    assert_eq!(noted(largest).noted_total(), Some(largest));
    // One above, and one whose high half overflows the multiply: read as unknown,
    // so nothing is given back by the ledger's rule.
    for beyond in [(u128::from(top) + 1) << 64, u128::MAX] {
        let a = noted(beyond);
        assert_eq!(a.noted_total(), None);
        assert_eq!(a.place(), None);
        assert_eq!(a.moved_since(), None);
        assert!(a.others_given_back() && !a.keeps_request());
        assert_eq!(a.before(), Some(1_000), "the word is still known");
    }
}

#[test]
fn a_place_is_the_word_shifted_by_the_noted_total_and_known_only_when_placed() {
    let total = (3 << 64) + 40;
    assert_eq!(
        noted(total).place(),
        Some((total + 1_000, total + 2_000, false))
    );
    let placed = noted(total).placed_if(true);
    assert_eq!(placed.place(), Some((total + 1_000, total + 2_000, true)));
    assert_eq!(
        placed.noted_total(),
        Some(total),
        "the flag leaves the total"
    );
    assert_eq!(
        noted(total).placed_if(false).place().map(|p| p.2),
        Some(false)
    );
    // Placed twice is still placed; a part keeps its place and is still a part.
    assert_eq!(placed.placed_if(true).place().map(|p| p.2), Some(true));
    let part = noted(total).part(4).placed_if(true);
    assert!(part.keeps_request());
    assert_eq!(part.place(), Some((total + 1_000, total + 2_000, true)));
    // Without a word or a noted total there is no place, and placing changes nothing.
    assert_eq!(Admission::new(5, 2).placed_if(true), Admission::new(5, 2));
    assert_eq!(Admission::new(5, 2).place(), None);
    let unknown = seen(&noted(0), 7, 0);
    assert_eq!(unknown.placed_if(true), seen(&noted(0), 7, 0));
}

#[test]
fn a_part_takes_the_units_given_back_and_keeps_the_request_whatever_the_tag() {
    let whole = noted(33);
    assert!(!whole.keeps_request());
    let part = noted(33).part(4);
    assert_eq!((part.cost(), part.at()), (4, 100));
    assert_eq!(part.noted_total(), Some(33));
    assert_eq!((part.before(), part.after()), (Some(1_000), Some(2_000)));
    assert!(part.keeps_request());
    // More than the cost is the cost; the cost itself and 0 are taken as asked.
    assert_eq!(noted(33).part(11).cost(), 10);
    assert_eq!(noted(33).part(10).cost(), 10);
    assert_eq!(noted(33).part(0).cost(), 0);
    // A part of a part stays a part (a flag set twice, not flipped back).
    let twice = noted(33).part(6).part(2);
    assert!(twice.keeps_request());
    assert_eq!((twice.cost(), twice.noted_total()), (2, Some(33)));
    // Seen by a refund: the part keeps what the ledger told, quiet or not.
    let quiet = seen(&noted(33), 33, 0).part(3);
    assert!(quiet.keeps_request() && !quiet.others_given_back());
    assert_eq!(quiet.moved_since(), Some(0));
    let moved = seen(&noted(33), 40, 0).part(3);
    assert!(moved.keeps_request() && moved.others_given_back());
    assert_eq!(moved.moved_since(), Some(7));
    // Without a word: nothing to keep, and still no word.
    let bare = Admission::new(5, 9).part(3);
    assert!(!bare.keeps_request());
    assert_eq!((bare.cost(), bare.before()), (3, None));
}

#[test]
fn settling_charges_the_excess_keeps_the_estimate_or_gives_back_the_difference() {
    match noted(0).settled_at(13) {
        Settlement::Charge(units) => assert_eq!(units, 3),
        _ => panic!("13 for an estimate of 10 charges 3"),
    }
    assert!(matches!(noted(0).settled_at(10), Settlement::Kept));
    match noted(0).settled_at(0) {
        Settlement::GiveBack(a) => {
            assert_eq!(a.cost(), 10);
            assert!(
                !a.keeps_request(),
                "a real cost of 0 is the whole admission"
            );
        }
        _ => panic!("0 gives back"),
    }
    match noted(0).settled_at(4) {
        Settlement::GiveBack(a) => {
            assert_eq!(a.cost(), 6);
            assert!(a.keeps_request(), "the request stays");
        }
        _ => panic!("4 of 10 gives 6 back"),
    }
}

#[test]
fn what_a_refund_reads_of_its_ledger() {
    let x = noted(5);
    // The ledger where it was: quiet, nothing moved.
    let q = seen(&x, 5, 0);
    assert_eq!(q.moved_since(), Some(0));
    assert!(!q.others_given_back() && !q.keeps_request());
    // Refunds since, some of them behind the admission's slot.
    let m = seen(&x, 12, 0);
    assert_eq!(m.moved_since(), Some(7));
    assert!(m.others_given_back());
    assert_eq!(seen(&x, 12, 3).moved_since(), Some(4));
    assert_eq!(seen(&x, 12, 7).moved_since(), Some(0), "all of it behind");
    // A log claiming more behind than was given back since is not read.
    assert_eq!(seen(&x, 12, 20).moved_since(), Some(7));
    assert!(seen(&x, 12, 20).others_given_back(), "moved");
    // The largest distance that fits, and beyond: unknown (nothing by the rule).
    assert_eq!(
        seen(&x, 5 + u128::from(UNKNOWN) - 1, 0).moved_since(),
        Some(UNKNOWN - 1)
    );
    assert_eq!(seen(&x, 5 + u128::from(UNKNOWN), 0).moved_since(), None);
    assert_eq!(seen(&x, 5 + TWO_64 + 5, 0).moved_since(), None);
    // A total below the noted one, or no ledger: unknown.
    assert_eq!(seen(&x, 4, 0).moved_since(), None);
    let none = x.seen_at(None);
    assert_eq!(none.moved_since(), None);
    assert!(none.others_given_back());
    // An admission without a word stays one.
    let bare = Admission::new(5, 9);
    assert_eq!(bare.seen_at(Some(Seen::total(0))), Admission::new(5, 9));
    // Parts, quiet and not.
    let pq = seen(&noted(5).part(2), 5, 0);
    assert!(pq.keeps_request() && !pq.others_given_back());
    let pm = seen(&noted(5).part(2), 9, 1);
    assert!(pm.keeps_request() && pm.others_given_back());
    assert_eq!(pm.moved_since(), Some(3));
}

#[test]
fn an_undo_only_while_the_word_is_as_written_and_nothing_moved_it() {
    let refund_to = |r: u64| move |_: &Admission, _: u64| Some(r);
    let quiet = Some(Seen::total(5));
    assert_eq!(
        noted(5).give_back_with(2_000, 150, quiet, refund_to(1_500)),
        Some((1_000, true))
    );
    // The word moved on: the algorithm's refund.
    assert_eq!(
        noted(5).give_back_with(2_001, 150, quiet, refund_to(1_500)),
        Some((1_500, false))
    );
    // Another refund moved it (the same word can come back): no undo.
    let moved = Some(Seen::total(6));
    assert_eq!(
        noted(5).give_back_with(2_000, 150, moved, refund_to(1_500)),
        Some((1_500, false))
    );
    // A part never undoes the whole.
    assert_eq!(
        noted(5)
            .part(3)
            .give_back_with(2_000, 150, quiet, refund_to(1_500)),
        Some((1_500, false))
    );
    // An algorithm that gives nothing back: nothing.
    assert_eq!(
        noted(5).give_back_with(2_000, 150, quiet, |_, _| None),
        None
    );
    // The refund's time is never before the admission's.
    let mut told = None;
    noted(5).give_back_with(2_001, 40, quiet, |_, now| {
        told = Some(now);
        Some(0)
    });
    assert_eq!(told, Some(100));
    // `undo` alone: the word it found, while the state is the one it wrote.
    assert_eq!(noted(0).undo(2_000), Some(1_000));
    assert_eq!(noted(0).undo(1_999), None);
    assert_eq!(
        Admission::new(5, 9).undo(0),
        None,
        "no word: nothing to restore"
    );
}

#[test]
fn words_are_known_only_for_admissions_that_wrote_one() {
    let bare = Admission::new(5, 9);
    assert_eq!((bare.before(), bare.after()), (None, None));
    let log = Admission::of_log(5, 9, 77);
    assert_eq!((log.log_drops(), log.before(), log.cost()), (77, None, 9));
    assert_eq!(
        (noted(0).before(), noted(0).after()),
        (Some(1_000), Some(2_000))
    );
}

#[test]
fn origins_tell_words_apart_and_are_never_the_any_origin() {
    let origins: Vec<u64> = (0..64).map(|tag| origin_of(3, tag)).collect();
    for (i, a) in origins.iter().enumerate() {
        assert_ne!(*a, ANY_ORIGIN);
        assert!(origins[i + 1..].iter().all(|b| b != a), "tags {i} collide");
    }
    assert_ne!(origin_of(3, 1), origin_of(4, 1), "two ledgers");
    // The one tag that would mix to the any-origin is moved off it.
    let ledger = 11u64;
    assert_eq!(
        origin_of(ledger, ledger.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
        1
    );
    let stamped = noted(0).taken_from(origin_of(3, 1));
    assert!(stamped.is_stamped() && stamped.is_from(origin_of(3, 1)));
    assert!(!stamped.is_from(origin_of(3, 2)));
    assert!(!noted(0).is_stamped() && noted(0).is_from(origin_of(3, 2)));
}

#[test]
fn a_schedule_gives_back_what_still_lies_ahead_never_below_now() {
    // Took [0, 100) of debt on an idle word; now is 50.
    let x = || Admission::of_word(0, 1, 0, 100, 0);
    let quiet = seen(&x(), 0, 0);
    assert_eq!(schedule_refund(300, &quiet, 50, 100, 1_000), 250);
    // Others gave back 30 ahead of it since: 30 less.
    assert_eq!(
        schedule_refund(300, &seen(&x(), 30, 0), 50, 100, 1_000),
        280
    );
    // Never below now.
    assert_eq!(schedule_refund(60, &quiet, 50, 100, 1_000), 50);
    assert_eq!(
        schedule_refund(40, &quiet, 50, 100, 1_000),
        40,
        "already paid off"
    );
    // At most the admission's own increment.
    assert_eq!(
        schedule_refund(
            900,
            &seen(&Admission::of_word(0, 1, 0, 700, 0), 0, 0),
            50,
            100,
            1_000
        ),
        800
    );
    // A booking's turn still ahead (more than the span past now): nothing.
    assert_eq!(schedule_refund(1_051, &quiet, 50, 100, 1_000), 1_051);
    assert_eq!(
        schedule_refund(1_050, &quiet, 50, 100, 1_000),
        1_000,
        "exactly the span"
    );
    // Unknown distance, or no word: nothing.
    assert_eq!(
        schedule_refund(300, &x().seen_at(None), 50, 100, 1_000),
        300
    );
    assert_eq!(
        schedule_refund(300, &Admission::new(0, 1), 50, 100, 1_000),
        300
    );
}

#[test]
fn a_charge_moves_the_word_on_by_its_units_up_to_the_debt_cap() {
    let quota = Quota::per_second(100).unwrap(); // T = 10 ms
    let t = 10_000_000;
    assert_eq!(
        quota_charge(&quota, 0, 5 * t, 2),
        7 * t,
        "from now when paid off"
    );
    assert_eq!(
        quota_charge(&quota, 9 * t, 5 * t, 2),
        11 * t,
        "from the word in debt"
    );
    assert_eq!(
        quota_charge(&quota, 0, 5 * t, u64::MAX),
        5 * t + MAX_DEBT_NANOS
    );
    let beyond = 5 * t + MAX_DEBT_NANOS + 1;
    assert_eq!(quota_charge(&quota, beyond, 5 * t, 1), beyond, "never back");
    // The refund of a schedule of this quota: cost·T, within the burst's span.
    let a = seen(&Admission::of_word(0, 3, 0, 3 * t, 0), 0, 0);
    assert_eq!(quota_refund(&quota, 3 * t, &a, 0), 0);
    assert_eq!(quota_refund(&quota, 3 * t, &a, t), t);
}
