//! loom models for stacked limits (refunds), the concurrency limit and the keyed table.
#![cfg(loom)]

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use portero::keyed::stack;
use portero::{ConcurrencyLimit, Gcra, KeyedLimiter, ManualClock, Quota, RateLimiter, SlotHint};

const T: u64 = 10;

fn gcra(burst: u64) -> RateLimiter<Gcra, ManualClock> {
    let q = Quota::from_nanos(1, T).unwrap().with_burst(burst).unwrap();
    RateLimiter::with_algorithm_and_clock(Gcra::new(q), ManualClock::new())
}

/// Two stacked requests and one direct request race on a user limit (burst 2) and a
/// global limit (burst 1), frozen clock. Refunds must leave each limit having admitted
/// at most its burst, and each state must be exactly what the admitted requests took.
#[test]
fn refunds_never_let_more_through_than_each_limit_allows() {
    loom::model(|| {
        let user = Arc::new(gcra(2));
        let global = Arc::new(gcra(1));
        let stacked: Vec<_> = (0..2)
            .map(|_| {
                let (u, g) = (user.clone(), global.clone());
                thread::spawn(move || {
                    let s = stack::check_all(&[&*u, &*g], 100, 1).unwrap();
                    s.rejected_by.is_none()
                })
            })
            .collect();
        let u = user.clone();
        let direct = thread::spawn(move || u.check_at(100, 1).unwrap().is_allowed());
        let stacks = stacked
            .into_iter()
            .map(|h| h.join().unwrap())
            .filter(|a| *a)
            .count() as u64;
        let direct = u64::from(direct.join().unwrap());
        assert!(stacks <= 1, "global burst 1, {stacks} stacks admitted");
        assert!(stacks + direct <= 2, "user burst 2");
        assert!(stacks + direct >= 1, "something got through");
        assert_eq!(global.raw_state(), if stacks == 1 { 100 + T } else { 0 });
        let used = stacks + direct;
        assert_eq!(user.raw_state(), if used == 0 { 0 } else { 100 + used * T });
    });
}

/// A refund of x1 and a check, and a refund of x2, race on one limiter (1 per 60 ns,
/// burst 5) that admitted x1 (4 units) at 0 and x2 (2) at 200. Once x1's refund moved
/// the word, x2's debt no longer ends where x2 wrote it: in every order the limiter
/// must still refuse 5 units at 350, as its twin that saw only the check at 320 does
/// (the count each refund reads after its load is what tells it; the check can run
/// between).
#[test]
fn refunds_racing_a_check_never_invent_units() {
    loom::model(|| {
        let q = Quota::from_nanos(1, 60).unwrap().with_burst(5).unwrap();
        let lim = Arc::new(RateLimiter::with_algorithm_and_clock(
            Gcra::new(q),
            ManualClock::new(),
        ));
        let x1 = lim.acquire_at(0, 4).unwrap().admission.unwrap();
        let x2 = lim.acquire_at(200, 2).unwrap().admission.unwrap();
        let l = lim.clone();
        let first = thread::spawn(move || {
            l.refund_at(x1, 200);
            l.check_at(320, 1).unwrap().is_allowed()
        });
        let l = lim.clone();
        let second = thread::spawn(move || l.refund_at(x2, 330));
        second.join().unwrap();
        assert!(first.join().unwrap(), "x1 given back left room for one");
        assert!(
            !lim.peek_at(350, 5).unwrap().is_allowed(),
            "5 units at 350 after one at 320 with a burst of 5"
        );
    });
}

