//! What the response knows, over real HTTP: a token budget settled after the
//! handler (from the response head, and from a streamed body's end), failed logins
//! counted and successes not (and clearing them), and plans — with exact counts, the
//! fields after settlement, an exact `Retry-After` after a debit, and 64 requests in
//! flight that never invent a unit (and keep some only past the log's 16 runs). Time
//! stands still (a manual clock) unless a test moves it.

mod support {
    pub mod counters;
    pub mod loopback;
}

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request as AxumRequest;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use http::{HeaderName, HeaderValue, Request, StatusCode};
use portero::{Clock, Gcra, KeyedLimiter, KeyedLog, ManualClock, Quota};
use portero_http::{keys, Limit, LimitLayer, Plans, Policy, Usage};
use support::counters::Counters;
use support::loopback::{send, serve};
use tower::ServiceExt;

type Budget = Arc<KeyedLimiter<HeaderValue, Gcra, Arc<ManualClock>>>;

/// A budget of 10,000 tokens a minute per API key, on a clock that stands still.
fn budget() -> (Budget, Arc<ManualClock>, Quota) {
    let clock = Arc::new(ManualClock::new());
    let q = Quota::per_minute(10_000).unwrap();
    let table = Arc::new(KeyedLimiter::with_clock(Gcra::new(q), 1_000, clock.clone()));
    (table, clock, q)
}

fn api_key() -> impl Fn(&Request<Body>) -> Option<HeaderValue> + Clone + Send + Sync + 'static {
    keys::header::<Body>(HeaderName::from_static("x-api-key"))
}

/// The units the key has left (a peek of none).
fn left(table: &Budget, key: &str) -> u64 {
    let now = table.clock().now();
    table
        .peek_at(&HeaderValue::from_str(key).unwrap(), now, 0)
        .unwrap()
        .remaining()
}

/// `/complete` answers with the usage the request asks for (`x-use`) in
/// `x-usage-tokens`, as a model gateway would after the call.
fn gateway(table: Budget, q: Quota) -> Router {
    let tokens = Limit::new(table, Policy::for_quota("tokens", &q).unwrap(), api_key())
        .cost(|_, _, _| 500)
        .settle(|head| head.units("x-usage-tokens"));
    Router::new()
        .route(
            "/complete",
            post(|req: AxumRequest| async move {
                let used = req
                    .headers()
                    .get("x-use")
                    .cloned()
                    .unwrap_or(HeaderValue::from_static("0"));
                ([("x-usage-tokens", used)], "done")
            }),
        )
        .layer(LimitLayer::new(tokens))
}

/// The `RateLimit` field's `r` for the policy named `name`.
fn remaining_in(head: &str, name: &str) -> Option<u64> {
    let line = head.lines().find(|l| l.starts_with("ratelimit:"))?;
    let item = line["ratelimit:".len()..]
        .split(',')
        .find(|item| item.trim().starts_with(&format!("\"{name}\"")))?;
    let r = item.split(';').find_map(|p| p.trim().strip_prefix("r="))?;
    r.parse().ok()
}

#[tokio::test]
async fn a_settled_cost_shows_in_the_fields_and_a_debt_gives_an_exact_retry_after() {
    let (table, _clock, q) = budget();
    let addr = serve(gateway(table.clone(), q)).await;
    let mut used = 0;
    for usage in [1_938u64, 120, 3_000] {
        let reply = send(
            addr,
            "POST",
            "/complete",
            &[("x-api-key", "ann"), ("x-use", &usage.to_string())],
        )
        .await;
        assert_eq!(reply.status, 200, "{}", reply.head);
        used += usage;
        // The field is the key after settlement, not after the estimate of 500.
        assert_eq!(
            remaining_in(&reply.head, "tokens"),
            Some(10_000 - used),
            "{}",
            reply.head
        );
        assert_eq!(left(&table, "ann"), 10_000 - used);
    }
    // One call that used more than the whole budget: charged whole, into debt.
    let reply = send(
        addr,
        "POST",
        "/complete",
        &[("x-api-key", "bo"), ("x-use", "12000")],
    )
    .await;
    assert_eq!(reply.status, 200);
    assert_eq!(remaining_in(&reply.head, "tokens"), Some(0));
    // 2,000 tokens of debt; the next request's estimate of 500 fits once 2,500 have
    // refilled, at 6 ms each: 15 s, to the second.
    let refused = send(
        addr,
        "POST",
        "/complete",
        &[("x-api-key", "bo"), ("x-use", "1")],
    )
    .await;
    assert_eq!(refused.status, 429);
    assert!(
        refused.head.contains("retry-after: 15\r\n") || refused.head.ends_with("retry-after: 15"),
        "{}",
        refused.head
    );
    // A response without a usage field keeps the estimate.
    let reply = send(addr, "POST", "/complete", &[("x-api-key", "cy")]).await;
    assert_eq!(reply.status, 200);
    assert_eq!(left(&table, "cy"), 10_000);
    let reply = send(
        addr,
        "POST",
        "/complete",
        &[("x-api-key", "cy"), ("x-use", "not a number")],
    )
    .await;
    assert_eq!(reply.status, 200);
    assert_eq!(
        left(&table, "cy"),
        10_000 - 500,
        "no usage read: the estimate stands"
    );
}

