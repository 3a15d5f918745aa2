//! Running a subject on T threads: pinned to cores where the OS allows it, started
//! together at a barrier, checking in batches until their time is up; then the
//! latency pass, each thread timing single checks.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::study::{Audit, Study};
use super::subjects::Subject;
use super::subjects::{distinct_keys, enforcing_quota, fresh, open_quota, stripes, AnyChecker};

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

/// A warm-up run, then `study.runs` timed runs on the speed quota, then the latency
/// pass, then the audit run on a quota the subject must enforce (a third of what a
/// short counting run just before it reached), each on a fresh subject.
pub(crate) fn measure(subject: Subject, threads: usize, study: &Study) -> Measured {
    let _warm = timed(
        &fresh(subject, threads, None),
        threads,
        study.duration / 4,
        None,
    );
    let mut mops = Vec::new();
    for _ in 0..study.runs.max(1) {
        let run = timed(
            &fresh(subject, threads, None),
            threads,
            study.duration,
            None,
        );
        mops.push(run.checks as f64 / run.span.as_secs_f64() / 1e6);
    }
    mops.sort_by(f64::total_cmp);
    // The audit run's own reach, counting as it does, just before it: a machine busy
    // with something else slows both alike, so the quota bites however loaded it is.
    // (On the quota that admits everything: the admit path, which the audit run
    // takes until the quota bites — the reject subject's own quota would measure its
    // refusals, twice as fast, and leave the audit nothing to refuse.)
    let counting = fresh(subject, threads, Some(open_quota()));
    let counts = Arc::new(
        (0..counting.key_count())
            .map(|_| AtomicU64::new(0))
            .collect::<Vec<_>>(),
    );
    let probe = timed(&counting, threads, study.duration / 4, Some(counts));
    let reach = probe.checks as f64 / probe.span.as_secs_f64().max(1e-9);
    let quota = enforcing_quota(
        reach,
        distinct_keys(subject),
        stripes(threads),
        study.duration,
    );
    let audited = fresh(subject, threads, Some(quota));
    Measured {
        mops,
        latency_ns: latency(&fresh(subject, threads, None), threads, study.samples),
        audit: audit(&audited, threads, study.duration),
    }
}

/// The audit run of `limit` (fresh: full) on `threads` threads for `duration`: every
/// admission counted against its key, and each key held to its quota over the run's
/// span.
pub fn audit(limit: &Arc<dyn AnyChecker>, threads: usize, duration: Duration) -> Audit {
    let admitted: Arc<Vec<AtomicU64>> =
        Arc::new((0..limit.key_count()).map(|_| AtomicU64::new(0)).collect());
    let run = timed(limit, threads, duration, Some(admitted.clone()));
    let quota = limit.claimed();
    let allowed = limit.allowed(run.span);
    let counts = admitted.iter().map(|a| a.load(Ordering::Relaxed));
    let (largest, over) = counts.fold((0, 0), |(largest, over), n| {
        (
            largest.max(n),
            over + usize::from(allowed.is_some_and(|a| n > a)),
        )
    });
    Audit {
        checks: run.checks,
        admitted: run.admitted,
        quota,
        keys: limit.key_count(),
        largest,
        allowed,
        over,
    }
}

/// What one run of [`timed`] gave.
struct Run {
    checks: u64,
    admitted: u64,
    /// From the first thread's first check to the last thread's last.
    span: Duration,
}

/// Runs `limit` on `threads` pinned threads for `duration` (counting each admission
/// against its key in `per_key`, when given): checks made, admitted, and the span
/// from the first thread's first check to the last thread's last (each thread reads
/// the clock around its own loop: a span timed by the main thread can miss checks
/// made before it read the clock, and the audit must cover them all). The span is
/// read on quanta's clock, the one the limiters here read.
fn timed(
    limit: &Arc<dyn AnyChecker>,
    threads: usize,
    duration: Duration,
    per_key: Option<Arc<Vec<AtomicU64>>>,
) -> Run {
    let barrier = Arc::new(Barrier::new(threads + 1));
    let stop = Arc::new(AtomicBool::new(false));
    let clock = quanta::Clock::new();
    let handles = spawn_pinned(threads, {
        let (limit, barrier, stop, clock) =
            (limit.clone(), barrier.clone(), stop.clone(), clock.clone());
        move |t| {
            barrier.wait();
            let first = clock.raw();
            let (mut i, mut took) = (0, 0);
            while !stop.load(Ordering::Relaxed) {
                took += match &per_key {
                    Some(counts) => limit.counted(i, BATCH, t, counts),
                    None => limit.checks(i, BATCH, t),
                };
                i += BATCH;
            }
            (i as u64, took, first, clock.raw())
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
    Run {
        checks: ends.iter().map(|e| e.0).sum(),
        admitted: ends.iter().map(|e| e.1).sum(),
        span: Duration::from_nanos(clock.delta_as_nanos(first, last)),
    }
}

/// Every thread times `samples` single checks (all threads at once, as in the runs):
/// p50, p99 and p99.9 in ns, the timer's own cost (its median over empty timings)
/// taken out.
fn latency(limit: &Arc<dyn AnyChecker>, threads: usize, samples: usize) -> [f64; 3] {
    let clock = quanta::Clock::new();
    let overhead = timer_cost_ns();
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

/// The timer's own cost: the median of 10,000 empty timings on quanta's clock (ns).
pub fn timer_cost_ns() -> u64 {
    let clock = quanta::Clock::new();
    let mut empty: Vec<u64> = (0..10_000)
        .map(|_| {
            let a = clock.raw();
            let b = clock.raw();
            clock.delta_as_nanos(a, b)
        })
        .collect();
    empty.sort_unstable();
    empty[empty.len() / 2]
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
