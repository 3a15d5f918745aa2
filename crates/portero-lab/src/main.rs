//! `portero-lab`: the guide's experiments (`docs/guide.md`), run through portero's limiters.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use portero_lab::scenario::{self, Scenario};
use portero_lab::sim::{self, Outcome};
use portero_lab::{arrivals, svg};

mod overload_report;
use overload_report as overload;
use overload_report::{Drawn, Seeded};
use portero_lab::Result;

#[derive(Parser)]
#[command(version, about = "Rate-limiting experiments with portero's limiters")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The same arrivals to all five algorithms (default: the burst experiment, 80 requests).
    Burst(BurstArgs),
    /// The boundary experiment: a fixed window of 100 lets 200 through across a boundary.
    Boundary(Output),
    /// "10 per second" meets 20 requests in 200 ms.
    Twenty(Output),
    /// Three questions about a fixed window of 10 per minute, answered by running them.
    Quiz,
    /// Scaling on this machine: T threads hammering one limiter, single word vs striped.
    Contention(ContentionArgs),
    /// The Redis race: check-then-act over-admits, one Lua script does not.
    Race(RaceArgs),
    /// One limit for a planet of 1-300 locations x 1-16 isolates each: per-isolate
    /// limits, the exact object, remembered refusals and leases, over-admission against
    /// decision latency.
    Planet(PlanetArgs),
    /// A service for 100/s offered 150/s, clients giving up after 2 s: goodput with an
    /// unbounded line, and with a bounded line, deadlines and early refusal; then over
    /// the line's length.
    Goodput(Seeded),
    /// 30 small tenants and one noisy one: random against fair shedding; then over the
    /// fair share's reserve.
    Tenants(Seeded),
    /// Three classes of traffic, 150/s to a service for 100/s: a plain concurrency
    /// limit against shedding by priority; then over the offered load.
    Priority(Seeded),
    /// 50 tasks share a provider's 100/s quota: waiting for a turn against retrying on 429.
    Outbound(Seeded),
    /// Little's law: the service time doubles; rate limit, concurrency limit, adaptive.
    Little,
    /// A dependency down for 60 s: calls that reach it without and with a breaker; then
    /// over the heal time and the call timeout.
    Breaker(Drawn),
    /// Retry storms: immediate retries against backoff, and a herd with and without
    /// jitter; then over the backoff base.
    Storm(Seeded),
    /// Writes every chart the project commits (`docs/*.svg`) into DIR.
    Charts {
        /// Where to write them (`cargo xtask charts` writes into `docs/`).
        dir: PathBuf,
    },
}

#[derive(Args)]
struct RaceArgs {
    /// Redis to use; by default a throwaway redis-server is started on a free
    /// loopback port (it must be installed).
    #[arg(long)]
    url: Option<String>,
    /// Rounds (a fresh key each).
    #[arg(long, default_value_t = 5)]
    rounds: u32,
    /// Concurrent requests per round, split between two instances.
    #[arg(long, default_value_t = 400)]
    requests: u32,
    /// Requests allowed per minute.
    #[arg(long, default_value_t = 50)]
    limit: u64,
    /// Run against a throwaway Redis Cluster of three primaries (started here) instead.
    #[arg(long, conflicts_with = "url")]
    cluster: bool,
}

#[derive(Args)]
struct ContentionArgs {
    /// Thread counts to sweep (default: 1, 2, 4, … and every available core).
    #[arg(long, value_delimiter = ',')]
    threads: Vec<usize>,
    /// Subjects to measure, by short name (default: all): floor, gcra-admit,
    /// gcra-reject, keyed-hot, keyed-10k-uniform, keyed-10k-zipf, keyed-1m-uniform,
    /// keyed-1m-zipf, striped, governor-direct, governor-10k-uniform, mutex, pingora-10k-uniform, limitador-10k-uniform.
    #[arg(long, value_delimiter = ',')]
    subjects: Vec<String>,
    /// Timed runs per measurement (after one warm-up).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// How long each run checks, in milliseconds.
    #[arg(long, default_value_t = 200)]
    duration_ms: u64,
    /// Single checks timed per thread for the latency percentiles.
    #[arg(long, default_value_t = 20_000)]
    samples: usize,
    /// Run thread counts above this machine's cores too (marked in the table): they
    /// measure the OS's scheduler as much as the subject, so they are refused unless asked.
    #[arg(long)]
    oversubscribe: bool,
    #[command(flatten)]
    out: Output,
}