/// 2,000 calls of one key, 64 in flight, each using 1–1,500 tokens (estimate 500),
/// with time standing still: the budget admits until it is spent, and the key ends
/// where a twin charged each admitted call's real usage would — never looser, and
/// kept units only past the log's documented runs. What got through uses at most the budget plus what the calls in
/// flight at the moment it ran out used above their estimate (at most 63 × 1,000).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_in_flight_settle_without_losing_or_inventing_a_unit() {
    let (table, _clock, q) = budget();
    let addr = serve(gateway(table.clone(), q)).await;
    let gate = Arc::new(tokio::sync::Semaphore::new(64));
    let mut all = tokio::task::JoinSet::new();
    for i in 0..2_000u64 {
        let turn = gate.clone().acquire_owned().await.unwrap();
        all.spawn(async move {
            let usage = 1 + (i * 7_919) % 1_500;
            let reply = send(
                addr,
                "POST",
                "/complete",
                &[("x-api-key", "ann"), ("x-use", &usage.to_string())],
            )
            .await;
            drop(turn);
            (reply.status, usage)
        });
    }
    let (mut through, mut spent) = (0u64, 0u64);
    while let Some(done) = all.join_next().await {
        let (status, usage) = done.unwrap();
        assert!(status == 200 || status == 429, "{status}");
        if status == 200 {
            through += 1;
            spent += usage;
        }
    }
    let debt_or_left = left(&table, "ann");
    println!("{through} calls through, {spent} tokens used; {debt_or_left} left");
    assert!(through >= 10, "the budget admitted only {through}");
    assert!(spent <= 10_000 + 63 * 1_000, "{spent} tokens used");
    // The key holds what was used: its debt past the burst is at least what a twin
    // charged each call's usage would hold (nothing invented, ever), and exactly that
    // while the places given back out of order form at most the table log's 16 runs
    // (the guarantees page's bound). With 64 in flight the settlements sometimes form
    // more, the closest runs merge and a give-back counts less: 3 runs of 61 kept
    // 323–499 tokens of about 10,000, the rest none. Past 10 % is a defect.
    let now = table.clock().now();
    let state = table.state_of(&HeaderValue::from_static("ann")).unwrap();
    let t = q.interval_nanos();
    assert!(
        state - now >= spent * t,
        "the key's debt is below the usage: units invented"
    );
    let kept = (state - now) / t - spent;
    println!("{kept} tokens kept past the log's runs");
    assert!(kept * 10 <= spent, "{kept} of {spent} tokens kept");
}

/// The username of a login form, parsed by a layer before the limit (a key function
/// may read what an earlier layer put in the request's extensions).
#[derive(Clone)]
struct LoginName(String);

async fn parse_login(req: AxumRequest, next: Next) -> Response {
    let (mut parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, 4_096).await.unwrap_or_default();
    let form = String::from_utf8_lossy(&bytes).into_owned();
    let field = |name: &str| {
        form.split('&')
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
            .map(str::to_owned)
    };
    if let Some(user) = field("user") {
        parts.extensions.insert(LoginName(user));
    }
    let password = field("password").unwrap_or_default();
    parts.extensions.insert(Password(password));
    next.run(AxumRequest::from_parts(parts, Body::from(bytes)))
        .await
}

#[derive(Clone)]
struct Password(String);

