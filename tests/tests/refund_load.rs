//! Giving back under load: what refunds return when many threads check and refund one
//! key at once, what a refused stack keeps, and the race in which another refund and a
//! check put back the very word a refund compares against.
//!
//! Each figure is printed (`cargo test --test refund_load -- --nocapture`) and held
//! to its bound: at least 99 % of refunded units back from 8 threads on one key, and
//! a stack refused by its later limit keeping none of the earlier limit's units.
#![cfg(not(target_os = "wasi"))] // threads

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use portero::keyed::stack;
use portero::{
    Admission, Algorithm, Clock, FixedWindow, Gcra, KeyedLimiter, ManualClock, Quota, RateLimiter,
    TokenBucket,
};

const THREADS: u64 = 8;
const PAIRS: u64 = 40_000;
const BURST: u64 = 100_000;

fn big_quota() -> Quota {
    Quota::per_second(BURST).unwrap().with_burst(BURST).unwrap()
}

/// 8 threads, each `PAIRS` times: `pair()` checks one unit and gives it back,
/// saying whether it was admitted. Returns the units admitted.
fn eight_threads(pair: impl Fn() -> bool + Send + Sync + 'static) -> u64 {
    let pair = Arc::new(pair);
    (0..THREADS)
        .map(|_| {
            let pair = pair.clone();
            std::thread::spawn(move || (0..PAIRS).filter(|_| pair()).count() as u64)
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|t| t.join().unwrap())
        .sum()
}

/// [`eight_threads`] on one key of a keyed table: (units admitted, units the key is
/// short of its burst afterwards) on a frozen clock, so every unit short is one a
/// refund kept.
fn check_and_refund_keyed<A: Algorithm + Copy + Send + Sync + 'static>(a: A) -> (u64, u64) {
    let clock = Arc::new(ManualClock::starting_at(1_000_000_000));
    let limiter = Arc::new(KeyedLimiter::with_clock(a, 1_000, clock.clone()));
    let l = limiter.clone();
    let admitted = eight_threads(move || {
        let taken = l.acquire_at(&7u64, l.clock().now(), 1).unwrap();
        taken.admission.map(|x| l.refund(&7u64, x)).is_some()
    });
    let left = limiter.peek_at(&7u64, clock.now(), 0).unwrap().remaining();
    (admitted, a.capacity() - left)
}

/// The same on a direct limiter.
fn check_and_refund_direct<A: Algorithm + Send + Sync + 'static>(a: A) -> (u64, u64) {
    let clock = Arc::new(ManualClock::starting_at(1_000_000_000));
    let limiter = Arc::new(RateLimiter::with_algorithm_and_clock(a, clock.clone()));
    let l = limiter.clone();
    let admitted = eight_threads(move || {
        let taken = l.acquire_at(l.clock().now(), 1).unwrap();
        taken.admission.map(|x| l.refund(x)).is_some()
    });
    let left = limiter.peek_at(clock.now(), 0).unwrap().remaining();
    (admitted, limiter.algorithm().capacity() - left)
}

fn hold_to_99_percent(name: &str, (admitted, kept): (u64, u64)) {
    let back = 100.0 * (admitted - kept.min(admitted)) as f64 / admitted.max(1) as f64;
    println!("{name}: {admitted} admitted and given back from {THREADS} threads, {kept} kept ({back:.3} % back)");
    // Every pair admits while the refunds come back: a limit drained by kept units
    // would start refusing the pairs.
    assert!(
        admitted * 100 >= THREADS * PAIRS * 99,
        "{name}: only {admitted} of {} pairs admitted",
        THREADS * PAIRS
    );
    assert!(
        kept * 100 <= admitted,
        "{name}: {kept} of {admitted} refunded units kept"
    );
}

#[test]
fn eight_threads_checking_and_refunding_one_key_get_99_percent_back() {
    let q = big_quota();
    hold_to_99_percent("keyed gcra", check_and_refund_keyed(Gcra::new(q)));
    hold_to_99_percent(
        "keyed token bucket",
        check_and_refund_keyed(TokenBucket::new(q)),
    );
    hold_to_99_percent(
        "keyed fixed window",
        check_and_refund_keyed(FixedWindow::new(q).unwrap()),
    );
    hold_to_99_percent("direct gcra", check_and_refund_direct(Gcra::new(q)));
    hold_to_99_percent(
        "direct token bucket",
        check_and_refund_direct(TokenBucket::new(q)),
    );
}

/// A limit that answers slowly, as a remote one does, and admits `left` more in all.
struct Slow {
    left: std::sync::atomic::AtomicU64,
}