/// The race an outside review replayed: quota 1 per 10 ns, burst 4; z and x admitted
/// at 0. x is given back at 10 while, on another thread, z is given back at 0 and a
/// check at 10 may write x's very word again. The word and the ledger the refunds
/// read move together (refunds of one word take turns), so in every order the
/// limiter ends exactly as its twin that saw only the check: 3 units fit at 10, 4 do
/// not.
#[test]
fn a_refund_racing_another_refund_and_a_check_is_never_fooled_by_the_same_word() {
    loom::model(|| {
        let lim = Arc::new(gcra(4));
        let z = lim.acquire_at(0, 1).unwrap().admission.unwrap();
        let x = lim.acquire_at(0, 1).unwrap().admission.unwrap();
        let l = lim.clone();
        let other = thread::spawn(move || {
            l.refund_at(z, 0);
            l.check_at(T, 1).unwrap().is_allowed()
        });
        lim.refund_at(x, T);
        assert!(other.join().unwrap());
        assert!(
            lim.peek_at(T, 3).unwrap().is_allowed(),
            "x and z given back"
        );
        assert!(
            !lim.peek_at(T, 4).unwrap().is_allowed(),
            "4 units at 10 after one check"
        );
    });
}

/// The same race on one key of a keyed table, whose slot is one 128-bit word.
/// Settlements racing each other and a check: x (3 units) and y (2) admitted at 0 fill
/// a burst of 5; x settles at 1 (a part of it given back) and then a check of one unit
/// runs, while y settles at 0 (the whole of it). In every order the check is admitted
/// and the limiter is never looser than its twin, charged 1 for x, 0 for y and the
/// check's unit: 4 units at 0 never fit.
#[test]
fn settlements_racing_a_check_never_invent_units() {
    loom::model(|| {
        let lim = Arc::new(gcra(5));
        let x = lim.acquire_at(0, 3).unwrap().admission.unwrap();
        let y = lim.acquire_at(0, 2).unwrap().admission.unwrap();
        let l = lim.clone();
        let first = thread::spawn(move || {
            l.settle_at(x, 1, 0).unwrap();
            l.check_at(0, 1).unwrap().is_allowed()
        });
        lim.settle_at(y, 0, 0).unwrap();
        assert!(first.join().unwrap(), "x's part given back left room");
        assert!(
            !lim.peek_at(0, 4).unwrap().is_allowed(),
            "4 units at 0 after 1 settled and 1 checked, of a burst of 5"
        );
    });
}

/// Settlements in any order, on the log of places: z (2 units, kept) and x (1) are
/// admitted at 0; then, at once, x is given back while another thread admits c (1)
/// and gives it back, and the main thread admits d (1, kept). A refund counts as
/// "behind" only the places it knows lay after its own: c's place is known only when
/// no refund ran between its note and its write. In every order the limiter is never
/// looser than its twin that saw z and d alone (3 units taken: 3 more fit at 0, 4
/// never), and x's and c's units come back whole when they can: with no time passing
/// and every place known, the limiter is that twin exactly.
#[test]
fn a_settlement_racing_a_settlement_and_a_check_gives_back_by_place() {
    loom::model(|| {
        let lim = Arc::new(gcra(6));
        let _z = lim.acquire_at(0, 2).unwrap().admission.unwrap();
        let x = lim.acquire_at(0, 1).unwrap().admission.unwrap();
        let l = lim.clone();
        let other = thread::spawn(move || {
            let c = l.acquire_at(0, 1).unwrap().admission.unwrap();
            l.settle_at(c, 0, 0).unwrap();
        });
        let l = lim.clone();
        let third = thread::spawn(move || {
            l.refund_at(x, 0);
        });
        let _d = lim.acquire_at(0, 1).unwrap().admission.unwrap();
        other.join().unwrap();
        third.join().unwrap();
        assert!(
            !lim.peek_at(0, 4).unwrap().is_allowed(),
            "never looser than the twin that saw z and d"
        );
        assert!(
            lim.peek_at(0, 3).unwrap().is_allowed(),
            "x and c come back whole"
        );
    });
}