/// 5 failed logins per username per 15 minutes; a success is not counted and clears
/// the failures before it.
fn login_app(log: Arc<KeyedLog<String, Arc<ManualClock>>>) -> Router {
    let q = Quota::new(5, Duration::from_secs(900)).unwrap();
    let by_user = |req: &Request<Body>| req.extensions().get::<LoginName>().map(|n| n.0.clone());
    let failures = Limit::new(log, Policy::for_quota("login", &q).unwrap(), by_user)
        .count_only(|head| head.status() == StatusCode::UNAUTHORIZED)
        .clear_on(|head| head.status().is_success());
    Router::new()
        .route(
            "/login",
            post(|Extension(Password(p)): Extension<Password>| async move {
                if p == "right" {
                    StatusCode::OK.into_response()
                } else {
                    StatusCode::UNAUTHORIZED.into_response()
                }
            }),
        )
        .layer(LimitLayer::new(failures))
        .layer(middleware::from_fn(parse_login))
}

fn login_log() -> Arc<KeyedLog<String, Arc<ManualClock>>> {
    let q = Quota::new(5, Duration::from_secs(900)).unwrap();
    Arc::new(KeyedLog::with_clock(q, 1_000, Arc::new(ManualClock::new())).unwrap())
}

async fn login(addr: SocketAddr, user: &str, password: &str) -> support::loopback::Reply {
    let body = format!("user={user}&password={password}");
    support::loopback::send_body(addr, "POST", "/login", &body).await
}

#[tokio::test]
async fn failed_logins_are_counted_successes_are_not_and_clear_them() {
    let addr = serve(login_app(login_log())).await;
    for n in 1..=4 {
        let reply = login(addr, "ann", "wrong").await;
        assert_eq!(reply.status, 401);
        assert_eq!(remaining_in(&reply.head, "login"), Some(5 - n));
    }
    // A success: not counted, and the four failures are forgotten.
    let ok = login(addr, "ann", "right").await;
    assert_eq!(ok.status, 200);
    assert_eq!(remaining_in(&ok.head, "login"), Some(5));
    for _ in 0..20 {
        assert_eq!(
            login(addr, "ann", "right").await.status,
            200,
            "successes are never counted"
        );
    }
    for _ in 0..5 {
        assert_eq!(login(addr, "ann", "wrong").await.status, 401);
    }
    // Exhausted: refused before the handler, even with the right password.
    let blocked = login(addr, "ann", "right").await;
    assert_eq!(blocked.status, 429);
    assert!(
        blocked.head.contains("retry-after: 900"),
        "{}",
        blocked.head
    );
    // Another user is untouched.
    assert_eq!(login(addr, "bo", "right").await.status, 200);
}

/// 64 wrong passwords for one user at once: exactly 5 reach the handler (each holds
/// its unit until its response), the rest are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_guesses_at_once_get_five_tries() {
    let addr = serve(login_app(login_log())).await;
    let mut all = tokio::task::JoinSet::new();
    for _ in 0..64 {
        all.spawn(async move { login(addr, "ann", "wrong").await.status });
    }
    let mut tries = 0;
    while let Some(status) = all.join_next().await {
        let status = status.unwrap();
        assert!(status == 401 || status == 429, "{status}");
        tries += u32::from(status == 401);
    }
    assert_eq!(tries, 5);
}

/// Free 3 a minute, pro 6, by API key: each key gets exactly its plan's quota, and
/// its fields describe its own plan only.
#[tokio::test]
async fn plans_give_each_key_its_own_plans_quota_and_fields() {
    let clock = Arc::new(ManualClock::new());
    let plan = |name: &str, n| {
        let q = Quota::per_minute(n).unwrap();
        let table = KeyedLimiter::with_clock(Gcra::new(q), 100, clock.clone());
        (Policy::for_quota(name, &q).unwrap(), table)
    };
    let (free, pro) = (plan("free", 3), plan("pro", 6));
    let plans = Plans::new().plan(free.0, free.1).plan(pro.0, pro.1);
    let key = |req: &Request<Body>| {
        let key = req.headers().get("x-api-key")?.to_str().ok()?.to_owned();
        Some((usize::from(key.starts_with("pro_")), key))
    };
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(LimitLayer::new(Limit::new(
            plans,
            Policy::new("plan", 3, 60).unwrap(),
            key,
        )));
    let addr = serve(app).await;
    for (api_key, quota, name) in [
        ("free_1", 3, "free"),
        ("pro_1", 6, "pro"),
        ("free_2", 3, "free"),
    ] {
        for n in 1..=quota {
            let reply = send(addr, "GET", "/", &[("x-api-key", api_key)]).await;
            assert_eq!(reply.status, 200, "{api_key} #{n}");
            assert_eq!(
                remaining_in(&reply.head, name),
                Some(quota - n),
                "{}",
                reply.head
            );
            assert!(
                reply
                    .head
                    .contains(&format!("ratelimit-policy: \"{name}\";q={quota};w=60")),
                "{}",
                reply.head
            );
            let other = if name == "free" { "pro" } else { "free" };
            assert!(
                !reply.head.contains(&format!("\"{other}\"")),
                "{}",
                reply.head
            );
        }
        let refused = send(addr, "GET", "/", &[("x-api-key", api_key)]).await;
        assert_eq!(refused.status, 429, "{api_key} past its plan");
    }
}

