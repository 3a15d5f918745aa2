//! portero-redis on loopback: one check (a Lua script on Redis's clock) against the
//! floor, one plain `INCR` round trip on the same kind of connection; one task, and 64
//! concurrent tasks sharing one connection (pipelined by redis-rs); three limits in one
//! stacked call against three calls; a hot key through the blocked-key cache and
//! through leases; a `LimitLayer` with three Redis limits (user, tenant, global) on one
//! connection, decided in one call, against the same limits on three connections,
//! three calls. First prints `redis-benchmark`'s own ceiling for the same script
//! (`EVALSHA`, 64 clients) on the same server. Starts its own redis-server (it must be
//! installed, with `redis-benchmark`).

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion};
use portero::Quota;
use portero_http::{keys, Limit, LimitLayer, Policy};
use portero_redis::{LeasedLimiter, LocalRedis, RedisAlgorithm, RedisLimiter, StackedLimit};
use redis::aio::ConnectionManager;
use tokio::runtime::Runtime;
use tower::{Layer, Service, ServiceExt};

const TASKS: u64 = 64;

/// The least any stacked check must do in Redis: read and write each limit's key.
const FLOOR_SCRIPT: &str = "redis.call('TIME') for i = 1, #KEYS do \
    redis.call('GET', KEYS[i]) redis.call('SET', KEYS[i], '1700000000000000', 'PX', 60000) \
    end return {1, 2}";

