//! `cargo xtask <command>`: the one entry point that installs what is missing and runs
//! every check. See `cargo xtask help`.

use std::env;
use std::path::{Path, PathBuf};
use std::process::{exit, Command};

const HELP: &str = "\
cargo xtask <command>

  test         everything CI runs: fmt, clippy, tests + doc tests, loom models,
               the no_std wasm32 build
  loom         the loom models (LOOM_MAX_PREEMPTIONS=2); `loom --deep` is unbounded
  setup        install what the checks need (rust target, components)
";

fn main() {
    let args: Vec<String> = env::args().skip(1).collect();
    let root = workspace_root();
    env::set_current_dir(&root).expect("cd to the workspace root");
    let result = match args.first().map(String::as_str) {
        Some("test") => test_all(),
        Some("loom") => loom(args.iter().any(|a| a == "--deep")),
        Some("setup") => setup(),
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

fn setup() -> Step {
    let installed = output("rustup", &["target", "list", "--installed"]).unwrap_or_default();
    if !installed
        .lines()
        .any(|l| l.trim() == "wasm32-unknown-unknown")
    {
        run("rustup", &["target", "add", "wasm32-unknown-unknown"], &[])?;
    }
    let components = output("rustup", &["component", "list", "--installed"]).unwrap_or_default();
    for c in ["rustfmt", "clippy"] {
        if !components.lines().any(|l| l.starts_with(c)) {
            run("rustup", &["component", "add", c], &[])?;
        }
    }
    Ok(())
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

fn test_all() -> Step {
    setup()?;
    run("cargo", &["fmt", "--all", "--", "--check"], &[])?;
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
    eprintln!("\nxtask: all checks passed");
    Ok(())
}