/// A streamed completion reports its usage as it goes: the key settles when the
/// body ends — at the total — or, when the client goes away mid-stream, at what was
/// reported by then.
#[tokio::test]
async fn a_streamed_body_settles_when_it_ends_or_at_what_it_knew_when_dropped() {
    let (table, _clock, q) = budget();
    let tokens = Limit::new(
        table.clone(),
        Policy::for_quota("tokens", &q).unwrap(),
        api_key(),
    )
    .cost(|_, _, _| 500)
    .settle_by_usage();
    let app = Router::new()
        .route(
            "/stream",
            post(|Extension(usage): Extension<Usage>| async move {
                // Ten chunks of 300 tokens, each reported as it is sent.
                let chunks = chunks(usage, 10, 300);
                Body::from_stream(chunks)
            }),
        )
        .layer(LimitLayer::new(tokens));
    let addr = serve(app).await;
    let reply = send(addr, "POST", "/stream", &[("x-api-key", "ann")]).await;
    assert_eq!(reply.status, 200);
    // Its fields showed the estimate: the body had not ended when they were sent.
    assert_eq!(remaining_in(&reply.head, "tokens"), Some(9_500));
    eventually(|| left(&table, "ann") == 10_000 - 3_000).await;
    // A client that reads the head and one chunk, then hangs up.
    support::loopback::send_and_hang_up(addr, "POST", "/stream", &[("x-api-key", "bo")]).await;
    eventually(|| {
        let l = left(&table, "bo");
        l < 10_000 - 300 && l > 10_000 - 3_000
    })
    .await;
}

