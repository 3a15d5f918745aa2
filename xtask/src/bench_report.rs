//! `cargo xtask bench-report [--run]`: `BENCHMARKS.md`'s current report, written from
//! criterion's estimates (`target/criterion/<group>/…/new/`), the contention study's
//! and the edge benchmarks' JSON (`target/bench-report/*.json`) between the page's two report
//! markers, so every figure in it comes from one run, never copied by hand. With
//! `--run` it runs the benchmarks first; without, it writes from the last run.
//! Each table says when its benchmarks ran and the command that reruns it alone.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

use serde_json::Value;

use crate::{run, Step};

const PAGE: &str = "BENCHMARKS.md";
const BEGIN: &str = "<!-- bench-report: begin -->";
const END: &str = "<!-- bench-report: end -->";
/// Where the run keeps what criterion does not: the study's JSON, the machine.
const KEPT: &str = "target/bench-report";

/// The report's areas: a heading, the bench file that measures it, its groups.
const AREAS: &[(&str, &str, &[&str])] = &[
    (
        "Direct limiters",
        "direct",
        &["direct_admit", "direct_reject", "clock"],
    ),
    (
        "Giving back and waiting",
        "direct",
        &["refund", "wait_admitted"],
    ),
    (
        "Keyed tables",
        "keyed",
        &[
            "keyed_existing",
            "keyed_existing_str",
            "keyed_insert",
            "keyed_existing_cached_clock",
            "keyed_existing_time_given",
        ],
    ),
    ("The HTTP layer", "http", &["http_layer"]),
    ("Redis", "redis", &["redis"]),
];

/// The criterion arguments of a report run: short, as the tables are medians.
const CRITERION: &[&str] = &["--warm-up-time", "1", "--measurement-time", "2"];

pub fn bench_report(rerun: bool) -> Step {
    if rerun {
        run_benchmarks()?;
    }
    let report = report()?;
    let page = fs::read_to_string(PAGE).map_err(|e| format!("{PAGE}: {e}"))?;
    let (Some(begin), Some(end)) = (page.find(BEGIN), page.find(END)) else {
        return Err(format!("{PAGE} has no {BEGIN} … {END} region"));
    };
    let written = format!("{}{BEGIN}\n{report}{}", &page[..begin], &page[end..]);
    fs::write(PAGE, written).map_err(|e| format!("{PAGE}: {e}"))?;
    eprintln!("xtask: {PAGE}'s report rewritten");
    Ok(())
}

fn run_benchmarks() -> Step {
    fs::create_dir_all(KEPT).map_err(|e| format!("{KEPT}: {e}"))?;
    fs::write(format!("{KEPT}/machine.txt"), machine()).map_err(|e| format!("{KEPT}: {e}"))?;
    let mut files: Vec<&str> = AREAS.iter().map(|(_, file, _)| *file).collect();
    files.dedup();
    let mut args = vec!["bench", "-p", "portero-benches"];
    for file in &files {
        args.extend(["--bench", file]);
    }
    args.push("--");
    args.extend(CRITERION);
    run("cargo", &args, &[])?;
    let line = "cargo run --release -p portero-lab -- contention --threads 1,2 --json";
    eprintln!("\n==> {line}");
    let out = Command::new("cargo")
        .args(["run", "--release", "--quiet", "-p", "portero-lab", "--"])
        .args(["contention", "--threads", "1,2", "--json"])
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("{line}: {e}"))?;
    // Kept even when the study failed (a limiter over its quota): the report shows it.
    fs::write(format!("{KEPT}/contention.json"), &out.stdout)
        .map_err(|e| format!("{KEPT}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{line}: {}", out.status));
    }
    // The edge: the package built, then its two benchmarks (paths from the package's
    // folder, where npm runs them).
    crate::setup()?;
    crate::wasm()?;
    for (script, file) in EDGE {
        let at = format!("../{KEPT}/{file}");
        run(
            "npm",
            &["--prefix", "wasm", "run", script, "--", "--json", &at],
            &[],
        )?;
    }
    Ok(())
}

/// The edge's benchmarks: the npm script, and the JSON it writes.
const EDGE: [(&str, &str); 2] = [
    ("bench", "edge.json"),
    ("bench:durable", "edge-durable.json"),
];

/// This machine, as the tables name it: its CPU model and core count.
fn machine() -> String {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .and_then(|r| r.split(':').nth(1))
        })
        .map_or("an unnamed CPU", str::trim)
        .to_owned();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!("{model}, {cores} cores")
}