#[test]
fn a_keyed_refund_racing_another_refund_and_a_check_is_never_fooled_by_the_same_word() {
    keyed_model_with_burst(4, portero::Overflow::RejectNewKeys, 4, |lim| {
        let z = lim.acquire_at(&1, 0, 1).unwrap().admission.unwrap();
        let x = lim.acquire_at(&1, 0, 1).unwrap().admission.unwrap();
        let l = lim.clone();
        let other = thread::spawn(move || {
            l.refund_fingerprint_at(l.fingerprint_of(&1), z, 0);
            l.check_at(&1, T, 1).unwrap().is_allowed()
        });
        lim.refund_fingerprint_at(lim.fingerprint_of(&1), x, T);
        assert!(other.join().unwrap());
        assert!(
            lim.peek_at(&1, T, 3).unwrap().is_allowed(),
            "x and z given back"
        );
        assert!(
            !lim.peek_at(&1, T, 4).unwrap().is_allowed(),
            "4 units at 10 after one check"
        );
    });
}

/// A sweep that drops a neighbour's idle key races a refund of another key's
/// admission (keys of one table share a ledger): in every interleaving the refund
/// gives back all of it — the sweep's mark is read past, since the key was not idle.
#[test]
fn a_neighbours_sweep_racing_a_refund_leaves_the_give_back_whole() {
    keyed_model_with_burst(4, portero::Overflow::RejectNewKeys, 4, |lim| {
        assert!(lim.check_at(&2, 0, 1).unwrap().is_allowed());
        // Key 1 keeps one unit (never idle at 10T), and X takes two more.
        assert!(lim.check_at(&1, 10 * T, 1).unwrap().is_allowed());
        let x = lim.acquire_at(&1, 10 * T, 2).unwrap().admission.unwrap();
        let l = lim.clone();
        let sweep = thread::spawn(move || l.sweep_at(10 * T));
        lim.refund_fingerprint_at(lim.fingerprint_of(&1), x, 10 * T);
        assert_eq!(sweep.join().unwrap(), 1, "the neighbour, idle since T");
        assert!(
            lim.peek_at(&1, 10 * T, 3).unwrap().is_allowed(),
            "both units back"
        );
        assert!(
            !lim.peek_at(&1, 10 * T, 4).unwrap().is_allowed(),
            "one kept"
        );
    });
}

/// Three threads take permits from a limit of 2 and release them: never more than 2
/// held at once, and all are back at the end.
#[test]
fn concurrency_limit_never_exceeds_its_permits() {
    loom::model(|| {
        let limit = Arc::new(ConcurrencyLimit::new(2));
        let held = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..3)
            .map(|_| {
                let (limit, held) = (limit.clone(), held.clone());
                thread::spawn(move || {
                    if let Ok(permit) = limit.try_acquire() {
                        let now = held.fetch_add(1, Ordering::SeqCst) + 1;
                        assert!(now <= 2);
                        held.fetch_sub(1, Ordering::SeqCst);
                        drop(permit);
                        true
                    } else {
                        false
                    }
                })
            })
            .collect();
        let got = admitted(handles);
        assert!(got >= 2, "at least two must get a permit");
        assert_eq!(limit.in_use(), 0);
    });
}

