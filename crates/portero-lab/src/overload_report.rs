//! The overload experiments' tables: each headline, then the curve it sits on (the
//! same run with the one parameter that decides it swept, a few points of it; the
//! chart, `--svg FILE`, draws every point).

use std::path::{Path, PathBuf};

use portero_lab::charts;
use portero_lab::overload::{
    breaker as brk, goodput as gp, little as lt, priority as pr, storm as st, tenants as tn, SEC,
};

use clap::Args;
use portero_lab::Result;

#[derive(Args)]
pub struct Seeded {
    /// Seed of the random arrivals (and jitter).
    #[arg(long, default_value_t = portero_lab::overload::DEFAULT_SEED)]
    pub seed: u64,
    /// Also draw the experiment, and its curve, as an SVG chart to this file.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
}

#[derive(Args)]
pub struct Drawn {
    /// Also draw the experiment's curves as an SVG chart to this file.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
}

/// Writes `svg` to `path`, if one was asked for.
fn write_chart(path: Option<&Path>, svg: impl FnOnce() -> String) -> Result<()> {
    if let Some(path) = path {
        std::fs::write(path, svg()).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        println!("chart written to {}", path.display());
    }
    Ok(())
}

/// The mark on the row of the experiment's own value.
fn mark(own: bool) -> &'static str {
    if own {
        "  ← the experiment"
    } else {
        ""
    }
}

pub fn goodput(args: &Seeded) -> Result<()> {
    let runs = gp::run(args.seed);
    println!(
        "goodput: {} workers × {} ms = 100/s offered {}/s (Poisson, seed {}), clients give up after {} s, {} s",
        gp::WORKERS,
        gp::SERVICE / 1_000_000,
        gp::OFFERED,
        args.seed,
        gp::PATIENCE / SEC,
        gp::SECONDS
    );
    println!(
        "{:<24} {:>22} {:>9} {:>9} {:>9}",
        "line", "goodput/s (last 30 s)", "served", "refused", "expired"
    );
    for r in &runs {
        println!(
            "{:<24} {:>22.1} {:>9} {:>9} {:>9}",
            r.line.name(),
            r.goodput_second_half(),
            r.served,
            r.refused,
            r.expired
        );
    }
    println!("(goodput: answers that reach the client within its 2 s; bounded line: {} requests, 503 when full)", gp::QUEUE);
    println!();
    println!("over the line's length: goodput/s, last 30 s (start check: a request starts only while its deadline leaves the 100 ms of service)");
    println!(
        "{:>15} {:>14} {:>14} {:>22} {:>22}",
        "waiting at most",
        "oldest first",
        "newest first",
        "oldest, start check",
        "newest, start check"
    );
    for p in gp::queue_curve(args.seed)
        .iter()
        .filter(|p| [0, 50, 100, 150, 200, 250, 300, 400, 500].contains(&p.queue))
    {
        println!(
            "{:>15} {:>14.1} {:>14.1} {:>22.1} {:>22.1}{}",
            p.queue,
            p.oldest,
            p.newest,
            p.oldest_checked,
            p.newest_checked,
            mark(p.queue == gp::QUEUE)
        );
    }
    write_chart(args.svg.as_deref(), || charts::goodput(args.seed))
}

pub fn tenants(args: &Seeded) -> Result<()> {
    let runs = tn::run(args.seed);
    println!(
        "tenants: {} in flight × {} s (mean, exponential) = 100/s; {} tenants at {}/s and one at {}/s (Poisson, seed {}), {} s",
        tn::CAPACITY,
        tn::SERVICE / SEC,
        tn::SMALL_TENANTS,
        tn::SMALL_RATE,
        tn::BIG_RATE,
        args.seed,
        tn::SECONDS
    );
    println!(
        "{:<10} {:>26} {:>16} {:>18}",
        "shedding", "small tenants lost", "big tenant lost", "big served per s"
    );
    for r in &runs {
        println!(
            "{:<10} {:>7.2}% ({:>5} of {:>5}) {:>15.1}% {:>18.1}",
            r.shedding.name(),
            r.small_lost_percent(),
            r.small.0 - r.small.1,
            r.small.0,
            r.big_lost_percent(),
            r.big_served_per_second()
        );
    }
    println!(
        "(fair: FairShare with {} of {} slots kept for tenants below their share)",
        tn::RESERVE,
        tn::CAPACITY
    );
    println!();
    println!("over the reserve (fair shedding):");
    println!(
        "{:>8} {:>26} {:>18}",
        "reserve", "small tenants lost", "big served per s"
    );
    for (reserve, r) in tn::reserve_curve(args.seed)
        .iter()
        .filter(|(reserve, _)| [0, 1, 2, 3, 5, 7, 10, 15, 20, 30].contains(reserve))
    {
        println!(
            "{:>8} {:>7.2}% ({:>5} of {:>5}) {:>18.1}{}",
            reserve,
            r.small_lost_percent(),
            r.small.0 - r.small.1,
            r.small.0,
            r.big_served_per_second(),
            mark(*reserve == tn::RESERVE)
        );
    }
    write_chart(args.svg.as_deref(), || charts::tenants(args.seed))
}

