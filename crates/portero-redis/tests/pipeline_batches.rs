//! One pipeline, every store, continued: Redis away or hanging (cancelled checks,
//! the breaker), keys of different types that must never share a bucket, Redis
//! limits batched in one round trip, local fallbacks, and peeks that take nothing.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::routing::get;
use axum::Router;
use http::{HeaderName, HeaderValue, Request, Response, StatusCode};
use portero::{Gcra, KeyedLimiter, Quota};
use portero_http::{
    keys, ClientIp, Limit, LimitLayer, Policy, Store, TrustedProxies, WhenUnavailable,
};
use portero_redis::{LeasedLimiter, LocalRedis, RedisAlgorithm, RedisLimiter, WhenDown};
use tower::ServiceExt;

#[path = "../../portero-http/tests/support/counters.rs"]
mod counters;

mod support {
    pub mod stores;
}
use support::stores::*;

/// Checks its caller cancels are neither failures nor successes of the breaker: a
/// client that gives up early cannot keep a hanging Redis's breaker closed (each
/// cancellation used to count as a success, resetting the run: 20 of 20 patient
/// checks waited), and a cancelled probe does not close it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_checks_neither_close_nor_hold_the_breaker() {
    let url = hanging_redis();
    let quota = per_minute(5);
    // Long beside a loaded machine's delays: a fallback answered at once never looks
    // like a wait, and the 17 checks after the trip all come while it is open.
    let timeout = Duration::from_millis(300);
    let open_for = Duration::from_secs(2);
    let limiter = RedisLimiter::connect_lazy(&url, RedisAlgorithm::gcra(quota).unwrap())
        .unwrap()
        .timeout(timeout)
        .when_down(WhenDown::FailClosed)
        .breaker(3, open_for)
        .unwrap();
    let app = behind(limiter, quota);
    let mut patient_waits = 0;
    for _ in 0..20 {
        let impatient = app.clone().oneshot(request(Some("alice")));
        let _ = tokio::time::timeout(Duration::from_millis(20), impatient).await;
        let started = Instant::now();
        let r = app.clone().oneshot(request(Some("alice"))).await.unwrap();
        assert_eq!(field(&r, "ratelimit-source"), Some("unavailable"));
        patient_waits += usize::from(started.elapsed() >= timeout);
    }
    assert_eq!(patient_waits, 3, "the three patient checks that trip it");
    // After the open period, the probe is cancelled: the breaker is not closed by it.
    tokio::time::sleep(open_for + Duration::from_millis(50)).await;
    let probe = app.clone().oneshot(request(Some("alice")));
    assert!(tokio::time::timeout(Duration::from_millis(10), probe)
        .await
        .is_err());
    let mut waits = 0;
    for _ in 0..5 {
        let started = Instant::now();
        let _ = app.clone().oneshot(request(Some("alice"))).await.unwrap();
        waits += usize::from(started.elapsed() >= timeout);
    }
    assert_eq!(waits, 0, "still open: nobody waits for the hanging Redis");
}

/// The shared bucket of requests without a key cannot be named by any key: a user
/// whose id is the text the bucket used to be stored under spends only their own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_key_can_name_the_redis_no_key_bucket() {
    let stores = Stores::start();
    let limiter = stores.redis(per_minute(3)).await;
    let by_id = |r: &Request<Body>| r.extensions().get::<String>().cloned();
    let app = app(LimitLayer::new(Limit::new(
        limiter,
        Policy::for_quota("p", &per_minute(3)).unwrap(),
        by_id,
    )));
    for _ in 0..5 {
        let mut r = request(None);
        r.extensions_mut().insert("\u{0}no-key".to_owned());
        let _ = app.clone().oneshot(r).await.unwrap();
    }
    let keyless = app.clone().oneshot(request(None)).await.unwrap();
    assert_eq!(
        keyless.status(),
        StatusCode::OK,
        "{:?}",
        field(&keyless, "ratelimit")
    );
}

/// One Redis limiter of 3 a minute behind two limits on two routes: `first` (named
/// `a`) for paths under `/a/`, `second` (`b`) under `/b/`; the app serves `/a/x`
/// and `/b/x`.
fn two_routes<K1, K2>(
    limiter: RedisLimiter,
    first: impl Fn(&Request<Body>) -> K1 + Send + Sync + 'static,
    second: impl Fn(&Request<Body>) -> K2 + Send + Sync + 'static,
) -> Router
where
    K1: portero_http::keys::IntoKey + 'static,
    K2: portero_http::keys::IntoKey + 'static,
    RedisLimiter: Store<K1::Key> + Store<K2::Key>,
{
    let layer = LimitLayer::new(
        Limit::new(limiter.clone(), policy("a", per_minute(3)), first)
            .route(portero_http::route::prefix("/a/")),
    )
    .limit(
        Limit::new(limiter, policy("b", per_minute(3)), second)
            .route(portero_http::route::prefix("/b/")),
    );
    Router::new()
        .route("/a/x", get(|| async { "ok" }))
        .route("/b/x", get(|| async { "ok" }))
        .layer(layer)
}