/// A stream of `n` chunks of `tokens` each, every one reported to `usage` as it is
/// sent, a little apart (so a client can hang up mid-stream).
fn chunks(
    usage: Usage,
    n: u64,
    tokens: u64,
) -> impl futures_core::Stream<Item = Result<String, std::convert::Infallible>> + Send {
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    tokio::spawn(async move {
        for i in 0..n {
            usage.add(tokens);
            if tx.send(Ok(format!("chunk {i}\n"))).await.is_err() {
                return; // the body was dropped: `usage` drops here, with what it knew
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let mut rx = rx;
    poll_stream(move |cx| rx.poll_recv(cx))
}

/// A stream from a poll function.
fn poll_stream<T, F>(f: F) -> impl futures_core::Stream<Item = T> + Send
where
    F: FnMut(&mut std::task::Context<'_>) -> std::task::Poll<Option<T>> + Send + Unpin,
{
    struct PollStream<F>(F);
    impl<T, F> futures_core::Stream for PollStream<F>
    where
        F: FnMut(&mut std::task::Context<'_>) -> std::task::Poll<Option<T>> + Unpin,
    {
        type Item = T;
        fn poll_next(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<T>> {
            (self.0)(cx)
        }
    }
    PollStream(f)
}

/// Waits (up to 5 s) until `done` holds.
async fn eventually(done: impl Fn() -> bool) {
    for _ in 0..500 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("not settled within 5 s");
}

/// Settlements are counted by result, like every other decision.
#[test]
fn settlements_are_counted_by_result() {
    let recorder = Counters::default();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let (table, _clock, q) = budget();
    let app = gateway(table, q);
    metrics::with_local_recorder(&recorder, || {
        rt.block_on(async {
            for usage in ["100", "500", "900"] {
                let request = Request::post("/complete")
                    .header("x-api-key", "ann")
                    .header("x-use", usage)
                    .body(Body::empty())
                    .unwrap();
                assert_eq!(app.clone().oneshot(request).await.unwrap().status(), 200);
            }
        })
    });
    for result in ["given_back", "unchanged", "charged"] {
        let key = format!("portero_settlements_total{{policy=tokens,result={result}}}");
        assert_eq!(recorder.get(&key), 1, "{key}");
    }
}

/// A charge by outcome shows in the metrics: a failed login that counts is
/// `result=counted` (before, it appeared in no metric), a success that clears the
/// key `result=cleared`.
#[test]
fn failed_logins_that_count_are_counted_in_the_metrics() {
    let recorder = Counters::default();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let app = login_app(login_log());
    metrics::with_local_recorder(&recorder, || {
        rt.block_on(async {
            for (password, status) in [("wrong", 401), ("wrong", 401), ("right", 200)] {
                let request = Request::post("/login")
                    .body(Body::from(format!("user=ann&password={password}")))
                    .unwrap();
                assert_eq!(app.clone().oneshot(request).await.unwrap().status(), status);
            }
        })
    });
    let count = |result: &str| {
        recorder.get(&format!(
            "portero_settlements_total{{policy=login,result={result}}}"
        ))
    };
    assert_eq!((count("counted"), count("cleared")), (2, 1));
}

/// Two layers that both settle by usage (an organisation's budget outside, a user's
/// inside): the handler reports once, and both limits settle at it (the inner
/// layer's handle used to replace the outer's, whose limit kept the estimate).
#[tokio::test]
async fn nested_layers_settling_by_usage_both_hear_the_report() {
    let (org, _, q) = budget();
    let (user, _, _) = budget();
    let limit = |table: Budget, name: &str| {
        Limit::new(table, Policy::for_quota(name, &q).unwrap(), api_key())
            .cost(|_, _, _| 500)
            .settle_by_usage()
    };
    let app = Router::new()
        .route(
            "/",
            post(|Extension(usage): Extension<Usage>| async move {
                usage.set(4_000);
                "done"
            }),
        )
        .layer(LimitLayer::new(limit(user.clone(), "user")))
        .layer(LimitLayer::new(limit(org.clone(), "org")));
    let request = Request::post("/")
        .header("x-api-key", "ann")
        .body(Body::empty())
        .unwrap();
    assert_eq!(app.oneshot(request).await.unwrap().status(), 200);
    assert_eq!(left(&user, "ann"), 6_000);
    assert_eq!(
        left(&org, "ann"),
        6_000,
        "the outer layer's limit settled too"
    );
}

/// A key of a plan cleared by a success advertises its own plan's whole quota.
#[tokio::test]
async fn a_cleared_key_of_a_plan_advertises_its_plans_quota() {
    let clock = Arc::new(ManualClock::new());
    let plan = |name: &str, n| {
        let q = Quota::per_minute(n).unwrap();
        (
            Policy::for_quota(name, &q).unwrap(),
            KeyedLimiter::with_clock(Gcra::new(q), 100, clock.clone()),
        )
    };
    let (free, pro) = (plan("free", 5), plan("pro", 600));
    let plans = Plans::new().plan(free.0, free.1).plan(pro.0, pro.1);
    let key = |req: &Request<Body>| {
        let key = req.headers().get("x-api-key")?.to_str().ok()?.to_owned();
        Some((usize::from(key.starts_with("pro_")), key))
    };
    let limit = Limit::new(plans, Policy::new("plan", 5, 60).unwrap(), key)
        .clear_on(|head| head.status().is_success());
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(LimitLayer::new(limit));
    let addr = serve(app).await;
    let reply = send(addr, "GET", "/", &[("x-api-key", "pro_1")]).await;
    assert_eq!(reply.status, 200);
    assert_eq!(
        remaining_in(&reply.head, "pro"),
        Some(600),
        "{}",
        reply.head
    );
}

/// An estimate of 0 ("charge me once the response says") is charged what the response
/// reports: 4,000 tokens reported leave 6,000, and three such calls leave the key in
/// debt, refusing the next. (A cost of 0 took nothing, so its settlement had nothing
/// to move: every call was free however many tokens it reported.)
#[tokio::test]
async fn an_estimate_of_zero_is_charged_what_the_response_reports() {
    let (table, _clock, q) = budget();
    let tokens = Limit::new(
        table.clone(),
        Policy::for_quota("tokens", &q).unwrap(),
        api_key(),
    )
    .cost(|_, _, _| 0)
    .settle(|head| head.units("x-usage-tokens"));
    let app = Router::new()
        .route(
            "/complete",
            post(|| async { ([("x-usage-tokens", "4000")], "done") }),
        )
        .layer(LimitLayer::new(tokens));
    let addr = serve(app).await;
    let call = || send(addr, "POST", "/complete", &[("x-api-key", "zed")]);
    assert_eq!(call().await.status, 200);
    assert_eq!(left(&table, "zed"), 6_000);
    for _ in 0..2 {
        assert_eq!(call().await.status, 200);
    }
    assert_eq!(left(&table, "zed"), 0);
    assert_eq!(call().await.status, 429, "2,000 tokens of debt to wait out");
}
