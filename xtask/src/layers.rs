//! `cargo xtask layout`: the rules that keep the crates' layout showing their
//! architecture, read from the code's own imports (see ARCHITECTURE.md).
//!
//! - Every import of a crate's own items names the module that defines them:
//!   `crate::decision::Decision`, never the root's re-export `crate::Decision`.
//! - In the core, a file imports nothing from a layer above its own (the foundations
//!   at the root, then `algorithm/`, `keyed/`, `wait/`, `overload/`).
//! - In every crate, no files import each other, directly or round a longer circle.
//! - No source file is over `MAX_LINES` lines; the core has at most `MAX_ROOT_FILES`
//!   files directly in `src`.
//!
//! An import is a path that starts `crate::`, `super::`, `self::` or names a child
//! module, in code (comments, doc comments and string literals are skipped), in `use`
//! items and in expressions alike, unit tests included. `lib.rs` is the facade: it
//! declares and re-exports, and nothing may import through it.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The crates whose `src` the rules cover.
const CRATES: &[&str] = &[
    "crates/portero",
    "crates/portero-http",
    "crates/portero-redis",
    "crates/portero-lab",
    "crates/portero-server",
    "wasm",
];
/// The core's layers, lowest first: a file may import its own layer and those before.
const CORE_LAYERS: &[&str] = &["", "algorithm", "keyed", "wait", "overload"];
const MAX_LINES: usize = 800;
const MAX_ROOT_FILES: usize = 12;
/// Where source files are counted for `MAX_LINES` (tests and benches too).
const LINE_ROOTS: &[&str] = &[
    "crates",
    "wasm/src",
    "wasm/tests",
    "tests",
    "benches",
    "examples",
    "xtask",
];

/// A module: its path below the crate root (`["keyed", "table"]`).
type Module = Vec<String>;

pub fn check(root: &Path) -> Result<(), String> {
    let mut problems = Vec::new();
    for krate in CRATES {
        let src = root.join(krate).join("src");
        let files = modules_of(&src);
        let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
        let mut why: BTreeMap<(Module, Module), String> = BTreeMap::new();
        for (module, path) in &files {
            let text = code_only(&fs::read_to_string(path).map_err(|e| e.to_string())?);
            let is_root = module.is_empty();
            for (target, through_root, written) in imports(module, &text, &files) {
                let shown = path
                    .strip_prefix(root)
                    .unwrap_or(path)
                    .display()
                    .to_string();
                if through_root && !is_root {
                    problems.push(format!("{shown}: imports `{written}` through the crate root's re-export; name the module that defines it"));
                    continue;
                }
                if *krate == "crates/portero" && !is_root && layer(&target) > layer(module) {
                    problems.push(format!(
                        "{shown}: imports `{}` from a layer above its own",
                        target.join("::")
                    ));
                }
                if target != *module && !target.is_empty() {
                    why.entry((module.clone(), target.clone()))
                        .or_insert(written);
                    edges.entry(module.clone()).or_default().insert(target);
                }
            }
        }
        for circle in circles(&edges) {
            let inside: Vec<String> = why
                .iter()
                .filter(|((a, b), _)| circle.contains(a) && circle.contains(b))
                .map(|((a, _), w)| format!("{} uses `{w}`", show(a)))
                .collect();
            problems.push(format!(
                "{krate}: files import each other: {}",
                inside.join("; ")
            ));
        }
        if *krate == "crates/portero" {
            let at_root = fs::read_dir(&src)
                .map_err(|e| e.to_string())?
                .filter(|e| e.as_ref().is_ok_and(|e| e.path().is_file()))
                .count();
            if at_root > MAX_ROOT_FILES {
                problems.push(format!(
                    "{krate}/src holds {at_root} files (at most {MAX_ROOT_FILES})"
                ));
            }
        }
    }
    for dir in LINE_ROOTS {
        for path in rust_files(&root.join(dir)) {
            let lines = fs::read_to_string(&path)
                .map_err(|e| e.to_string())?
                .lines()
                .count();
            if lines > MAX_LINES {
                let shown = path.strip_prefix(root).unwrap_or(&path).display();
                problems.push(format!("{shown}: {lines} lines (at most {MAX_LINES})"));
            }
        }
    }
    problems.dedup();
    if problems.is_empty() {
        eprintln!("xtask: layout: imports flow one way, files within their size");
        Ok(())
    } else {
        for p in &problems {
            eprintln!("layout: {p}");
        }
        Err(format!("layout ({} problems)", problems.len()))
    }
}