/// One Redis limiter shared by limits of different key types: an API-key header
/// whose text is an address never spends that address's bucket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_of_different_types_never_share_a_redis_bucket() {
    let stores = Stores::start();
    let limiter = stores.redis(per_minute(3)).await;
    let ip = ClientIp::new(TrustedProxies::none());
    let app = two_routes(
        limiter,
        keys::header::<Body>(HeaderName::from_static("x-api-key")),
        move |r: &Request<Body>| ip.key(r),
    );
    let from = |addr: [u8; 4], path: &str, api_key: Option<&str>| {
        let mut r = Request::builder().uri(path);
        if let Some(k) = api_key {
            r = r.header("x-api-key", k);
        }
        let mut r = r.body(Body::empty()).unwrap();
        r.extensions_mut().insert(SocketAddr::from((addr, 4000)));
        r
    };
    for _ in 0..3 {
        let r = app
            .clone()
            .oneshot(from([203, 0, 113, 1], "/a/x", Some("198.51.100.7")))
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
    }
    let victim = app
        .clone()
        .oneshot(from([198, 51, 100, 7], "/b/x", None))
        .await
        .unwrap();
    assert_eq!(
        victim.status(),
        StatusCode::OK,
        "{:?}",
        field(&victim, "ratelimit")
    );
}

/// A user limit of `user` and a tenant limit of `tenant` in Redis on one connection
/// (the user limiter, to count round trips, and the app).
async fn on_one_connection(stores: &Stores, user: Quota, tenant: Quota) -> (RedisLimiter, Router) {
    let users = stores.redis(user).await;
    let tenants = users
        .clone()
        .with_algorithm(RedisAlgorithm::gcra(tenant).unwrap());
    let app = app(user_and_tenant((users.clone(), user), (tenants, tenant)));
    (users, app)
}

/// Two Redis limits of one layer on one connection (per client, per tenant): one
/// round trip per request, and all or none — a request the tenant's limit refuses
/// takes nothing from its client's limit, and the refusal reports the client's limit
/// as it stands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_limits_on_one_connection_are_decided_in_one_round_trip_all_or_none() {
    let stores = Stores::start();
    let (redis, app) = on_one_connection(&stores, per_minute(3), per_minute(4)).await;
    let before = redis.round_trips();
    assert_eq!(ok(&send_all(&app, 3, || from("alice", "acme")).await), 3);
    assert_eq!(ok(&send_all(&app, 1, || from("carol", "acme")).await), 1);
    let refused = send_all(&app, 2, || from("bob", "acme")).await;
    assert!(refused
        .iter()
        .all(|r| r.status() == StatusCode::TOO_MANY_REQUESTS));
    assert_eq!(
        field(&refused[1], "ratelimit"),
        Some(r#""user";r=3;t=0, "tenant";r=0;t=15"#),
        "bob's own limit is untouched by the tenant's refusals"
    );
    assert_eq!(redis.round_trips() - before, 6, "one round trip a request");
    let elsewhere = send_all(&app, 5, || from("bob", "initech")).await;
    assert_eq!(ok(&elsewhere), 3, "bob still has his 3");
}

