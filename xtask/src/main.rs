//! `cargo xtask <command>`: the one entry point that installs what is missing and runs
//! every check. See `cargo xtask help`.

use std::env;
use std::path::{Path, PathBuf};
use std::process::{exit, Command};

mod bench_report;
mod layers;
mod publish;

const HELP: &str = "\
cargo xtask <command>

  test         everything CI runs: fmt, clippy, tests + doc tests, loom models,
               the no_std wasm32 build, the tests on wasm32-wasip1, the wasm
               package (Node and workerd tests)
  layout       the layout's rules: imports name the defining module and flow one
               way (core layers, no circles), no file over 800 lines
  loom         the loom models (LOOM_MAX_PREEMPTIONS=2); `loom --deep` is unbounded
  wasm         build wasm/pkg: cargo (nightly, build-std), wasm-bindgen, wasm-opt,
               and check the size budget
  wasi         the core's unit tests and the property tests on wasm32-wasip1 (Node's WASI)
  charts       redraw every committed chart (docs/*.svg) from the lab's experiments
  docs         the book (docs/book, its Rust snippets run as doc tests) and the API
               docs (rustdoc, warnings as errors): target/doc/portero_tests/book
  bench-report write BENCHMARKS.md's current report from the last benchmark run;
               `bench-report --run` runs the benchmarks first (about 15 minutes)
  package      cargo package the three library crates together (verified), and
               their docs with warnings as errors
  msrv         each library crate on its minimum Rust (1.82 core and HTTP, 1.83
               Redis), dependencies resolved MSRV-aware
  setup        install what the checks need (rust targets, components, nightly
               rust-src, wasm-bindgen-cli, npm packages)
";

/// The wasm-bindgen CLI must match the crate's pinned version exactly.
const WASM_BINDGEN: &str = "0.2.130";
/// Size budget for the optimized module (bytes): raw and gzipped. Settling at the
/// edge (`Rule.settle`) brought every algorithm's refund rule in: 37,454 → 41,996 raw,
/// 15,835 → 17,603 gzipped; settling in the keyed table (`KeyedLimiter.acquire` and
/// `settle`, for the middleware's counting by outcome) its refund ledger and log of
/// places: → 56,491 raw, 23,413 gzipped; the Durable Object's own log of places
/// (`Rule.settle` in any order, `KeptPlaces` as words — as text, its 128-bit decimal
/// formatting cost 10 KB more): → 60,127 raw, 25,173 gzipped; that log grown from 16
/// runs to 64 (195 of 200 given back in random order: exact, where 16 runs keep 6 %):
/// → 63,430 raw, 26,477 gzipped (still a fraction of a Worker's 1 MB).
const WASM_MAX_RAW: u64 = 64 * 1024;
const WASM_MAX_GZIP: u64 = 27 * 1024;

fn main() {
    let args: Vec<String> = env::args().skip(1).collect();
    let root = workspace_root();
    env::set_current_dir(&root).expect("cd to the workspace root");
    let result = match args.first().map(String::as_str) {
        Some("test") => test_all(),
        Some("layout") => layers::check(&root),
        Some("loom") => loom(args.iter().any(|a| a == "--deep")),
        Some("setup") => setup(),
        Some("wasm") => setup().and_then(|()| wasm()),
        Some("wasi") => setup().and_then(|()| wasi()),
        Some("charts") => charts(),
        Some("docs") => docs(),
        Some("bench-report") => bench_report::bench_report(args.iter().any(|a| a == "--run")),
        Some("package") => publish::package_and_docs(),
        Some("msrv") => publish::setup().and_then(|()| publish::msrv()),
        _ => {
            print!("{HELP}");
            Ok(())
        }
    };
    if let Err(step) = result {
        eprintln!("xtask: FAILED at: {step}");
        exit(1);
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf()
}

type Step = Result<(), String>;

/// `cargo args…`, failing if the compiler warns (a warning is shown once, then the
/// build is cached: so the build is checked from its own output, every time).
fn without_warnings(args: &[&str]) -> Step {
    let line = format!("cargo {} (no warnings)", args.join(" "));
    eprintln!("\n==> {line}");
    let out = Command::new("cargo")
        .args(args)
        .args(["--message-format", "short"])
        .env("CARGO_TERM_COLOR", "never")
        .output()
        .map_err(|e| format!("{line}: {e}"))?;
    let printed = String::from_utf8_lossy(&out.stderr);
    eprint!("{printed}");
    if !out.status.success() {
        return Err(line);
    }
    let warnings: Vec<&str> = printed.lines().filter(|l| l.contains("warning")).collect();
    if warnings.is_empty() {
        Ok(())
    } else {
        Err(format!("{line}: {}", warnings.join("; ")))
    }
}

/// Runs `program args…` with extra environment, echoing it; an error names the step.
fn run(program: &str, args: &[&str], envs: &[(&str, &str)]) -> Step {
    let line = format!("{program} {}", args.join(" "));
    eprintln!("\n==> {line}");
    let status = Command::new(program)
        .args(args)
        .envs(envs.iter().copied())
        .status()
        .map_err(|e| format!("{line}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(line)
    }
}

fn output(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs `rustup install` unless a line of `rustup list` starts with `have`.
fn rustup_unless(list: &[&str], have: &str, install: &[&str]) -> Step {
    let listed = output("rustup", list).unwrap_or_default();
    if listed.lines().any(|l| l.starts_with(have)) {
        return Ok(());
    }
    run("rustup", install, &[])
}

fn setup() -> Step {
    for target in ["wasm32-unknown-unknown", "wasm32-wasip1"] {
        rustup_unless(
            &["target", "list", "--installed"],
            target,
            &["target", "add", target],
        )?;
    }
    for c in ["rustfmt", "clippy"] {
        rustup_unless(
            &["component", "list", "--installed"],
            c,
            &["component", "add", c],
        )?;
    }
    // The edge module is built with build-std and panic=immediate-abort (nightly): it
    // drops the panic formatting machinery, which would otherwise be half the module.
    rustup_unless(
        &["toolchain", "list"],
        "nightly",
        &["toolchain", "install", "nightly", "--profile", "minimal"],
    )?;
    rustup_unless(
        &["component", "list", "--installed", "--toolchain", "nightly"],
        "rust-src",
        &["component", "add", "rust-src", "--toolchain", "nightly"],
    )?;
    let have = output("wasm-bindgen", &["--version"]).unwrap_or_default();
    if !have.contains(WASM_BINDGEN) {
        // Not --locked: with it a pinned dependency is missing from the registry.
        run(
            "cargo",
            &["install", "wasm-bindgen-cli", "--version", WASM_BINDGEN],
            &[],
        )?;
    }
    // Every runtime and tool the JS tests run (pinned in wasm/package.json): an older
    // checkout's node_modules without one of them gets `npm ci` again.
    let tools = [
        "workerd",
        "wasm-opt",
        "bun",
        "deno",
        "edge-runtime",
        "tsc",
        "esbuild",
        "wrangler",
    ];
    if tools
        .iter()
        .any(|t| !Path::new("wasm/node_modules/.bin").join(t).exists())
    {
        run(
            "npm",
            &["ci", "--prefix", "wasm", "--no-audit", "--no-fund"],
            &[],
        )?;
    }
    publish::setup()?;
    // portero-redis's tests start their own redis-server (loopback, a free port).
    if output("redis-server", &["--version"]).is_none() {
        install_redis()?;
    }
    grpc_client()
}

/// The gRPC client portero-server's tests call it with, written by nobody here:
/// Python's grpcio and Envoy's protos as the gRPC project publishes them
/// (`xds-protos`), in a virtual environment of the repository's own (`.venv-grpc`).
fn grpc_client() -> Step {
    const VENV: &str = ".venv-grpc";
    const PACKAGES: [&str; 2] = ["grpcio==1.85.4", "xds-protos==1.85.0"];
    let python = format!("{VENV}/bin/python");
    let have = output(
        &python,
        &[
            "-c",
            "import grpc, envoy.service.ratelimit.v3.rls_pb2_grpc as s; print(grpc.__version__)",
        ],
    )
    .unwrap_or_default();
    if have.trim() == "1.85.4" {
        return Ok(());
    }
    run("python3", &["-m", "venv", VENV], &[])?;
    let mut install = vec![
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
    ];
    install.extend(PACKAGES);
    run(&python, &install, &[])
}

/// redis-server from Debian's packages (`sudo` when not root).
fn install_redis() -> Step {
    let root = output("id", &["-u"]).is_some_and(|u| u.trim() == "0");
    let apt = |args: &[&str]| {
        if root {
            run("apt-get", args, &[("DEBIAN_FRONTEND", "noninteractive")])
        } else {
            let mut with_sudo = vec!["apt-get"];
            with_sudo.extend_from_slice(args);
            run("sudo", &with_sudo, &[("DEBIAN_FRONTEND", "noninteractive")])
        }
    };
    apt(&["update"])?;
    apt(&["install", "-y", "--no-install-recommends", "redis-server"])
}

fn wasm() -> Step {
    run(
        "cargo",
        &[
            "+nightly",
            "build",
            "-p",
            "portero-wasm",
            "--target",
            "wasm32-unknown-unknown",
            "--profile",
            "wasm-release",
            "-Z",
            "build-std=std,panic_abort",
        ],
        &[
            ("RUSTFLAGS", "-Zunstable-options -Cpanic=immediate-abort"),
            ("CARGO_TARGET_DIR", "target-wasm"),
        ],
    )?;
    let built = "target-wasm/wasm32-unknown-unknown/wasm-release/portero_wasm.wasm";
    let _ = std::fs::remove_dir_all("wasm/pkg");
    // The license texts, beside the npm package's README (npm packs no symbolic link,
    // so they are copied from the one copy at the root; git ignores the copies).
    for license in ["LICENSE-MIT", "LICENSE-APACHE"] {
        std::fs::copy(license, format!("wasm/{license}"))
            .map_err(|e| format!("copy {license} into wasm/: {e}"))?;
    }
    run(
        "wasm-bindgen",
        &[
            "--target",
            "web",
            "--out-dir",
            "wasm/pkg",
            "--out-name",
            "portero_wasm",
            built,
        ],
        &[],
    )?;
    redis_script()?;
    let module = "wasm/pkg/portero_wasm_bg.wasm";
    run(
        "wasm/node_modules/.bin/wasm-opt",
        &[
            "-Oz",
            "--enable-bulk-memory",
            "--enable-nontrapping-float-to-int",
            "--enable-sign-ext",
            "--enable-mutable-globals",
            "--enable-reference-types",
            "--enable-multivalue",
            "--strip-debug",
            "--strip-producers",
            module,
            "-o",
            module,
        ],
        &[],
    )?;
    let raw = std::fs::metadata(module)
        .map_err(|e| format!("{module}: {e}"))?
        .len();
    let gz = output("sh", &["-c", &format!("gzip -9 -c {module} | wc -c")])
        .and_then(|s| s.trim().parse::<u64>().ok())
        .ok_or("gzip failed")?;
    eprintln!(
        "wasm module: {raw} bytes, {gz} bytes gzipped (budget {WASM_MAX_RAW} / {WASM_MAX_GZIP})"
    );
    if raw > WASM_MAX_RAW || gz > WASM_MAX_GZIP {
        return Err(format!(
            "wasm module over budget: {raw} B raw, {gz} B gzipped"
        ));
    }
    Ok(())
}

/// portero-redis's one script, as the npm package's Redis store sends it: generated into
/// `wasm/pkg/` from the crate's Lua files (in the order the crate concatenates them), so
/// Node and Rust instances run the same text and no copy lives in the repository.
fn redis_script() -> Step {
    let mut lua = String::new();
    for part in ["algorithms.lua", "limits.lua"] {
        let path = format!("crates/portero-redis/src/lua/{part}");
        lua.push_str(&std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?);
    }
    let text = serde_json::to_string(&lua).map_err(|e| e.to_string())?;
    let module = format!(
        "// Generated by `cargo xtask wasm` from crates/portero-redis/src/lua: do not edit.\n\
         /** portero-redis's script (its algorithms, then the dispatcher). */\n\
         export const LIMITS_LUA = {text};\n"
    );
    std::fs::write("wasm/pkg/redis_script.js", module)
        .map_err(|e| format!("wasm/pkg/redis_script.js: {e}"))
}