fn show(module: &Module) -> String {
    if module.is_empty() {
        "lib.rs".to_owned()
    } else {
        module.join("/")
    }
}

fn layer(module: &Module) -> usize {
    let top = if module.len() > 1 {
        module[0].as_str()
    } else {
        ""
    };
    // A root file that is a folder's `mod.rs` belongs to that folder's layer.
    let top = if module.len() == 1 && CORE_LAYERS.contains(&module[0].as_str()) {
        module[0].as_str()
    } else {
        top
    };
    CORE_LAYERS.iter().position(|l| *l == top).unwrap_or(0)
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() && name != "target" && name != "node_modules" && name != "pkg" {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// Every file of a crate's `src`, by the module it is.
fn modules_of(src: &Path) -> BTreeMap<Module, PathBuf> {
    rust_files(src)
        .into_iter()
        .filter_map(|path| {
            let rel = path.strip_prefix(src).ok()?;
            let mut parts: Vec<String> = rel
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect();
            let last = parts.pop()?;
            let stem = last.trim_end_matches(".rs");
            if parts.first().is_some_and(|p| p == "bin") || stem == "main" && parts.is_empty() {
                return None;
            }
            if stem != "mod" && stem != "lib" {
                parts.push(stem.to_owned());
            }
            Some((parts, path))
        })
        .collect()
}

/// The text with comments and string/char literals blanked (newlines kept).
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            while i < b.len() && !b[i..].starts_with(b"*/") {
                i += 1;
            }
            i += 2;
        } else if b[i] == b'r'
            && (b[i..].starts_with(b"r\"") || b[i..].starts_with(b"r#"))
            && (i == 0 || !is_ident(b[i - 1]))
        {
            let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
            if b.get(i + 1 + hashes) == Some(&b'"') {
                let end: Vec<u8> = std::iter::once(b'"')
                    .chain(std::iter::repeat_n(b'#', hashes))
                    .collect();
                i += 2 + hashes;
                while i < b.len() && !b[i..].starts_with(&end) {
                    i += 1;
                }
                i += end.len();
                out.push_str("\"\"");
            } else {
                out.push('r');
                i += 1;
            }
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if b[i] == b'\'' && (b.get(i + 2) == Some(&b'\'') || b.get(i + 1) == Some(&b'\\')) {
            // A char literal ('x' or '\n'); lifetimes ('a) are left alone.
            i += 1;
            while i < b.len() && b[i] != b'\'' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("' '");
        } else {
            let ch = text[i..].chars().next().unwrap_or(' ');
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The modules `text` (the file of `module`) imports, each with whether the path went
/// through the crate root's re-exports (`crate::Name` where `Name` is no module).
fn imports(
    module: &Module,
    text: &str,
    files: &BTreeMap<Module, PathBuf>,
) -> Vec<(Module, bool, String)> {
    let inline = inline_modules(text);
    let children: BTreeSet<String> = files
        .keys()
        .filter(|m| m.len() == module.len() + 1 && m.starts_with(module))
        .map(|m| m[module.len()].clone())
        .collect();
    let mut out = Vec::new();
    for (at, path) in paths(text) {
        let depth = inline.iter().filter(|(s, e)| *s < at && at < *e).count();
        let mut segs: Vec<&str> = path.split("::").collect();
        let mut base: Module = match segs[0] {
            "crate" => {
                segs.remove(0);
                Vec::new()
            }
            "self" => {
                segs.remove(0);
                if depth > 0 {
                    continue; // an inline module's own items
                }
                module.clone()
            }
            "super" => {
                let mut ups = 0;
                while segs.first() == Some(&"super") {
                    segs.remove(0);
                    ups += 1;
                }
                if ups <= depth {
                    continue; // the file itself, seen from its inline test module
                }
                let mut m = module.clone();
                for _ in 0..ups - depth {
                    m.pop();
                }
                m
            }
            first if depth == 0 && children.contains(first) => module.clone(),
            _ => continue,
        };
        // The deepest module the path names.
        let mut named = false;
        for seg in &segs {
            let mut next = base.clone();
            next.push((*seg).to_owned());
            if files.contains_key(&next) {
                base = next;
                named = true;
            } else {
                break;
            }
        }
        let through_root = base.is_empty()
            && !named
            && path.starts_with("crate::")
            && segs
                .first()
                .is_some_and(|s| s.chars().next().is_some_and(|c| c.is_alphabetic()));
        out.push((base, through_root, path));
    }
    out
}

/// The byte ranges of inline `mod name { … }` blocks.
fn inline_modules(text: &str) -> Vec<(usize, usize)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(off) = text[i..].find("mod ") {
        let start = i + off;
        i = start + 4;
        if start > 0 && is_ident(b[start - 1]) {
            continue;
        }
        let rest = &text[i..];
        let name_len = rest.bytes().take_while(|&c| is_ident(c)).count();
        let after = rest[name_len..].trim_start();
        if name_len == 0 || !after.starts_with('{') {
            continue;
        }
        let open = i + name_len + (rest[name_len..].len() - after.len());
        let mut depth = 0usize;
        for (j, &c) in b.iter().enumerate().skip(open) {
            if c == b'{' {
                depth += 1;
            } else if c == b'}' {
                depth -= 1;
                if depth == 0 {
                    out.push((open, j));
                    break;
                }
            }
        }
    }
    out
}

/// Every path in the code: `a::b::c` and the expansions of `use a::{b, c::d}`, with
/// where it starts.
fn paths(text: &str) -> Vec<(usize, String)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if is_ident(b[i]) && (i == 0 || !is_ident(b[i - 1]) && b[i - 1] != b':' && b[i - 1] != b'$')
        {
            let start = i;
            let mut j = i;
            let mut path = String::new();
            loop {
                let k = j + b[j..].iter().take_while(|&&c| is_ident(c)).count();
                path.push_str(&text[j..k]);
                if b[k..].starts_with(b"::") {
                    path.push_str("::");
                    j = k + 2;
                    if b.get(j) == Some(&b'{') {
                        let end = matching(b, j);
                        for inner in split_group(&text[j + 1..end]) {
                            out.push((start, format!("{path}{inner}")));
                        }
                        i = end;
                        break;
                    }
                    if !b.get(j).is_some_and(|&c| is_ident(c)) {
                        i = j;
                        break;
                    }
                } else {
                    if path.contains("::") {
                        out.push((start, path.clone()));
                    }
                    i = k;
                    break;
                }
            }
            i = i.max(start + 1);
        } else {
            i += 1;
        }
    }
    out
}