/// What must not travel in one all-or-none call does not: one limiter used twice
/// with one key (decided once, it would be charged twice against one state: the
/// parts go one after the other, as two limits would), and a shadow limit (whose
/// refusal must not stop the real limit being charged).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_key_and_a_shadow_limit_are_not_batched() {
    let stores = Stores::start();
    let redis = stores.redis(per_minute(4)).await;
    let twice = LimitLayer::new(Limit::new(
        redis.clone(),
        Policy::for_quota("a", &per_minute(4)).unwrap(),
        x_client(),
    ))
    .limit(Limit::new(
        redis.clone(),
        Policy::for_quota("b", &per_minute(4)).unwrap(),
        x_client(),
    ));
    assert_eq!(
        ok(&send(&app(twice), Some("alice"), 4).await),
        2,
        "two units a request from one bucket of 4"
    );

    let watched = stores.redis(per_minute(3)).await;
    let shadow = watched
        .clone()
        .with_algorithm(RedisAlgorithm::gcra(per_minute(1)).unwrap());
    let layer = LimitLayer::new(Limit::new(
        watched.clone(),
        Policy::for_quota("real", &per_minute(3)).unwrap(),
        x_client(),
    ))
    .limit(
        Limit::new(
            shadow,
            Policy::for_quota("trial", &per_minute(1)).unwrap(),
            x_client(),
        )
        .shadow(true),
    );
    let all = send(&app(layer), Some("bob"), 5).await;
    assert_eq!(
        ok(&all),
        3,
        "the real limit, charged while the trial refuses"
    );
    let alone = app(LimitLayer::new(Limit::new(
        watched,
        Policy::for_quota("real", &per_minute(3)).unwrap(),
        x_client(),
    )));
    assert_eq!(
        ok(&send(&alone, Some("bob"), 1).await),
        0,
        "bob's 3 are spent"
    );
}

/// A batch Redis does not answer: each limit is answered by its own outage policy
/// (one fails open, one closed: refused, and so says the fallback source).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_redis_does_not_answer_gets_each_limits_own_outage_policy() {
    let url = hanging_redis();
    let quota = per_minute(5);
    let open = away(&url, quota).when_down(WhenDown::FailOpen);
    let closed = open.clone().when_down(WhenDown::FailClosed);
    let both = |first: &RedisLimiter, second: &RedisLimiter| {
        app(user_and_tenant(
            (first.clone(), quota),
            (second.clone(), quota),
        ))
    };
    let with_tenant = || from("alice", "acme");
    let refused = send_all(&both(&open, &closed), 1, with_tenant).await;
    // Failing closed decides nothing: the outage answer.
    assert_eq!(refused[0].status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(field(&refused[0], "ratelimit-source"), Some("unavailable"));
    let admitted = send_all(&both(&open, &open), 1, with_tenant).await;
    assert_eq!(admitted[0].status(), StatusCode::OK);
}

/// Limits that cannot travel in the batch (a shadow limit, a leased one) declared
/// between two that can do not split them: the two still go in one call, all or
/// none, and the one in between is sent on its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limit_declared_between_two_batched_ones_does_not_split_them() {
    let stores = Stores::start();
    let user = stores.redis(per_minute(5)).await;
    let gcra = |n| RedisAlgorithm::gcra(per_minute(n)).unwrap();
    let audit = user.clone().with_algorithm(gcra(1_000));
    let tenant = user.clone().with_algorithm(gcra(3));
    let leased = LeasedLimiter::new(
        user.clone().with_algorithm(gcra(1_000)),
        10,
        Duration::from_secs(60),
        100,
    );
    let layer = LimitLayer::new(per_client(user.clone(), "user", 5))
        .limit(per_client(audit, "audit", 1_000).shadow(true))
        .limit(per_client(leased, "leased", 1_000))
        .limit(Limit::new(
            tenant,
            policy("tenant", per_minute(3)),
            x_tenant(),
        ));
    let app = app(layer);
    let mut admitted = 0;
    for client in ["u1", "u2", "u3", "u1", "u2", "u3"] {
        admitted += ok(&send_all(&app, 1, || from(client, "t")).await);
    }
    assert_eq!(admitted, 3, "the tenant's 3");
    for client in ["u1", "u2", "u3"] {
        let left = user.peek(&text_of(client), 0).await.unwrap().decision;
        assert_eq!(
            left.remaining(),
            4,
            "{client}: the refused request took nothing"
        );
    }
}

/// When a limit of a batch refuses, the others the same call decided are listed
/// too, each as it stands (the call took nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_in_a_batch_lists_every_limit_the_call_decided() {
    let stores = Stores::start();
    let (_, app) = on_one_connection(&stores, per_minute(1), per_minute(10)).await;
    let request = || from("ann", "t");
    let answers = send_all(&app, 2, request).await;
    assert_eq!(answers[1].status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        field(&answers[1], "ratelimit"),
        Some(r#""user";r=0;t=60, "tenant";r=9;t=6"#)
    );
}

/// A lazy limiter's first check, with Redis up, is decided by Redis (its deadline
/// is set on Redis's clock once the connection is made, not before).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lazy_limiters_first_check_is_decided_by_redis() {
    let server = LocalRedis::start().expect("redis-server for this test");
    let limiter =
        RedisLimiter::connect_lazy(&server.url(), RedisAlgorithm::gcra(per_minute(5)).unwrap())
            .unwrap()
            .timeout(Duration::from_secs(5));
    let first = limiter.check("k", 1).await.unwrap();
    assert_eq!(first.served_by, portero_redis::ServedBy::Redis);
    assert!(first.decision.is_allowed());
}

