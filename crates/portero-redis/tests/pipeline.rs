//! One pipeline, every store: each option of `LimitLayer` (no key, shadow, cost,
//! refusal, a full or unavailable store, legacy fields, a stack with refunds) through
//! tower's `oneshot` for the in-memory table, a Redis limiter and a leased one, with
//! exact counts; a stack of an in-memory and a Redis limit over a real socket; and
//! the store breaker's bound on how many checks wait for a Redis that hangs. Redis
//! away, keys of many types, batches and peeks: `pipeline_batches.rs`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use http::{HeaderValue, Request, Response, StatusCode};
use portero::{Gcra, KeyedLimiter};
use portero_http::{
    ClientIp, Limit, LimitLayer, Policy, TrustedProxies, WhenNoKey, WhenUnavailable,
};
use portero_redis::{LocalRedis, RedisAlgorithm, RedisLimiter, WhenDown};
use tower::ServiceExt;

#[path = "../../portero-http/tests/support/loopback.rs"]
mod loopback;

#[path = "../../portero-http/tests/support/counters.rs"]
mod counters;

mod support {
    pub mod stores;
}
use support::stores::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_without_a_key_is_never_unlimited_unless_asked_for_every_store() {
    let stores = Stores::start();
    for kind in KINDS {
        let shared = app(stores.limit(kind, per_minute(5), "p", None).await);
        assert_eq!(
            ok(&send(&shared, None, 20).await),
            5,
            "{kind:?} shared bucket"
        );
        let layer = stores.limit(kind, per_minute(5), "p", None).await;
        let refused = send(&app(layer.when_no_key(WhenNoKey::Reject)), None, 3).await;
        assert_eq!(ok(&refused), 0, "{kind:?} reject");
        assert_eq!(field(&refused[0], "retry-after"), Some("1"));
        let layer = stores.limit(kind, per_minute(5), "p", None).await;
        let open = send(&app(layer.when_no_key(WhenNoKey::Allow)), None, 20).await;
        assert_eq!(ok(&open), 20, "{kind:?} allow");
        assert_eq!(field(&open[0], "ratelimit"), None, "unlimited: no fields");
        // A keyed client is not held back by the shared bucket.
        assert_eq!(ok(&send(&shared, Some("alice"), 5).await), 5, "{kind:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shadow_mode_counts_and_advertises_but_never_refuses_every_store() {
    let stores = Stores::start();
    for kind in KINDS {
        let layer = stores.limit(kind, per_minute(5), "trial", None).await;
        let all = send(&app(layer.shadow(true)), Some("alice"), 8).await;
        assert_eq!(ok(&all), 8, "{kind:?}");
        let fields: Vec<_> = all.iter().map(|r| field(r, "ratelimit")).collect();
        if kind != Kind::Leased {
            // (A lease advertises what is left of this instance's lease.)
            assert_eq!(
                fields[4],
                Some(r#""trial";r=0;t=60"#),
                "{kind:?} {fields:?}"
            );
        }
        assert!(field(&all[7], "ratelimit").unwrap().contains(";r=0;"));
        assert_eq!(field(&all[7], "retry-after"), None, "{kind:?}");
        // Per limit: the shadowed one watches, the enforced one refuses.
        let enforced = stores.limit(kind, per_minute(3), "enforced", None).await;
        let mixed = Limit::new(
            Arc::new(KeyedLimiter::new(Gcra::new(per_minute(1)), 10)),
            Policy::for_quota("new", &per_minute(1)).unwrap(),
            x_client(),
        )
        .shadow(true);
        let all = send(&app(enforced.limit(mixed)), Some("bob"), 5).await;
        assert_eq!(ok(&all), 3, "{kind:?}: only the enforced limit refuses");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cost_is_all_or_nothing_and_one_above_capacity_is_413_every_store() {
    let stores = Stores::start();
    for kind in KINDS {
        let layer = stores.limit(kind, per_minute(5), "p", None).await;
        let by_header = |_: &http::Method, _: &http::Uri, h: &http::HeaderMap| {
            h.get("x-cost")
                .and_then(|v| v.to_str().ok()?.parse().ok())
                .unwrap_or(1)
        };
        let app = app(layer.cost(by_header));
        let costly = |n: &str| {
            Request::builder()
                .uri("/")
                .header("x-client", "alice")
                .header("x-cost", n)
                .body(Body::empty())
                .unwrap()
        };
        let statuses = [
            app.clone().oneshot(costly("2")).await.unwrap().status(),
            app.clone().oneshot(costly("2")).await.unwrap().status(),
            app.clone().oneshot(costly("2")).await.unwrap().status(),
            app.clone().oneshot(costly("1")).await.unwrap().status(),
        ];
        assert_eq!(
            statuses,
            [
                StatusCode::OK,
                StatusCode::OK,
                StatusCode::TOO_MANY_REQUESTS,
                StatusCode::OK
            ],
            "{kind:?}: 2+2 of 5, then 2 does not fit and takes nothing, 1 does"
        );
        let huge = app.clone().oneshot(costly("6")).await.unwrap();
        assert_eq!(huge.status(), StatusCode::PAYLOAD_TOO_LARGE, "{kind:?}");
        assert_eq!(field(&huge, "retry-after"), None);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_refusal_and_legacy_fields_apply_to_every_store() {
    let stores = Stores::start();
    for kind in KINDS {
        let layer = stores.limit(kind, per_minute(2), "p", None).await;
        let layer = layer.legacy_headers(true).refusal(|decision, policy| {
            let mut r = Response::new(format!(
                "slow down: {} of {} left",
                decision.remaining(),
                policy.quota()
            ));
            *r.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
            r
        });
        let all = send(&app(layer), Some("alice"), 3).await;
        assert_eq!(field(&all[0], "x-ratelimit-limit"), Some("2"), "{kind:?}");
        assert_eq!(field(&all[0], "x-ratelimit-remaining"), Some("1"));
        assert_eq!(all[2].status(), StatusCode::SERVICE_UNAVAILABLE, "{kind:?}");
        // GCRA: the next unit in 30 s; the log: when the oldest entry leaves, 60 s.
        let retry = if kind == Kind::Log { "60" } else { "30" };
        assert_eq!(field(&all[2], "retry-after"), Some(retry), "{kind:?}");
        assert_eq!(field(&all[2], "x-ratelimit-remaining"), Some("0"));
        assert_eq!(field(&all[2], "cache-control"), Some("no-store"));
    }
}

/// A store that cannot take a new key: the in-memory table full, or Redis away with
/// its local fallback's table full. `WhenUnavailable` decides for both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_cannot_take_the_key_is_decided_by_when_unavailable() {
    let quota = per_minute(5);
    let mut redis = LocalRedis::start().expect("redis-server for this test");
    let local = Arc::new(KeyedLimiter::<str, Gcra>::new(Gcra::new(quota), 1));
    let away = RedisLimiter::connect(&redis.url(), RedisAlgorithm::gcra(quota).unwrap())
        .await
        .unwrap()
        .timeout(Duration::from_millis(50))
        .when_down(WhenDown::Local(local.clone()));
    redis.stop();
    for when in [WhenUnavailable::Reject, WhenUnavailable::Allow] {
        let full = Arc::new(KeyedLimiter::new(Gcra::new(quota), 1));
        let policy = || Policy::for_quota("p", &quota).unwrap();
        let memory = LimitLayer::new(Limit::new(full, policy(), x_client()));
        let remote = LimitLayer::new(Limit::new(away.clone(), policy(), x_client()));
        for (store, layer) in [("memory", memory), ("redis", remote)] {
            let app = app(layer.when_unavailable(when));
            // The first key takes the only slot (and one unit of it).
            assert_eq!(ok(&send(&app, Some("first"), 1).await), 1, "{store}");
            let newcomer = send(&app, Some(&format!("new-{store}-{when:?}")), 1).await;
            let want = match when {
                WhenUnavailable::Reject => StatusCode::SERVICE_UNAVAILABLE,
                _ => StatusCode::OK,
            };
            assert_eq!(newcomer[0].status(), want, "{store} {when:?}");
        }
    }
}

/// All or none with refunds, in both orders: a refusal by the store under test gives
/// back what the in-memory limit took (and reports it after the refund), and a
/// refusal by the in-memory limit costs the store nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stack_refunds_earlier_limits_and_reports_them_after_the_refund_every_store() {
    let stores = Stores::start();
    for kind in KINDS {
        let memory = || Arc::new(KeyedLimiter::new(Gcra::new(per_minute(10)), 100));
        let wide = LimitLayer::new(Limit::new(
            memory(),
            Policy::for_quota("wide", &per_minute(10)).unwrap(),
            x_client(),
        ));
        let layer = stores
            .limit(kind, per_minute(3), "narrow", Some(wide))
            .await;
        let all = send(&app(layer), Some("alice"), 5).await;
        assert_eq!(ok(&all), 3, "{kind:?}");
        assert_eq!(
            field(&all[3], "ratelimit"),
            Some(if kind == Kind::Log {
                r#""wide";r=7;t=18, "narrow";r=0;t=60"#
            } else {
                r#""wide";r=7;t=18, "narrow";r=0;t=20"#
            }),
            "{kind:?}: the wide limit is reported after its refund (7 left, not 6)"
        );
        let retry = if kind == Kind::Log { "60" } else { "20" };
        assert_eq!(field(&all[3], "retry-after"), Some(retry), "{kind:?}");

        // The other way round: the in-memory limit refuses and the store under test,
        // declared after it, is never charged: the same store alone then admits the
        // 7 units that 3 admissions left of its 10.
        let store = stores.store(kind, per_minute(10)).await;
        let narrow = LimitLayer::new(Limit::new(
            Arc::new(KeyedLimiter::new(Gcra::new(per_minute(3)), 100)),
            Policy::for_quota("narrow", &per_minute(3)).unwrap(),
            x_client(),
        ));
        let both = app(store.clone().limit("wide", Some(narrow)));
        assert_eq!(ok(&send(&both, Some("bob"), 6).await), 3, "{kind:?}");
        let alone = app(store.limit("wide", None));
        assert_eq!(ok(&send(&alone, Some("bob"), 10).await), 7, "{kind:?}");
    }
}

/// A stack of a per-address limit in memory and a per-client limit in Redis, over a
/// real socket with axum: exact counts across two instances, and the per-address
/// limit holds a client that rotates its id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_backed_stack_over_a_socket_admits_exact_counts() {
    let stores = Stores::start();
    let redis = stores.redis(per_minute(4)).await;
    let mut instances = Vec::new();
    for _ in 0..2 {
        let addr_limit = Arc::new(KeyedLimiter::new(Gcra::new(per_minute(6)), 100));
        let ip = ClientIp::new(TrustedProxies::none());
        let layer = LimitLayer::new(Limit::new(
            addr_limit,
            Policy::for_quota("per-ip", &per_minute(6)).unwrap(),
            move |r: &Request<Body>| ip.key(r),
        ))
        .limit(Limit::new(
            redis.clone(),
            Policy::for_quota("per-client", &per_minute(4)).unwrap(),
            x_client(),
        ));
        let addr: SocketAddr = loopback::serve(app(layer)).await;
        instances.push(addr);
    }
    let mut admitted = 0;
    for i in 0..10 {
        let at = instances[i % 2];
        admitted +=
            usize::from(loopback::status(at, "GET", "/", &[("x-client", "alice")]).await == 200);
    }
    assert_eq!(
        admitted, 4,
        "the shared per-client limit, across both instances"
    );
    // Rotating ids: each instance's per-address limit (6, of which alice used 5
    // and 5 were refused and refunded... only admissions count) holds the rest.
    let mut rotated = 0;
    for i in 0..20 {
        let id = format!("rotated-{i}");
        rotated += usize::from(
            loopback::status(instances[0], "GET", "/", &[("x-client", &id)]).await == 200,
        );
    }
    assert_eq!(
        rotated,
        6 - 2,
        "instance 0 admitted 2 of alice's; 4 more fit"
    );
}

/// A Redis that accepts connections and never answers: with the store breaker, at
/// most `failures_in_a_row` checks wait the timeout, the rest are answered by the
/// outage policy at once (without it, every check waits).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_redis_makes_at_most_the_tripping_checks_wait_with_the_breaker() {
    let url = hanging_redis();
    let quota = per_minute(5);
    // Long beside a loaded machine's delays: an answer of the outage policy, given at
    // once, never looks like a wait.
    let timeout = Duration::from_millis(250);
    let lazy = || {
        RedisLimiter::connect_lazy(&url, RedisAlgorithm::gcra(quota).unwrap())
            .unwrap()
            .timeout(timeout)
            .when_down(WhenDown::FailClosed)
    };
    let waited = |limiter: RedisLimiter| async move {
        let app = behind(limiter, quota);
        let mut slow = 0;
        for _ in 0..20 {
            let started = Instant::now();
            let r = app.clone().oneshot(request(Some("alice"))).await.unwrap();
            assert_eq!(
                r.status(),
                StatusCode::SERVICE_UNAVAILABLE,
                "failing closed: an outage"
            );
            assert_eq!(field(&r, "ratelimit-source"), Some("unavailable"));
            slow += usize::from(started.elapsed() >= timeout);
        }
        slow
    };
    assert_eq!(
        waited(lazy()).await,
        20,
        "without a breaker every check waits"
    );
    let guarded = lazy().breaker(3, Duration::from_secs(60)).unwrap();
    assert_eq!(
        waited(guarded).await,
        3,
        "with one, only the three that trip it"
    );
}

/// While Redis is away, a local fallback decides with its own quota (here 2, a share
/// of the shared 6): the response advertises that quota, says who decided, and the
/// answer is counted as a fallback.
#[test]
fn a_fallback_answer_advertises_its_own_quota_and_is_counted() {
    let recorder = counted(async {
        let shared = per_minute(6);
        let mut redis = LocalRedis::start().expect("redis-server for this test");
        let local = Arc::new(KeyedLimiter::<str, Gcra>::new(
            Gcra::new(per_minute(2)),
            100,
        ));
        let limiter = RedisLimiter::connect(&redis.url(), RedisAlgorithm::gcra(shared).unwrap())
            .await
            .unwrap()
            .timeout(Duration::from_millis(50))
            .when_down(WhenDown::Local(local));
        let app = app(LimitLayer::new(Limit::new(
            limiter,
            Policy::for_quota("shared", &shared).unwrap(),
            x_client(),
        )));
        let up = send(&app, Some("alice"), 1).await;
        assert_eq!(
            field(&up[0], "ratelimit-policy"),
            Some(r#""shared";q=6;w=60"#)
        );
        assert_eq!(field(&up[0], "ratelimit-source"), None);
        redis.stop();
        let down = send(&app, Some("alice"), 3).await;
        assert_eq!(ok(&down), 2, "the fallback's own 2");
        for r in &down {
            assert_eq!(field(r, "ratelimit-policy"), Some(r#""shared";q=2;w=60"#));
            assert_eq!(field(r, "ratelimit-source"), Some("fallback"));
        }
    });
    assert_eq!(recorder.get("portero_fallback_total{policy=shared}"), 3);
    assert_eq!(
        recorder.get("portero_requests_total{policy=shared,outcome=admitted,source=fallback}"),
        2
    );
}

/// A request cancelled while its remote limit is deciding (the client went away)
/// takes nothing from the local limits checked before it: their units go back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_cancelled_while_redis_decides_gives_back_the_local_units() {
    let url = hanging_redis();
    let quota = per_minute(1);
    let hanging = RedisLimiter::connect_lazy(&url, RedisAlgorithm::gcra(quota).unwrap())
        .unwrap()
        .timeout(Duration::from_secs(30));
    let local = Arc::new(KeyedLimiter::new(Gcra::new(quota), 10));
    let app = app(LimitLayer::new(Limit::new(
        local.clone(),
        Policy::for_quota("local", &quota).unwrap(),
        x_client(),
    ))
    .limit(Limit::new(
        hanging,
        Policy::for_quota("shared", &quota).unwrap(),
        x_client(),
    )));
    for _ in 0..3 {
        let call = app.clone().oneshot(request(Some("alice")));
        assert!(tokio::time::timeout(Duration::from_millis(50), call)
            .await
            .is_err());
        let key = HeaderValue::from_static("alice");
        assert_eq!(local.peek(&key).remaining(), 1, "the local unit came back");
    }
}
