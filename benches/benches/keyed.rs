//! Keyed checks: an existing key among 10,000 or 1,000,000, uniform or Zipf, portero's
//! table against governor's keyed limiter and the candidate concurrent maps (each map
//! holding one `AtomicU64` state per key, updated by a CAS: the same work).

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, BenchmarkId, Criterion};
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::DashMapStateStore;
use portero::{Gcra, KeyedLimiter};
use portero_benches::{governor_open_quota, open_quota, uniform_keys, zipf_keys};

const SEQ: usize = 1 << 16;

fn bump(state: &AtomicU64) -> bool {
    let v = state.load(Ordering::Relaxed);
    state
        .compare_exchange(v, v + 1, Ordering::AcqRel, Ordering::Relaxed)
        .is_ok()
}

/// Runs `f(key)` over the key sequence on `threads` threads; wall time per op.
fn on_threads<F: Fn(u64) -> bool + Sync + Send + 'static>(
    f: Arc<F>,
    keys: Arc<Vec<u64>>,
    threads: usize,
    iters: u64,
) -> Duration {
    let per = iters / threads as u64 + 1;
    let start = Instant::now();
    let hs: Vec<_> = (0..threads)
        .map(|t| {
            let (f, keys) = (f.clone(), keys.clone());
            std::thread::spawn(move || {
                let mut n = 0u64;
                for i in 0..per as usize {
                    n += u64::from(f(keys[(i + t * 997) % SEQ]));
                }
                black_box(n)
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    start.elapsed()
}

/// One benchmark `name/label`: `f(key)` over the key sequence on `threads` threads.
fn bench_on<F: Fn(u64) -> bool + Sync + Send + 'static>(
    g: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    label: &str,
    keys: &Arc<Vec<u64>>,
    threads: usize,
    f: F,
) {
    let f = Arc::new(f);
    g.bench_function(BenchmarkId::new(name, label), |b| {
        b.iter_custom(|i| on_threads(f.clone(), keys.clone(), threads, i))
    });
}

/// The floor under a keyed check: hash the key, load its 128-bit slot (fingerprint,
/// state) and publish `now` into it with one 128-bit CAS, on a table of the same size
/// (9/5 slots a key), with nothing decided.
struct FloorTable {
    hasher: ahash::RandomState,
    slots: Vec<portable_atomic::AtomicU128>,
}

impl FloorTable {
    fn new(keys: u64) -> Self {
        let slots = (0..keys * 9 / 5)
            .map(|_| portable_atomic::AtomicU128::new(0))
            .collect();
        Self {
            hasher: ahash::RandomState::new(),
            slots,
        }
    }

    fn touch(&self, key: u64, now: u64) -> bool {
        let slot = &self.slots[(self.hasher.hash_one(key) % self.slots.len() as u64) as usize];
        let v = slot.load(Ordering::Acquire);
        let new = (v & !u128::from(u64::MAX)) | u128::from(now.wrapping_add(v as u64));
        slot.compare_exchange(v, new, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }
}

/// The two keyed limiters every table benchmark compares, each holding the keys:
/// `portero/label` and `governor/label`, a check of an existing key each.
fn portero_and_governor<C, GS, GC, MW>(
    g: &mut BenchmarkGroup<'_, WallTime>,
    label: &str,
    keys: &Arc<Vec<u64>>,
    threads: usize,
    portero: &Arc<KeyedLimiter<u64, Gcra, C>>,
    governor: &Arc<governor::RateLimiter<u64, GS, GC, MW>>,
) where
    C: portero::Clock,
    KeyedLimiter<u64, Gcra, C>: Send + Sync + 'static,
    GS: governor::state::keyed::KeyedStateStore<u64>,
    GC: governor::clock::Clock,
    MW: governor::middleware::RateLimitingMiddleware<GC::Instant>,
    governor::RateLimiter<u64, GS, GC, MW>: Send + Sync + 'static,
{
    let p = portero.clone();
    bench_on(g, "portero", label, keys, threads, move |k| {
        p.check(&k).is_allowed()
    });
    let gv = governor.clone();
    bench_on(g, "governor", label, keys, threads, move |k| {
        gv.check_key(&k).is_ok()
    });
}

fn existing_keys(c: &mut Criterion) {
    let mut g = c.benchmark_group("keyed_existing");
    for (n, dist) in [
        (10_000u64, "uniform"),
        (10_000, "zipf"),
        (1_000_000, "uniform"),
        (1_000_000, "zipf"),
    ] {
        let keys = Arc::new(if dist == "uniform" {
            uniform_keys(n, SEQ)
        } else {
            zipf_keys(n, SEQ)
        });
        let portero = Arc::new(KeyedLimiter::new(Gcra::new(open_quota()), n as usize));
        let governor = Arc::new(governor::RateLimiter::keyed(governor_open_quota()));
        let dash = Arc::new(dashmap::DashMap::<u64, AtomicU64, ahash::RandomState>::default());
        let papaya = Arc::new(papaya::HashMap::<u64, AtomicU64>::new());
        let scc = Arc::new(scc::HashMap::<u64, AtomicU64>::new());
        let floor = Arc::new(FloorTable::new(n));
        for k in 0..n {
            portero.check(&k);
            let _ = governor.check_key(&k);
            dash.insert(k, AtomicU64::new(0));
            papaya.pin().insert(k, AtomicU64::new(0));
            let _ = scc.insert(k, AtomicU64::new(0));
        }
        for threads in [1usize, 2] {
            let label = format!("{n}_{dist}_{threads}t");
            portero_and_governor(&mut g, &label, &keys, threads, &portero, &governor);
            if n == 10_000 && dist == "uniform" {
                // The floor on the default clock: one read of it, then the table floor.
                let (f, clock) = (floor.clone(), portero::DefaultClock::default());
                bench_on(
                    &mut g,
                    "floor_clock_hash_cas128",
                    &label,
                    &keys,
                    threads,
                    move |k| f.touch(k, portero::Clock::now(&clock)),
                );
            }
            if n == 10_000 && dist == "uniform" {
                peers(&mut g, &label, &keys, threads);
            }
            if n == 10_000 {
                let d = dash.clone();
                bench_on(&mut g, "map_dashmap", &label, &keys, threads, move |k| {
                    d.get(&k).is_some_and(|s| bump(&s))
                });
                let p = papaya.clone();
                bench_on(&mut g, "map_papaya", &label, &keys, threads, move |k| {
                    p.pin().get(&k).is_some_and(bump)
                });
                let s = scc.clone();
                bench_on(&mut g, "map_scc", &label, &keys, threads, move |k| {
                    s.read(&k, |_, v| bump(v)).unwrap_or(false)
                });
            }
        }
    }
    g.finish();
}

/// String keys (API-key-like, 20 bytes) among 10,000, uniform: each library with its
/// default hasher (portero: ahash, run-time seed; governor: std's SipHash via dashmap).
fn string_keys(c: &mut Criterion) {
    let mut g = c.benchmark_group("keyed_existing_str");
    let n = 10_000u64;
    let names: Arc<Vec<String>> = Arc::new((0..n).map(|k| format!("key-{k:016x}")).collect());
    let keys = Arc::new(uniform_keys(n, SEQ));
    let portero = Arc::new(KeyedLimiter::<str, _>::new(
        Gcra::new(open_quota()),
        n as usize,
    ));
    let governor = Arc::new(governor::RateLimiter::<String, _, _>::keyed(
        governor_open_quota(),
    ));
    for name in names.iter() {
        portero.check(name);
        let _ = governor.check_key(name);
    }
    for threads in [1usize, 2] {
        let label = format!("10000_uniform_{threads}t");
        let (p, ns) = (portero.clone(), names.clone());
        bench_on(&mut g, "portero", &label, &keys, threads, move |k| {
            p.check(&ns[k as usize]).is_allowed()
        });
        let (gv, ns) = (governor.clone(), names.clone());
        bench_on(&mut g, "governor", &label, &keys, threads, move |k| {
            gv.check_key(&ns[k as usize]).is_ok()
        });
    }
    g.finish();
}

fn new_keys(c: &mut Criterion) {
    let mut g = c.benchmark_group("keyed_insert");
    g.bench_function("portero", |b| {
        b.iter_custom(|iters| {
            let l = KeyedLimiter::new(Gcra::new(open_quota()), iters as usize);
            let start = Instant::now();
            for k in 0..iters {
                black_box(l.check(&k));
            }
            start.elapsed()
        })
    });
    g.bench_function("governor", |b| {
        b.iter_custom(|iters| {
            let l = governor::RateLimiter::keyed(governor_open_quota());
            let start = Instant::now();
            for k in 0..iters {
                let _ = black_box(l.check_key(&k));
            }
            start.elapsed()
        })
    });
    g.finish();
}

/// portero's table and governor's (on a DashMap, as its keyed default) for `n` keys,
/// each on the clock given.
#[allow(clippy::type_complexity)] // the two limiters' own types, spelled out once
fn tables_on_clocks<C: portero::Clock, GC: governor::clock::Clock>(
    n: u64,
    portero_clock: C,
    governor_clock: GC,
) -> (
    Arc<KeyedLimiter<u64, Gcra, C>>,
    Arc<governor::RateLimiter<u64, DashMapStateStore<u64>, GC, NoOpMiddleware<GC::Instant>>>,
) {
    let portero = KeyedLimiter::with_clock(Gcra::new(open_quota()), n as usize, portero_clock);
    let governor = governor::RateLimiter::dashmap_with_clock(governor_open_quota(), governor_clock);
    (Arc::new(portero), Arc::new(governor))
}

/// Both on a cached clock: governor's `QuantaUpkeepClock` (its upkeep thread updates
/// quanta's recent time every 1 ms) and portero's `RecentClock`, which reads the same
/// recent time. An existing key among 10,000, uniform.
fn cached_clock(c: &mut Criterion) {
    let mut g = c.benchmark_group("keyed_existing_cached_clock");
    let upkeep = governor::clock::QuantaUpkeepClock::from_interval(Duration::from_millis(1))
        .expect("no other upkeep thread in this benchmark");
    let n = 10_000u64;
    let keys = Arc::new(uniform_keys(n, SEQ));
    let (portero, governor) = tables_on_clocks(n, portero::RecentClock::new(), upkeep);
    for k in 0..n {
        portero.check(&k);
        let _ = governor.check_key(&k);
    }
    for threads in [1usize, 2] {
        let label = format!("{n}_uniform_{threads}t");
        portero_and_governor(&mut g, &label, &keys, threads, &portero, &governor);
    }
    g.finish();
}

/// The table alone: the time given (portero `check_at` with a caller's time, governor
/// on its fake clock, one atomic load), 10,000 `u64` keys, one and two threads.
fn time_given(c: &mut Criterion) {
    let mut g = c.benchmark_group("keyed_existing_time_given");
    let n = 10_000u64;
    let keys = Arc::new(uniform_keys(n, SEQ));
    let fake = governor::clock::FakeRelativeClock::default();
    let (portero, governor) = tables_on_clocks(n, portero::ManualClock::new(), fake);
    for k in 0..n {
        let _ = portero.check_at(&k, 1, 1);
        let _ = governor.check_key(&k);
    }
    let floor = Arc::new(FloorTable::new(n));
    for threads in [1usize, 2] {
        let label = format!("{n}_uniform_{threads}t");
        let f = floor.clone();
        bench_on(
            &mut g,
            "floor_hash_cas128",
            &label,
            &keys,
            threads,
            move |k| f.touch(k, 1),
        );
        let p = portero.clone();
        bench_on(&mut g, "portero", &label, &keys, threads, move |k| {
            p.check_at(&k, 1, 1).is_ok_and(|d| d.is_allowed())
        });
        let gv = governor.clone();
        bench_on(&mut g, "governor", &label, &keys, threads, move |k| {
            gv.check_key(&k).is_ok()
        });
    }
    g.finish();
}

/// The keyed peers that are not the same kind of thing, on 10,000 keys that never run
/// out: Cloudflare's `pingora-limits` (an estimator: a check observes one event and
/// reads its key's count in the interval; a sketch of 4 x 65,536 counters) and
/// Kuadrant's `limitador` in memory (a network service's limiter: a limit per value
/// of the variable `k`, a request context built per check as a service would).
fn peers(g: &mut BenchmarkGroup<'_, WallTime>, label: &str, keys: &Arc<Vec<u64>>, threads: usize) {
    let rate = Arc::new(pingora_limits::rate::Rate::new_with_estimator_config(
        Duration::from_secs(3600),
        4,
        1 << 16,
    ));
    let r = rate.clone();
    bench_on(g, "pingora_limits_rate", label, keys, threads, move |k| {
        r.observe(&k, 1) <= isize::MAX / 2
    });
    let limitador = Arc::new(limitador::RateLimiter::new(20_000));
    let k = "k".try_into().expect("a variable");
    limitador.add_limit(limitador::limit::Limit::new(
        "bench",
        u64::MAX / 2,
        3600,
        vec![],
        vec![k],
    ));
    let namespace: limitador::limit::Namespace = "bench".into();
    let check = move |key: u64| {
        let values = std::collections::HashMap::from([("k".to_owned(), key.to_string())]);
        let ctx: limitador::limit::Context = values.into();
        limitador
            .check_rate_limited_and_update(&namespace, &ctx, 1)
            .is_ok_and(|r| !r.limited)
    };
    for key in 0..10_000 {
        check(key);
    }
    bench_on(g, "limitador_in_memory", label, keys, threads, check);
}

criterion_group!(
    benches,
    existing_keys,
    string_keys,
    new_keys,
    cached_clock,
    time_given
);
criterion_main!(benches);
