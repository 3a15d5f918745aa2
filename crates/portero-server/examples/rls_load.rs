//! A load generator for any Envoy rate-limit service (portero-server, limitador,
//! envoyproxy/ratelimit): `ShouldRateLimit` calls over gRPC, each with one descriptor
//! `(key, value)` whose value cycles over `--values` distinct ones.
//!
//! - `--rate R` (open loop): calls are scheduled at R per second whatever the answers
//!   take, and each latency runs from the call's scheduled time, so a server that
//!   falls behind shows it in the percentiles (no coordinated omission);
//! - `--rate 0` (closed loop): `--concurrency` callers each call again as soon as
//!   answered: the most decisions per second the service gives.
//!
//! Prints one line: decisions per second, OK / OVER_LIMIT / errors, p50, p99, max.
//!
//! `cargo run --release -p portero-server --example rls_load -- --target 127.0.0.1:8081 --rate 5000`

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use tokio::sync::Mutex;
use tonic::transport::Channel;

#[derive(Debug, Parser)]
struct Args {
    /// The service's gRPC address.
    #[arg(long, default_value = "127.0.0.1:8081")]
    target: String,
    /// The requests' domain.
    #[arg(long, default_value = "bench")]
    domain: String,
    /// The descriptor's key.
    #[arg(long, default_value = "client")]
    key: String,
    /// How many distinct values the descriptor cycles over.
    #[arg(long, default_value_t = 10_000)]
    values: u64,
    /// Calls per second offered (0: closed loop).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=10_000_000))]
    rate: u64,
    /// Callers in a closed loop; connections in either.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// How long to load, after one second of warm-up.
    /// From 1 to 86,400: every instant it schedules then stays far from overflowing.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    seconds: u64,
    /// A label for the line printed.
    #[arg(long, default_value = "service")]
    label: String,
}

#[derive(Default)]
struct Tally {
    ok: u64,
    over: u64,
    errors: u64,
    latencies_us: Vec<u32>,
}

fn request(args: &Args, i: u64) -> RateLimitRequest {
    RateLimitRequest {
        domain: args.domain.clone(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry {
                key: args.key.clone(),
                value: format!("v{}", i % args.values.max(1)),
            }],
            ..Default::default()
        }],
        hits_addend: 1,
    }
}

async fn call(client: &mut RateLimitServiceClient<Channel>, r: RateLimitRequest) -> Option<bool> {
    match client.should_rate_limit(r).await {
        // 1 = OK, 2 = OVER_LIMIT.
        Ok(answer) => Some(answer.into_inner().overall_code == 1),
        Err(_) => None,
    }
}

fn record(tally: &mut Tally, answer: Option<bool>, latency: Duration) {
    match answer {
        Some(true) => tally.ok += 1,
        Some(false) => tally.over += 1,
        None => tally.errors += 1,
    }
    tally
        .latencies_us
        .push(u32::try_from(latency.as_micros()).unwrap_or(u32::MAX));
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Arc::new(Args::parse());
    let mut clients = Vec::new();
    for _ in 0..args.concurrency.max(1) {
        let channel = Channel::from_shared(format!("http://{}", args.target))?
            .connect()
            .await?;
        clients.push(RateLimitServiceClient::new(channel));
    }
    let warm_up = Duration::from_secs(1);
    let length = Duration::from_secs(args.seconds);
    let tally = Arc::new(Mutex::new(Tally::default()));
    let start = Instant::now();
    if let Some(every) = 1_000_000_000u64.checked_div(args.rate) {
        open_loop(
            &args,
            clients,
            Duration::from_nanos(every),
            start,
            warm_up,
            &tally,
        )
        .await?;
    } else {
        let mut callers = Vec::new();
        for (c, mut client) in clients.into_iter().enumerate() {
            let (args, tally) = (args.clone(), tally.clone());
            callers.push(tokio::spawn(async move {
                let mut i = c as u64 * 7_919;
                while start.elapsed() < warm_up + length {
                    let sent = Instant::now();
                    let answer = call(&mut client, request(&args, i)).await;
                    if sent >= start + warm_up && start.elapsed() < warm_up + length {
                        record(&mut *tally.lock().await, answer, sent.elapsed());
                    }
                    i += 1;
                }
            }));
        }
        for caller in callers {
            caller.await?;
        }
    }
    let mut tally = tally.lock().await;
    tally.latencies_us.sort_unstable();
    let at = |q: f64| {
        let n = tally.latencies_us.len();
        tally
            .latencies_us
            .get(((n as f64 * q) as usize).min(n.saturating_sub(1)))
            .copied()
            .unwrap_or(0)
    };
    let decided = tally.ok + tally.over;
    println!(
        "{} offered={} decisions/s={:.0} ok={} over_limit={} errors={} p50_us={} p99_us={} max_us={}",
        args.label,
        if args.rate == 0 { "max".to_string() } else { args.rate.to_string() },
        decided as f64 / length.as_secs_f64(),
        tally.ok,
        tally.over,
        tally.errors,
        at(0.50),
        at(0.99),
        tally.latencies_us.last().copied().unwrap_or(0),
    );
    Ok(())
}

/// Calls scheduled every `every` from `start`, whatever the answers take; each
/// latency from its call's scheduled time.
async fn open_loop(
    args: &Arc<Args>,
    clients: Vec<RateLimitServiceClient<Channel>>,
    every: Duration,
    start: Instant,
    warm_up: Duration,
    tally: &Arc<Mutex<Tally>>,
) -> Result<(), Box<dyn std::error::Error>> {
    let total = (args.rate * (args.seconds + 1)) as usize;
    let mut calls = Vec::with_capacity(total);
    for i in 0..total {
        // Within the ceilings on rate and seconds: at most a day past `start`.
        let due = start + every * u32::try_from(i)?;
        // The timer wakes to the millisecond: sleep to within one, then yield
        // (answers are read meanwhile) until the call is due.
        if let Some(far) = due.checked_duration_since(Instant::now()) {
            if far > Duration::from_millis(2) {
                tokio::time::sleep(far - Duration::from_millis(1)).await;
            }
        }
        while Instant::now() < due {
            tokio::task::yield_now().await;
        }
        let mut client = clients[i % clients.len()].clone();
        let (args, tally) = (args.clone(), tally.clone());
        calls.push(tokio::spawn(async move {
            let answer = call(&mut client, request(&args, i as u64)).await;
            if due >= start + warm_up {
                record(&mut *tally.lock().await, answer, due.elapsed());
            }
        }));
    }
    for c in calls {
        c.await?;
    }
    Ok(())
}