/// While Redis is away, a cost the local fallback cannot hold (above its burst,
/// not the shared limit's) is refused for now (429 from the fallback), not called
/// never admissible (413).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cost_above_only_the_fallbacks_capacity_is_a_429_while_redis_is_away() {
    let url = hanging_redis();
    let local = Arc::new(KeyedLimiter::<str, Gcra>::new(
        Gcra::new(per_minute(2)),
        100,
    ));
    let shared = per_minute(10);
    let limiter = away(&url, shared).when_down(WhenDown::Local(local));
    let layer = LimitLayer::new(Limit::new(
        limiter,
        Policy::for_quota("shared", &shared).unwrap(),
        x_client(),
    ))
    .cost(|_, _, _| 3);
    let answer = send(&app(layer), Some("alice"), 1).await;
    assert_eq!(answer[0].status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(field(&answer[0], "ratelimit-source"), Some("fallback"));
}

/// The text `x-client: value` is stored under (a header value's).
fn text_of(value: &str) -> String {
    let mut text = String::new();
    portero_http::StoreKey::write_key(&HeaderValue::from_str(value).unwrap(), &mut text);
    text
}

/// A batch Redis does not answer is all or none in the fallbacks too: when one
/// limit's local fallback refuses, what an earlier one's took goes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_answered_by_local_fallbacks_is_all_or_none() {
    let url = hanging_redis();
    let fallback = |n| {
        Arc::new(KeyedLimiter::<str, Gcra>::new(
            Gcra::new(per_minute(n)),
            100,
        ))
    };
    let (user_local, tenant_local) = (fallback(5), fallback(1));
    let user = away(&url, per_minute(50)).when_down(WhenDown::Local(user_local.clone()));
    let tenant = user
        .clone()
        .with_algorithm(RedisAlgorithm::gcra(per_minute(10)).unwrap())
        .when_down(WhenDown::Local(tenant_local));
    let layer = user_and_tenant((user, per_minute(50)), (tenant, per_minute(10)));
    let request = || from("ann", "t");
    let answers = send_all(&app(layer), 2, request).await;
    assert_eq!(answers[0].status(), StatusCode::OK);
    assert_eq!(answers[1].status(), StatusCode::TOO_MANY_REQUESTS);
    let left = user_local.peek(text_of("ann").as_str()).remaining();
    assert_eq!(
        left, 4,
        "the refused request's unit went back to the user's fallback"
    );
}

/// A batch whose limit's local fallback table is full while Redis is away: that limit
/// is decided by `when_unavailable` (here: let through), the others by their own
/// fallbacks, in either order (before: the other limit's units were given back and
/// the request let through, or a 500).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_fallback_table_in_a_batch_is_decided_by_when_unavailable() {
    let url = hanging_redis();
    for full_first in [false, true] {
        let full = Arc::new(KeyedLimiter::<str, Gcra>::new(Gcra::new(per_minute(10)), 1));
        full.check_n("h:occupant", 1).unwrap();
        let small = Arc::new(KeyedLimiter::<str, Gcra>::new(
            Gcra::new(per_minute(3)),
            100,
        ));
        let base = away(&url, per_minute(10));
        let a = base.clone().when_down(WhenDown::Local(full));
        let b = base
            .with_algorithm(RedisAlgorithm::gcra(per_minute(60)).unwrap())
            .when_down(WhenDown::Local(small.clone()));
        let (first, second) = if full_first { (a, b) } else { (b, a) };
        let layer = LimitLayer::new(per_client(first, "first", 10))
            .limit(per_client(second, "second", 60))
            .when_unavailable(WhenUnavailable::Allow);
        let answers = send(&app(layer), Some("ann"), 6).await;
        let statuses: Vec<_> = answers.iter().map(Response::status).collect();
        assert_eq!(ok(&answers), 3, "full first: {full_first}: {statuses:?}");
        let left = small.peek(text_of("ann").as_str()).remaining();
        assert_eq!(left, 0, "the small fallback's 3 were charged");
    }
}