pub fn priority(args: &Seeded) -> Result<()> {
    let mix: Vec<String> = pr::CLASSES
        .iter()
        .map(|c| format!("{} {:.0} % ({})", c.name, c.share * 100.0, c.path))
        .collect();
    println!(
        "priority: {} in flight × {} s (mean, exponential) = 100/s offered {}/s (Poisson, seed {}): {}; {} s",
        pr::CAPACITY,
        pr::SERVICE / SEC,
        pr::OFFERED,
        args.seed,
        mix.join(", "),
        pr::SECONDS
    );
    println!(
        "{:<24} {:>14} {:>14} {:>15} {:>10}",
        "admission", "critical lost", "default lost", "sheddable lost", "served/s"
    );
    for r in pr::run(args.seed) {
        println!(
            "{:<24} {:>13.2}% {:>13.2}% {:>14.2}% {:>10.1}",
            r.admission.name(),
            r.lost_percent(0),
            r.lost_percent(1),
            r.lost_percent(2),
            r.throughput()
        );
    }
    println!("(both through LoadShedLayer: by_priority over PriorityLimit::three_classes, sheddable up to 70 in flight, default 90, critical 100; new over a ConcurrencyLimit)");
    println!();
    println!("over the offered load: refused, % of each class (by priority unless marked plain), and all classes served per second");
    println!(
        "{:>10} {:>16} {:>17} {:>12} {:>12} {:>12} {:>16} {:>13}",
        "offered/s",
        "plain: critical",
        "plain: sheddable",
        "critical",
        "default",
        "sheddable",
        "served/s: plain",
        "by priority"
    );
    for [plain, by] in pr::load_curve(args.seed)
        .iter()
        .filter(|[p, _]| [50.0, 100.0, 125.0, 150.0, 200.0, 300.0, 400.0].contains(&p.offered))
    {
        println!(
            "{:>10} {:>15.2}% {:>16.2}% {:>11.2}% {:>11.2}% {:>11.2}% {:>16.1} {:>13.1}{}",
            plain.offered,
            plain.lost_percent(0),
            plain.lost_percent(2),
            by.lost_percent(0),
            by.lost_percent(1),
            by.lost_percent(2),
            plain.throughput(),
            by.throughput(),
            mark(plain.offered == pr::OFFERED)
        );
    }
    write_chart(args.svg.as_deref(), || charts::priority(args.seed))
}

pub fn little() -> Result<()> {
    println!(
        "little: {} workers, {}/s offered; service time 0.25 s for {} s, then 0.5 s (capacity 120/s, then 60/s)",
        lt::WORKERS,
        lt::OFFERED,
        lt::PHASE
    );
    println!(
        "{:<22} {:>14} {:>14} {:>14} {:>14} {:>12}",
        "admission",
        "admitted/s S=¼",
        "latency S=¼",
        "admitted/s S=½",
        "latency S=½",
        "line at end"
    );
    for r in lt::run() {
        let [a, b] = r.phases;
        println!(
            "{:<22} {:>14.1} {:>13.2}s {:>14.1} {:>13.2}s {:>12}",
            r.admission.name(),
            a.admitted_per_second,
            a.mean_latency,
            b.admitted_per_second,
            b.mean_latency,
            b.line_at_end
        );
    }
    println!(
        "(last {} s of each phase; latency: admission to answer, mean)",
        lt::MEASURED
    );
    Ok(())
}

fn seconds(ns: u64) -> String {
    format!("{:.2} s", ns as f64 / SEC as f64)
}

