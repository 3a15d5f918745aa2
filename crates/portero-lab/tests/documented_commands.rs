//! Every `portero-lab` command the documents show (the README, the book, the guide,
//! `BENCHMARKS.md` and its log) parses: each is run with `--help` after its arguments, so an
//! argument the lab no longer takes (`contention --ops 2000000` was shown long after
//! it was gone) fails here instead of in a reader's terminal.

use std::path::Path;
use std::process::Command;

/// The documents a reader runs commands from.
fn documents() -> Vec<std::path::PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut docs = vec![
        root.join("README.md"),
        root.join("BENCHMARKS.md"),
        root.join("docs/benchmarks-log.md"),
        root.join("docs/guide.md"),
    ];
    let book = root.join("docs/book");
    let mut pages: Vec<_> = std::fs::read_dir(&book)
        .expect("docs/book")
        .map(|e| e.expect("a page").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    docs.extend(pages);
    docs
}

/// The arguments of every `portero-lab` command in `text` (after `portero-lab` or
/// `portero-lab --`), up to the end of the code span, a pipe or a redirection.
fn commands(text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for (i, _) in text.match_indices("portero-lab") {
        let rest = &text[i + "portero-lab".len()..];
        let rest = rest.strip_prefix(" --").unwrap_or(rest);
        let Some(rest) = rest.strip_prefix(' ') else {
            continue;
        };
        let end = rest
            .find(['`', '\n', '|', '>', ')', '"'])
            .unwrap_or(rest.len());
        let args: Vec<String> = rest[..end]
            .split_whitespace()
            .map(|a| a.trim_end_matches([',', '.', ';', ':']).to_owned())
            .take_while(|a| !a.is_empty() && a != "…" && a != "...")
            .collect();
        // A subcommand is a lowercase word (prose such as "portero-lab reproduces" is
        // not a command; the list of subcommands decides below).
        if args
            .first()
            .is_some_and(|a| a.chars().all(|c| c.is_ascii_lowercase() || c == '-'))
        {
            out.push(args);
        }
    }
    out
}

/// The lab's subcommands, from its own help.
fn subcommands(lab: &str) -> Vec<String> {
    let help = Command::new(lab)
        .arg("--help")
        .output()
        .expect("the lab runs");
    let text = String::from_utf8_lossy(&help.stdout).into_owned();
    text.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect()
}

#[test]
fn every_documented_lab_command_parses() {
    let lab = env!("CARGO_BIN_EXE_portero-lab");
    let known = subcommands(lab);
    assert!(known.iter().any(|s| s == "contention"), "{known:?}");
    let mut checked = 0;
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).expect("a document");
        for args in commands(&text) {
            if !known.contains(&args[0]) {
                continue;
            }
            let out = Command::new(lab)
                .args(&args)
                .arg("--help")
                .output()
                .expect("the lab runs");
            assert!(
                out.status.success(),
                "{}: `portero-lab {}` does not parse: {}",
                doc.display(),
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            );
            checked += 1;
        }
    }
    assert!(
        checked >= 10,
        "only {checked} commands found in the documents"
    );
}

#[test]
fn a_gone_argument_fails_the_check() {
    let lab = env!("CARGO_BIN_EXE_portero-lab");
    let found =
        commands("run `cargo run --release -p portero-lab -- contention --ops 2000000` here");
    assert_eq!(found, [["contention", "--ops", "2000000"]]);
    let out = Command::new(lab)
        .args(&found[0])
        .arg("--help")
        .output()
        .expect("the lab runs");
    assert!(!out.status.success(), "--ops parsed");
}

/// What a documented command may name, from the sources themselves: `cargo xtask`'s
/// subcommands (its help text), the workspace's packages, benches, examples and
/// binaries, and the npm package's scripts.
struct Known {
    xtask: Vec<String>,
    packages: Vec<String>,
    benches: Vec<String>,
    examples: Vec<String>,
    bins: Vec<String>,
    scripts: Vec<String>,
}

impl Known {
    fn read() -> Self {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let read = |p: &str| std::fs::read_to_string(root.join(p)).expect(p);
        let help = read("xtask/src/main.rs");
        let help = &help[help.find("const HELP").expect("xtask's help")..];
        let help = &help[..help.find("\";").expect("its end")];
        let xtask = help
            .lines()
            .filter_map(|l| l.strip_prefix("  "))
            .filter(|l| !l.starts_with(' '))
            .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
            .collect();
        let stems = |dir: &str| -> Vec<String> {
            std::fs::read_dir(root.join(dir))
                .map(|d| {
                    d.filter_map(|e| {
                        let p = e.ok()?.path();
                        Some(p.file_stem()?.to_str()?.to_owned())
                    })
                    .collect()
                })
                .unwrap_or_default()
        };
        let mut packages = Vec::new();
        for manifest in [
            "crates/portero",
            "crates/portero-http",
            "crates/portero-redis",
            "crates/portero-lab",
            "crates/portero-server",
            "benches",
            "examples",
            "tests",
            "xtask",
            "wasm",
        ] {
            let text = read(&format!("{manifest}/Cargo.toml"));
            if let Some(name) = text
                .lines()
                .find_map(|l| l.strip_prefix("name = \""))
                .and_then(|l| l.strip_suffix('"'))
            {
                packages.push(name.to_owned());
            }
        }
        let package = read("wasm/package.json");
        let scripts = package[package.find("\"scripts\"").expect("scripts")..]
            .lines()
            .skip(1)
            .take_while(|l| !l.trim_start().starts_with('}'))
            .filter_map(|l| {
                l.trim()
                    .strip_prefix('"')?
                    .split('"')
                    .next()
                    .map(str::to_owned)
            })
            .collect();
        let mut bins = stems("examples/src/bin");
        bins.extend(stems("benches/src/bin"));
        bins.push("portero-lab".into());
        bins.push("portero-server".into());
        let mut examples = stems("benches/examples");
        examples.extend(stems("crates/portero-server/examples"));
        Self {
            xtask,
            packages,
            benches: stems("benches/benches"),
            examples,
            bins,
            scripts,
        }
    }

