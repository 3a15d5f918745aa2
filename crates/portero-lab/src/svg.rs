//! SVG charts: [`render`] draws one rate-limiting experiment (when requests arrived,
//! when each algorithm let them through, the largest number through in any window
//! against the limit); [`lines`] draws one value per second for several policies (the
//! overload experiments).
//!
//! Written as plain SVG elements (no plotting crate): the chart is a few hundred
//! marks and bars, and plain SVG needs no font files to render its labels.

use std::fmt::Write;

use crate::scenario::Scenario;
use crate::sim::Outcome;

const W: f64 = 960.0;
const LEFT: f64 = 150.0;
const RIGHT: f64 = 30.0;
const ROW: f64 = 46.0;
const TOP: f64 = 70.0;
const COLORS: [&str; 5] = ["#d1495b", "#00798c", "#edae49", "#30638e", "#66a182"];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// An SVG document `W` wide and `height` high: white background, `title` on top.
fn document(height: f64, title: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height}" viewBox="0 0 {W} {height}" font-family="sans-serif" font-size="13">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="20" y="28" font-size="18" font-weight="bold">{}</text>"#,
        esc(title)
    );
    s
}

/// Renders the chart for `scenario` and its `outcomes` as an SVG document.
pub fn render(scenario: &Scenario, outcomes: &[Outcome]) -> String {
    let first = *scenario.arrivals.first().unwrap_or(&0);
    let last_pass = outcomes
        .iter()
        .filter_map(|o| o.passed.last())
        .max()
        .copied();
    let last = scenario
        .arrivals
        .last()
        .copied()
        .unwrap_or(0)
        .max(last_pass.unwrap_or(0));
    let span = (last - first).max(1) as f64;
    let x = |t: u64| LEFT + (t - first) as f64 / span * (W - LEFT - RIGHT);
    let rows = outcomes.len() + 1;
    let bars_top = TOP + rows as f64 * ROW + 50.0;
    let bar_h = 22.0;
    let height = bars_top + outcomes.len() as f64 * (bar_h + 10.0) + 60.0;
    let secs = |ns: u64| ns as f64 / 1e9;

    let mut s = document(height, scenario.description);
    let _ = writeln!(
        s,
        r##"<text x="20" y="50" fill="#555">limit {} per {} s · ticks: arrivals (grey), admitted / released (colour)</text>"##,
        scenario.limit,
        secs(scenario.window)
    );
    // Time axis with window boundaries.
    let axis_y = TOP + rows as f64 * ROW - 10.0;
    let _ = writeln!(
        s,
        r##"<line x1="{LEFT}" y1="{axis_y}" x2="{}" y2="{axis_y}" stroke="#333"/>"##,
        W - RIGHT
    );
    let mut k = first / scenario.window;
    while k * scenario.window <= last {
        let t = k * scenario.window;
        if t >= first {
            let xx = x(t);
            let _ = writeln!(
                s,
                r##"<line x1="{xx:.1}" y1="{TOP}" x2="{xx:.1}" y2="{axis_y}" stroke="#ccc" stroke-dasharray="4 3"/><text x="{xx:.1}" y="{:.1}" text-anchor="middle" fill="#333">{} s</text>"##,
                axis_y + 16.0,
                secs(t)
            );
        }
        k += 1;
    }
    let mut row = |label: &str, times: &[u64], color: &str, i: usize| {
        let y = TOP + i as f64 * ROW;
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
            LEFT - 10.0,
            y + 18.0,
            esc(label)
        );
        for &t in times {
            let _ = writeln!(
                s,
                r#"<rect x="{:.1}" y="{:.1}" width="2" height="26" fill="{color}" fill-opacity="0.8"/>"#,
                x(t) - 1.0,
                y + 2.0
            );
        }
    };
    row(
        &format!("arrivals ({})", scenario.arrivals.len()),
        &scenario.arrivals,
        "#888",
        0,
    );
    for (i, o) in outcomes.iter().enumerate() {
        let label = format!("{} ({})", o.name.replace('-', " "), o.admitted);
        row(&label, &o.passed, COLORS[i % COLORS.len()], i + 1);
    }
    // Max-in-window bars against the limit.
    let top = outcomes
        .iter()
        .map(|o| o.max_in_window)
        .max()
        .unwrap_or(0)
        .max(scenario.limit) as f64;
    let bw = |v: f64| v / top * (W - LEFT - RIGHT - 60.0);
    let _ = writeln!(
        s,
        r#"<text x="20" y="{:.1}" font-size="15" font-weight="bold">Most let through in any {} s</text>"#,
        bars_top - 16.0,
        secs(scenario.window)
    );
    for (i, o) in outcomes.iter().enumerate() {
        let y = bars_top + i as f64 * (bar_h + 10.0);
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{:.1}" text-anchor="end">{}</text><rect x="{LEFT}" y="{y:.1}" width="{:.1}" height="{bar_h}" fill="{}"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            LEFT - 10.0,
            y + 16.0,
            o.name.replace('-', " "),
            bw(o.max_in_window as f64),
            COLORS[i % COLORS.len()],
            LEFT + bw(o.max_in_window as f64) + 6.0,
            y + 16.0,
            o.max_in_window
        );
    }
    let lx = LEFT + bw(scenario.limit as f64);
    let _ = writeln!(
        s,
        r##"<line x1="{lx:.1}" y1="{:.1}" x2="{lx:.1}" y2="{:.1}" stroke="#111" stroke-width="2" stroke-dasharray="6 3"/><text x="{lx:.1}" y="{:.1}" text-anchor="middle">limit {}</text>"##,
        bars_top - 6.0,
        bars_top + outcomes.len() as f64 * (bar_h + 10.0),
        bars_top + outcomes.len() as f64 * (bar_h + 10.0) + 16.0,
        scenario.limit
    );
    s.push_str("</svg>\n");
    s
}