fn report() -> Result<String, String> {
    let machine = fs::read_to_string(format!("{KEPT}/machine.txt"))
        .unwrap_or_else(|_| format!("{} (this machine: the run did not record one)", machine()));
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## Current report\n\n\
         Written by `cargo xtask bench-report` from the last run's results (`--run` reruns \
         them first: criterion at {} per benchmark, then the contention study). Machine: \
         {machine}. Times are criterion's median per operation; on N threads, wall time over \
         all threads per check. Each table says when its benchmarks ran and how to rerun it \
         alone.\n",
        CRITERION.join(" ")
    );
    for (heading, file, groups) in AREAS {
        let _ = writeln!(out, "### {heading}\n");
        for group in *groups {
            match group_table(group, file)? {
                Some(table) => out.push_str(&table),
                None => {
                    let _ = writeln!(out, "`{group}`: no results (not run yet).\n");
                }
            }
        }
    }
    out.push_str(&edge()?);
    out.push_str(&contention()?);
    Ok(out)
}

/// The edge's tables: ns per check in Node (portero's wasm against
/// rate-limiter-flexible and a plain-JS GCRA), and a request's latency in workerd.
fn edge() -> Result<String, String> {
    let mut out = String::from(
        "### The edge

",
    );
    for (script, file) in EDGE {
        let path = format!("{KEPT}/{file}");
        let Ok(text) = fs::read_to_string(&path) else {
            let _ = writeln!(
                out,
                "`npm --prefix wasm run {script}`: no results (not run yet).\n"
            );
            continue;
        };
        let bench: Value = serde_json::from_str(&text).map_err(|e| format!("{path}: {e}"))?;
        let ran = fs::metadata(&path)
            .and_then(|m| m.modified())
            .map_err(|e| format!("{path}: {e}"))?;
        let rows = bench["rows"].as_array().into_iter().flatten();
        if script == "bench" {
            let _ = writeln!(
                out,
                "Checks in Node {} — ran {}; `npm --prefix wasm run bench` (best of {} rounds of {} checks)\n\n\
                 | benchmark | ns per check |\n|---|---:|",
                bench["node"].as_str().unwrap_or("?"),
                date(ran),
                bench["rounds"],
                bench["checks"]
            );
            for row in rows {
                let ns = row["ns"].as_f64().unwrap_or(f64::NAN);
                let _ = writeln!(out, "| {} | {ns:.1} |", row["name"].as_str().unwrap_or("?"));
            }
        } else {
            let _ = writeln!(
                out,
                "A request through workerd (from npm), {} sequential requests over loopback — ran {}; \
                 `npm --prefix wasm run bench:durable`\n\n\
                 | setup | p50 µs | p90 µs | p99 µs |\n|---|---:|---:|---:|",
                bench["requests"],
                date(ran)
            );
            for row in rows {
                let us = |k: &str| row[k].as_f64().unwrap_or(f64::NAN);
                let _ = writeln!(
                    out,
                    "| {} | {:.0} | {:.0} | {:.0} |",
                    row["name"].as_str().unwrap_or("?"),
                    us("p50_us"),
                    us("p90_us"),
                    us("p99_us")
                );
            }
        }
        out.push('\n');
    }
    Ok(out)
}

/// One benchmark's median (ns), and when it ran.
struct Estimate {
    function: String,
    value: Option<String>,
    median_ns: f64,
    ran: SystemTime,
}

fn group_table(group: &str, file: &str) -> Result<Option<String>, String> {
    let dir = Path::new("target/criterion").join(group);
    let mut found = Vec::new();
    collect(&dir, &mut found);
    if found.is_empty() {
        return Ok(None);
    }
    let mut estimates = Vec::new();
    for new in found {
        estimates.push(estimate(&new)?);
    }
    let ran = estimates.iter().map(|e| e.ran).max().expect("one at least");
    let mut out = format!(
        "`{group}` — ran {}; `cargo bench -p portero-benches --bench {file} -- '^{group}/'`\n\n",
        date(ran)
    );
    let mut functions: Vec<&str> = estimates.iter().map(|e| e.function.as_str()).collect();
    functions.sort_by_key(|f| (!f.starts_with("portero"), *f));
    functions.dedup();
    if estimates.iter().all(|e| e.value.is_none()) {
        out.push_str("| benchmark | median |\n|---|---:|\n");
        for f in functions {
            if let Some(e) = estimates.iter().find(|e| e.function == f) {
                let _ = writeln!(out, "| {f} | {} |", time(e.median_ns));
            }
        }
    } else {
        let mut rows: BTreeMap<&str, BTreeMap<&str, f64>> = BTreeMap::new();
        for e in &estimates {
            let value = e.value.as_deref().unwrap_or("—");
            rows.entry(value)
                .or_default()
                .insert(&e.function, e.median_ns);
        }
        let _ = writeln!(out, "| | {} |", functions.join(" | "));
        let _ = writeln!(out, "|---|{}", "---:|".repeat(functions.len()));
        for (value, cells) in rows {
            let cells: Vec<String> = functions
                .iter()
                .map(|f| cells.get(f).map_or_else(|| "—".to_owned(), |ns| time(*ns)))
                .collect();
            let _ = writeln!(out, "| {value} | {} |", cells.join(" | "));
        }
    }
    out.push('\n');
    Ok(Some(out))
}

