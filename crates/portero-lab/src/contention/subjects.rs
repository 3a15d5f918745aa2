//! What the contention study measures: each subject a shared limiter (or table) and
//! the quota its audit holds it to.

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portero::{Gcra, KeyedLimiter, Quota, RateLimiter, Striped};
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Zipf};

pub use super::checker::{gcra_allowance, Checker};

/// A subject of the study.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subject {
    /// One compare-and-swap on a shared cache line: the hardware floor.
    FloorCas,
    /// portero's direct GCRA on a quota that admits everything.
    GcraAdmit,
    /// portero's direct GCRA on 1,000 per second (burst 100): nearly every check
    /// refused (the audit's tightest test).
    GcraReject,
    /// portero's keyed table, every thread on one hot key.
    KeyedHot,
    /// portero's keyed table, 10,000 keys drawn uniformly.
    Keyed10kUniform,
    /// portero's keyed table, 10,000 keys drawn by Zipf(1) (a few hot keys).
    Keyed10kZipf,
    /// portero's keyed table, 1,000,000 keys drawn uniformly.
    Keyed1mUniform,
    /// portero's keyed table, 1,000,000 keys drawn by Zipf(1).
    Keyed1mZipf,
    /// portero's `Striped`, one stripe per thread.
    Striped,
    /// governor 0.10's direct limiter, admitting everything.
    GovernorDirect,
    /// governor 0.10's keyed limiter (its default DashMap store), 10,000 keys uniform.
    Governor10kUniform,
    /// A token bucket behind a `std::sync::Mutex`: what a user writes first.
    Mutex,
    /// Cloudflare's `pingora-limits` `Rate` (an estimator) as a limit, 10,000 keys
    /// uniform.
    Pingora10kUniform,
    /// Kuadrant's `limitador` in memory (a service's limiter), 10,000 keys uniform.
    Limitador10kUniform,
}

impl Subject {
    /// Every subject, in table order.
    pub const ALL: [Subject; 14] = [
        Subject::FloorCas,
        Subject::GcraAdmit,
        Subject::GcraReject,
        Subject::KeyedHot,
        Subject::Keyed10kUniform,
        Subject::Keyed10kZipf,
        Subject::Keyed1mUniform,
        Subject::Keyed1mZipf,
        Subject::Striped,
        Subject::GovernorDirect,
        Subject::Governor10kUniform,
        Subject::Mutex,
        Subject::Pingora10kUniform,
        Subject::Limitador10kUniform,
    ];

    /// Its name in the tables, the JSON and the chart.
    pub fn name(self) -> &'static str {
        match self {
            Self::FloorCas => "floor: one CAS",
            Self::GcraAdmit => "portero gcra (admit)",
            Self::GcraReject => "portero gcra (reject)",
            Self::KeyedHot => "portero keyed, 1 hot key",
            Self::Keyed10kUniform => "portero keyed 10k uniform",
            Self::Keyed10kZipf => "portero keyed 10k zipf",
            Self::Keyed1mUniform => "portero keyed 1M uniform",
            Self::Keyed1mZipf => "portero keyed 1M zipf",
            Self::Striped => "portero striped",
            Self::GovernorDirect => "governor direct",
            Self::Governor10kUniform => "governor keyed 10k uniform",
            Self::Mutex => "mutex token bucket",
            Self::Pingora10kUniform => "pingora-limits 10k uniform (estimator)",
            Self::Limitador10kUniform => "limitador 10k uniform (in memory)",
        }
    }

    /// The subject named `name` (as [`name`](Self::name) spells it, or its short
    /// form: `floor`, `gcra-admit`, `gcra-reject`, `keyed-hot`, `keyed-10k-uniform`,
    /// `keyed-10k-zipf`, `keyed-1m-uniform`, `keyed-1m-zipf`, `striped`,
    /// `governor-direct`, `governor-10k-uniform`, `mutex`, `pingora-10k-uniform`,
    /// `limitador-10k-uniform`).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|s| s.name() == name || s.short() == name)
    }

    /// Whether it claims to admit exactly its quota: every subject but the estimator
    /// (`pingora-limits`, whose concurrent increments of one key can each read the
    /// same count in its sketch, so two checks can both be let through at the
    /// limit). An exact subject over its quota fails the study; the estimator's
    /// audit is reported, never recommended.
    pub fn exact(self) -> bool {
        self != Self::Pingora10kUniform
    }

    /// The short name (the `--subjects` spelling).
    pub fn short(self) -> &'static str {
        match self {
            Self::FloorCas => "floor",
            Self::GcraAdmit => "gcra-admit",
            Self::GcraReject => "gcra-reject",
            Self::KeyedHot => "keyed-hot",
            Self::Keyed10kUniform => "keyed-10k-uniform",
            Self::Keyed10kZipf => "keyed-10k-zipf",
            Self::Keyed1mUniform => "keyed-1m-uniform",
            Self::Keyed1mZipf => "keyed-1m-zipf",
            Self::Striped => "striped",
            Self::GovernorDirect => "governor-direct",
            Self::Governor10kUniform => "governor-10k-uniform",
            Self::Mutex => "mutex",
            Self::Pingora10kUniform => "pingora-10k-uniform",
            Self::Limitador10kUniform => "limitador-10k-uniform",
        }
    }
}