/// A line chart of one value per second for each named series (same length each).
pub fn lines(title: &str, x_label: &str, y_label: &str, series: &[(&str, Vec<f64>)]) -> String {
    const H: f64 = 420.0;
    const BOTTOM: f64 = 60.0;
    let len = series
        .iter()
        .map(|(_, v)| v.len())
        .max()
        .unwrap_or(0)
        .max(1);
    let top = series
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .fold(1.0_f64, f64::max)
        * 1.1;
    let x = |i: usize| LEFT + i as f64 / len as f64 * (W - LEFT - RIGHT);
    let y = |v: f64| H - BOTTOM - v / top * (H - BOTTOM - TOP);
    let mut s = document(H, title);
    let (x0, x1, y0) = (x(0), x(len), y(0.0));
    let _ = writeln!(
        s,
        r##"<path d="M{x0},{t} V{y0} H{x1}" fill="none" stroke="#333"/>"##,
        t = TOP
    );
    for tick in [0.0, top / 1.1 / 2.0, top / 1.1] {
        let _ = writeln!(
            s,
            r##"<text x="{lx}" y="{ty}" text-anchor="end" fill="#555">{tick:.0}</text>"##,
            lx = LEFT - 8.0,
            ty = y(tick) + 4.0
        );
    }
    for i in (0..=len).step_by((len / 6).max(1)) {
        let _ = writeln!(
            s,
            r##"<text x="{tx}" y="{ty}" text-anchor="middle" fill="#555">{i}</text>"##,
            tx = x(i),
            ty = y0 + 18.0
        );
    }
    let _ = writeln!(
        s,
        r##"<text x="{cx}" y="{ly}" text-anchor="middle" fill="#555">{}</text>"##,
        esc(x_label),
        cx = (x0 + x1) / 2.0,
        ly = H - 16.0
    );
    let _ = writeln!(
        s,
        r##"<text x="20" y="{ly}" fill="#555">{}</text>"##,
        esc(y_label),
        ly = TOP - 12.0
    );
    for (k, (name, values)) in series.iter().enumerate() {
        let color = COLORS[k % COLORS.len()];
        let points: Vec<String> = values
            .iter()
            .enumerate()
            .map(|(i, &v)| format!("{:.1},{:.1}", x(i) + 0.5 * (x(1) - x(0)), y(v)))
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2"/>"#,
            points.join(" ")
        );
        // The legend: one row above the plot, each name in its line's colour.
        let _ = writeln!(
            s,
            r#"<text x="{lx}" y="{ly}" fill="{color}">━ {}</text>"#,
            esc(name),
            lx = 330.0 + 200.0 * k as f64,
            ly = TOP - 12.0
        );
    }
    s.push_str("</svg>\n");
    s
}