pub fn breaker(args: &Drawn) -> Result<()> {
    println!(
        "breaker: {} calls/s, dependency down from {} s to {} s; breaker: {} failures in a row, open {} s, one probe",
        brk::RATE,
        brk::DOWN_FROM / SEC,
        brk::DOWN_UNTIL / SEC,
        brk::FAILURES,
        brk::OPEN_FOR.as_secs()
    );
    println!(
        "{:<10} {:>24} {:>12} {:>26}",
        "breaker", "calls reaching it (down)", "fallbacks", "recovered after it healed"
    );
    for r in brk::run() {
        println!(
            "{:<10} {:>24} {:>12} {:>23} ms",
            if r.with_breaker { "with" } else { "without" },
            r.reached_while_down,
            r.fallbacks,
            r.recovered_after_ms
        );
    }
    println!();
    println!("over the heal: recovered after the dependency healed, by outage and open period (calls reaching it: the 60 s outage)");
    let curves: Vec<Vec<(u64, u64)>> = brk::OPEN_PERIODS
        .iter()
        .map(|&open| brk::recovery_curve(open))
        .collect();
    print!("{:>22}", "outage");
    for open in brk::OPEN_PERIODS {
        print!(" {:>12}", format!("open {} s", open.as_secs()));
    }
    println!();
    let own = brk::DOWN_UNTIL - brk::DOWN_FROM;
    for outage in [
        10 * SEC,
        30 * SEC,
        45 * SEC,
        own - brk::OUTAGE_STEP,
        own,
        own + brk::OUTAGE_STEP,
        75 * SEC,
        90 * SEC,
        120 * SEC,
    ] {
        print!("{:>22}", seconds(outage));
        for curve in &curves {
            let (_, r) = curve
                .iter()
                .find(|(o, _)| *o == outage)
                .expect("on the grid");
            print!(" {:>12}", seconds(*r));
        }
        println!("{}", mark(outage == own));
    }
    print!(
        "{:>22}",
        format!("mean, every {} ms", brk::OUTAGE_STEP / 1_000_000)
    );
    for curve in &curves {
        print!(" {:>12}", seconds(brk::mean_recovery(curve)));
    }
    println!();
    print!("{:>22}", "calls reaching it");
    for open in brk::OPEN_PERIODS {
        let r = brk::simulate(brk::Setup {
            open_for: open,
            ..brk::Setup::headline(true)
        });
        print!(" {:>12}", r.reached_while_down);
    }
    println!();
    println!(
        "(mean over outages of {} to {}: a heal at a random moment waits about half an open period)",
        seconds(brk::OUTAGE_STEP),
        seconds(brk::LONGEST_OUTAGE)
    );
    println!();
    println!("over the call timeout: each call to the dead dependency hangs until it (60 s outage, open 30 s)");
    println!(
        "{:>8} {:>20} {:>14} {:>16} {:>20} {:>14}",
        "timeout",
        "with: reaching it",
        "most hanging",
        "recovered after",
        "without: reaching it",
        "most hanging"
    );
    for (timeout, without, with) in brk::timeout_curve()
        .iter()
        .filter(|(t, _, _)| [0, 1, 5, 10, 20, 50, 100].contains(&(t / (SEC / 10))))
    {
        println!(
            "{:>8} {:>20} {:>14} {:>16} {:>20} {:>14}{}",
            seconds(*timeout),
            with.reached_while_down,
            with.most_hanging,
            seconds(with.recovered_after),
            without.reached_while_down,
            without.most_hanging,
            mark(*timeout == 0)
        );
    }
    write_chart(args.svg.as_deref(), charts::breaker)
}

pub fn storm(args: &Seeded) -> Result<()> {
    println!(
        "storm: {}/s to a server refusing everything for {} s, Retry-After {} s, up to {} retries (seed {})",
        st::RATE,
        st::DOWN_UNTIL / SEC,
        st::RETRY_AFTER.as_secs(),
        st::RETRIES,
        args.seed
    );
    println!(
        "{:<22} {:>20} {:>22}",
        "retries", "load while down /s", "requests answered"
    );
    let total = st::RATE * st::SECONDS;
    for r in st::amplification(args.seed) {
        println!(
            "{:<22} {:>20.1} {:>15} of {}",
            match r.retry {
                st::Retry::Immediate => "immediate",
                st::Retry::Backoff => "backoff + full jitter",
            },
            r.load_while_down,
            r.answered,
            total
        );
    }
    let h = st::herd(args.seed);
    println!(
        "herd: {} clients refused at once, backoff 1 s base: most retries in any 100 ms: {} without jitter, {} with full jitter",
        st::HERD, h.peak_without_jitter, h.peak_with_jitter
    );
    println!();
    println!(
        "over the backoff base (full jitter, cap 30 s): load while down /s, requests answered"
    );
    println!(
        "{:>8} {:>22} {:>10} {:>22} {:>10}",
        "base", "after Retry-After", "answered", "Retry-After ignored", "answered"
    );
    let own = st::Client::EXPERIMENT.base;
    for (base, after, ignored) in st::base_curve(args.seed)
        .iter()
        .filter(|(b, _, _)| [1, 2, 5, 10, 15, 20, 30].contains(&(b.as_millis() / 100)))
    {
        println!(
            "{:>8} {:>22.1} {:>10} {:>22.1} {:>10}{}",
            format!("{:.1} s", base.as_secs_f64()),
            after.load_while_down,
            after.answered,
            ignored.load_while_down,
            ignored.answered,
            mark(*base == own)
        );
    }
    let quick = st::Client::QUICK;
    let q = st::backing_off(quick, args.seed);
    println!(
        "base {} s, cap {} s, Retry-After ignored: {:.1}/s while down, {} of {} answered",
        quick.base.as_secs_f64(),
        quick.cap.as_secs(),
        q.load_while_down,
        q.answered,
        total
    );
    write_chart(args.svg.as_deref(), || charts::storm(args.seed))
}