    /// What is wrong with the command starting at `text` (after `cargo ` or `npm `),
    /// if anything: a name the sources do not have.
    fn fault(&self, tool: &str, text: &str) -> Option<String> {
        let end = text
            .find(['`', '\n', '|', '>', ')', '"'])
            .unwrap_or(text.len());
        let words: Vec<&str> = text[..end].split_whitespace().collect();
        let after = |flag: &str| {
            words
                .iter()
                .position(|w| *w == flag)
                .and_then(|i| words.get(i + 1))
                .map(|w| w.trim_end_matches([',', '.', ';', ':']))
        };
        let unknown = |what: &str, name: &str, known: &[String]| {
            (!known.iter().any(|k| k == name) && name != "NAME")
                .then(|| format!("{what} `{name}` does not exist"))
        };
        if tool == "npm" {
            let script = after("run")?;
            return unknown("npm script", script, &self.scripts);
        }
        if words.first() == Some(&"xtask") {
            let sub = words.get(1)?.trim_end_matches([',', '.', ';', ':']);
            // "everything cargo xtask does": prose, not a command.
            if !sub.chars().all(|c| c.is_ascii_lowercase() || c == '-') || sub == "does" {
                return None;
            }
            return unknown("xtask subcommand", sub, &self.xtask);
        }
        let checks = [
            ("-p", "package", &self.packages),
            ("--bench", "bench", &self.benches),
            ("--example", "example", &self.examples),
            ("--bin", "binary", &self.bins),
        ];
        checks
            .into_iter()
            .find_map(|(flag, what, known)| unknown(what, after(flag)?, known))
    }
}

/// Every `cargo …` and `npm … run …` command in `text` with a name that does not exist.
fn faults(known: &Known, text: &str) -> Vec<String> {
    checked_faults(known, text).1
}

/// [`faults`], and how many commands were looked at.
fn checked_faults(known: &Known, text: &str) -> (usize, Vec<String>) {
    let (mut checked, mut out) = (0, Vec::new());
    for tool in ["cargo", "npm"] {
        for (i, _) in text.match_indices(&format!("{tool} ")) {
            // A word of its own: not "subcargo ", not the end of a path.
            if text[..i].ends_with(|c: char| c.is_alphanumeric() || c == '/' || c == '-') {
                continue;
            }
            checked += 1;
            if let Some(fault) = known.fault(tool, &text[i + tool.len() + 1..]) {
                let line = text[i..].lines().next().unwrap_or_default();
                out.push(format!("{fault}: {line}"));
            }
        }
    }
    (checked, out)
}

#[test]
fn every_documented_cargo_and_npm_command_names_what_exists() {
    let known = Known::read();
    assert!(
        known.xtask.iter().any(|s| s == "bench-report"),
        "{:?}",
        known.xtask
    );
    assert!(
        known.benches.iter().any(|s| s == "keyed"),
        "{:?}",
        known.benches
    );
    assert!(
        known.scripts.iter().any(|s| s == "bench:durable"),
        "{:?}",
        known.scripts
    );
    let mut wrong = Vec::new();
    let mut docs = documents();
    docs.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../wasm/README.md"));
    for doc in docs {
        let text = std::fs::read_to_string(&doc).expect("a document");
        wrong.extend(
            faults(&known, &text)
                .into_iter()
                .map(|f| format!("{}: {f}", doc.display())),
        );
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_wrong_name_fails_the_command_check() {
    let known = Known::read();
    for wrong in [
        "`cargo xtask bench-reports`",
        "`cargo bench -p portero-benches --bench keyd`",
        "`cargo run --release -p portero-benches --example wait_lop`",
        "`cargo run -p portero-examples --bin llm_gateway2`",
        "`cargo run -p portero-lib`",
        "`npm --prefix wasm run bench:durabel`",
    ] {
        assert_eq!(faults(&known, wrong).len(), 1, "{wrong}");
    }
    assert!(faults(
        &known,
        "`cargo bench -p portero-benches --bench keyed -- '^keyed/'`"
    )
    .is_empty());
}