/// Two threads insert the same new key while a third inserts another: the key is held
/// once (no duplicate slot that would double its quota) and admits exactly its burst.
#[test]
fn keyed_concurrent_inserts_never_duplicate_a_key() {
    keyed_model(4, portero::Overflow::RejectNewKeys, |keyed| {
        let handles: Vec<_> = [7u64, 7, 9]
            .into_iter()
            .map(|key| {
                let k = keyed.clone();
                thread::spawn(move || (key, k.check_at(&key, 100, 1).unwrap().is_allowed()))
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let sevens = results.iter().filter(|(k, a)| *k == 7 && *a).count();
        assert_eq!(sevens, 1, "burst 1 for key 7: {results:?}");
        assert_eq!(keyed.len(), 2);
        assert_eq!(keyed.count_slots(), 2);
    });
}

/// A keyed table of `max_keys` (burst 1, frozen clock) under `policy`, checked by
/// `model` in every interleaving. Every slot access is a model step (up to 16 slots
/// per scan), so long executions are allowed.
fn keyed_model(
    max_keys: usize,
    policy: portero::Overflow,
    model: impl Fn(Arc<KeyedLimiter<u64, Gcra, ManualClock>>) + Send + Sync + 'static,
) {
    keyed_model_with_burst(max_keys, policy, 1, model)
}

/// [`keyed_model`] with a burst of `burst`.
fn keyed_model_with_burst(
    max_keys: usize,
    policy: portero::Overflow,
    burst: u64,
    model: impl Fn(Arc<KeyedLimiter<u64, Gcra, ManualClock>>) + Send + Sync + 'static,
) {
    let mut builder = loom::model::Builder::new();
    builder.max_branches = 100_000;
    builder.check(move || {
        let q = Quota::from_nanos(1, T).unwrap().with_burst(burst).unwrap();
        let keyed =
            KeyedLimiter::with_hasher(Gcra::new(q), max_keys, ManualClock::new(), ahash_seed());
        model(Arc::new(keyed.overflow(policy)));
    });
}

/// The evicting insert: a table of one key, held by an active key; two threads check
/// the same new key (burst 1) at one instant. Whichever evicts must leave the new key
/// findable, so the other is rejected by it instead of evicting again.
#[test]
fn keyed_eviction_leaves_the_new_key_findable() {
    keyed_model(1, portero::Overflow::EvictSoonestFull, |keyed| {
        assert!(keyed.check_at(&1u64, 100, 1).unwrap().is_allowed());
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let k = keyed.clone();
                thread::spawn(move || k.check_at(&7u64, 100, 1).unwrap().is_allowed())
            })
            .collect();
        let admitted = admitted(handles);
        assert_eq!(admitted, 1, "burst 1 for the new key");
        assert_eq!(keyed.len(), 1);
        assert!(keyed.state_of(&7u64).is_some());
    });
}

/// The evicting policy always tracks a new key, even when the key it chose to evict
/// is checked at that moment (its CAS then fails; the insert must choose again, not
/// refuse the new key as a full table would).
#[test]
fn keyed_evicting_insert_never_refuses_while_its_victim_is_checked() {
    keyed_model_with_burst(1, portero::Overflow::EvictSoonestFull, 2, |keyed| {
        assert!(keyed.check_at(&1u64, 100, 1).unwrap().is_allowed());
        let handles: Vec<_> = [1u64, 7]
            .into_iter()
            .map(|key| {
                let k = keyed.clone();
                thread::spawn(move || k.check_at(&key, 100, 1).map(|d| d.is_allowed()))
            })
            .collect();
        for h in handles {
            assert_eq!(h.join().unwrap(), Ok(true));
        }
        assert_eq!(keyed.len(), 1);
    });
}

/// A hinted check races an insert that evicts its key and gives the slot to another
/// key in the very same state (both one unit used at one instant, burst 2, a table of
/// one key). Whatever the order, exactly one key is held afterwards with exactly one
/// unit used: the hinted check's update never lands in the other key's slot (its CAS
/// covers the fingerprint; a CAS over the state alone would succeed there) and never
/// takes the slot over.
#[test]
fn keyed_hinted_check_never_updates_a_reclaimed_slot() {
    keyed_model_with_burst(1, portero::Overflow::EvictSoonestFull, 2, |keyed| {
        let one_used = {
            assert!(keyed.check_at(&9u64, 100, 1).unwrap().is_allowed());
            let s = keyed.state_of(&9u64).unwrap();
            keyed.reset(&9u64);
            s
        };
        let first = keyed.fingerprint_of(&1u64);
        let mut hint = SlotHint::NONE;
        assert!(keyed
            .check_hinted_at(first, &mut hint, 100, 1)
            .unwrap()
            .is_allowed());
        let hinted = {
            let k = keyed.clone();
            thread::spawn(move || {
                k.check_hinted_at(first, &mut hint, 100, 1)
                    .unwrap()
                    .is_allowed()
            })
        };
        let other = {
            let k = keyed.clone();
            thread::spawn(move || k.check_at(&7u64, 100, 1).unwrap().is_allowed())
        };
        assert_eq!(admitted(vec![hinted, other]), 2);
        assert_eq!(keyed.len(), 1);
        let held: Vec<_> = [1u64, 7].iter().filter_map(|k| keyed.state_of(k)).collect();
        assert_eq!(held, [one_used], "one key, one unit");
    });
}

