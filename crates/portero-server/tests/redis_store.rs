//! The gateway's counters in Redis: the same answers as in memory, every limit shared
//! by a second instance, all or none in one script, and each rule's outage policy
//! while Redis is away (the first check after it is back is Redis's again).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use portero_redis::LocalRedis;
use portero_server::config;
use portero_server::config::outage::Outage;
use portero_server::decide::{Answer, Code, Descriptor, Request};
use portero_server::gateway::Gateway;
use portero_server::shared::Shared;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

mod support;
use support::descriptor;

const FILE: &str = "
domain: api
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 5 }
  - key: tenant
    rate_limit: { unit: hour, requests_per_unit: 8, name: tenant }
  - key: tenant
    value: gold
    rate_limit: { unit: hour, requests_per_unit: 12, replaces: [{ name: tenant }] }
  - key: path
    value: /slow*
    share_threshold: true
    rate_limit: { unit: hour, requests_per_unit: 4 }
  - key: probe
    shadow_mode: true
    rate_limit: { unit: hour, requests_per_unit: 2 }
  - key: open
    rate_limit: { unit: hour, requests_per_unit: 1, portero: { when_down: open } }
  - key: closed
    rate_limit: { unit: hour, requests_per_unit: 100, portero: { when_down: closed } }
  - key: local
    rate_limit: { unit: hour, requests_per_unit: 2, portero: { when_down: local } }
  - key: smooth
    rate_limit: { unit: hour, requests_per_unit: 6, portero: { algorithm: gcra, burst: 3 } }
  - key: slide
    rate_limit: { unit: hour, requests_per_unit: 5, portero: { algorithm: sliding-window-counter } }
";

fn tree() -> config::tree::Tree {
    config::from_texts(&[("api.yaml".into(), FILE.into())]).expect("loads")
}

fn shared(url: &str, prefix: &str) -> Shared {
    Shared::new(url, prefix, Duration::from_millis(200), Outage::Open).expect("a Redis URL")
}

fn request(descriptors: Vec<Descriptor>) -> Request {
    Request {
        domain: "api".into(),
        descriptors,
    }
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// Waits out the end of an hour if it is under `margin` away: every test here counts
/// in hourly windows and must not see one end.
fn clear_of_the_hour(margin: Duration) {
    let hour = 3_600 * 1_000_000_000;
    let left = hour - now_ns() % hour;
    if left < margin.as_nanos() as u64 {
        std::thread::sleep(Duration::from_nanos(left + 50_000_000));
    }
}

/// A status's code, limit (per unit, name) and remaining.
type Shape = (Code, Option<(u32, String)>, u32);

/// Codes, limits and remaining (the time until reset is read at different instants).
fn shape(a: &Answer) -> Vec<Shape> {
    a.statuses
        .iter()
        .map(|s| {
            let limit = s
                .limit
                .as_ref()
                .map(|l| (l.requests_per_unit, l.name.clone()));
            (s.code, limit, s.remaining)
        })
        .collect()
}

/// A random descriptor of the file's (and some overrides and unknown keys).
fn random_descriptor(rng: &mut StdRng) -> Descriptor {
    let pick = |rng: &mut StdRng, options: &[&str]| {
        options[rng.random_range(0..options.len())].to_string()
    };
    let (key, value) = match rng.random_range(0..9) {
        0 => ("user".into(), pick(rng, &["ann", "bob"])),
        1 => ("tenant".into(), pick(rng, &["gold", "acme"])),
        2 => ("path".into(), pick(rng, &["/slow/a", "/slow/b", "/fast"])),
        3 => ("probe".into(), "x".into()),
        4 => ("nobody".into(), "x".into()),
        5 => ("user".into(), "cap".into()),
        6 => ("smooth".into(), pick(rng, &["ann", "bob"])),
        7 => ("slide".into(), pick(rng, &["ann", "bob"])),
        _ => ("local".into(), "l".into()),
    };
    let limit = (key == "user" && value == "cap").then_some((3, config::unit::Unit::Hour));
    Descriptor {
        entries: vec![(key, value)],
        limit,
        hits: rng.random_range(0..=3),
    }
}

/// Sixty random requests of one to three descriptors (from `seed`) through `memory`
/// and through `redis`: the same codes, limits and remaining at every step, and Redis
/// answered every one.
async fn same_answers(seed: u64, memory: &Gateway, redis: &Gateway) {
    let mut rng = StdRng::seed_from_u64(seed);
    for step in 0..60 {
        let n = rng.random_range(1..=3);
        let r = request((0..n).map(|_| random_descriptor(&mut rng)).collect());
        let in_memory = memory.decide_at(&r, now_ns()).expect("decided");
        let in_redis = redis.decide(&r).await.expect("decided");
        assert_eq!(
            (in_redis.code, shape(&in_redis)),
            (in_memory.code, shape(&in_memory)),
            "seed {seed} step {step}: {r:?}"
        );
    }
    assert_eq!(redis.stats().redis_unavailable_total(), 0);
}

/// Random requests of one to three descriptors through a gateway in memory and one in
/// Redis: the same codes, limits and remaining at every step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_answers_as_memory_does() {
    let server = LocalRedis::start().expect("redis-server");
    clear_of_the_hour(Duration::from_secs(20));
    for seed in 0..6u64 {
        let redis = Gateway::new(tree(), 1_000, false)
            .with_redis(shared(&server.url(), &format!("seed{seed}:")));
        same_answers(seed, &Gateway::new(tree(), 1_000, false), &redis).await;
    }
}