#[derive(Args)]
struct Output {
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// Also draw the experiment as an SVG chart to this file.
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
}

#[derive(Args)]
struct PlanetArgs {
    /// Seed of the arrivals.
    #[arg(long, default_value_t = portero_lab::overload::DEFAULT_SEED)]
    seed: u64,
    #[command(flatten)]
    out: Output,
}

#[derive(Args)]
struct BurstArgs {
    /// Arrivals: one time in seconds per line (decimals allowed, any order).
    #[arg(long, value_name = "FILE", requires_all = ["limit", "window"])]
    arrivals: Option<PathBuf>,
    /// Requests per window (buckets: capacity, and refill per window).
    #[arg(long)]
    limit: Option<u64>,
    /// Window length in seconds.
    #[arg(long, value_name = "SECONDS")]
    window: Option<f64>,
    #[command(flatten)]
    out: Output,
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("portero-lab: error: {e}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Burst(args) => {
            let s = match args.arrivals {
                Some(path) => from_file(&path, args.limit, args.window)?,
                None => scenario::burst(),
            };
            report(&s, &args.out)
        }
        Command::Boundary(out) => report(&scenario::boundary(), &out),
        Command::Twenty(out) => report(&scenario::twenty(), &out),
        Command::Quiz => quiz(),
        Command::Contention(args) => contention(args),
        Command::Race(args) => race(args),
        Command::Planet(args) => planet(&args),
        Command::Goodput(args) => overload::goodput(&args),
        Command::Tenants(args) => overload::tenants(&args),
        Command::Priority(args) => overload::priority(&args),
        Command::Outbound(args) => overload::outbound(&args),
        Command::Little => overload::little(),
        Command::Breaker(args) => overload::breaker(&args),
        Command::Storm(args) => overload::storm(&args),
        Command::Charts { dir } => charts(&dir),
    }
}

fn charts(dir: &std::path::Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for chart in portero_lab::charts::all() {
        let path = dir.join(chart.file);
        std::fs::write(&path, chart.svg)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        println!("{}", path.display());
    }
    Ok(())
}

fn race(args: RaceArgs) -> Result<()> {
    if args.limit == 0 || args.rounds == 0 || args.requests == 0 {
        return Err("--limit, --rounds and --requests must be above zero".into());
    }
    if args.cluster {
        let cluster = portero_redis::LocalCluster::start()?;
        let runtime = tokio::runtime::Runtime::new()?;
        let rounds = runtime.block_on(portero_lab::race::run_cluster(
            &cluster.urls(),
            args.rounds,
            args.requests,
            args.limit,
        ))?;
        return print_race(&args, "a local cluster of three primaries", &rounds);
    }
    let local = match &args.url {
        Some(_) => None,
        None => Some(portero_redis::LocalRedis::start()?),
    };
    let url = args
        .url
        .clone()
        .or_else(|| local.as_ref().map(|l| l.url()))
        .expect("a URL or a local server");
    let runtime = tokio::runtime::Runtime::new()?;
    let rounds = runtime.block_on(portero_lab::race::run(
        &url,
        args.rounds,
        args.requests,
        args.limit,
    ))?;
    print_race(&args, &url, &rounds)
}

fn print_race(args: &RaceArgs, place: &str, rounds: &[portero_lab::race::Round]) -> Result<()> {
    println!(
        "race: two instances, {} concurrent requests per round, limit {} per minute ({place})",
        args.requests, args.limit
    );
    println!(
        "{:<7} {:>24} {:>20}",
        "round", "naive (GET, then INCR)", "Lua script"
    );
    for (i, r) in rounds.iter().enumerate() {
        println!("{:<7} {:>24} {:>20}", i + 1, r.naive, r.script);
    }
    Ok(())
}

fn from_file(path: &PathBuf, limit: Option<u64>, window: Option<f64>) -> Result<Scenario> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let arrivals = arrivals::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let limit = limit.ok_or("--limit is required with --arrivals")?;
    let window = window.ok_or("--window is required with --arrivals")?;
    if !window.is_finite() || window <= 0.0 || window > arrivals::MAX_SECONDS {
        return Err(format!("--window must be a positive number of seconds, got {window}").into());
    }
    Ok(Scenario {
        name: "burst",
        description: "arrivals from a file",
        arrivals,
        limit,
        window: (window * 1e9).round() as u64,
    })
}

