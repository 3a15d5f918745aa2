//! Every malformed configuration envoyproxy/ratelimit's documentation rejects, and
//! the mistakes a file can hold besides: each is an error naming the file and the
//! reason (the line and column where the parser knows them), never a panic and never
//! a configuration half used.

use portero_server::config;

fn refused(yaml: &str) -> String {
    match config::from_texts(&[("bad.yaml".into(), yaml.into())]) {
        Ok(_) => panic!("accepted:\n{yaml}"),
        Err(e) => {
            let said = e.to_string();
            assert!(said.starts_with("bad.yaml: "), "names the file: {said}");
            said
        }
    }
}

fn says(yaml: &str, words: &[&str]) {
    let said = refused(yaml);
    for w in words {
        assert!(said.contains(w), "{said:?} should say {w:?}");
    }
}

#[test]
fn each_rejected_file_says_why() {
    says("descriptors: []\n", &["empty domain"]);
    says("domain: d\ndescriptors:\n  - value: v\n", &["empty key"]);
    says(
        "domain: d\ndescriptors:\n  - key: k\n    value: v\n  - key: k\n    value: v\n",
        &["duplicate descriptor composite key", "d.k_v"],
    );
    says(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: 1\n",
        &["invalid rate limit unit 'fortnight'"],
    );
    says(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      requests_per_unit: 1\n",
        &["invalid rate limit unit ''"],
    );
    says(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unlimited: true\n      unit: second\n",
        &["should not specify rate limit unit when unlimited"],
    );
    says(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      replaces:\n        - name: \"\"\n",
        &["empty replaces entry"],
    );
    says(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      name: me\n      unit: second\n      requests_per_unit: 1\n      replaces:\n        - name: me\n",
        &["replaces should not contain name of same descriptor"],
    );
    says(
        "domain: d\ndescriptors:\n  - key: k\n    value: v\n    share_threshold: true\n",
        &["share_threshold can only be used with wildcard values"],
    );
}

#[test]
fn unknown_keys_wrong_types_and_broken_yaml_name_the_place() {
    says(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limits:\n      unit: second\n",
        &["rate_limits", "line 4"],
    );
    says("domain: d\nunknown: 1\n", &["unknown"]);
    says(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: many\n",
        &["line 6"],
    );
    says(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 5000000000\n",
        &["line 6"],
    );
    says("domain: d\ndescriptors:\n  - key: [unclosed\n", &["line"]);
    says("domain: d\ndescriptors: not a list\n", &["line 2"]);
}

#[test]
fn a_second_file_with_the_same_domain_is_refused() {
    let file = "domain: d\ndescriptors:\n  - key: k\n";
    let e = config::from_texts(&[
        ("a.yaml".into(), file.into()),
        ("b.yaml".into(), file.into()),
    ])
    .unwrap_err();
    assert_eq!(e.file, "b.yaml");
    assert!(e.reason.contains("duplicate domain 'd'"), "{e}");
}

#[test]
fn hostile_files_are_errors_not_panics() {
    // Deep nesting, huge documents, aliases: refused or loaded, never a crash.
    let deep = format!(
        "domain: d\ndescriptors:\n{}",
        (0..200)
            .map(|i| format!(
                "{}- key: k{i}\n{}  descriptors:\n",
                "  ".repeat(2 * i),
                "  ".repeat(2 * i)
            ))
            .collect::<String>()
    );
    let _ = config::from_texts(&[("deep.yaml".into(), deep)]);
    let bomb = "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\ndomain: [*d, *d, *d, *d, *d, *d, *d, *d, *d]\n";
    assert!(config::from_texts(&[("bomb.yaml".into(), bomb.into())]).is_err());
    assert!(config::from_texts(&[("empty.yaml".into(), String::new())]).is_err());
    assert!(config::from_texts(&[("nul.yaml".into(), "domain: \"\\0\"\n\u{0}".into())]).is_err());
}

#[test]
fn the_documented_example_file_loads() {
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/example.yaml");
    let tree = config::load(&[example]).expect("the book's example loads");
    assert!(tree.has_domain("edge"));
    assert_eq!(tree.rules().len(), 4);
}
