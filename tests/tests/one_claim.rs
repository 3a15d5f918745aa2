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

/// Found by an outside harness: a charge that saturates the word (a schedule's debt
/// at its 146-year cap) drops units the word no longer holds; an admission from
/// before it then gave back what was no longer counted (GCRA, token bucket and leaky
/// meter alike, one word, keyed, and a word its caller keeps). Now a saturating
/// charge lets no earlier admission give anything back: the limiter stands where its
/// twin that never saw the refunded request stands, or stricter.
#[test]
fn a_charge_that_saturates_the_word_leaves_nothing_for_an_earlier_admission() {
    use portero::algorithm::kept::KeptWord;
    use portero::{Admission, Algorithm, LeakyMeter, TokenBucket};
    // T = 2^60 ns, a burst of 4: a span of 2^62 ns, the most debt a charge leaves.
    let q = Quota::from_nanos(4, 1 << 62).unwrap();
    fn direct<A: Algorithm + Copy>(a: A, name: &str) {
        let (l, twin) = (
            RateLimiter::with_algorithm_and_clock(a, ManualClock::new()),
            RateLimiter::with_algorithm_and_clock(a, ManualClock::new()),
        );
        let x = l.acquire_at(0, 1).unwrap().admission.unwrap(); // real cost 0
        let y = l.acquire_at(0, 1).unwrap().admission.unwrap(); // real cost 4
        twin.charge_at(0, 4).unwrap();
        l.settle_at(y, 4, 0).unwrap();
        l.refund_at(x, 0);
        assert!(
            !l.peek_at(0, 1).unwrap().is_allowed() || twin.peek_at(0, 1).unwrap().is_allowed(),
            "{name}: admits what its twin refuses"
        );
        // A plain charge the same way.
        let l = RateLimiter::with_algorithm_and_clock(a, ManualClock::new());
        let x = l.acquire_at(0, 1).unwrap().admission.unwrap();
        l.charge_at(0, 4).unwrap();
        l.refund_at(x, 0);
        assert!(!l.peek_at(0, 1).unwrap().is_allowed(), "{name}: charged");
    }
    fn keyed<A: Algorithm + Copy>(a: A, name: &str) {
        let t = KeyedLimiter::with_clock(a, 10, ManualClock::new());
        let x = t.acquire_at(&"k", 0, 1).unwrap().admission.unwrap();
        let y = t.acquire_at(&"k", 0, 1).unwrap().admission.unwrap();
        let k = t.fingerprint_of(&"k");
        t.settle_fingerprint_at(k, y, 4, 0).unwrap();
        t.refund_fingerprint_at(k, x, 0);
        assert!(
            !t.peek_at(&"k", 0, 1).unwrap().is_allowed(),
            "{name}, keyed"
        );
    }
    fn kept<A: Algorithm + Copy>(a: A, name: &str) {
        let mut w = KeptWord::new(&a);
        let keep = |w: &KeptWord, adm: Admission| {
            Admission::of_word(
                adm.at(),
                adm.cost(),
                adm.before().unwrap(),
                adm.after().unwrap(),
                w.ledger,
            )
        };
        let noted = w.ledger;
        let (_, x) = w.check(&a, 0, 1).unwrap();
        let x = x.unwrap();
        let x = Admission::of_word(
            x.at(),
            x.cost(),
            x.before().unwrap(),
            x.after().unwrap(),
            noted,
        );
        let (_, y) = w.check(&a, 0, 1).unwrap();
        let y = keep(&w, y.unwrap());
        w.settle(&a, y, 4, 0).unwrap();
        w.settle(&a, x, 0, 0).unwrap();
        assert!(
            !a.decide(w.state, 0, 1).unwrap().decision.is_allowed(),
            "{name}, kept"
        );
    }
    for (name, test) in [
        ("gcra", (&|| direct(Gcra::new(q), "gcra")) as &dyn Fn()),
        ("token bucket", &|| {
            direct(TokenBucket::new(q), "token bucket")
        }),
        ("leaky meter", &|| direct(LeakyMeter::new(q), "leaky meter")),
        ("gcra keyed", &|| keyed(Gcra::new(q), "gcra")),
        ("token bucket keyed", &|| {
            keyed(TokenBucket::new(q), "token bucket")
        }),
        ("gcra kept", &|| kept(Gcra::new(q), "gcra")),
    ] {
        let _ = name;
        test();
    }
}

/// The other side of the saturating charge: a charge the word holds whole tells the
/// ledger nothing, and an earlier admission still gives everything back (a ledger
/// told "everything went back" at every charge would keep every unit a settlement
/// above its estimate came after). Exactly the twin, one word and keyed.
#[test]
fn a_charge_the_word_holds_leaves_earlier_admissions_their_give_back() {
    let q = Quota::per_second(10).unwrap();
    let (l, twin) = (
        RateLimiter::with_algorithm_and_clock(Gcra::new(q), ManualClock::new()),
        RateLimiter::with_algorithm_and_clock(Gcra::new(q), ManualClock::new()),
    );
    let x = l.acquire_at(0, 2).unwrap().admission.unwrap();
    l.charge_at(0, 3).unwrap();
    twin.charge_at(0, 3).unwrap();
    assert!(l.refund_at(x, 0), "given back");
    assert_eq!(l.raw_state(), twin.raw_state());
    let t = per_key();
    let x = t.acquire_at(&"k", 0, 2).unwrap().admission.unwrap();
    let k = t.fingerprint_of(&"k");
    t.charge_fingerprint_at(k, 0, 3).unwrap();
    t.refund_fingerprint_at(k, x, 0);
    assert_eq!(t.peek_at(&"k", 0, 0).unwrap().remaining(), 1_000 - 3);
}
