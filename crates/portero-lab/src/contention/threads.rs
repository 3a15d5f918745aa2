//! Running a subject on T threads: pinned to cores where the OS allows it, started
//! together at a barrier, checking in batches until their time is up; then the
//! latency pass, each thread timing single checks.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::study::{Audit, Study};
use super::subjects::Subject;
use super::subjects::{fresh, AnyChecker};

/// Checks between two looks at the clock.
const BATCH: usize = 1_024;

/// Whether measuring threads are pinned to cores: `core_affinity` lists them and a
/// thread can be moved to one (not on every OS or in every container).
pub fn pinning_works() -> bool {
    core_affinity::get_core_ids().is_some_and(|ids| !ids.is_empty())
}

/// `threads` threads running `work(thread)`, each pinned to a core of its own (round
/// robin over the cores this process may use) where the OS allows it.
fn spawn_pinned<T: Send + 'static>(
    threads: usize,
    work: impl Fn(usize) -> T + Clone + Send + 'static,
) -> Vec<std::thread::JoinHandle<T>> {
    let cores = core_affinity::get_core_ids().unwrap_or_default();
    (0..threads)
        .map(|t| {
            let work = work.clone();
            let core = (!cores.is_empty()).then(|| cores[t % cores.len()]);
            std::thread::spawn(move || {
                if let Some(core) = core {
                    core_affinity::set_for_current(core);
                }
                work(t)
            })
        })
        .collect()
}

/// What measuring one (subject, threads) gave.
pub(crate) struct Measured {
    pub(crate) mops: Vec<f64>,
    pub(crate) latency_ns: [f64; 3],
    pub(crate) audit: Audit,
}

/// A warm-up run, then `study.runs` timed runs, then the latency pass, each on a
/// fresh subject (so every run's audit starts from a full quota).
pub(crate) fn measure(subject: Subject, threads: usize, study: &Study) -> Measured {
    let _warm = timed(&fresh(subject, threads), threads, study.duration / 4);
    let mut mops = Vec::new();
    let mut worst: Option<Audit> = None;
    for _ in 0..study.runs.max(1) {
        let (audit, elapsed) = audited(&fresh(subject, threads), threads, study.duration);
        mops.push(audit.checks as f64 / elapsed.as_secs_f64() / 1e6);
        // Keep the run that came closest to (or past) its allowance.
        let ratio = |a: &Audit| {
            a.allowed
                .map_or(0.0, |al| a.admitted as f64 / al.max(1) as f64)
        };
        if worst.as_ref().is_none_or(|w| ratio(&audit) >= ratio(w)) {
            worst = Some(audit);
        }
    }
    mops.sort_by(f64::total_cmp);
    Measured {
        mops,
        latency_ns: latency(&fresh(subject, threads), threads, study.samples),
        audit: worst.expect("at least one run"),
    }
}

/// One timed run of `limit` (fresh: full) on `threads` threads for `duration`: its
/// audit, and the span the checks took.
pub fn audited(
    limit: &Arc<dyn AnyChecker>,
    threads: usize,
    duration: Duration,
) -> (Audit, Duration) {
    let (checks, admitted, elapsed) = timed(limit, threads, duration);
    let audit = Audit {
        checks,
        admitted,
        allowed: limit.allowance(elapsed),
    };
    (audit, elapsed)
}

/// Runs `limit` on `threads` pinned threads for `duration`: checks made, admitted, and
/// the span from the first thread's first check to the last thread's last (each
/// thread reads the clock around its own loop: a span timed by the main thread can
/// miss checks made before it read the clock, and the audit must cover them all).
fn timed(limit: &Arc<dyn AnyChecker>, threads: usize, duration: Duration) -> (u64, u64, Duration) {
    let barrier = Arc::new(Barrier::new(threads + 1));
    let stop = Arc::new(AtomicBool::new(false));
    let handles = spawn_pinned(threads, {
        let (limit, barrier, stop) = (limit.clone(), barrier.clone(), stop.clone());
        move |t| {
            barrier.wait();
            let first = Instant::now();
            let (mut i, mut took) = (0, 0);
            while !stop.load(Ordering::Relaxed) {
                took += limit.checks(i, BATCH, t);
                i += BATCH;
            }
            (i as u64, took, first, Instant::now())
        }
    });
    barrier.wait();
    std::thread::sleep(duration);
    stop.store(true, Ordering::Relaxed);
    let ends: Vec<_> = handles
        .into_iter()
        .map(|h| h.join().expect("a measuring thread panicked"))
        .collect();
    let first = ends.iter().map(|e| e.2).min().expect("a thread");
    let last = ends.iter().map(|e| e.3).max().expect("a thread");
    let checks = ends.iter().map(|e| e.0).sum();
    let admitted = ends.iter().map(|e| e.1).sum();
    (checks, admitted, last - first)
}

/// Every thread times `samples` single checks (all threads at once, as in the runs):
/// p50, p99 and p99.9 in ns, the timer's own cost (its median over empty timings)
/// taken out.
fn latency(limit: &Arc<dyn AnyChecker>, threads: usize, samples: usize) -> [f64; 3] {
    let clock = quanta::Clock::new();
    let overhead = {
        let mut empty: Vec<u64> = (0..10_000)
            .map(|_| {
                let a = clock.raw();
                let b = clock.raw();
                clock.delta_as_nanos(a, b)
            })
            .collect();
        empty.sort_unstable();
        empty[empty.len() / 2]
    };
    let barrier = Arc::new(Barrier::new(threads));
    let handles = spawn_pinned(threads, {
        let (limit, barrier, clock) = (limit.clone(), barrier.clone(), clock.clone());
        move |t| {
            let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)
                .expect("valid histogram bounds");
            barrier.wait();
            for i in 0..samples {
                let a = clock.raw();
                std::hint::black_box(limit.one(i, t));
                let b = clock.raw();
                let ns = clock.delta_as_nanos(a, b).saturating_sub(overhead).max(1);
                h.saturating_record(ns);
            }
            h
        }
    });
    let mut all = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds");
    for h in handles {
        all.add(h.join().expect("a timing thread panicked"))
            .expect("histograms of one shape");
    }
    [0.5, 0.99, 0.999].map(|q| all.value_at_quantile(q) as f64)
}

/// What [`hammer`] measured.
#[derive(Debug, Clone, Copy)]
pub struct Hammered {
    /// Checks admitted.
    pub admitted: u64,
    /// From the common start to the last thread's end.
    pub elapsed: Duration,
}

/// Runs `op` `ops` times on each of `threads` threads that start together at a
/// barrier: the fixed-count loop the criterion contention benchmark times.
pub fn hammer<L: Send + Sync + 'static>(
    l: Arc<L>,
    threads: usize,
    ops: u64,
    op: fn(&L) -> bool,
) -> Hammered {
    let barrier = Arc::new(Barrier::new(threads + 1));
    let admitted = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (l, b, a) = (l.clone(), barrier.clone(), admitted.clone());
            std::thread::spawn(move || {
                b.wait();
                let n = (0..ops).filter(|_| op(&l)).count() as u64;
                a.fetch_add(n, Ordering::Relaxed);
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    for h in handles {
        h.join().expect("a measuring thread panicked");
    }
    Hammered {
        admitted: admitted.load(Ordering::Relaxed),
        elapsed: start.elapsed(),
    }
}
