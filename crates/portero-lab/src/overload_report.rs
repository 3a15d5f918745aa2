//! The overload experiments' tables (and the goodput chart).

use portero_lab::overload::{
    breaker as brk, goodput as gp, little as lt, storm as st, tenants as tn,
};
use portero_lab::svg;

use crate::{Result, Seeded};

pub fn goodput(args: &Seeded) -> Result<()> {
    let runs = gp::run(args.seed);
    println!(
        "goodput: {} workers × {} ms = 100/s offered {}/s (Poisson, seed {}), clients give up after {} s, {} s",
        gp::WORKERS,
        gp::SERVICE / 1_000_000,
        gp::OFFERED,
        args.seed,
        gp::PATIENCE / 1_000_000_000,
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
    if let Some(path) = &args.svg {
        let series: Vec<(&str, Vec<f64>)> = runs
            .iter()
            .map(|r| {
                (
                    r.line.name(),
                    r.goodput.iter().map(|&g| f64::from(g)).collect(),
                )
            })
            .collect();
        let chart = svg::lines(
            "Goodput: answers in time per second, 150/s offered to a service for 100/s",
            "seconds",
            "answers in time per second",
            &series,
        );
        std::fs::write(path, chart).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        println!("chart written to {}", path.display());
    }
    Ok(())
}

pub fn tenants(args: &Seeded) -> Result<()> {
    let runs = tn::run(args.seed);
    println!(
        "tenants: {} in flight × {} s (mean, exponential) = 100/s; {} tenants at {}/s and one at {}/s (Poisson, seed {}), {} s",
        tn::CAPACITY,
        tn::SERVICE / 1_000_000_000,
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
    Ok(())
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

pub fn breaker() -> Result<()> {
    println!(
        "breaker: {} calls/s, dependency down from {} s to {} s; breaker: {} failures in a row, open {} s, one probe",
        brk::RATE,
        brk::DOWN_FROM / 1_000_000_000,
        brk::DOWN_UNTIL / 1_000_000_000,
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
    Ok(())
}

pub fn storm(args: &Seeded) -> Result<()> {
    println!(
        "storm: {}/s to a server refusing everything for {} s, Retry-After {} s, up to {} retries (seed {})",
        st::RATE,
        st::DOWN_UNTIL / 1_000_000_000,
        st::RETRY_AFTER.as_secs(),
        st::RETRIES,
        args.seed
    );
    println!(
        "{:<22} {:>20} {:>22}",
        "retries", "load while down /s", "requests answered"
    );
    for r in st::amplification(args.seed) {
        println!(
            "{:<22} {:>20.1} {:>15} of {}",
            match r.retry {
                st::Retry::Immediate => "immediate",
                st::Retry::Backoff => "backoff + full jitter",
            },
            r.load_while_down,
            r.answered,
            st::RATE * st::SECONDS
        );
    }
    let h = st::herd(args.seed);
    println!(
        "herd: {} clients refused at once, backoff 1 s base: most retries in any 100 ms: {} without jitter, {} with full jitter",
        st::HERD, h.peak_without_jitter, h.peak_with_jitter
    );
    Ok(())
}
