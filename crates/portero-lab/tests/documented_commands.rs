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
