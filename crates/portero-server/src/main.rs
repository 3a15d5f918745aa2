//! `portero-server`: Envoy's rate-limit service (gRPC) and envoyproxy/ratelimit's HTTP
//! side, configured by envoyproxy/ratelimit's YAML files.
//!
//! Once both ports are bound it prints one line, `listening grpc=ADDR http=ADDR`, so
//! a supervisor (or a test) asked for port 0 learns the ports it got. It stops on
//! Ctrl-C or SIGTERM, finishing the requests in flight.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Parser;
use portero_server::config::outage::Outage;
use portero_server::gateway::Gateway;
use portero_server::headers::HeaderStyle;
use portero_server::shared::Shared;
use portero_server::{config, http, rls};

/// Envoy's rate-limit service, deciding with portero.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// envoyproxy/ratelimit configuration files, or directories of them (`.yaml`,
    /// `.yml`).
    #[arg(long = "config", required = true)]
    config: Vec<PathBuf>,
    /// Where the gRPC service listens.
    #[arg(long, default_value = "127.0.0.1:8081")]
    grpc: SocketAddr,
    /// Where `/json`, `/healthcheck` and `/metrics` are served.
    #[arg(long, default_value = "127.0.0.1:8080")]
    http: SocketAddr,
    /// The most descriptor values each rule keeps counters for (a flood of values
    /// cannot grow memory past it).
    #[arg(long, default_value_t = 100_000)]
    max_keys: usize,
    /// Answer OK to every request, counting as usual (global shadow mode).
    #[arg(long)]
    shadow: bool,
    /// How often the files are read again for changes, in milliseconds (0: never). A
    /// changed file that loads replaces the configuration, keeping the counters of
    /// unchanged rules; one that does not is refused, and the previous stays.
    /// At most an hour: a longer interval is an error, not a timer that overflows.
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(0..=3_600_000))]
    reload_ms: u64,
    /// Count in Redis (`redis://host:port`) instead of this process's memory: every
    /// instance naming the same Redis shares every limit. The server starts while
    /// Redis is down, and connects when it is up.
    #[arg(long, conflicts_with = "redis_cluster")]
    redis: Option<String>,
    /// Count in a Redis Cluster, through any of its nodes (repeatable): a request's
    /// counters are checked one call each, the others given back when one refuses.
    /// The server does not start unless a node answers.
    #[arg(long = "redis-cluster")]
    redis_cluster: Vec<String>,
    /// The prefix of every Redis key the server writes.
    #[arg(long, default_value = "portero:")]
    redis_prefix: String,
    /// How long a check waits for Redis, in milliseconds, before the outage policies
    /// answer.
    /// From 1 to 60,000.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    redis_timeout_ms: u64,
    /// What a rule without its own `when_down` answers while Redis is away: `open`
    /// (admit), `closed` (refuse) or `local` (count in this instance's memory).
    #[arg(long, default_value = "local", value_parser = outage)]
    when_redis_down: Outage,
    /// Headers answers ask Envoy to add to its response: `none`, `envoy`
    /// (envoyproxy/ratelimit's `RateLimit-Limit`, `-Remaining`, `-Reset`, renamed by
    /// its `LIMIT_LIMIT_HEADER`, `LIMIT_REMAINING_HEADER`, `LIMIT_RESET_HEADER`), `ietf`
    /// (`RateLimit-Policy`, `RateLimit`, `Retry-After`) or `both`. Default: `envoy`
    /// where `LIMIT_RESPONSE_HEADERS_ENABLED=true`, as for envoyproxy/ratelimit, else
    /// `none`.
    #[arg(long)]
    response_headers: Option<String>,
}

/// The headers `--response-headers` (or envoyproxy/ratelimit's variables) ask for.
fn header_style(asked: Option<&str>) -> Result<HeaderStyle, String> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let enabled = var("LIMIT_RESPONSE_HEADERS_ENABLED").is_some_and(|v| v == "true");
    let name = asked.unwrap_or(if enabled { "envoy" } else { "none" });
    let defaults = HeaderStyle::envoy_names();
    let names = [
        "LIMIT_LIMIT_HEADER",
        "LIMIT_REMAINING_HEADER",
        "LIMIT_RESET_HEADER",
    ];
    let mut chosen = defaults.clone();
    for (slot, variable) in chosen.iter_mut().zip(names) {
        if let Some(v) = var(variable) {
            ::http::HeaderName::try_from(v.as_str())
                .map_err(|_| format!("{variable}={v:?} is not a header name"))?;
            *slot = v;
        }
    }
    HeaderStyle::from_name(name, chosen)
        .ok_or_else(|| format!("--response-headers {name}: expected none, envoy, ietf or both"))
}

