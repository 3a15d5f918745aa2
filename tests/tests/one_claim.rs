//! One settlement per admission, on its own key and limiter: an admission is one
//! claim on the units one word took. Settled against another key or limiter it is
//! an error and changes nothing; refunded there it gives nothing back; and a key
//! reset since gets nothing back whatever the clock's resolution. (A second
//! settlement of one admission does not compile: `Admission` is neither `Copy` nor
//! `Clone`, see its docs.)

use portero::{
    CheckError, Gcra, KeyedError, KeyedLimiter, KeyedLog, ManualClock, Quota, RateLimiter,
};

fn per_key() -> KeyedLimiter<&'static str, Gcra, ManualClock> {
    KeyedLimiter::with_clock(
        Gcra::new(Quota::per_hour(1_000).unwrap()),
        100,
        ManualClock::new(),
    )
}

const FOREIGN: KeyedError = KeyedError::Check(CheckError::NotThisAdmission);

/// Found by an outside harness: key a's admission of 100 settled at 0 on key b
/// gave b 100 units it never spent (b stood at 800 where it used 300).
#[test]
fn an_admission_settled_on_another_key_is_an_error_and_gives_nothing() {
    let t = per_key();
    let a = t.acquire_at(&"a", 0, 100).unwrap().admission.unwrap();
    t.acquire_at(&"b", 0, 300).unwrap();
    let b = t.fingerprint_of(&"b");
    assert_eq!(t.settle_fingerprint_at(b, a, 0, 0), Err(FOREIGN));
    assert_eq!(t.peek_at(&"b", 0, 0).unwrap().remaining(), 700);
    // A refund on the wrong key gives nothing back either.
    let a = t.acquire_at(&"a", 0, 100).unwrap().admission.unwrap();
    t.refund(&"b", a);
    assert_eq!(t.peek_at(&"b", 0, 0).unwrap().remaining(), 700);
    assert_eq!(
        t.peek_at(&"a", 0, 0).unwrap().remaining(),
        800,
        "a keeps both"
    );
}

/// The same across two limiters, keyed (even with one hasher) and direct.
#[test]
fn an_admission_settled_on_another_limiter_is_an_error_and_gives_nothing() {
    let (one, two) = (per_key(), per_key());
    let taken = one.acquire_at(&"a", 0, 100).unwrap().admission.unwrap();
    two.acquire_at(&"a", 0, 300).unwrap();
    let key = two.fingerprint_of(&"a");
    assert_eq!(two.settle_fingerprint_at(key, taken, 0, 0), Err(FOREIGN));
    assert_eq!(two.peek_at(&"a", 0, 0).unwrap().remaining(), 700);

    let q = Quota::per_hour(1_000).unwrap();
    let (x, y) = (
        RateLimiter::gcra(q).with_clock(ManualClock::new()),
        RateLimiter::gcra(q).with_clock(ManualClock::new()),
    );
    let taken = x.acquire_at(0, 100).unwrap().admission.unwrap();
    y.acquire_at(0, 300).unwrap();
    assert_eq!(y.settle_at(taken, 0, 0), Err(CheckError::NotThisAdmission));
    let taken = x.acquire_at(0, 100).unwrap().admission.unwrap();
    assert!(!y.refund_at(taken, 0), "nothing given back");
    assert_eq!(y.peek_at(0, 0).unwrap().remaining(), 700);
    assert_eq!(x.peek_at(0, 0).unwrap().remaining(), 800);

    let (l1, l2): (KeyedLog<&str, ManualClock>, KeyedLog<&str, ManualClock>) = (
        KeyedLog::with_clock(q, 10, ManualClock::new()).unwrap(),
        KeyedLog::with_clock(q, 10, ManualClock::new()).unwrap(),
    );
    let taken = l1.acquire_at(&"a", 5, 100).unwrap().admission.unwrap();
    l2.acquire_at(&"a", 5, 300).unwrap();
    let key = l2.fingerprint_of(&"a");
    assert_eq!(l2.settle_fingerprint_at(key, taken, 0, 5), Err(FOREIGN));
    let taken = l1.acquire_at(&"a", 5, 100).unwrap().admission.unwrap();
    l2.refund(&"b", taken);
    assert_eq!(l2.peek_at(&"a", 5, 0).unwrap().remaining(), 700);
}

/// Found by an outside harness: an exact log's key reset and used again at the
/// same timestamp got the old admission's units back (600 where 500).
#[test]
fn a_log_key_reset_and_used_again_at_the_same_time_gets_nothing_back() {
    let q = Quota::per_hour(1_000).unwrap();
    let log: KeyedLog<&str, ManualClock> = KeyedLog::with_clock(q, 10, ManualClock::new()).unwrap();
    let old = log.acquire_at(&"k", 7, 100).unwrap().admission.unwrap();
    log.reset(&"k");
    log.acquire_at(&"k", 7, 500).unwrap();
    log.refund(&"k", old);
    assert_eq!(log.peek_at(&"k", 7, 0).unwrap().remaining(), 500);
    // Settled instead of refunded: the same.
    let old = log.acquire_at(&"j", 7, 100).unwrap().admission.unwrap();
    log.reset(&"j");
    log.acquire_at(&"j", 7, 500).unwrap();
    log.settle_fingerprint_at(log.fingerprint_of(&"j"), old, 0, 7)
        .unwrap();
    assert_eq!(log.peek_at(&"j", 7, 0).unwrap().remaining(), 500);
    // Not reset: all of it back, exactly.
    let x = log.acquire_at(&"m", 7, 100).unwrap().admission.unwrap();
    log.acquire_at(&"m", 7, 400).unwrap();
    log.refund(&"m", x);
    assert_eq!(log.peek_at(&"m", 7, 0).unwrap().remaining(), 600);
}