/// The same on a Redis Cluster, where a request's counters sit in different slots and
/// are decided one call each, the admitted ones given back when one refuses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_answers_as_memory_does() {
    let cluster = portero_redis::LocalCluster::start().expect("a local Redis Cluster");
    let urls = cluster.urls();
    let nodes: Vec<&str> = urls.iter().map(String::as_str).collect();
    clear_of_the_hour(Duration::from_secs(20));
    for seed in 0..4u64 {
        let shared = Shared::cluster(
            &nodes,
            &format!("c{seed}:"),
            Duration::from_millis(500),
            Outage::Open,
        )
        .await
        .expect("the cluster answers");
        let redis = Gateway::new(tree(), 1_000, false).with_redis(shared);
        same_answers(seed, &Gateway::new(tree(), 1_000, false), &redis).await;
    }
}

/// Two instances on one Redis: a limit of 5 admits 5 between them, and each reports
/// what the other spent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_instance_shares_every_limit() {
    let server = LocalRedis::start().expect("redis-server");
    clear_of_the_hour(Duration::from_secs(10));
    let a = Gateway::new(tree(), 1_000, false).with_redis(shared(&server.url(), "p:"));
    let b = Gateway::new(tree(), 1_000, false).with_redis(shared(&server.url(), "p:"));
    let one = request(vec![descriptor(&[("user", "carol")])]);
    let mut remaining = Vec::new();
    let mut admitted = 0;
    for i in 0..8 {
        let gateway = if i % 2 == 0 { &a } else { &b };
        let answer = gateway.decide(&one).await.expect("decided");
        admitted += usize::from(answer.code == Code::Ok);
        remaining.push(answer.statuses[0].remaining);
    }
    assert_eq!(admitted, 5);
    assert_eq!(remaining, [4, 3, 2, 1, 0, 0, 0, 0]);
}

/// A request one rule refuses is charged to no rule, in Redis too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_request_charges_nothing_in_redis() {
    let server = LocalRedis::start().expect("redis-server");
    clear_of_the_hour(Duration::from_secs(10));
    let g = Gateway::new(tree(), 1_000, false).with_redis(shared(&server.url(), "p:"));
    let both = request(vec![
        descriptor(&[("path", "/slow/x")]),
        descriptor(&[("user", "dan")]),
    ]);
    let alone = request(vec![descriptor(&[("path", "/slow/y")])]);
    for _ in 0..4 {
        assert_eq!(g.decide(&alone).await.unwrap().code, Code::Ok);
    }
    // The shared /slow* threshold is spent: the user's limit must not be.
    for _ in 0..3 {
        let answer = g.decide(&both).await.unwrap();
        assert_eq!(answer.code, Code::OverLimit);
        assert_eq!(answer.statuses[0].code, Code::OverLimit);
        assert_eq!(answer.statuses[1].code, Code::Ok);
        assert_eq!(answer.statuses[1].remaining, 5);
    }
}

