//! T threads hammering one limiter (T = 1, 2, 4, 8; 8 oversubscribes a 2-core machine):
//! time per operation across all threads (lower is better; aggregate throughput is its
//! inverse). Admit and reject paths, portero, its scalable mode and governor.

use std::num::NonZeroU32;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use portero::{Quota, RateLimiter, Striped};
use portero_benches::{cas_once, governor_open_quota, open_quota};

/// Runs `op` `iters` times in total, split over `threads` threads that start together;
/// returns the wall time (the lab's loop, so both measure the same thing).
fn hammer<L: Sync + Send + 'static>(
    limiter: Arc<L>,
    threads: usize,
    iters: u64,
    op: fn(&L) -> bool,
) -> Duration {
    portero_lab::contention::threads::hammer(limiter, threads, iters / threads as u64 + 1, op)
        .elapsed
}

fn contention(c: &mut Criterion) {
    let mut g = c.benchmark_group("contention");
    g.throughput(Throughput::Elements(1));
    for threads in [1usize, 2, 4, 8] {
        let id = |name: &str| BenchmarkId::new(name, threads);
        g.bench_function(id("floor_cas"), |b| {
            b.iter_custom(|n| hammer(Arc::new(AtomicU64::new(0)), threads, n, cas_once))
        });
        g.bench_function(id("portero_gcra_admit"), |b| {
            let l = Arc::new(RateLimiter::gcra(open_quota()));
            b.iter_custom(|n| hammer(l.clone(), threads, n, |l| l.check().is_allowed()))
        });
        g.bench_function(id("governor_admit"), |b| {
            let q = governor_open_quota();
            let l = Arc::new(governor::RateLimiter::direct(q));
            b.iter_custom(|n| hammer(l.clone(), threads, n, |l| l.check().is_ok()))
        });
        g.bench_function(id("portero_striped_admit"), |b| {
            let l = Arc::new(Striped::new(open_quota(), threads.max(2)).unwrap());
            b.iter_custom(|n| hammer(l.clone(), threads, n, |l| l.check().is_allowed()))
        });
        g.bench_function(id("portero_gcra_reject"), |b| {
            let l = Arc::new(RateLimiter::gcra(Quota::per_hour(1).unwrap()));
            l.check();
            b.iter_custom(|n| hammer(l.clone(), threads, n, |l| l.check().is_allowed()))
        });
        g.bench_function(id("governor_reject"), |b| {
            let q = governor::Quota::per_hour(NonZeroU32::new(1).unwrap());
            let l = Arc::new(governor::RateLimiter::direct(q));
            let _ = l.check();
            b.iter_custom(|n| hammer(l.clone(), threads, n, |l| l.check().is_ok()))
        });
    }
    g.finish();
}

/// The scalable mode's bound, checked in the same run as its throughput: 2 threads ×
/// 1,000,000 attempts on a frozen clock (burst 1,000) admit exactly 1,000.
fn striped_bound(_: &mut Criterion) {
    let clock = portero::ManualClock::starting_at(1_000_000_000);
    let q = Quota::per_second(100).unwrap().with_burst(1_000).unwrap();
    let s = Arc::new(Striped::with_clock(q, 2, clock).unwrap());
    let admitted: u64 = (0..2)
        .map(|_| {
            let s = s.clone();
            std::thread::spawn(move || {
                (0..1_000_000).filter(|_| s.check().is_allowed()).count() as u64
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|h| h.join().unwrap())
        .sum();
    println!("striped bound: 2 threads x 1,000,000 attempts, burst 1,000, frozen clock: {admitted} admitted");
    assert_eq!(
        admitted, 1_000,
        "over- or under-admission in the striped mode"
    );
}

criterion_group!(benches, contention, striped_bound);
criterion_main!(benches);
