//! What a contention study measures (subjects, thread counts, runs) and what each
//! (subject, threads) yields: throughput, latency, scaling and the admission audit.

use std::time::Duration;

use super::subjects::Subject;

/// What one study measures.
#[derive(Debug, Clone)]
pub struct Study {
    /// Thread counts to sweep.
    pub threads: Vec<usize>,
    /// Timed runs per (subject, threads), after one warm-up run.
    pub runs: usize,
    /// How long each thread checks in a run.
    pub duration: Duration,
    /// Single checks timed per thread, for the latency histogram.
    pub samples: usize,
    /// The subjects.
    pub subjects: Vec<Subject>,
}

impl Study {
    /// Every subject, every available core (1, 2, 4, … up to it, and it), 3 runs of
    /// 200 ms, 20,000 latency samples a thread.
    pub fn default_for_this_machine() -> Self {
        let cores = cores();
        let mut sweep: Vec<usize> = std::iter::successors(Some(1), |t| Some(t * 2))
            .take_while(|&t| t < cores)
            .collect();
        sweep.push(cores);
        Self {
            threads: sweep,
            runs: 3,
            duration: Duration::from_millis(200),
            samples: 20_000,
            subjects: Subject::ALL.to_vec(),
        }
    }
}

/// The figures of one (subject, threads).
#[derive(Debug, Clone)]
pub struct Row {
    /// What was measured.
    pub subject: Subject,
    /// Threads checking at once.
    pub threads: usize,
    /// Millions of checks per second, each timed run (sorted).
    pub mops: Vec<f64>,
    /// Latency of one check, ns: p50, p99, p99.9 (over every thread's samples).
    pub latency_ns: [f64; 3],
    /// Throughput at these threads ÷ (threads × one thread's), from the medians.
    pub efficiency: f64,
    /// The audit run's: the subject on a quota it must enforce.
    pub audit: Audit,
}

impl Row {
    /// The median throughput (Mops/s).
    pub fn median_mops(&self) -> f64 {
        self.mops[self.mops.len() / 2]
    }
}

/// The audit run: the subject on a quota it must enforce ([`enforcing_quota`]),
/// every admission counted against its key, each key held to `burst + ⌊t/T⌋` for the
/// run's span `t` with no slack.
///
/// [`enforcing_quota`]: super::subjects::enforcing_quota
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Audit {
    /// Checks made.
    pub checks: u64,
    /// Checks admitted, every key together.
    pub admitted: u64,
    /// The quota each key was held to (`None`: no quota, the floor).
    pub quota: Option<portero::Quota>,
    /// Keys the checks were spread over.
    pub keys: usize,
    /// The most any one key admitted.
    pub largest: u64,
    /// The most one key may admit in the run's span (`burst + ⌊t/T⌋`; for a windowed
    /// peer, its limit for each window begun since it was made).
    pub allowed: Option<u64>,
    /// Keys that admitted more than `allowed`.
    pub over: usize,
}

impl Audit {
    /// Whether no key admitted more than its quota allows.
    pub fn holds(&self) -> bool {
        self.over == 0
    }

    /// The share of checks refused (how hard the quota bit).
    pub fn refused_share(&self) -> f64 {
        1.0 - self.admitted as f64 / self.checks.max(1) as f64
    }
}

/// The cores this process may use.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