/// Redis stopped: an open rule admits, a closed one refuses, a local one counts its
/// own limit in memory; Redis back on its port: the next check is Redis's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_rule_answers_by_its_policy_while_redis_is_away() {
    let mut server = LocalRedis::start().expect("redis-server");
    clear_of_the_hour(Duration::from_secs(20));
    let url = server.url();
    let port: u16 = url.rsplit(':').next().unwrap().parse().unwrap();
    let g = Gateway::new(tree(), 1_000, false).with_redis(shared(&url, "p:"));
    let of = |k: &str| request(vec![descriptor(&[(k, "v")])]);
    // Redis's count: one of the open rule's one unit spent.
    assert_eq!(g.decide(&of("open")).await.unwrap().code, Code::Ok);
    assert_eq!(g.decide(&of("open")).await.unwrap().code, Code::OverLimit);
    server.stop();
    let before = g.stats().redis_unavailable_total();
    for _ in 0..3 {
        assert_eq!(
            g.decide(&of("open")).await.unwrap().code,
            Code::Ok,
            "open admits"
        );
        assert_eq!(
            g.decide(&of("closed")).await.unwrap().code,
            Code::OverLimit,
            "closed refuses"
        );
    }
    let local: Vec<Code> = {
        let mut codes = Vec::new();
        for _ in 0..3 {
            codes.push(g.decide(&of("local")).await.unwrap().code);
        }
        codes
    };
    assert_eq!(
        local,
        [Code::Ok, Code::Ok, Code::OverLimit],
        "local counts its 2 in memory"
    );
    assert!(g.stats().redis_unavailable_total() >= before + 9);
    let _back = LocalRedis::start_on(port).expect("redis-server again on its port");
    // Redis came back empty (no persistence): the first check it answers finds the
    // open rule's unit, where the outage answered everything open.
    let unavailable = g.stats().redis_unavailable_total();
    let first = g.decide(&of("closed")).await.unwrap();
    assert_eq!(
        first.code,
        Code::Ok,
        "the first check after Redis is back is Redis's"
    );
    assert_eq!(first.statuses[0].remaining, 99);
    assert_eq!(g.stats().redis_unavailable_total(), unavailable);
}

/// On a Cluster, 30 requests at once on two counters in different slots: exactly the
/// tighter one's 4 admitted, and every refused request's unit on the other given back
/// (it stands at 8 − 4, nothing kept).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_gives_back_what_a_refused_request_took_under_load() {
    let cluster = portero_redis::LocalCluster::start().expect("a local Redis Cluster");
    let urls = cluster.urls();
    let nodes: Vec<&str> = urls.iter().map(String::as_str).collect();
    clear_of_the_hour(Duration::from_secs(20));
    let shared = Shared::cluster(&nodes, "load:", Duration::from_millis(500), Outage::Closed)
        .await
        .expect("the cluster answers");
    let g = std::sync::Arc::new(Gateway::new(tree(), 1_000, false).with_redis(shared));
    let both = request(vec![
        descriptor(&[("tenant", "acme")]),
        descriptor(&[("path", "/slow/z")]),
    ]);
    let tasks: Vec<_> = (0..30)
        .map(|_| {
            let (g, r) = (g.clone(), both.clone());
            tokio::spawn(async move { g.decide(&r).await.expect("decided").code })
        })
        .collect();
    let mut admitted = 0;
    for t in tasks {
        admitted += usize::from(t.await.unwrap() == Code::Ok);
    }
    assert_eq!(admitted, 4);
    let tenant = request(vec![Descriptor {
        hits: 0,
        ..descriptor(&[("tenant", "acme")])
    }]);
    let standing = g.decide(&tenant).await.unwrap();
    assert_eq!(
        standing.statuses[0].remaining,
        8 - 4,
        "nothing kept by the refused"
    );
    assert_eq!(g.stats().redis_unavailable_total(), 0);
}

const LEASED: &str = "
domain: lease
descriptors:
  - key: tenant
    rate_limit: { unit: hour, requests_per_unit: 40, portero: { lease: 10, lease_ms: 60000 } }
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 1 }
";

/// A request of `(key, value)` descriptors to the leased file's domain.
fn leased_request(entries: &[(&str, &str)]) -> Request {
    Request {
        domain: "lease".into(),
        descriptors: entries.iter().map(|e| descriptor(&[*e])).collect(),
    }
}