fn loom(deep: bool) -> Step {
    let mut envs = vec![
        ("RUSTFLAGS", "--cfg loom"),
        ("CARGO_TARGET_DIR", "target-loom"),
    ];
    if !deep {
        envs.push(("LOOM_MAX_PREEMPTIONS", "2"));
    }
    run(
        "cargo",
        &[
            "test",
            "-p",
            "portero-tests",
            "--release",
            "--test",
            "loom_core",
            "--test",
            "loom_limits",
        ],
        &envs,
    )
}

/// The core's unit tests and the workspace's property and integration tests on
/// wasm32-wasip1 (the target of Fastly Compute, Spin and wasmtime), run by Node's WASI
/// (`xtask/wasi/runner.mjs`). Tests that need threads or tokio's clock are left out
/// there by `cfg(not(target_os = "wasi"))`.
fn wasi() -> Step {
    let runner = format!(
        "node --no-warnings {}",
        workspace_root().join("xtask/wasi/runner.mjs").display()
    );
    let envs = [("CARGO_TARGET_WASM32_WASIP1_RUNNER", runner.as_str())];
    let target = ["--target", "wasm32-wasip1"];
    run(
        "cargo",
        &[
            &[
                "test",
                "-p",
                "portero",
                "--lib",
                "--no-default-features",
                "--features",
                "std",
            ][..],
            &target,
        ]
        .concat(),
        &envs,
    )?;
    run(
        "cargo",
        &[&["test", "-p", "portero-tests", "--tests"][..], &target].concat(),
        &envs,
    )
}

