//! portero-redis on loopback: one check (a Lua script on Redis's clock) against the
//! floor, one plain `INCR` round trip on the same kind of connection; one task, and 64
//! concurrent tasks sharing one connection (pipelined by redis-rs). Starts its own
//! redis-server (it must be installed).

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use portero::Quota;
use portero_redis::{LocalRedis, RedisAlgorithm, RedisLimiter};
use redis::aio::ConnectionManager;

const TASKS: u64 = 64;

fn redis(c: &mut Criterion) {
    let server = LocalRedis::start().expect("redis-server for this benchmark");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let open = Quota::per_second(1_000_000)
        .unwrap()
        .with_burst(1 << 30)
        .unwrap();
    let limiter = Arc::new(
        rt.block_on(RedisLimiter::connect(
            &server.url(),
            RedisAlgorithm::gcra(open).unwrap(),
        ))
        .unwrap()
        .timeout(Duration::from_secs(5)),
    );
    let floor: ConnectionManager = rt
        .block_on(ConnectionManager::new(
            redis::Client::open(server.url()).unwrap(),
        ))
        .unwrap();

    let mut g = c.benchmark_group("redis");
    g.bench_function("floor_incr_1_task", |b| {
        b.iter_custom(|iters| {
            let mut con = floor.clone();
            rt.block_on(async move {
                let start = Instant::now();
                for _ in 0..iters {
                    let _: u64 = redis::cmd("INCR")
                        .arg("floor")
                        .query_async(&mut con)
                        .await
                        .unwrap();
                }
                start.elapsed()
            })
        })
    });
    g.bench_function("portero_gcra_1_task", |b| {
        b.iter_custom(|iters| {
            let l = limiter.clone();
            rt.block_on(async move {
                let start = Instant::now();
                for _ in 0..iters {
                    assert!(l.check("k", 1).await.unwrap().decision.is_allowed());
                }
                start.elapsed()
            })
        })
    });
    g.bench_function("floor_incr_64_tasks", |b| {
        b.iter_custom(|iters| {
            let floor = floor.clone();
            rt.block_on(in_tasks(iters / TASKS + 1, move |_| {
                let mut con = floor.clone();
                async move {
                    let _: u64 = redis::cmd("INCR")
                        .arg("floor")
                        .query_async(&mut con)
                        .await
                        .unwrap();
                }
            }))
        })
    });
    g.bench_function("portero_gcra_64_tasks", |b| {
        b.iter_custom(|iters| {
            let limiter = limiter.clone();
            rt.block_on(in_tasks(iters / TASKS + 1, move |t| {
                let l = limiter.clone();
                async move {
                    let key = format!("k{t}");
                    assert!(l.check(&key, 1).await.unwrap().decision.is_allowed());
                }
            }))
        })
    });
    g.finish();
}

/// `TASKS` tasks, task `t` awaiting `call(t)` `per` times; the wall time for all.
async fn in_tasks<F, Fut>(per: u64, call: F) -> Duration
where
    F: Fn(u64) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let start = Instant::now();
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let call = call.clone();
            tokio::spawn(async move {
                for _ in 0..per {
                    call(t).await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    start.elapsed()
}

criterion_group!(benches, redis);
criterion_main!(benches);