/// A breaker opened by one failure at t = 0 for 1 ms; three threads ask at once when
/// the period is over: exactly one becomes the probe.
#[test]
fn breaker_lets_exactly_one_probe_through() {
    loom::model(|| {
        let breaker = breaker(1, std::time::Duration::from_millis(1));
        breaker.try_call_at(0).unwrap().failure_at(0);
        let handles: Vec<_> = (0..3)
            .map(|_| {
                let b = breaker.clone();
                thread::spawn(move || match b.try_call_at(1_000_000) {
                    Ok(call) => {
                        let probe = call.is_probe();
                        // Unreported on purpose: a report would close the breaker and
                        // let later askers through, which is not what this counts.
                        std::mem::forget(call);
                        assert!(probe, "a half-open breaker only lets the probe through");
                        true
                    }
                    Err(_) => false,
                })
            })
            .collect();
        assert_eq!(admitted(handles), 1, "exactly one probe");
    });
}

/// A call admitted before the breaker tripped reports its failure while the probe of
/// the next cycle succeeds: in every interleaving the stale failure changes nothing,
/// so the breaker ends closed (on the old word, a failure reported after the probe
/// closed the breaker opened it again).
#[test]
fn breaker_ignores_a_report_from_an_earlier_cycle() {
    loom::model(|| {
        // A std `Arc`: a call that outlives its borrow holds the breaker itself.
        let b = portero::CircuitBreaker::new(1, std::time::Duration::from_millis(1));
        let breaker = std::sync::Arc::new(b.unwrap().with_clock(ManualClock::new()));
        let stale = breaker.try_call_owned().unwrap();
        breaker.try_call_at(0).unwrap().failure_at(0); // trips
        let b = breaker.clone();
        let probe = thread::spawn(move || {
            let call = b.try_call_at(1_000_000).expect("the period is over");
            assert!(call.is_probe());
            call.success_at(1_000_000);
        });
        let late = thread::spawn(move || stale.failure_at(1_000_000));
        probe.join().unwrap();
        late.join().unwrap();
        assert!(breaker.allows_call_at(1_000_000), "closed by the probe");
        assert!(!breaker.try_call_at(1_000_000).unwrap().is_probe());
    });
}

/// Two failures reported at once against a threshold of two: neither is lost, so the
/// breaker opens.
#[test]
fn breaker_loses_no_failure() {
    loom::model(|| two_failures_at_once_open(portero::Trip::InARow(2)));
}

/// Two threads each report a failure at t = 0 on a breaker tripping by `rule` after two:
/// both are recorded, so it is open afterwards.
fn two_failures_at_once_open(rule: portero::Trip) {
    let b = portero::CircuitBreaker::tripping(rule, std::time::Duration::from_secs(30));
    let breaker = Arc::new(b.unwrap().with_clock(ManualClock::new()));
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let b = breaker.clone();
            thread::spawn(move || {
                b.try_call_at(0).unwrap().failure_at(0);
                true
            })
        })
        .collect();
    assert_eq!(admitted(handles), 2);
    assert!(breaker.try_call_at(0).is_err(), "open after two failures");
}