fn redis(c: &mut Criterion) {
    let server = LocalRedis::start().expect("redis-server for this benchmark");
    let rt = Runtime::new().unwrap();
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

    // The ceiling: redis-benchmark driving the very same script (loaded by one check).
    rt.block_on(limiter.check("warm", 1)).unwrap();
    let port = server.url().rsplit(':').next().unwrap().to_owned();
    let ceiling = std::process::Command::new("redis-benchmark")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &port,
            "-c",
            "64",
            "-n",
            "200000",
            "-q",
        ])
        .args(["EVALSHA", limiter.script_sha(), "2", "bk1", "bk2"])
        .args(["0", "0", "0", "1", "1", "1073741824", "1"])
        .output()
        .expect("redis-benchmark");
    eprintln!(
        "redis-benchmark EVALSHA ceiling (64 clients): {}",
        String::from_utf8_lossy(&ceiling.stdout).trim()
    );
    let huge = Duration::from_secs(3600);
    let stack_algorithms = [
        RedisAlgorithm::gcra(open).unwrap(),
        RedisAlgorithm::fixed_window(1 << 40, huge).unwrap(),
        RedisAlgorithm::sliding_counter(1 << 20, huge).unwrap(),
    ];
    let leased = Arc::new(LeasedLimiter::new(
        (*limiter).clone().blocked_key_cache(1_000),
        1_000,
        Duration::from_secs(10),
        1_000,
    ));
    let cached = Arc::new(
        (*limiter)
            .clone()
            .prefix("cached:")
            .unwrap()
            .blocked_key_cache(1_000),
    );
    let tiny = RedisAlgorithm::gcra(Quota::per_hour(1).unwrap()).unwrap();

    let mut g = OnRuntime {
        group: c.benchmark_group("redis"),
        rt: &rt,
    };
    g.group.bench_function("floor_incr_1_task", |b| {
        b.iter_custom(|iters| {
            let mut con = floor.clone();
            rt.block_on(async move {
                let start = Instant::now();
                for _ in 0..iters {
                    incr_floor(&mut con).await;
                }
                start.elapsed()
            })
        })
    });
    g.group.bench_function("portero_gcra_1_task", |b| {
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
    g.in_tasks(
        "floor_incr_64_tasks",
        TASKS,
        &floor,
        |mut con, _| async move { incr_floor(&mut con).await },
    );
    // Each task on a key of its own, and all of them on one hot key.
    for (name, hot) in [
        ("portero_gcra_64_tasks", false),
        ("portero_gcra_64_tasks_hot_key", true),
    ] {
        g.in_tasks(name, TASKS, &limiter, move |l, t| async move {
            let key = if hot {
                Cow::Borrowed("hot")
            } else {
                Cow::Owned(format!("k{t}"))
            };
            assert!(l.check(&key, 1).await.unwrap().decision.is_allowed());
        });
    }
    // The same three limits in one stacked call, and as three calls; each task count
    // on its own tenant and global keys.
    for (tasks, label) in [(1, "1_task"), (TASKS, "64_tasks")] {
        let one_call = format!("portero_stack3_one_call_{label}");
        g.in_tasks(one_call, tasks, &limiter, move |l, t| async move {
            let keys = stack_keys(t, tasks);
            let stack = stack_algorithms
                .iter()
                .zip(&keys)
                .map(|(&alg, key)| StackedLimit::new(alg, key, 1))
                .collect::<Vec<_>>();
            assert!(l.check_all(&stack).await.unwrap().is_allowed());
        });
        let three_calls = format!("portero_three_calls_{label}");
        g.in_tasks(three_calls, tasks, &limiter, move |l, t| async move {
            let keys = stack_keys(t, tasks);
            for (alg, key) in stack_algorithms.iter().zip(&keys) {
                let d = l.check_with(key, 1, alg).await.unwrap().decision;
                assert!(d.is_allowed());
            }
        });
    }
    // The floor under any stack: a script that only reads and writes each limit's key
    // (`GET`, `SET … PX`, after one `TIME`), for three keys in one call and in three.
    let floor_script: String = rt
        .block_on(
            redis::cmd("SCRIPT")
                .arg("LOAD")
                .arg(FLOOR_SCRIPT)
                .query_async(&mut floor.clone()),
        )
        .unwrap();
    let floor_and_script = (floor.clone(), floor_script);
    for (calls, keys_per_call) in [(1, 3), (3, 1)] {
        let name = format!("floor_get_set_3_keys_in_{calls}_calls_64_tasks");
        g.in_tasks(
            name,
            TASKS,
            &floor_and_script,
            move |(mut con, sha), t| async move {
                let keys = stack_keys(t, TASKS);
                for chunk in keys.chunks(keys_per_call) {
                    let _: Vec<u64> = redis::cmd("EVALSHA")
                        .arg(&sha)
                        .arg(chunk.len())
                        .arg(chunk)
                        .query_async(&mut con)
                        .await
                        .unwrap();
                }
            },
        );
    }
    // The pipeline: three Redis limits per request, in one call (one connection) or
    // three (three connections).
    let three_on = |limiters: [RedisLimiter; 3]| {
        let [user, tenant, global] = limiters;
        let header = |name| keys::header::<()>(http::HeaderName::from_static(name));
        let layer = LimitLayer::new(Limit::new(user, policy("user"), header("x-user")))
            .limit(Limit::new(tenant, policy("tenant"), header("x-tenant")))
            .limit(Limit::new(global, policy("global"), keys::global::<()>()));
        layer.layer(tower::service_fn(|_: http::Request<()>| async {
            Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
        }))
    };
    let on_one = three_on(stack_algorithms.map(|alg| (*limiter).clone().with_algorithm(alg)));
    let on_three = three_on(stack_algorithms.map(|alg| {
        rt.block_on(RedisLimiter::connect(&server.url(), alg))
            .unwrap()
            .timeout(Duration::from_secs(5))
    }));
    for (name, service) in [
        ("layer_three_redis_limits_one_connection_64_tasks", on_one),
        (
            "layer_three_redis_limits_three_connections_64_tasks",
            on_three,
        ),
    ] {
        g.in_tasks(name, TASKS, &service, |mut service, t| async move {
            let request = http::Request::builder()
                .header("x-user", format!("u{t}"))
                .header("x-tenant", "acme")
                .body(())
                .unwrap();
            let service = service.ready().await.unwrap();
            let response = service.call(request).await.unwrap();
            assert_eq!(response.status(), http::StatusCode::OK);
        });
    }
    g.in_tasks(
        "portero_cached_refusals_64_tasks_hot_key",
        TASKS,
        &cached,
        move |l, _| async move {
            let _ = l.check_with("abuser", 1, &tiny).await.unwrap();
        },
    );
    g.in_tasks(
        "portero_leases_64_tasks_hot_key",
        TASKS,
        &leased,
        |l, _| async move {
            assert!(l.check("leased", 1).await.unwrap().decision.is_allowed());
        },
    );
    g.group.finish();
}

/// A policy the benchmarks never run out of.
fn policy(name: &str) -> Policy {
    Policy::new(name, 1 << 30, 3_600).unwrap()
}

/// The stack benchmarks' user, tenant and global keys for task `t` of `tasks`.
fn stack_keys(t: u64, tasks: u64) -> [String; 3] {
    [
        format!("s{t}"),
        format!("tenant{tasks}"),
        format!("*{tasks}"),
    ]
}

/// A benchmark group whose benchmarks run on one tokio runtime.
struct OnRuntime<'a> {
    group: BenchmarkGroup<'a, WallTime>,
    rt: &'a Runtime,
}

impl OnRuntime<'_> {
    /// One benchmark `name`: `call(shared, t)` in each task `t` of `tasks`, each call
    /// given its own clone of `shared` (a connection, a limiter); the iterations are
    /// spread over the tasks.
    fn in_tasks<S, F, Fut>(&mut self, name: impl Into<String>, tasks: u64, shared: &S, call: F)
    where
        S: Clone + Send + Sync + 'static,
        F: Fn(S, u64) -> Fut + Clone + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send,
    {
        let rt = self.rt;
        self.group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let (shared, call) = (shared.clone(), call.clone());
                rt.block_on(in_tasks(tasks, iters.div_ceil(tasks), move |t| {
                    call(shared.clone(), t)
                }))
            })
        });
    }
}

/// One `INCR` round trip: the floor under any check.
async fn incr_floor(con: &mut ConnectionManager) {
    let _: u64 = redis::cmd("INCR")
        .arg("floor")
        .query_async(con)
        .await
        .unwrap();
}

/// `tasks` tasks, task `t` awaiting `call(t)` `per` times; the wall time for all.
async fn in_tasks<F, Fut>(tasks: u64, per: u64, call: F) -> Duration
where
    F: Fn(u64) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let start = Instant::now();
    let tasks: Vec<_> = (0..tasks)
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