fn outage(name: &str) -> Result<Outage, String> {
    Outage::from_name(name).ok_or_else(|| format!("expected {}", Outage::NAMES))
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    // What the files held before they were read: a change made from here on (even
    // while the server starts, before the watcher's first look) is a change.
    let loaded = config::stamp(&args.config);
    let tree = match config::load(&args.config) {
        Ok(tree) => tree,
        Err(e) => {
            eprintln!("portero-server: configuration refused: {e}");
            std::process::exit(2);
        }
    };
    let style = match header_style(args.response_headers.as_deref()) {
        Ok(style) => style,
        Err(e) => {
            eprintln!("portero-server: {e}");
            std::process::exit(2);
        }
    };
    let mut gateway = match Gateway::try_new(tree, args.max_keys.max(1), args.shadow) {
        Ok(gateway) => gateway.with_headers(style),
        Err(e) => {
            eprintln!("portero-server: {e}");
            std::process::exit(2);
        }
    };
    let timeout = std::time::Duration::from_millis(args.redis_timeout_ms);
    let shared = if let Some(url) = &args.redis {
        Some(Shared::new(
            url,
            &args.redis_prefix,
            timeout,
            args.when_redis_down,
        ))
    } else if !args.redis_cluster.is_empty() {
        let nodes: Vec<&str> = args.redis_cluster.iter().map(String::as_str).collect();
        Some(Shared::cluster(&nodes, &args.redis_prefix, timeout, args.when_redis_down).await)
    } else {
        None
    };
    match shared {
        Some(Ok(shared)) => gateway = gateway.with_redis(shared),
        Some(Err(e)) => {
            eprintln!("portero-server: {e}");
            std::process::exit(2);
        }
        None => {}
    }
    let gateway = Arc::new(gateway);
    if args.reload_ms > 0 {
        tokio::spawn(watch(
            args.config.clone(),
            std::time::Duration::from_millis(args.reload_ms),
            gateway.clone(),
            loaded,
        ));
    }
    if let Err(e) = serve(&args, gateway).await {
        eprintln!("portero-server: {e}");
        std::process::exit(1);
    }
}

async fn serve(args: &Args, gateway: Arc<Gateway>) -> std::io::Result<()> {
    let grpc = tokio::net::TcpListener::bind(args.grpc).await?;
    let web = tokio::net::TcpListener::bind(args.http).await?;
    println!(
        "listening grpc={} http={}",
        grpc.local_addr()?,
        web.local_addr()?
    );
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let until = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let grpc_server = tonic::transport::Server::builder()
        .add_service(rls::Rls(gateway.clone()).server())
        .serve_with_incoming_shutdown(
            tonic::transport::server::TcpIncoming::from(grpc),
            until(stopped.clone()),
        );
    let http_server =
        axum::serve(web, http::router(gateway)).with_graceful_shutdown(until(stopped.clone()));
    tokio::spawn(async move {
        shutdown_signal().await;
        let _ = stop.send(true);
    });
    let (g, h) = tokio::join!(grpc_server, http_server);
    g.map_err(std::io::Error::other)?;
    h
}

/// Reads `paths` again every `every`, and reloads what changed since they held `seen`
/// (their stamp when the configuration in use was read; said on stderr).
async fn watch(
    paths: Vec<PathBuf>,
    every: std::time::Duration,
    gateway: Arc<Gateway>,
    mut seen: u64,
) {
    loop {
        tokio::time::sleep(every).await;
        let now = config::stamp(&paths);
        if now == seen {
            continue;
        }
        // A file being written is read once it stands still for a whole interval: a
        // half-written file that happens to parse (the later rules cut off) would
        // otherwise replace the configuration, and those rules lose their counts.
        tokio::time::sleep(every).await;
        if config::stamp(&paths) != now {
            continue;
        }
        seen = now;
        match config::load(&paths) {
            Ok(tree) => {
                let rules = tree.rules().len();
                match gateway.reload(tree) {
                    Ok(kept) => eprintln!(
                        "portero-server: configuration reloaded: {rules} rules, {kept} kept their counters"
                    ),
                    Err(e) => eprintln!(
                        "portero-server: configuration change refused, the previous one stays: {e}"
                    ),
                }
            }
            Err(e) => eprintln!(
                "portero-server: configuration change refused, the previous one stays: {e}"
            ),
        }
    }
}

/// Ctrl-C, or SIGTERM where there is one.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                    return;
                }
            };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