fn matching(b: &[u8], open: usize) -> usize {
    let mut depth = 0;
    for (j, &c) in b.iter().enumerate().skip(open) {
        match c {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return j;
                }
            }
            _ => {}
        }
    }
    b.len()
}

/// `a, b::{c, d}, e as f` → `a`, `b::c`, `b::d`, `e`.
fn split_group(inner: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let (mut depth, mut cur) = (0, String::new());
    for c in inner.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            _ => {}
        }
        if c == ',' && depth == 0 {
            parts.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    parts.push(cur);
    let mut out = Vec::new();
    for p in parts {
        let p = p.trim();
        if let Some(open) = p.find('{') {
            let head: String = p[..open].split_whitespace().collect();
            let close = p.rfind('}').unwrap_or(p.len());
            for inner in split_group(&p[open + 1..close]) {
                out.push(format!("{head}{inner}"));
            }
        } else {
            let name: String = p
                .split(" as ")
                .next()
                .unwrap_or("")
                .split_whitespace()
                .collect();
            if !name.is_empty() {
                out.push(name);
            }
        }
    }
    out
}

/// The circles in the import graph (Tarjan's strongly connected components of more
/// than one file).
fn circles(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    let nodes: BTreeSet<&Module> = edges.keys().chain(edges.values().flatten()).collect();
    let ids: BTreeMap<&Module, usize> = nodes.iter().enumerate().map(|(i, m)| (*m, i)).collect();
    let names: Vec<&Module> = nodes.iter().copied().collect();
    let adj: Vec<Vec<usize>> = names
        .iter()
        .map(|m| {
            edges
                .get(*m)
                .map(|t| t.iter().map(|x| ids[x]).collect())
                .unwrap_or_default()
        })
        .collect();
    let n = names.len();
    let (mut index, mut low, mut on, mut stack) =
        (vec![usize::MAX; n], vec![0; n], vec![false; n], Vec::new());
    let mut next = 0;
    let mut out = Vec::new();
    fn visit(
        v: usize,
        adj: &[Vec<usize>],
        st: &mut (
            &mut Vec<usize>,
            &mut Vec<usize>,
            &mut Vec<bool>,
            &mut Vec<usize>,
            &mut usize,
        ),
        out: &mut Vec<Vec<usize>>,
    ) {
        st.0[v] = *st.4;
        st.1[v] = *st.4;
        *st.4 += 1;
        st.3.push(v);
        st.2[v] = true;
        for &w in &adj[v] {
            if st.0[w] == usize::MAX {
                visit(w, adj, st, out);
                st.1[v] = st.1[v].min(st.1[w]);
            } else if st.2[w] {
                st.1[v] = st.1[v].min(st.0[w]);
            }
        }
        if st.1[v] == st.0[v] {
            let mut comp = Vec::new();
            while let Some(w) = st.3.pop() {
                st.2[w] = false;
                comp.push(w);
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                out.push(comp);
            }
        }
    }
    let mut found = Vec::new();
    for v in 0..n {
        if index[v] == usize::MAX {
            let mut st = (&mut index, &mut low, &mut on, &mut stack, &mut next);
            visit(v, &adj, &mut st, &mut found);
        }
    }
    for comp in found {
        let mut c: Vec<Module> = comp.into_iter().map(|i| names[i].clone()).collect();
        c.sort();
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(path: &str) -> Module {
        path.split('/')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    }

    fn files(list: &[&str]) -> BTreeMap<Module, PathBuf> {
        list.iter().map(|p| (m(p), PathBuf::from(p))).collect()
    }

    #[test]
    fn groups_expand_and_comments_and_strings_are_not_code() {
        let text = code_only(
            "use crate::{a::X, b::{c::Y, Z as W}};\n// crate::hidden::Q\nlet s = \"crate::s::T\";\n",
        );
        let found: Vec<String> = paths(&text).into_iter().map(|(_, p)| p).collect();
        assert_eq!(found, ["crate::a::X", "crate::b::c::Y", "crate::b::Z"]);
    }

    #[test]
    fn an_import_through_the_root_is_told_apart_from_one_naming_the_module() {
        let all = files(&["", "decision", "algorithm", "algorithm/gcra"]);
        let text = code_only("use crate::Decision;\nuse crate::decision::CheckError;\n");
        let got = imports(&m("algorithm/gcra"), &text, &all);
        assert_eq!(got[0].0, m(""));
        assert!(got[0].1, "crate::Decision goes through the root");
        assert_eq!(got[1].0, m("decision"));
        assert!(!got[1].1);
    }

    #[test]
    fn super_in_an_inline_test_module_is_the_file_itself() {
        let all = files(&["", "keyed", "keyed/table", "keyed/slot"]);
        let text = code_only(
            "use super::slot::Slot;\n#[cfg(test)]\nmod tests {\n    use super::*;\n    use super::super::slot::pack;\n}\n",
        );
        let got: Vec<Module> = imports(&m("keyed/table"), &text, &all)
            .into_iter()
            .map(|i| i.0)
            .collect();
        assert_eq!(got, [m("keyed/slot"), m("keyed/slot")]);
    }

    #[test]
    fn layers_rank_the_folders_and_a_circle_of_three_is_found() {
        assert_eq!(layer(&m("window")), 0);
        assert_eq!(layer(&m("algorithm")), 1);
        assert_eq!(layer(&m("keyed/log/shard")), 2);
        assert!(layer(&m("overload/breaker")) > layer(&m("wait/reserve")));
        let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
        for (a, b) in [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")] {
            edges.entry(m(a)).or_default().insert(m(b));
        }
        assert_eq!(circles(&edges), [vec![m("a"), m("b"), m("c")]]);
        edges.get_mut(&m("c")).unwrap().remove(&m("a"));
        assert!(circles(&edges).is_empty());
    }
}
