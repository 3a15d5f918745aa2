//! Direct (unkeyed) checks on one thread: portero, governor and ratelimit in the same
//! groups, with the floor (a clock read plus one uncontended CAS) beside them.

use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::atomic::AtomicU64;

use criterion::{criterion_group, criterion_main, Criterion};
use portero::{
    Clock, CoarseClock, FixedWindow, ManualClock, QuantaClock, Quota, RateLimiter, SlidingLog,
    SlidingWindowCounter, StdClock,
};
use portero_benches::{cas_once, governor_open_quota, open_quota};

fn governor_open() -> governor::DefaultDirectRateLimiter {
    governor::RateLimiter::direct(governor_open_quota())
}

fn clocks(c: &mut Criterion) {
    let mut g = c.benchmark_group("clock");
    let (q, s, k) = (QuantaClock::new(), StdClock::new(), CoarseClock::new());
    g.bench_function("quanta", |b| b.iter(|| black_box(q.now())));
    g.bench_function("std_instant", |b| b.iter(|| black_box(s.now())));
    g.bench_function("coarse_monotonic", |b| b.iter(|| black_box(k.now())));
    g.finish();
}

fn admit(c: &mut Criterion) {
    let mut g = c.benchmark_group("direct_admit");
    let word = AtomicU64::new(0);
    let clock = QuantaClock::new();
    g.bench_function("floor_cas", |b| b.iter(|| black_box(cas_once(&word))));
    // The same harness as `portero_gcra_check_at` (a caller-supplied time each
    // iteration), with the limiter replaced by one CAS that stores that time.
    let mut t = 0u64;
    g.bench_function("floor_cas_at", |b| {
        b.iter(|| {
            t += 1;
            let v = word.load(std::sync::atomic::Ordering::Relaxed);
            black_box(
                word.compare_exchange(
                    v,
                    black_box(t),
                    std::sync::atomic::Ordering::AcqRel,
                    std::sync::atomic::Ordering::Relaxed,
                )
                .is_ok(),
            )
        })
    });
    // The floor under every clock-driven check on x86_64: one raw TSC read (what
    // quanta scales to nanoseconds) and one uncontended CAS.
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `rdtsc` has no preconditions on x86_64.
        let rdtsc = || unsafe { core::arch::x86_64::_rdtsc() };
        g.bench_function("floor_rdtsc", |b| b.iter(|| black_box(rdtsc())));
        g.bench_function("floor_rdtsc_plus_cas", |b| {
            b.iter(|| {
                black_box(rdtsc());
                black_box(cas_once(&word))
            })
        });
    }
    g.bench_function("floor_quanta_plus_cas", |b| {
        b.iter(|| {
            black_box(clock.now());
            black_box(cas_once(&word))
        })
    });
    let p = RateLimiter::gcra(open_quota());
    g.bench_function("portero_gcra", |b| {
        b.iter(|| black_box(p.check().is_allowed()))
    });
    let coarse = RateLimiter::gcra(open_quota()).with_clock(CoarseClock::new());
    g.bench_function("portero_gcra_coarse_clock", |b| {
        b.iter(|| black_box(coarse.check().is_allowed()))
    });
    let e = RateLimiter::gcra(open_quota()).with_clock(ManualClock::new());
    let mut t = 0u64;
    g.bench_function("portero_gcra_check_at", |b| {
        b.iter(|| {
            t += 1;
            // A bool out, like the floors: black-boxing the whole 24-byte `Result`
            // costs a dozen stack stores and loads that no caller pays.
            black_box(matches!(e.check_at(black_box(t), 1), Ok(d) if d.is_allowed()))
        })
    });
    let tb = RateLimiter::token_bucket(open_quota());
    g.bench_function("portero_token_bucket", |b| {
        b.iter(|| black_box(tb.check().is_allowed()))
    });
    let gov = governor_open();
    g.bench_function("governor", |b| b.iter(|| black_box(gov.check().is_ok())));
    let rl = ratelimit::Ratelimiter::builder(1_000_000_000)
        .max_tokens(1 << 30)
        .initial_available(1 << 30)
        .build()
        .unwrap();
    g.bench_function("ratelimit", |b| b.iter(|| black_box(rl.try_wait().is_ok())));
    // The window algorithms, for completeness (explicit time, so no clock read).
    let window = Quota::from_nanos(1_000_000, 1_000_000).unwrap(); // 1 per ns, 1 ms windows
    let fw = RateLimiter::new(FixedWindow::new(window).unwrap()).with_clock(ManualClock::new());
    let sc = RateLimiter::new(
        // The largest limit a one-second counter holds (15-bit counts beside the whole
        // window index); at one check per ns nearly all are rejections, as before.
        SlidingWindowCounter::new(Quota::per_second(32_767).unwrap()).unwrap(),
    )
    .with_clock(ManualClock::new());
    let log = SlidingLog::with_clock(Quota::from_nanos(64, 1_000).unwrap(), ManualClock::new());
    let mut t = 0u64;
    g.bench_function("portero_fixed_window_check_at", |b| {
        b.iter(|| {
            t += 1;
            black_box(matches!(fw.check_at(t, 1), Ok(d) if d.is_allowed()))
        })
    });
    g.bench_function("portero_sliding_counter_check_at", |b| {
        b.iter(|| {
            t += 1;
            black_box(matches!(sc.check_at(t, 1), Ok(d) if d.is_allowed()))
        })
    });
    g.bench_function("portero_sliding_log_check_at", |b| {
        b.iter(|| {
            t += 16;
            black_box(matches!(log.check_at(t, 1), Ok(d) if d.is_allowed()))
        })
    });
    g.finish();
}