/// The quota a subject must enforce in an audit run of `duration`: each key may
/// admit about a third of what `reach` (checks per second, every thread together,
/// measured counting as the audit run does) would send it in that time (`h`, spread
/// evenly over `keys`), a sixth as burst and about a sixth earned at the rate (rounded
/// down onto the 1-2-5 series) — so a key of average traffic sees most of its checks
/// refused, and a hot one more. At least burst 1 and 1 per second (a key that
/// gets fewer than two checks in the run cannot be refused: with a million keys,
/// only runs long enough for the keys to repeat test them), at most 1,000,000 per
/// second (an interval of 1 µs or more, far above any clock's disagreement), and a
/// burst of at least `stripes` for `Striped`.
pub fn enforcing_quota(reach: f64, keys: usize, stripes: usize, duration: Duration) -> Quota {
    let hits = reach * duration.as_secs_f64() / keys.max(1) as f64;
    let burst = ((hits / 6.0) as u64).max(1).max(stripes as u64);
    let wanted = (hits / 6.0 / duration.as_secs_f64()).clamp(1.0, 1_000_000.0) as u64;
    // On the 1-2-5 series (1, 2, 5, 10, 20, 50…), each of which divides a second into
    // whole nanoseconds: every limiter here then has the very same interval (governor
    // and portero round a fraction differently, which at 1.46 µs is 16 units in 30 ms).
    let rate = [1, 2, 5]
        .iter()
        .flat_map(|&m| (0..7).map(move |k| m * 10u64.pow(k)))
        .filter(|&r| r <= wanted)
        .max()
        .unwrap_or(1);
    Quota::per_second(rate)
        .and_then(|q| q.with_burst(burst))
        .expect("a valid quota")
}

/// A quota that never runs out at this speed: 10^9 per second, burst 2^30.
pub fn open_quota() -> Quota {
    Quota::per_second(1_000_000_000)
        .and_then(|q| q.with_burst(1 << 30))
        .expect("a valid quota")
}

/// 1,000 per second, burst 100: refuses nearly every check at this speed.
pub fn tight_quota() -> Quota {
    Quota::per_second(1_000)
        .and_then(|q| q.with_burst(100))
        .expect("a valid quota")
}

/// Each thread's keys, `1 << 16` of them, reproducibly drawn from `0..keys`.
pub fn key_streams(keys: u64, zipf: bool, threads: usize) -> Vec<Vec<u64>> {
    (0..threads)
        .map(|t| {
            let mut rng = rand::rngs::StdRng::seed_from_u64(11 + t as u64);
            if zipf {
                let z = Zipf::new(keys as f64, 1.0).expect("valid Zipf parameters");
                (0..1 << 16)
                    .map(|_| z.sample(&mut rng) as u64 - 1)
                    .collect()
            } else {
                (0..1 << 16).map(|_| rng.random_range(0..keys)).collect()
            }
        })
        .collect()
}

/// One CAS on a shared word.
pub struct Floor(AtomicU64);

