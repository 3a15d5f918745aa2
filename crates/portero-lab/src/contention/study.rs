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
    /// The audit of the run that admitted most against its quota's allowance.
    pub audit: Audit,
}

impl Row {
    /// The median throughput (Mops/s).
    pub fn median_mops(&self) -> f64 {
        self.mops[self.mops.len() / 2]
    }
}

/// Admissions against what the subject's quota allows over the run's time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Audit {
    /// Checks made.
    pub checks: u64,
    /// Checks admitted.
    pub admitted: u64,
    /// The most the quota allows in the run's time (`None`: no quota, the floor).
    pub allowed: Option<u64>,
}

impl Audit {
    /// Whether no more was admitted than the quota allows.
    pub fn holds(&self) -> bool {
        self.allowed.is_none_or(|a| self.admitted <= a)
    }
}

/// The cores this process may use.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