fn simulate(s: &Scenario) -> Result<Vec<Outcome>> {
    let bar = ProgressBar::new(s.arrivals.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} arrivals ({eta})")
            .expect("static template"),
    );
    // Small runs finish before a bar is worth drawing.
    if s.arrivals.len() < 200_000 {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let out = sim::simulate(&s.arrivals, s.limit, s.window, &mut |done| {
        bar.set_position(done)
    })
    .map_err(|e| format!("invalid limit/window: {e}"))?;
    bar.finish_and_clear();
    Ok(out)
}

fn report(s: &Scenario, out: &Output) -> Result<()> {
    let outcomes = simulate(s)?;
    if out.json {
        let mut obj = serde_json::Map::new();
        for o in &outcomes {
            obj.insert(
                o.name.to_string(),
                serde_json::json!({ "admitted": o.admitted, "max_in_window": o.max_in_window }),
            );
        }
        println!("{}", serde_json::Value::Object(obj));
    } else {
        println!("{}: {}", s.name, s.description);
        println!(
            "{:<22} {:>9} {:>16}",
            "algorithm",
            "admitted",
            format!("max in any {}s", s.window as f64 / 1e9)
        );
        for o in &outcomes {
            println!("{:<22} {:>9} {:>16}", o.name, o.admitted, o.max_in_window);
        }
        println!("(leaky-queue: admitted = queued; max = released in any window)");
    }
    if let Some(path) = &out.svg {
        std::fs::write(path, svg::render(s, &outcomes))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        if !out.json {
            println!("chart written to {}", path.display());
        }
    }
    Ok(())
}

fn quiz() -> Result<()> {
    const MIN: u64 = 60_000_000_000;
    let run = |arrivals: Vec<u64>| {
        simulate(&Scenario {
            name: "quiz",
            description: "",
            arrivals,
            limit: 10,
            window: MIN,
        })
    };
    let find =
        |o: &[Outcome], name: &str| o.iter().find(|o| o.name == name).cloned().expect("known");

    println!("Limit 10 per 60 s, windows aligned to the minute.\n");
    let q1 = run(scenario::quiz::q1())?;
    let fw = find(&q1, "fixed-window");
    println!("1. 10 at 12:00:59 and 10 at 12:01:01 with a fixed window:");
    println!(
        "   {} of 20 accepted, {} within 2 s: no window ever counted past 10, yet the limit was not held.",
        fw.admitted, fw.max_in_window
    );

    let q2 = run(scenario::quiz::q2())?;
    let fw = find(&q2, "fixed-window");
    let at_30 = *fw.verdicts.last().expect("11 arrivals");
    println!("2. 10 at 12:00:00, then one at 12:00:30:");
    println!(
        "   the 12:00:30 request is {}: the window is full for 30 s more, though the service is idle.",
        if at_30 { "accepted" } else { "rejected" }
    );

    let log = find(&q1, "sliding-log");
    println!(
        "3. At most 10 in any 60 s span? A fixed window cannot: question 1 got {} through in 2 s.",
        fw_max(&q1)
    );
    println!(
        "   A sliding log can: on the same arrivals it admitted {} and never more than {} in any 60 s.",
        log.admitted, log.max_in_window
    );
    Ok(())
}

fn fw_max(o: &[Outcome]) -> u64 {
    o.iter()
        .find(|o| o.name == "fixed-window")
        .map_or(0, |o| o.max_in_window)
}

/// What the figures were measured on: the CPU model and the kernel's clock source
/// (Linux), so a table pasted elsewhere still says where it comes from.
fn machine() -> String {
    let read = |path: &str| std::fs::read_to_string(path).ok();
    let cpu = read("/proc/cpuinfo")
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, name)| name.trim().to_owned())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_owned());
    match read("/sys/devices/system/clocksource/clocksource0/current_clocksource") {
        Some(source) => format!("{cpu}, clocksource {}", source.trim()),
        None => cpu,
    }
}