/// A leased rule is spent from this instance's batch (a round trip per ten requests),
/// a request another rule refuses gives its unit back to the lease, and two instances
/// together admit exactly the limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leased_rule_spends_batches_here_and_gives_back_what_a_refusal_took() {
    let server = LocalRedis::start().expect("redis-server");
    clear_of_the_hour(Duration::from_secs(20));
    let tree = || config::from_texts(&[("lease.yaml".into(), LEASED.into())]).unwrap();
    let a_redis = shared(&server.url(), "lease:");
    let a = Gateway::new(tree(), 1_000, false).with_redis(a_redis.clone());
    let b = Gateway::new(tree(), 1_000, false).with_redis(shared(&server.url(), "lease:"));
    let tenant = leased_request(&[("tenant", "acme")]);
    let admitted = |answer: Answer| answer.code == Code::Ok;
    for _ in 0..10 {
        assert!(admitted(a.decide(&tenant).await.unwrap()));
    }
    assert_eq!(a_redis.round_trips(), 1, "ten requests, one lease");
    let with_user = leased_request(&[("tenant", "acme"), ("user", "ann")]);
    assert!(admitted(a.decide(&with_user).await.unwrap()));
    // Refused by the user's limit: the tenant's unit goes back to the lease.
    for _ in 0..5 {
        assert!(!admitted(a.decide(&with_user).await.unwrap()));
    }
    let trips = a_redis.round_trips();
    for i in 0..9 {
        assert!(
            admitted(a.decide(&tenant).await.unwrap()),
            "request {i} of the lease's 9"
        );
    }
    assert_eq!(
        a_redis.round_trips(),
        trips,
        "spent from the lease, no round trip"
    );
    // The other instance gets what Redis has left: 40 - 2 leases of 10.
    let mut on_b = 0;
    while admitted(b.decide(&tenant).await.unwrap()) {
        on_b += 1;
        assert!(on_b <= 40, "never past the limit");
    }
    assert_eq!(on_b, 20, "40 in all across both instances");
    assert!(!admitted(a.decide(&tenant).await.unwrap()));
}

/// A request Redis refuses outright (one descriptor asks more than its rule ever
/// holds) only reads its other counters; one of them without room for its own hits
/// says so, and asks back when it is whole again — not "now".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counter_only_read_reports_when_its_own_hits_fit() {
    let server = LocalRedis::start().expect("redis-server");
    clear_of_the_hour(Duration::from_secs(20));
    let redis = Gateway::new(tree(), 1_000, false).with_redis(shared(&server.url(), "read:"));
    let ann = |hits| Descriptor {
        hits,
        ..descriptor(&[("user", "ann")])
    };
    // ann's five of the hour spent.
    assert_eq!(
        redis.decide(&request(vec![ann(5)])).await.unwrap().code,
        Code::Ok
    );
    let mut never = descriptor(&[("smooth", "x")]);
    never.hits = 4; // a burst of 3
    let answer = redis.decide(&request(vec![never, ann(1)])).await.unwrap();
    assert_eq!(answer.code, Code::OverLimit);
    let user = &answer.statuses[1];
    assert_eq!((user.code, user.remaining), (Code::OverLimit, 0));
    assert_eq!(user.retry_after, user.until_reset, "{user:?}");
    assert!(user.retry_after.unwrap() > Duration::ZERO);
}

/// 200 requests at once through a leased rule and a rule that admits 5 of them: the
/// 195 refused give their lease units back, so the leased counter ends exactly at its
/// limit across two instances (5 + what is left = 40), none kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hundred_at_once_refused_by_another_rule_keep_no_lease_unit() {
    let server = LocalRedis::start().expect("redis-server");
    clear_of_the_hour(Duration::from_secs(20));
    let tree = || config::from_texts(&[("lease.yaml".into(), LEASED.into())]).unwrap();
    let user_file = LEASED.replace("requests_per_unit: 1 }", "requests_per_unit: 5 }");
    let a = std::sync::Arc::new(
        Gateway::new(
            config::from_texts(&[("lease.yaml".into(), user_file)]).unwrap(),
            1_000,
            false,
        )
        .with_redis(shared(&server.url(), "burst:")),
    );
    let b = Gateway::new(tree(), 1_000, false).with_redis(shared(&server.url(), "burst:"));
    let both = leased_request(&[("tenant", "acme"), ("user", "ann")]);
    let mut all = tokio::task::JoinSet::new();
    for _ in 0..200 {
        let (a, r) = (a.clone(), both.clone());
        all.spawn(async move { a.decide(&r).await.unwrap().code == Code::Ok });
    }
    let mut first = 0;
    while let Some(ok) = all.join_next().await {
        first += u32::from(ok.unwrap());
    }
    assert_eq!(first, 5, "the user's five");
    let tenant = leased_request(&[("tenant", "acme")]);
    let mut rest = 0;
    for g in [&*a, &b] {
        while g.decide(&tenant).await.unwrap().code == Code::Ok {
            rest += 1;
            assert!(rest <= 40);
        }
    }
    assert_eq!(
        first + rest,
        40,
        "every refused request's lease unit came back"
    );
}