impl Checker for Floor {
    #[inline]
    fn check(&self, _: usize, _: usize) -> bool {
        let v = self.0.load(Ordering::Relaxed);
        self.0
            .compare_exchange(v, v + 1, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    }
    fn quota(&self) -> Option<Quota> {
        None
    }
}

/// portero's direct GCRA.
pub struct Direct(pub RateLimiter<Gcra>, pub Quota);

/// portero's keyed table, each thread over its own key stream.
pub struct Keyed {
    /// The table.
    pub table: KeyedLimiter<u64, Gcra>,
    /// Each thread's keys.
    pub keys: Vec<Vec<u64>>,
    /// The keys in play.
    pub distinct: u64,
    /// The per-key quota.
    pub quota: Quota,
}

/// portero's `Striped`.
pub struct StripedLimit(pub Striped, pub Quota);

/// governor's quota for `quota` (the same rate and burst).
fn governor_quota(quota: &Quota) -> governor::Quota {
    let per_second =
        NonZeroU32::new(u32::try_from(quota.limit()).unwrap_or(u32::MAX)).expect("a rate");
    let burst = NonZeroU32::new(u32::try_from(quota.burst()).unwrap_or(u32::MAX)).expect("a burst");
    governor::Quota::per_second(per_second).allow_burst(burst)
}

/// governor's direct limiter.
pub struct GovernorDirect(pub governor::DefaultDirectRateLimiter, pub Quota);

impl GovernorDirect {
    /// Over `quota` (per second).
    pub fn new(quota: Quota) -> Self {
        Self(governor::RateLimiter::direct(governor_quota(&quota)), quota)
    }
}

/// governor's keyed limiter.
pub struct GovernorKeyed {
    limiter: governor::DefaultKeyedRateLimiter<u64>,
    keys: Vec<Vec<u64>>,
    distinct: u64,
    quota: Quota,
}

impl GovernorKeyed {
    /// Over `quota` per key, each thread over its own key stream.
    pub fn new(quota: Quota, keys: Vec<Vec<u64>>, distinct: u64) -> Self {
        let limiter = governor::RateLimiter::keyed(governor_quota(&quota));
        Self {
            limiter,
            keys,
            distinct,
            quota,
        }
    }
}

// One limit for every thread: the subject in `.0`, its quota in `.1`.
macro_rules! one_limit {
    ($($subject:ty: $l:ident => $admits:expr;)*) => {$(
        impl Checker for $subject {
            #[inline]
            fn check(&self, _: usize, _: usize) -> bool {
                let $l = &self.0;
                $admits
            }
            fn quota(&self) -> Option<Quota> {
                Some(self.1)
            }
        }
    )*};
}

one_limit! {
    Direct: l => l.check().is_allowed();
    StripedLimit: l => l.check().is_allowed();
    GovernorDirect: l => l.check().is_ok();
}

// A limit per key: each thread checks its own stream of keys, `distinct` keys in
// play, each with `quota`.
super::checker::keyed_checker! {
    Keyed: |s, k| s.table.check(&k).is_allowed();
    GovernorKeyed: |s, k| s.limiter.check_key(&k).is_ok();
}

/// The token bucket a user writes first: tokens and a timestamp behind a mutex.
pub struct MutexBucket {
    state: Mutex<(f64, Instant)>,
    quota: Quota,
}

impl MutexBucket {
    /// Full, for `quota`.
    pub fn new(quota: Quota) -> Self {
        Self {
            state: Mutex::new((quota.burst() as f64, Instant::now())),
            quota,
        }
    }
}

impl Checker for MutexBucket {
    #[inline]
    fn check(&self, _: usize, _: usize) -> bool {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let per_ns = 1.0 / self.quota.interval_nanos() as f64;
        let refill = now.duration_since(s.1).as_nanos() as f64 * per_ns;
        s.0 = (s.0 + refill).min(self.quota.burst() as f64);
        s.1 = now;
        if s.0 >= 1.0 {
            s.0 -= 1.0;
            true
        } else {
            false
        }
    }
    fn quota(&self) -> Option<Quota> {
        Some(self.quota)
    }
}

/// How many keys `subject`'s checks are spread over.
pub fn distinct_keys(subject: Subject) -> usize {
    match subject {
        Subject::Keyed10kUniform
        | Subject::Keyed10kZipf
        | Subject::Governor10kUniform
        | Subject::Pingora10kUniform
        | Subject::Limitador10kUniform => 10_000,
        Subject::Keyed1mUniform | Subject::Keyed1mZipf => 1_000_000,
        _ => 1,
    }
}

/// A fresh `subject` for `threads` threads, behind one type per kind of limit: on
/// its speed quota (`None`: one that admits everything, the tight one for
/// `gcra-reject`), or on `quota` per key (the audit run's).
pub fn fresh(subject: Subject, threads: usize, quota: Option<Quota>) -> Arc<dyn AnyChecker> {
    let speed = if subject == Subject::GcraReject {
        tight_quota()
    } else {
        open_quota()
    };
    let q = quota.unwrap_or(speed);
    let keyed = |keys: u64, zipf: bool| Keyed {
        table: KeyedLimiter::new(Gcra::new(q), keys as usize),
        keys: key_streams(keys, zipf, threads),
        distinct: keys,
        quota: q,
    };
    match subject {
        Subject::FloorCas => Arc::new(Floor(AtomicU64::new(0))),
        Subject::GcraAdmit | Subject::GcraReject => Arc::new(Direct(RateLimiter::gcra(q), q)),
        Subject::KeyedHot => Arc::new(keyed(1, false)),
        Subject::Keyed10kUniform => Arc::new(keyed(10_000, false)),
        Subject::Keyed10kZipf => Arc::new(keyed(10_000, true)),
        Subject::Keyed1mUniform => Arc::new(keyed(1_000_000, false)),
        Subject::Keyed1mZipf => Arc::new(keyed(1_000_000, true)),
        Subject::Striped => Arc::new(StripedLimit(
            Striped::new(q, stripes(threads)).expect("a valid quota"),
            q,
        )),
        Subject::GovernorDirect => Arc::new(GovernorDirect::new(q)),
        Subject::Governor10kUniform => Arc::new(GovernorKeyed::new(
            q,
            key_streams(10_000, false, threads),
            10_000,
        )),
        Subject::Mutex => Arc::new(MutexBucket::new(q)),
        Subject::Pingora10kUniform => Arc::new(super::peers::PingoraKeyed::new(
            q,
            key_streams(10_000, false, threads),
            10_000,
        )),
        Subject::Limitador10kUniform => Arc::new(super::peers::LimitadorKeyed::new(
            q,
            key_streams(10_000, false, threads),
            10_000,
        )),
    }
}

/// The stripes `Striped` gets on `threads` threads: one each, at least two.
pub fn stripes(threads: usize) -> usize {
    threads.max(2)
}

/// A [`Checker`] behind one object type (each subject's loop is still its own
/// monomorphized code: see `threads::run_checks`).
pub trait AnyChecker: Send + Sync {
    /// `count` checks starting at `i`, on `thread`: how many were admitted.
    fn checks(&self, i: usize, count: usize, thread: usize) -> u64;
    /// One check (for the latency samples).
    fn one(&self, i: usize, thread: usize) -> bool;
    /// `count` checks starting at `i`, on `thread`, each admitted one counted in
    /// `admitted[key]` (the audit run): how many were admitted.
    fn counted(&self, i: usize, count: usize, thread: usize, admitted: &[AtomicU64]) -> u64;
    /// [`Checker::quota`].
    fn claimed(&self) -> Option<Quota>;
    /// [`Checker::keys`].
    fn key_count(&self) -> usize;
    /// [`Checker::allowance`].
    fn allowed(&self, span: Duration) -> Option<u64>;
}

impl<C: Checker> AnyChecker for C {
    #[inline(never)]
    fn checks(&self, i: usize, count: usize, thread: usize) -> u64 {
        (i..i + count).filter(|&j| self.check(j, thread)).count() as u64
    }
    #[inline]
    fn one(&self, i: usize, thread: usize) -> bool {
        self.check(i, thread)
    }
    #[inline(never)]
    fn counted(&self, i: usize, count: usize, thread: usize, admitted: &[AtomicU64]) -> u64 {
        let mut took = 0;
        for j in i..i + count {
            if self.check(j, thread) {
                admitted[self.key(j, thread)].fetch_add(1, Ordering::Relaxed);
                took += 1;
            }
        }
        took
    }
    fn claimed(&self) -> Option<Quota> {
        self.quota()
    }
    fn key_count(&self) -> usize {
        self.keys()
    }
    fn allowed(&self, span: Duration) -> Option<u64> {
        self.allowance(span)
    }
}