fn contention(args: ContentionArgs) -> Result<()> {
    use portero_lab::contention::{self, report, threads, Study, Subject};
    let mut study = Study::default_for_this_machine();
    if !args.threads.is_empty() {
        study.threads = args.threads.clone();
    }
    if study.threads.contains(&0) {
        return Err("--threads must all be at least 1".into());
    }
    let cores = contention::study::cores();
    if let Some(&over) = study.threads.iter().find(|&&t| t > cores) {
        if !args.oversubscribe {
            return Err(format!(
                "--threads {over} is more than this machine's {cores} cores: the threads would take turns \
                 on the cores and the figures measure the OS's scheduler; pass --oversubscribe to run them \
                 anyway (marked in the table)"
            )
            .into());
        }
    }
    if !args.subjects.is_empty() {
        study.subjects = args
            .subjects
            .iter()
            .map(|s| Subject::parse(s).ok_or_else(|| format!("no subject {s:?} (see --help)")))
            .collect::<std::result::Result<_, _>>()?;
    }
    if args.runs == 0 || args.duration_ms == 0 || args.samples == 0 {
        return Err("--runs, --duration-ms and --samples must be above zero".into());
    }
    study.runs = args.runs;
    study.duration = std::time::Duration::from_millis(args.duration_ms);
    study.samples = args.samples;
    let bar = ProgressBar::new((study.threads.len() * study.subjects.len()) as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} measurements {msg}")
            .expect("static template"),
    );
    let load_before = report::load_average();
    let rows = contention::run(&study, |subject, t| {
        bar.set_message(format!("{} x {t}", subject.name()));
        bar.inc(1);
    });
    bar.finish_and_clear();
    let (machine, pinned) = (machine(), threads::pinning_works());
    if let Some(path) = &args.out.svg {
        std::fs::write(path, report::chart(&rows, &machine))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    if args.out.json {
        println!("{}", report::json(&study, &rows, &machine, pinned));
    } else {
        println!(
            "machine: {machine}; {} cores; threads {}; {} runs of {} ms after a warm-up; {} latency samples a thread",
            contention::study::cores(),
            match (pinned, study.threads.iter().any(|&t| t > cores)) {
                (true, false) => "pinned to cores, one each",
                (true, true) => "pinned to cores, one each up to the core count, then sharing them in turn",
                (false, _) => "NOT pinned (the OS does not let this process choose cores)",
            },
            study.runs,
            args.duration_ms,
            study.samples
        );
        print!("{}", report::table(&rows));
        println!("(Mops/s: million checks per second, all threads; efficiency: Mops/s at T / (T x one thread's);");
        println!(
            " latency: one check, timer cost taken out (timer: quanta, {} ns per reading here);",
            threads::timer_cost_ns()
        );
        println!(" audit run: the subject on a quota it must enforce, a third of what it reached just before, spread over its keys;");
        println!(" every key held to burst + floor(t/T) for the run's span t, no slack; keys drawn uniformly or by Zipf, exponent 1;");
        println!(" pingora-limits counts events in windows with a sketch (an estimator: a check is admitted while its key's count is at most the limit),");
        println!(" limitador is a network service's limiter (conditions and variables per request) in memory: each held to its limit per window begun)");
        if let (Some(before), Some(after)) = (load_before, report::load_average()) {
            println!(
                "load average (1 min) before the study {before:.2}, after {after:.2}{}",
                if before > 0.5 {
                    ": something else was running; expect the figures to move"
                } else {
                    ""
                }
            );
        }
        if let Some(verdict) = report::verdict(&rows) {
            println!("{verdict}");
        }
    }
    for r in rows
        .iter()
        .filter(|r| !r.audit.holds() && !r.subject.exact())
    {
        eprintln!(
            "note: {} x {} admitted more than its limit: an estimator, not held to exactness",
            r.subject.name(),
            r.threads
        );
    }
    let over: Vec<_> = rows
        .iter()
        .filter(|r| !r.audit.holds() && r.subject.exact())
        .collect();
    if !over.is_empty() {
        return Err(format!(
            "{} measurement(s) admitted more than their quota allows: {}",
            over.len(),
            over.iter()
                .map(|r| format!("{} x {}", r.subject.name(), r.threads))
                .collect::<Vec<_>>()
                .join(", ")
        )
        .into());
    }
    Ok(())
}

fn planet(args: &PlanetArgs) -> Result<()> {
    use portero_lab::planet::report;
    let rows = report::sweep(args.seed);
    if args.out.json {
        println!("{}", report::json(&rows));
    } else {
        println!("planet: {}", report::described(args.seed));
        print!("{}", report::table(&rows));
        println!("(hot key / worst key: most admitted in any minute ÷ what the rule admits in one; simulated time)");
    }
    if let Some(path) = &args.out.svg {
        std::fs::write(path, report::chart(&rows, 4))?;
    }
    Ok(())
}