/// Ids of different integer types on one Redis limiter (a user id `u32`, an org id
/// `u64`) never share a bucket: user 7 spending its 3 leaves org 7 untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn integer_ids_of_different_types_never_share_a_redis_bucket() {
    let stores = Stores::start();
    let limiter = stores.redis(per_minute(3)).await;
    let id = |name: &'static str| {
        move |r: &Request<Body>| r.headers().get(name)?.to_str().ok()?.parse::<u64>().ok()
    };
    let user = id("x-user");
    let app = two_routes(
        limiter,
        move |r: &Request<Body>| user(r).and_then(|n| u32::try_from(n).ok()),
        id("x-org"),
    );
    let to = |path: &str, header: &str| {
        Request::builder()
            .uri(path)
            .header(header, "7")
            .body(Body::empty())
            .unwrap()
    };
    assert_eq!(ok(&send_all(&app, 3, || to("/a/x", "x-user")).await), 3);
    let org = send_all(&app, 1, || to("/b/x", "x-org")).await;
    assert_eq!(
        org[0].status(),
        StatusCode::OK,
        "{:?}",
        field(&org[0], "ratelimit")
    );
}

/// Every store says how a key stands, taking nothing (the no-key bucket too): 3 of 5
/// used leave 2, asked twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_store_peeks_without_taking() {
    let stores = Stores::start();
    for kind in KINDS {
        let under = stores.store(kind, per_minute(5)).await;
        let app = app(under.clone().limit("peeked", None));
        assert_eq!(ok(&send(&app, Some("ann"), 3).await), 3);
        assert_eq!(ok(&send(&app, None, 1).await), 1);
        let key = Some(HeaderValue::from_static("ann"));
        for _ in 0..2 {
            let left =
                |answer: Result<portero_http::Checked, _>| answer.unwrap().decision.remaining();
            let (ann, nobody) = match &under {
                Under::Memory(s, _) => (peeked(&**s, key.clone()).await, peeked(&**s, None).await),
                Under::Log(s, _) => (peeked(&**s, key.clone()).await, peeked(&**s, None).await),
                Under::Redis(s, _) => (peeked(s, key.clone()).await, peeked(s, None).await),
                Under::Leased(s, _) => (peeked(s, key.clone()).await, peeked(s, None).await),
            };
            // A leased limit's shared count includes what this instance leased ahead
            // (batches of 2: two leases for three checks).
            let expected = if kind == Kind::Leased { 1 } else { 2 };
            assert_eq!(left(ann), expected, "{kind:?}");
            assert_eq!(left(nobody), 4, "{kind:?}: the no-key bucket");
        }
    }
}

async fn peeked<S: Store<HeaderValue>>(
    store: &S,
    key: Option<HeaderValue>,
) -> Result<portero_http::Checked, portero_http::StoreError> {
    match store.standing(key) {
        portero_http::Checking::Done(answer) => answer,
        portero_http::Checking::Pending(answer) => answer.await,
    }
}

/// A check a lease answers says when the shared key is full again (as Redis said
/// when the lease was taken), not "now" (`t=0`): a batch of 2 of 5 a minute leaves
/// the key full in 24 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leased_limit_advertises_when_the_shared_key_is_full_again() {
    let stores = Stores::start();
    let under = stores.store(Kind::Leased, per_minute(5)).await;
    let answers = send(&app(under.limit("leased", None)), Some("ann"), 2).await;
    let fields: Vec<_> = answers.iter().map(|a| field(a, "ratelimit")).collect();
    assert_eq!(
        fields,
        [Some(r#""leased";r=1;t=24"#), Some(r#""leased";r=0;t=24"#)]
    );
}

/// While Redis is away, a refusal because the local fallback's table is full is the
/// outage policy's answer too: marked `RateLimit-Source: fallback` and counted as a
/// fallback answer, not as an in-memory refusal.
#[test]
fn a_full_fallback_table_is_marked_and_counted_as_a_fallback_answer() {
    let recorder = counted(async {
        let local = Arc::new(KeyedLimiter::<str, Gcra>::new(Gcra::new(per_minute(2)), 1));
        let url = hanging_redis();
        let limiter = away(&url, per_minute(30)).when_down(WhenDown::Local(local));
        let app = app(LimitLayer::new(Limit::new(
            limiter,
            policy("shared", per_minute(30)),
            x_client(),
        )));
        assert_eq!(
            ok(&send(&app, Some("ann"), 1).await),
            1,
            "ann takes the one slot"
        );
        let bob = send(&app, Some("bob"), 1).await;
        // No limit decided (the fallback's table is full): the outage answer.
        assert_eq!(bob[0].status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(field(&bob[0], "ratelimit-source"), Some("fallback"));
    });
    assert_eq!(recorder.get("portero_fallback_total{policy=shared}"), 2);
    assert_eq!(
        recorder.get("portero_requests_total{policy=shared,outcome=rejected,source=fallback}"),
        1
    );
}