/// A breaker on a manual clock, shared between threads.
fn breaker(
    failures: u32,
    open_for: std::time::Duration,
) -> Arc<portero::CircuitBreaker<ManualClock>> {
    let b = portero::CircuitBreaker::new(failures, open_for).unwrap();
    Arc::new(b.with_clock(ManualClock::new()))
}

/// How many of the threads answered `true`.
fn admitted(handles: Vec<thread::JoinHandle<bool>>) -> usize {
    handles
        .into_iter()
        .map(|h| h.join().unwrap())
        .filter(|a| *a)
        .count()
}

fn ahash_seed() -> portero::keyed::RandomState {
    portero::keyed::RandomState::with_seeds(1, 2, 3, 4)
}

/// The scalable mode: three threads on two stripes (burst 1 each), frozen clock:
/// borrowing lets exactly the burst through, never more.
#[test]
fn striped_admits_exactly_the_burst() {
    loom::model(|| {
        let q = Quota::from_nanos(1, T).unwrap().with_burst(2).unwrap();
        let striped = Arc::new(portero::Striped::with_clock(q, 2, ManualClock::new()).unwrap());
        let handles: Vec<_> = (0..3)
            .map(|_| {
                let s = striped.clone();
                thread::spawn(move || s.check_at(100, 1).unwrap().is_allowed())
            })
            .collect();
        let admitted = admitted(handles);
        assert_eq!(admitted, 2);
    });
}

/// The failure-rate rule (both of the last two calls failed): two failures reported at
/// once are both recorded, so the breaker opens.
#[test]
fn breaker_rate_rule_loses_no_failure() {
    loom::model(|| {
        two_failures_at_once_open(portero::Trip::FailureRate {
            percent: 100,
            window: 2,
            min_calls: 2,
        })
    });
}

/// An adaptive limit starting at 5 within [2, 10], with no tolerance: updated every
/// `batch` completed calls, its baseline measured again every `rebaseline_every`
/// batches.
fn adaptive(batch: u16, rebaseline_every: u32) -> std::sync::Arc<portero::AdaptiveConcurrency> {
    let config = portero::AdaptiveConfig {
        initial_limit: 5,
        min_limit: 2,
        max_limit: 10,
        batch,
        tolerance_percent: 0,
        rebaseline_every,
    };
    std::sync::Arc::new(portero::AdaptiveConcurrency::new(config).unwrap())
}

/// Two batches of one call close at once, the second of which starts a new baseline
/// measurement. Closes are serial: either both run one after the other (the limit goes
/// 5 → 7 → pinned to 9 / 2 = 4, and one more call ends the measurement, restoring 9),
/// or the second sample arrives while the first close is in progress and waits for the
/// next batch (7, then one more call closes it: pinned to 4). Interleaved stores — the
/// pinned limit overwritten by the other close, as the old code allowed — would show
/// any other pair.
#[test]
fn adaptive_limit_batch_closes_never_interleave() {
    use std::time::Duration;
    loom::model(|| {
        let limit = adaptive(1, 2);
        let ms = Duration::from_millis(10);
        limit.try_acquire_owned().unwrap().completed(ms); // baseline 10 ms, limit 5
        let (a, b) = (
            limit.try_acquire_owned().unwrap(),
            limit.try_acquire_owned().unwrap(),
        );
        let other = thread::spawn(move || a.completed(ms));
        b.completed(ms);
        other.join().unwrap();
        let after_both = limit.limit();
        limit.try_acquire_owned().unwrap().completed(ms);
        let pair = (after_both, limit.limit());
        assert!([(7, 4), (4, 9)].contains(&pair), "{pair:?}");
        assert_eq!(limit.in_flight(), 0);
    });
}