/// Every `new` directory of a benchmark under `dir`.
fn collect(dir: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        if path.file_name().is_some_and(|n| n == "new") && path.join("estimates.json").is_file() {
            found.push(path);
        } else if path.is_dir() && path.file_name().is_some_and(|n| n != "report") {
            collect(&path, found);
        }
    }
}

fn estimate(new: &Path) -> Result<Estimate, String> {
    let read = |name: &str| -> Result<Value, String> {
        let path = new.join(name);
        let text = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
    };
    let benchmark = read("benchmark.json")?;
    let estimates = read("estimates.json")?;
    let ran = fs::metadata(new.join("estimates.json"))
        .and_then(|m| m.modified())
        .map_err(|e| format!("{}: {e}", new.display()))?;
    Ok(Estimate {
        function: benchmark["function_id"].as_str().unwrap_or("?").to_owned(),
        value: benchmark["value_str"].as_str().map(str::to_owned),
        median_ns: estimates["median"]["point_estimate"]
            .as_f64()
            .unwrap_or(f64::NAN),
        ran,
    })
}

fn contention() -> Result<String, String> {
    let path = format!("{KEPT}/contention.json");
    let mut out = String::from("### The contention study\n\n");
    let Ok(text) = fs::read_to_string(&path) else {
        out.push_str("No results (not run yet).\n\n");
        return Ok(out);
    };
    let study: Value = serde_json::from_str(&text).map_err(|e| format!("{path}: {e}"))?;
    let ran = fs::metadata(&path)
        .and_then(|m| m.modified())
        .map_err(|e| format!("{path}: {e}"))?;
    let _ = writeln!(
        out,
        "Ran {} ({} runs of {} ms each); \
         `cargo run --release -p portero-lab -- contention --threads 1,2` prints it with the \
         audit's figures and the latency percentiles.\n",
        date(ran),
        study["runs"],
        study["duration_ms"]
    );
    out.push_str("| subject | threads | Mops/s | p99 ns | audit: busiest key / allowed |\n|---|---:|---:|---:|---|\n");
    for row in study["rows"].as_array().into_iter().flatten() {
        let audit = &row["audit"];
        let verdict = match (audit["allowed_per_key"].as_u64(), audit["holds"].as_bool()) {
            (None, _) => "no quota".to_owned(),
            (Some(allowed), Some(true)) => {
                format!("{} / {allowed} ok", audit["largest_key_admitted"])
            }
            (Some(allowed), _) => format!("{} / {allowed} OVER", audit["largest_key_admitted"]),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {:.1} | {:.0} | {verdict} |",
            row["subject"].as_str().unwrap_or("?"),
            row["threads"],
            row["mops"]["median"].as_f64().unwrap_or(f64::NAN),
            row["latency_ns"]["p99"].as_f64().unwrap_or(f64::NAN),
        );
    }
    out.push('\n');
    Ok(out)
}

/// A median as the tables show it: ns below 10 µs, µs above.
fn time(ns: f64) -> String {
    if ns < 10_000.0 {
        format!("{ns:.1} ns")
    } else {
        format!("{:.2} µs", ns / 1_000.0)
    }
}

/// The UTC day of `t`, as `YYYY-MM-DD`.
fn date(t: SystemTime) -> String {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_times_read_as_written() {
        let day = |secs: u64| date(SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(secs));
        assert_eq!(day(0), "1970-01-01");
        assert_eq!(day(951_782_400), "2000-02-29");
        assert_eq!(day(1_796_256_000), "2026-12-03");
        assert_eq!(time(9.84), "9.8 ns");
        assert_eq!(time(12_345.0), "12.35 µs");
    }
}