fn reject(c: &mut Criterion) {
    let mut g = c.benchmark_group("direct_reject");
    let closed = Quota::per_hour(1).unwrap();
    let p = RateLimiter::gcra(closed);
    p.check();
    assert!(!p.check().is_allowed());
    g.bench_function("portero_gcra", |b| {
        b.iter(|| black_box(p.check().is_allowed()))
    });
    let gov = governor::RateLimiter::direct(governor::Quota::per_hour(NonZeroU32::new(1).unwrap()));
    let _ = gov.check();
    assert!(gov.check().is_err());
    g.bench_function("governor", |b| b.iter(|| black_box(gov.check().is_ok())));
    g.finish();
}

/// What a refund costs beside its check: portero's acquire then refund of the same
/// admission (the undo: nothing came since) on a limiter that admits everything, and
/// the acquire alone, on one thread; and on one key of a keyed table. Governor has no
/// refund to set beside them.
fn refund(c: &mut Criterion) {
    let mut g = c.benchmark_group("refund");
    let direct = RateLimiter::gcra(open_quota()).with_clock(ManualClock::new());
    let mut t = 0u64;
    // A check beside them: what giving back costs on top of taking.
    g.bench_function("portero_gcra_check", |b| {
        b.iter(|| {
            t += 1;
            black_box(direct.check_at(black_box(t), 1).ok())
        })
    });
    g.bench_function("portero_gcra_acquire", |b| {
        b.iter(|| {
            t += 1;
            black_box(direct.acquire_at(black_box(t), 1).ok())
        })
    });
    g.bench_function("portero_gcra_acquire_refund", |b| {
        b.iter(|| {
            t += 1;
            let taken = direct.acquire_at(black_box(t), 1).unwrap();
            black_box(direct.refund_at(taken.admission.unwrap(), t))
        })
    });
    // Admitted on an estimate of 10, settled at 3: 7 units back by the refund rule.
    g.bench_function("portero_gcra_acquire_settle", |b| {
        b.iter(|| {
            t += 1;
            let taken = direct.acquire_at(black_box(t), 10).unwrap();
            black_box(direct.settle_at(taken.admission.unwrap(), 3, t).ok())
        })
    });
    let keyed = portero::KeyedLimiter::with_clock(
        portero::Gcra::new(open_quota()),
        1_000,
        ManualClock::new(),
    );
    g.bench_function("portero_keyed_gcra_acquire", |b| {
        b.iter(|| {
            t += 1;
            black_box(keyed.acquire_at(&7u64, black_box(t), 1).ok())
        })
    });
    g.bench_function("portero_keyed_gcra_acquire_refund", |b| {
        b.iter(|| {
            t += 1;
            let taken = keyed.acquire_at(&7u64, black_box(t), 1).unwrap();
            keyed.refund_fingerprint_at(keyed.fingerprint_of(&7u64), taken.admission.unwrap(), t);
        })
    });
    g.bench_function("portero_keyed_gcra_acquire_settle", |b| {
        b.iter(|| {
            t += 1;
            let taken = keyed.acquire_at(&7u64, black_box(t), 10).unwrap();
            let key = keyed.fingerprint_of(&7u64);
            black_box(
                keyed
                    .settle_fingerprint_at(key, taken.admission.unwrap(), 3, t)
                    .ok(),
            )
        })
    });
    g.finish();
}

/// Waiting callers whose turn is now (the common case of an outbound throttle under
/// its rate): portero's reservation, booked and used at once (runtime-agnostic) and
/// awaited on tokio, portero's `until_ready` (the line: one check when nobody waits),
/// and the floor (a check and a ready future), against governor's `until_ready`, each
/// awaited on the same current-thread runtime.
fn wait_admitted(c: &mut Criterion) {
    let mut g = c.benchmark_group("wait_admitted");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a tokio runtime");
    let portero = RateLimiter::gcra(open_quota());
    let forever = std::time::Duration::from_secs(3_600);
    g.bench_function("portero_reserve_commit", |b| {
        b.iter(|| portero.reserve(1, forever).expect("room").commit())
    });
    g.bench_function("portero_reserve_ready", |b| {
        b.iter(|| rt.block_on(portero.reserve(1, forever).expect("room").ready()))
    });
    let governor = governor_open();
    g.bench_function("governor_until_ready", |b| {
        b.iter(|| rt.block_on(governor.until_ready()))
    });
    // The same awaits inside one task, so the runtime's entry cost is not in them.
    let (p, gov, rt) = (&portero, &governor, &rt);
    g.bench_function("portero_reserve_ready_in_task", |b| {
        b.iter_custom(|n| {
            in_task(rt, n, || async move {
                p.reserve(1, forever).expect("room").ready().await
            })
        })
    });
    g.bench_function("portero_until_ready_in_task", |b| {
        b.iter_custom(|n| {
            in_task(
                rt,
                n,
                || async move { p.until_ready().await.expect("room") },
            )
        })
    });
    // The floor: a check, and a future that is ready at once.
    g.bench_function("floor_check_ready_in_task", |b| {
        b.iter_custom(|n| in_task(rt, n, || std::future::ready(p.check().is_allowed())))
    });
    g.bench_function("governor_until_ready_in_task", |b| {
        b.iter_custom(|n| in_task(rt, n, || gov.until_ready()))
    });
    g.finish();
}

/// The time of `iters` awaits of `one()`, one after another inside one task on `rt`.
fn in_task<F: std::future::Future>(
    rt: &tokio::runtime::Runtime,
    iters: u64,
    mut one: impl FnMut() -> F,
) -> std::time::Duration {
    rt.block_on(async {
        let start = std::time::Instant::now();
        for _ in 0..iters {
            black_box(one().await);
        }
        start.elapsed()
    })
}

criterion_group!(benches, clocks, admit, reject, refund, wait_admitted);
criterion_main!(benches);