/// An adaptive limit measuring its baseline (limit pinned at 2): three callers at once,
/// exactly two get a slot; the two complete at once, exactly one closes the batch, so
/// the baseline is their mean and the limit is restored once.
#[test]
fn adaptive_limit_admits_within_its_limit_and_closes_each_batch_once() {
    use std::time::Duration;
    loom::model(|| {
        let limit = adaptive(2, 100);
        let handles: Vec<_> = (0..2u64)
            .map(|i| {
                let l = limit.clone();
                thread::spawn(move || l.try_acquire_owned().ok().map(|p| (p, i)))
            })
            .collect();
        let mine = limit.try_acquire_owned().ok().map(|p| (p, 2));
        let mut permits: Vec<_> = handles
            .into_iter()
            .filter_map(|h| h.join().unwrap())
            .chain(mine)
            .collect();
        assert_eq!(permits.len(), 2, "the pinned limit is 2");
        let (p, i) = permits.pop().unwrap();
        let other = thread::spawn(move || p.completed(Duration::from_millis(10 + 10 * i)));
        let (p, i) = permits.pop().unwrap();
        p.completed(Duration::from_millis(10 + 10 * i));
        other.join().unwrap();
        // Two of 10, 20 and 30 ms: a mean of 15, 20 or 25 ms.
        let base = limit.baseline().as_millis();
        assert!([15, 20, 25].contains(&base), "baseline {base} ms");
        assert_eq!(limit.limit(), 5);
        assert_eq!(limit.in_flight(), 0);
    });
}

/// Two callers book a slot of one GCRA limiter (burst 1, 10 per second) at once; one
/// uses it, the other cancels. Slots go in booking order and a cancel gives back only
/// if no booking came after it: every interleaving ends as one of the serial
/// histories, the next booking included.
#[test]
fn reservations_book_in_order_and_a_cancel_never_frees_a_later_slot() {
    use std::time::Duration;
    loom::model(|| {
        let quota = Quota::per_second(10).unwrap().with_burst(1).unwrap();
        let limiter = Arc::new(portero::RateLimiter::gcra(quota).with_clock(ManualClock::new()));
        let l = limiter.clone();
        let user = thread::spawn(move || {
            let r = l.reserve_at(0, 1, Duration::from_secs(1)).unwrap();
            let at = r.ready_at();
            r.commit();
            at
        });
        let r = limiter.reserve_at(0, 1, Duration::from_secs(1)).unwrap();
        let mine = r.ready_at();
        let gave = r.cancel();
        let theirs = user.join().unwrap();
        let next = limiter
            .reserve_at(0, 1, Duration::from_secs(1))
            .unwrap()
            .ready_at();
        const T: u64 = 100_000_000;
        // The serial histories: mine booked and cancelled before theirs (both at 0);
        // mine first, theirs after it (mine cannot give back); theirs first, mine last
        // (mine gives back).
        let serial = [(0, 0, true, T), (0, T, false, 2 * T), (T, 0, true, T)];
        let seen = (mine, theirs, gave, next);
        assert!(serial.contains(&seen), "{seen:?}");
    });
}

/// Keyed reservations: the booking transition on a key's slot word (one CAS over
/// fingerprint and state). The key is held (burst 1, T = 10 ns, frozen clock); two
/// callers book its next turn at once, one uses it, the other cancels. As for the
/// direct limiter, every interleaving ends as a serial history, the next booking
/// included: turns in booking order, and a cancel gives back only the last booking.
#[test]
fn keyed_reservations_book_in_order_and_a_cancel_never_frees_a_later_turn() {
    use std::time::Duration;
    keyed_model(2, portero::Overflow::RejectNewKeys, |keyed| {
        let long = Duration::from_secs(1);
        assert!(keyed.check_at(&7u64, 100, 1).unwrap().is_allowed());
        let k = keyed.clone();
        let user = thread::spawn(move || {
            let r = k.reserve_key_at(&7u64, 100, 1, long).unwrap();
            let at = r.ready_at();
            r.commit();
            at
        });
        let r = keyed.reserve_key_at(&7u64, 100, 1, long).unwrap();
        let mine = r.ready_at();
        let gave = r.cancel();
        let theirs = user.join().unwrap();
        let next = keyed
            .reserve_key_at(&7u64, 100, 1, long)
            .unwrap()
            .ready_at();
        let serial = [
            (110, 110, true, 120),
            (110, 120, false, 130),
            (120, 110, true, 120),
        ];
        let seen = (mine, theirs, gave, next);
        assert!(serial.contains(&seen), "{seen:?}");
        assert_eq!(keyed.count_slots(), 1);
    });
}

