//! The scaling measurement behind `portero-lab contention`: T threads hammer one
//! limiter, and we count aggregate checks per second and how many were admitted.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use portero::{Quota, RateLimiter, Striped};

/// What is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subject {
    /// One uncontended-in-principle CAS on a shared word: the hardware floor.
    FloorCas,
    /// `RateLimiter::gcra`: one atomic word.
    Gcra,
    /// `Striped`, one stripe per thread, borrowing from the others.
    Striped,
}

impl Subject {
    /// Every subject, in table order.
    pub const ALL: &'static [Subject] = &[Subject::FloorCas, Subject::Gcra, Subject::Striped];

    /// Name in the table.
    pub fn name(self) -> &'static str {
        match self {
            Self::FloorCas => "floor (one CAS)",
            Self::Gcra => "portero gcra",
            Self::Striped => "portero striped",
        }
    }
}

/// One measurement.
#[derive(Debug, Clone, Copy)]
pub struct Outcome {
    /// Aggregate millions of checks per second.
    pub mops: f64,
    /// Checks admitted (all of them on the open quota).
    pub admitted: u64,
    /// Wall time from the common start to the last thread's end.
    pub elapsed: Duration,
}

fn open_quota() -> Quota {
    Quota::per_second(1_000_000_000)
        .and_then(|q| q.with_burst(1 << 30))
        .expect("a valid quota")
}

/// Runs `op` `ops` times on each of `threads` threads that start together at a barrier
/// (the criterion contention benchmark times the same loop).
pub fn run<L: Send + Sync + 'static>(
    l: Arc<L>,
    threads: usize,
    ops: u64,
    op: fn(&L) -> bool,
) -> Outcome {
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
    let elapsed = start.elapsed();
    Outcome {
        mops: (threads as u64 * ops) as f64 / elapsed.as_secs_f64() / 1e6,
        admitted: admitted.load(Ordering::Relaxed),
        elapsed,
    }
}

/// Measures `subject` with `threads` threads doing `ops` checks each.
pub fn measure(subject: Subject, threads: usize, ops: u64) -> Outcome {
    match subject {
        Subject::FloorCas => run(Arc::new(AtomicU64::new(0)), threads, ops, |w| {
            let v = w.load(Ordering::Relaxed);
            w.compare_exchange(v, v + 1, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        }),
        Subject::Gcra => run(
            Arc::new(RateLimiter::gcra(open_quota())),
            threads,
            ops,
            |l| l.check().is_allowed(),
        ),
        Subject::Striped => {
            let s = Striped::new(open_quota(), threads.max(2)).expect("a valid quota");
            run(Arc::new(s), threads, ops, |l| l.check().is_allowed())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_check_on_the_open_quota_is_admitted() {
        for &s in Subject::ALL {
            let r = measure(s, 2, 1_000);
            assert!(r.mops > 0.0);
            if s != Subject::FloorCas {
                assert_eq!(r.admitted, 2_000, "{}", s.name());
            }
        }
    }
}
