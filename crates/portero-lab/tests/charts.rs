//! The committed charts (`docs/*.svg`) are what the lab draws now, and every label in
//! them fits inside its chart.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::OnceLock;

use portero_lab::charts::{self, Chart};
use portero_lab::svg::text_width;

/// Drawn once for the tests that read them (the sweeps take seconds unoptimised).
fn drawn() -> &'static [Chart] {
    static DRAWN: OnceLock<Vec<Chart>> = OnceLock::new();
    DRAWN.get_or_init(charts::all)
}

fn docs() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs")
}

#[test]
fn every_committed_chart_is_what_the_lab_draws() {
    let drawn = drawn();
    let mut stale = Vec::new();
    for chart in drawn {
        let path = docs().join(chart.file);
        match std::fs::read(&path) {
            Ok(committed) if committed == chart.svg.as_bytes() => {}
            Ok(_) => stale.push(format!("docs/{} differs", chart.file)),
            Err(e) => stale.push(format!("docs/{} cannot be read ({e})", chart.file)),
        }
    }
    // A chart the lab no longer draws would stay in the docs unnoticed.
    let names: BTreeSet<&str> = drawn.iter().map(|c| c.file).collect();
    for entry in std::fs::read_dir(docs()).expect("docs/") {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".svg") && !names.contains(name.as_str()) {
            stale.push(format!("docs/{name} is not drawn by the lab"));
        }
    }
    assert!(
        stale.is_empty(),
        "{}: run `cargo xtask charts`",
        stale.join("; ")
    );
}

/// One `<text>` element: its anchor point, anchor, size, weight and content.
struct Label {
    x: f64,
    y: f64,
    anchor: String,
    size: f64,
    bold: bool,
    content: String,
}

fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let start = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    let len = tag[start..].find('"')?;
    Some(&tag[start..start + len])
}

fn labels(svg: &str) -> Vec<Label> {
    let mut out = Vec::new();
    let mut rest = svg;
    while let Some(i) = rest.find("<text ") {
        let tag_end = i + rest[i..].find('>').unwrap();
        let close = tag_end + rest[tag_end..].find("</text>").unwrap();
        let tag = &rest[i..tag_end];
        let number = |name: &str| -> f64 {
            attr(tag, name)
                .unwrap_or_else(|| panic!("a label without {name}: {tag}"))
                .parse()
                .unwrap()
        };
        out.push(Label {
            x: number("x"),
            y: number("y"),
            anchor: attr(tag, "text-anchor").unwrap_or("start").to_string(),
            size: number("font-size"),
            bold: attr(tag, "font-weight") == Some("bold"),
            content: rest[tag_end + 1..close]
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&amp;", "&"),
        });
        rest = &rest[close..];
    }
    out
}

#[test]
fn every_label_fits_inside_its_chart() {
    for chart in drawn() {
        let svg = &chart.svg;
        let root = &svg[..svg.find('>').unwrap()];
        let width: f64 = attr(root, "width").unwrap().parse().unwrap();
        let height: f64 = attr(root, "height").unwrap().parse().unwrap();
        let all = labels(svg);
        assert!(all.len() > 10, "{}: labels found", chart.file);
        for l in all {
            let w = text_width(&l.content, l.size, l.bold);
            let (from, to) = match l.anchor.as_str() {
                "end" => (l.x - w, l.x),
                "middle" => (l.x - w / 2.0, l.x + w / 2.0),
                _ => (l.x, l.x + w),
            };
            assert!(
                from >= 0.0 && to <= width,
                "{}: \"{}\" spans {from:.0}–{to:.0} of {width}",
                chart.file,
                l.content
            );
            assert!(
                l.y - l.size >= 0.0 && l.y <= height,
                "{}: \"{}\" at y {}",
                chart.file,
                l.content,
                l.y
            );
        }
    }
}

#[test]
fn the_charts_subcommand_writes_them_all() {
    let dir = std::env::temp_dir().join(format!("portero-lab-charts-{}", std::process::id()));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_portero-lab"))
        .args(["charts", dir.to_str().unwrap()])
        .output()
        .expect("run portero-lab");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for chart in drawn() {
        let written = std::fs::read_to_string(dir.join(chart.file)).unwrap();
        assert!(written == chart.svg, "{} as written", chart.file);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