/// A keyed sliding log (limit 2 in any `T`, one key, frozen clock) checked by `model`
/// in every interleaving of its shard lock and the relaxed loads and stores under it.
fn keyed_log_model(
    max_keys: usize,
    model: impl Fn(Arc<portero::KeyedLog<u64, ManualClock>>) + Send + Sync + 'static,
) {
    let mut builder = loom::model::Builder::new();
    builder.max_branches = 100_000;
    builder.check(move || {
        let q = Quota::from_nanos(2, T).unwrap();
        let log = portero::KeyedLog::with_hasher(q, max_keys, ManualClock::new(), ahash_seed());
        model(Arc::new(log.unwrap()));
    });
}

/// Three checks of one key at one instant, one refunded if admitted: never more than
/// the limit held at once, and the log ends holding exactly what stayed admitted.
#[test]
fn keyed_log_never_holds_more_than_its_limit_and_refunds_exactly() {
    keyed_log_model(1, |log| {
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let l = log.clone();
                thread::spawn(move || l.check_at(&7, 100, 1).unwrap().is_allowed())
            })
            .collect();
        let mine = log.acquire_at(&7, 100, 1).unwrap();
        if let Some(admission) = mine.admission {
            log.refund(&7, admission);
        }
        // What stays admitted: the two threads' units (mine was given back).
        let kept = admitted(handles) as u64;
        assert!((1..=2).contains(&kept), "{kept} kept");
        let left = log.peek_at(&7, 100, 0).unwrap().remaining();
        assert_eq!(left, 2 - kept);
    });
}

/// The reported leak: one thread checks the key at 10 while another checks it at 5
/// and gives that back. Checked second, the check at 5 is recorded at 10 (the key's
/// latest time), and its admission says so: the refund removes exactly its own entry
/// in every interleaving, and the key ends with the one unit still admitted.
#[test]
fn keyed_log_refund_races_a_later_check_and_loses_nothing() {
    keyed_log_model(1, |log| {
        let l = log.clone();
        let later = thread::spawn(move || l.check_at(&7, 10, 1).unwrap().is_allowed());
        let mine = log.acquire_at(&7, 5, 1).unwrap();
        if let Some(admission) = mine.admission {
            log.refund(&7, admission);
        }
        assert!(later.join().unwrap());
        assert_eq!(log.peek_at(&7, 10, 0).unwrap().remaining(), 1);
    });
}

/// A table of one key whose log expires at 110: a newcomer at 120 reclaims it while
/// the old key is checked at 105. The newcomer is always admitted; the old key is
/// refused either way (its own log is full for cost 2, or its slot is gone and the
/// table full), never admitted by a half-done reclaim.
#[test]
fn keyed_log_reclaim_races_a_check_of_the_reclaimed_key() {
    keyed_log_model(1, |log| {
        assert!(log.check_at(&1, 100, 1).unwrap().is_allowed());
        let l = log.clone();
        let newcomer = thread::spawn(move || l.check_at(&2, 120, 1).unwrap().is_allowed());
        let old = log.check_at(&1, 105, 2);
        assert!(newcomer.join().unwrap());
        match old {
            Ok(d) => assert!(!d.is_allowed()),
            Err(e) => assert_eq!(e, portero::KeyedError::KeyTableFull { max_keys: 1 }),
        }
        assert_eq!(log.len(), 1);
        assert_eq!(log.peek_at(&2, 120, 0).unwrap().remaining(), 1);
    });
}