/// The book and the API docs: the book's pages are the `book` module of
/// `portero-tests` (`include_str!`, so every Rust block is a doc test that runs), and
/// rustdoc renders them beside the crates' own pages.
fn docs() -> Step {
    run("cargo", &["test", "-p", "portero-tests", "--doc"], &[])?;
    run(
        "cargo",
        &[
            "doc",
            "--no-deps",
            "--all-features",
            "-p",
            "portero",
            "-p",
            "portero-http",
            "-p",
            "portero-redis",
            "-p",
            "portero-tests",
        ],
        &[("RUSTDOCFLAGS", "-D warnings")],
    )?;
    eprintln!("\nxtask: the book is at target/doc/portero_tests/book/index.html");
    Ok(())
}

/// Redraws `docs/*.svg` from the lab's seeded, simulated-time experiments; the lab's
/// chart test fails while a committed chart differs from what this writes.
fn charts() -> Step {
    run(
        "cargo",
        &[
            "run",
            "--release",
            "--quiet",
            "-p",
            "portero-lab",
            "--",
            "charts",
            "docs",
        ],
        &[],
    )
}

fn test_all() -> Step {
    setup()?;
    run("cargo", &["fmt", "--all", "--", "--check"], &[])?;
    layers::check(Path::new("."))?;
    run(
        "cargo",
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
        &[],
    )?;
    run("cargo", &["test", "--workspace"], &[])?;
    // What a user builds first prints no warning: the README's main job (the lab, in
    // release, with the features a plain build gets) and the examples.
    without_warnings(&["build", "--release", "-p", "portero-lab"])?;
    without_warnings(&["build", "-p", "portero-examples", "--bins"])?;
    run(
        "cargo",
        &[
            "build",
            "-p",
            "portero",
            "--no-default-features",
            "--target",
            "wasm32-unknown-unknown",
        ],
        &[],
    )?;
    loom(false)?;
    wasi()?;
    publish::package_and_docs()?;
    publish::msrv()?;
    wasm()?;
    // The package's own test script: the test files, not the workers they load.
    run("npm", &["--prefix", "wasm", "test"], &[])?;
    run("npm", &["--prefix", "wasm", "run", "test:installed"], &[])?;
    eprintln!("\nxtask: all checks passed");
    Ok(())
}