impl stack::Limit for Slow {
    fn acquire_at(&self, now: u64, cost: u64) -> Result<portero::Acquired, portero::KeyedError> {
        std::thread::sleep(Duration::from_micros(200));
        let took = self
            .left
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |l| l.checked_sub(cost))
            .is_ok();
        let left = self.left.load(Ordering::Acquire);
        Ok(portero::Acquired {
            decision: if took {
                portero::Decision::admitted(5, left, 0)
            } else {
                portero::Decision::rejected(5, left, 1_000_000_000, 0)
            },
            admission: took.then(|| Admission::new(now, cost)),
        })
    }
    fn refund(&self, admission: Admission) {
        self.left.fetch_add(admission.cost(), Ordering::AcqRel);
    }
}

/// A per-user limit (burst 300) stacked before a later limit that admits 5 in all —
/// in memory on a frozen clock, or slow like a remote one: 8 threads send 1,600
/// stacked requests of one user. 5 get through; the rest are refused by the later
/// limit, and the user's limit must stand as if only the 5 had come — a refused
/// request takes nothing it has to give back.
#[test]
fn a_stack_refused_by_its_later_limit_keeps_none_of_the_earlier_units() {
    for (name, slow) in [
        ("gcra", false),
        ("token-bucket", false),
        ("gcra", true),
        ("token-bucket", true),
    ] {
        let clock = Arc::new(ManualClock::starting_at(1_000_000_000));
        let per_user = Quota::per_second(300).unwrap();
        let algorithm =
            portero::AnyAlgorithm::new(portero::AlgorithmName::parse(name).unwrap(), per_user);
        let user: Arc<KeyedLimiter<u64, _, _>> = Arc::new(KeyedLimiter::with_clock(
            algorithm.unwrap(),
            64,
            clock.clone(),
        ));
        let global =
            Arc::new(RateLimiter::gcra(Quota::per_hour(5).unwrap()).with_clock(clock.clone()));
        let remote = Arc::new(Slow { left: 5.into() });
        let requests = if slow { 200 } else { 1_600 };
        let through: u64 = (0..THREADS)
            .map(|_| {
                let (user, global, remote) = (user.clone(), global.clone(), remote.clone());
                std::thread::spawn(move || {
                    let mut through = 0;
                    for _ in 0..requests / THREADS {
                        let now = user.clock().now();
                        let later: &dyn stack::Limit = if slow { &*remote } else { &*global };
                        let limits: [&dyn stack::Limit; 2] = [&user.limit_for(&1), later];
                        if stack::check_all(&limits, now, 1)
                            .unwrap()
                            .rejected_by
                            .is_none()
                        {
                            through += 1;
                        }
                    }
                    through
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().unwrap())
            .sum();
        let left = user.peek_at(&1, clock.now(), 0).unwrap().remaining();
        let kept = 300 - left - through;
        let later = if slow { "slow" } else { "in memory" };
        println!("stack ({name} per user, a later limit of 5 {later}): {through} through, {kept} units kept by {} refused requests", requests - through);
        assert_eq!(through, 5);
        assert_eq!(
            kept, 0,
            "{name}, {later}: refused requests kept {kept} units"
        );
    }
}

/// A clock that, once armed, runs a hook the next time it is read: inside a refund,
/// between its load of the word and its compare-and-swap.
#[derive(Default)]
struct HookedClock {
    at: ManualClock,
    hook: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl Clock for HookedClock {
    fn now(&self) -> u64 {
        let hook = self.hook.lock().unwrap().take();
        if let Some(hook) = hook {
            hook();
        }
        self.at.now()
    }
}

type Hook = Arc<Mutex<Option<Box<dyn FnOnce() + Send>>>>;

/// GCRA that, once armed, runs a hook inside the next refund it decides: after the
/// limiter read what the refund relies on, before its compare-and-swap.
struct HookedGcra(Gcra, Hook);

impl Algorithm for HookedGcra {
    fn capacity(&self) -> u64 {
        self.0.capacity()
    }
    fn decide(
        &self,
        state: u64,
        now: u64,
        cost: u64,
    ) -> Result<portero::Transition, portero::CheckError> {
        self.0.decide(state, now, cost)
    }
    fn refund(&self, state: u64, admission: &Admission, now: u64) -> Option<u64> {
        let hook = self.1.lock().unwrap().take();
        if let Some(hook) = hook {
            hook();
        }
        self.0.refund(state, admission, now)
    }
}

/// Runs `interfere` on another thread and waits for it, up to half a second: while a
/// refund holds its turn, another refund waits for it, and the refund goes on alone.
fn meanwhile(interfere: impl FnOnce() + Send + 'static) -> Box<dyn FnOnce() + Send> {
    Box::new(move || {
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        let handle = std::thread::spawn(move || {
            interfere();
            flag.store(true, Ordering::Release);
        });
        let start = std::time::Instant::now();
        while !done.load(Ordering::Acquire) && start.elapsed() < Duration::from_millis(500) {
            std::thread::sleep(Duration::from_millis(1));
        }
        // Joined by whoever waits for the refund to finish (see `replay`).
        *PENDING.lock().unwrap() = Some(handle);
    })
}

static PENDING: Mutex<Option<std::thread::JoinHandle<()>>> = Mutex::new(None);

const MS: u64 = 1_000_000;

/// Quota 10/s, burst 4: Z and X at 0. While X's refund at 100 ms is between its load
/// and its compare-and-swap, Z is given back (at 0) and a check at 100 ms writes X's
/// word again. Whatever the order, the limiter must then refuse 4 units at 100 ms, as
/// its twin that saw only the check does (it admits 3).
#[test]
fn the_refund_race_replayed_on_the_public_api_invents_nothing() {
    let q = Quota::per_second(10).unwrap().with_burst(4).unwrap();

    let hook: Hook = Arc::default();
    let direct = Arc::new(RateLimiter::with_algorithm_and_clock(
        HookedGcra(Gcra::new(q), hook.clone()),
        ManualClock::new(),
    ));
    let z = direct.acquire_at(0, 1).unwrap().admission.unwrap();
    let x = direct.acquire_at(0, 1).unwrap().admission.unwrap();
    let l = direct.clone();
    *hook.lock().unwrap() = Some(meanwhile(move || {
        l.refund_at(z, 0);
        assert!(l.check_at(100 * MS, 1).unwrap().is_allowed());
    }));
    replay(|| {
        direct.refund_at(x, 100 * MS);
    });
    assert!(direct.peek_at(100 * MS, 3).unwrap().is_allowed());
    assert!(
        !direct.peek_at(100 * MS, 4).unwrap().is_allowed(),
        "a limiter admits 4 units at 100 ms where its twin refuses the 4th"
    );

    let clock = Arc::new(HookedClock::default());
    clock.at.set(100 * MS);
    let keyed = Arc::new(KeyedLimiter::with_clock(Gcra::new(q), 16, clock.clone()));
    let z: Admission = keyed.acquire_at(&1u8, 0, 1).unwrap().admission.unwrap();
    let x = keyed.acquire_at(&1u8, 0, 1).unwrap().admission.unwrap();
    let k = keyed.clone();
    *clock.hook.lock().unwrap() = Some(meanwhile(move || {
        k.refund_fingerprint_at(k.fingerprint_of(&1), z, 0);
        assert!(k.check_at(&1, 100 * MS, 1).unwrap().is_allowed());
    }));
    replay(|| keyed.refund(&1u8, x));
    assert!(keyed.peek_at(&1, 100 * MS, 3).unwrap().is_allowed());
    assert!(
        !keyed.peek_at(&1, 100 * MS, 4).unwrap().is_allowed(),
        "a keyed limiter admits 4 units at 100 ms where its twin refuses the 4th"
    );
}

/// Runs `refund`, then waits for what it let run meanwhile.
fn replay(refund: impl FnOnce()) {
    refund();
    if let Some(handle) = PENDING.lock().unwrap().take() {
        handle.join().unwrap();
    }
}

/// Found by an outside review of the ledger: what moves a word back without a refund
/// must tell the ledger, or an admission from before gives back units that are no
/// longer its own.
mod word_moved_without_a_refund {
    use super::*;
    use portero::{Fingerprint, Overflow};

    const S: u64 = 1_000_000_000;

    /// A one-key table that evicts: x taken from k, j evicts k, k returns as new and
    /// is checked; x given back must not free k's new unit.
    #[test]
    fn an_evicted_key_that_returns_gets_nothing_from_an_admission_before() {
        for later in [0, S / 2] {
            let l = KeyedLimiter::with_clock(
                Gcra::new(Quota::per_second(1).unwrap()),
                1,
                ManualClock::new(),
            )
            .overflow(Overflow::EvictSoonestFull);
            let x = l.acquire_at(&"k", 0, 1).unwrap().admission.unwrap();
            assert!(l.check_at(&"j", 0, 1).unwrap().is_allowed()); // evicts k
            assert!(l.check_at(&"k", later, 1).unwrap().is_allowed()); // evicts j
            let k: Fingerprint = l.fingerprint_of(&"k");
            l.refund_fingerprint_at(k, x, later);
            // The twin (j, then k at `later`): k is full again one second after
            // `later`, so it refuses at `later` (and at 1 s, after 0.5 s).
            let probe = if later == 0 { 0 } else { S };
            assert!(
                !l.peek_at(&"k", probe, 1).unwrap().is_allowed(),
                "k admitted at {probe} ns after its new unit at {later} ns"
            );
        }
    }

    /// `set_tokens_at` pulls the word back: an admission from before gives nothing.
    #[test]
    fn a_top_up_is_not_given_back_again() {
        let q = Quota::per_second(1).unwrap().with_burst(3).unwrap();
        let l = RateLimiter::with_algorithm_and_clock(TokenBucket::new(q), ManualClock::new());
        l.set_tokens_at(1, 0).unwrap();
        let x = l.acquire_at(0, 1).unwrap().admission.unwrap();
        l.set_tokens_at(3, 0).unwrap();
        assert!(l.check_at(0, 1).unwrap().is_allowed());
        l.refund_at(x, 0);
        // The twin (topped up to 3, one taken): 2 left.
        assert!(l.peek_at(0, 2).unwrap().is_allowed());
        assert!(
            !l.peek_at(0, 3).unwrap().is_allowed(),
            "3 tokens where the twin has 2"
        );
    }

    /// A new configuration: an admission counted under the old one gives nothing back
    /// under the new.
    #[test]
    fn a_new_quota_is_not_given_back_by_an_admission_under_the_old() {
        let q = Quota::per_second(1).unwrap().with_burst(3).unwrap();
        let l = KeyedLimiter::with_clock(Gcra::new(q), 16, ManualClock::new());
        let _y = l.acquire_at(&1, 0, 1).unwrap();
        let x = l.acquire_at(&1, 0, 1).unwrap().admission.unwrap();
        let _z = l.acquire_at(&1, 0, 1).unwrap();
        let slower = Quota::new(1, Duration::from_secs(2))
            .unwrap()
            .with_burst(3)
            .unwrap();
        l.set_algorithm(Gcra::new(slower));
        let before = l.peek_at(&1, 0, 0).unwrap().remaining();
        l.refund(&1, x);
        assert_eq!(
            l.peek_at(&1, 0, 0).unwrap().remaining(),
            before,
            "x gave back under the new quota"
        );
    }
}

/// Settling under load: 8 threads on one key of a frozen clock, each admitted on an
/// estimate and settled at once at its real cost. Below the estimate (4, used 1), the
/// key must owe at least what was used (never looser than the twin charged the real
/// cost) and at least 99 % of the unused units must come back; above it (1, used 3),
/// every unit above the estimate is charged — none lost. GCRA and the token bucket,
/// direct and keyed.
#[test]
fn eight_threads_settling_one_key_owe_what_they_used() {
    const EACH: u64 = 3_000;
    fn settled<A: Algorithm + Copy + Send + Sync + 'static>(a: A, name: &str, keyed: bool) {
        for (estimate, real) in [(4u64, 1u64), (1, 3)] {
            let clock = Arc::new(ManualClock::starting_at(1_000_000_000));
            let table = Arc::new(KeyedLimiter::with_clock(a, 1_000, clock.clone()));
            let direct = Arc::new(RateLimiter::with_algorithm_and_clock(a, clock.clone()));
            let (t, d) = (table.clone(), direct.clone());
            let admitted: Vec<u64> = (0..THREADS)
                .map(|_| {
                    let (t, d) = (t.clone(), d.clone());
                    std::thread::spawn(move || {
                        let mut n = 0;
                        for _ in 0..EACH {
                            if keyed {
                                let now = t.clock().now();
                                if let Some(x) =
                                    t.acquire_at(&7u64, now, estimate).unwrap().admission
                                {
                                    t.settle(&7u64, x, real).unwrap();
                                    n += 1;
                                }
                            } else if let Some(x) =
                                d.acquire_at(d.clock().now(), estimate).unwrap().admission
                            {
                                d.settle(x, real).unwrap();
                                n += 1;
                            }
                        }
                        n
                    })
                })
                .collect::<Vec<_>>()
                .into_iter()
                .map(|h| h.join().unwrap())
                .collect();
            let admitted: u64 = admitted.iter().sum();
            assert_eq!(admitted, THREADS * EACH, "{name}: the burst holds them all");
            let left = if keyed {
                table.peek_at(&7u64, clock.now(), 0).unwrap().remaining()
            } else {
                direct.peek_at(clock.now(), 0).unwrap().remaining()
            };
            let owed = a.capacity() - left;
            let used = admitted * real;
            println!(
                "{name} ({}), estimate {estimate}, used {real}: owes {owed} of {used} used ({} kept above the real cost)",
                if keyed { "keyed" } else { "direct" },
                owed - used.min(owed)
            );
            assert!(
                owed >= used,
                "{name}: owes {owed}, less than the {used} used"
            );
            if real < estimate {
                let unused = admitted * (estimate - real);
                assert!(
                    100 * (owed - used) <= unused,
                    "{name}: kept {} of {unused} unused",
                    owed - used
                );
            } else {
                assert_eq!(owed, used, "{name}: units above the estimate lost");
            }
        }
    }
    let q = big_quota();
    for keyed in [false, true] {
        settled(Gcra::new(q), "gcra", keyed);
        settled(TokenBucket::new(q), "token bucket", keyed);
    }
}