/// `portero-lab outbound`.
pub fn outbound(args: &Seeded) -> Result<()> {
    use portero_lab::overload::outbound as ob;
    println!(
        "outbound: {} tasks x {} messages at once, a provider allowing {}/s (burst 1), seed {}",
        ob::TASKS,
        ob::MESSAGES,
        ob::PER_SECOND,
        args.seed
    );
    table(
        &[
            ("strategy", 18),
            ("delivered/s", 12),
            ("over quota", 11),
            ("wait p50", 9),
            ("wait p99", 9),
            ("wait max", 9),
        ],
        ob::run(args.seed).iter().map(|r| {
            let wait = |q| format!("{:.2}s", r.wait_at(q));
            let rate = format!("{:.1}", r.delivered_per_second);
            vec![
                r.strategy.name().into(),
                rate,
                r.over_quota.to_string(),
                wait(0.5),
                wait(0.99),
                wait(1.0),
            ]
        }),
    );
    use portero_lab::overload::outbound_waits as ow;
    println!(
        "\ncallers that give up: {} tasks, a provider allowing 100/s (burst 10) for {} s, each call waiting at most 1-150 ms, then calling again",
        ow::TASKS,
        ow::RUN / portero_lab::overload::SEC
    );
    table(
        &[
            ("waiting", 22),
            ("admitted", 10),
            ("turns", 7),
            ("used", 10),
            ("newcomer waits", 15),
            ("overtaken", 10),
        ],
        ow::patience(args.seed).iter().map(|r| {
            let used = format!("{:.1}%", 100.0 * r.admitted as f64 / r.turns as f64);
            let newcomer = format!("{:.3}s", r.newcomer_wait);
            let (admitted, turns) = (r.admitted.to_string(), r.turns.to_string());
            vec![
                r.waiting.name().into(),
                admitted,
                turns,
                used,
                newcomer,
                r.overtaken.to_string(),
            ]
        }),
    );
    println!("(overtaken: admitted while a call that started earlier still waited)");
    println!(
        "\na provider allowing {} in any sliding second: {} tasks x {} calls, timers firing 0-2 ms late",
        ow::N,
        ow::TASKS,
        ow::CALLS
    );
    table(
        &[
            ("timing", 22),
            ("refused", 9),
            ("busiest second", 16),
            ("served/s", 12),
        ],
        ow::window(args.seed).iter().map(|r| {
            let rate = format!("{:.1}", r.delivered_per_second);
            vec![
                r.timing.name().into(),
                r.refused.to_string(),
                r.busiest_second.to_string(),
                rate,
            ]
        }),
    );
    println!("(simulated time: the same on every machine)");
    Ok(())
}

/// Prints a table: a header of `columns` (title, width), then one line per row of
/// formatted cells, the first column left-aligned and the others right-aligned.
fn table(columns: &[(&str, usize)], rows: impl Iterator<Item = Vec<String>>) {
    let line = |cells: &[String]| {
        let mut out = String::new();
        for (i, (cell, (_, width))) in cells.iter().zip(columns).enumerate() {
            if i == 0 {
                out.push_str(&format!("{cell:<width$}"));
            } else {
                out.push_str(&format!(" {cell:>width$}"));
            }
        }
        println!("{out}");
    };
    line(
        &columns
            .iter()
            .map(|(title, _)| title.to_string())
            .collect::<Vec<_>>(),
    );
    for row in rows {
        line(&row);
    }
}
