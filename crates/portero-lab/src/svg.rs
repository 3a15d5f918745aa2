//! SVG charts: [`render`] draws one rate-limiting experiment (when requests arrived,
//! when each algorithm let them through, the largest number through in any window
//! against the limit); [`figure`] draws panels of lines (a value over time, or an
//! experiment's headline over the parameter that decides it).
//!
//! Written as plain SVG elements (no plotting crate): a chart is a few hundred marks,
//! and plain SVG needs no font files to render its labels. Margins are not fixed: each
//! is computed from the widest label it must hold, measured with [`text_width`].
//!
//! Only basic floating-point arithmetic is used for layout (no logarithms or powers,
//! whose last bit depends on the platform's maths library), so a chart is the same
//! bytes on every machine and can be compared with the committed one.

use std::fmt::Write;

use crate::scenario::Scenario;
use crate::sim::Outcome;

/// The body text size, in pixels.
pub const FONT: f64 = 13.0;
/// The narrowest chart; a wider title widens it.
const MIN_WIDTH: f64 = 960.0;
/// Space between the chart's edge and anything written on it.
const PAD: f64 = 20.0;
const ROW: f64 = 46.0;
const COLORS: [&str; 12] = [
    "#d1495b", "#00798c", "#edae49", "#30638e", "#66a182", "#8d5a97", "#e07a5f", "#3d405b",
    "#81b29a", "#b5838d", "#6d597a", "#264653",
];
const GREY: &str = "#555";

/// Advance widths of DejaVu Sans, regular, for `' '..='~'`, in 1/2048 em.
const REGULAR: [u16; 95] = [
    651, 821, 942, 1716, 1303, 1946, 1597, 563, 799, 799, 1024, 1716, 651, 739, 651, 690, 1303,
    1303, 1303, 1303, 1303, 1303, 1303, 1303, 1303, 1303, 690, 690, 1716, 1716, 1716, 1087, 2048,
    1401, 1405, 1430, 1577, 1294, 1178, 1587, 1540, 604, 604, 1343, 1141, 1767, 1532, 1612, 1235,
    1612, 1423, 1300, 1251, 1499, 1401, 2025, 1403, 1251, 1403, 799, 690, 799, 1716, 1024, 1024,
    1255, 1300, 1126, 1300, 1260, 721, 1300, 1298, 569, 569, 1186, 569, 1995, 1298, 1253, 1300,
    1300, 842, 1067, 803, 1298, 1212, 1675, 1212, 1212, 1075, 1303, 690, 1303, 1716,
];
/// The same for DejaVu Sans Bold.
const BOLD: [u16; 95] = [
    713, 934, 1067, 1716, 1425, 2052, 1786, 627, 936, 936, 1071, 1716, 778, 850, 778, 748, 1425,
    1425, 1425, 1425, 1425, 1425, 1425, 1425, 1425, 1425, 819, 819, 1716, 1716, 1716, 1188, 2048,
    1585, 1561, 1503, 1700, 1399, 1399, 1681, 1714, 762, 762, 1587, 1305, 2038, 1714, 1741, 1501,
    1741, 1577, 1475, 1397, 1663, 1585, 2259, 1579, 1483, 1485, 936, 748, 936, 1716, 1024, 1024,
    1382, 1466, 1214, 1466, 1389, 891, 1466, 1458, 702, 702, 1362, 702, 2134, 1458, 1407, 1466,
    1466, 1010, 1219, 979, 1458, 1335, 1892, 1321, 1335, 1192, 1458, 748, 1458, 1716,
];

/// The width in pixels of `text` at `size` px, as DejaVu Sans sets it: the font most
/// renderers pick for `sans-serif` on Linux (rsvg, Firefox), and wider than Helvetica
/// or Arial, so a label that fits in it fits in those. Characters outside ASCII count
/// as a full em, more than any of them takes.
pub fn text_width(text: &str, size: f64, bold: bool) -> f64 {
    let table = if bold { &BOLD } else { &REGULAR };
    let units: u32 = text
        .chars()
        .map(|c| match u32::from(c) {
            code @ 32..=126 => u32::from(table[(code - 32) as usize]),
            _ => 2048,
        })
        .sum();
    f64::from(units) * size / 2048.0
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Where a label's `x` is: its start, its middle or its end.
#[derive(Clone, Copy)]
enum Anchor {
    Start,
    Middle,
    End,
}

/// How a label is set: size, weight, colour.
#[derive(Clone, Copy)]
struct Style {
    size: f64,
    bold: bool,
    fill: &'static str,
}

const BODY: Style = Style {
    size: FONT,
    bold: false,
    fill: "#111",
};
const MUTED: Style = Style {
    size: FONT,
    bold: false,
    fill: GREY,
};
const HEADING: Style = Style {
    size: 15.0,
    bold: true,
    fill: "#111",
};
const TITLE: Style = Style {
    size: 18.0,
    bold: true,
    fill: "#111",
};

/// Writes one label (every label goes through here, with its size and anchor spelled
/// out, so a test can measure each one against the chart's edges).
fn text(s: &mut String, x: f64, y: f64, anchor: Anchor, style: Style, content: &str) {
    let anchor = match anchor {
        Anchor::Start => "start",
        Anchor::Middle => "middle",
        Anchor::End => "end",
    };
    let weight = if style.bold {
        r#" font-weight="bold""#
    } else {
        ""
    };
    let _ = writeln!(
        s,
        r#"<text x="{x:.1}" y="{y:.1}" text-anchor="{anchor}" font-size="{}"{weight} fill="{}">{}</text>"#,
        style.size,
        style.fill,
        esc(content)
    );
}

/// The chart's width: [`MIN_WIDTH`], or wider if a title needs it.
fn width_for(titles: &[(&str, Style)]) -> f64 {
    titles
        .iter()
        .map(|(t, st)| 2.0 * PAD + text_width(t, st.size, st.bold))
        .fold(MIN_WIDTH, f64::max)
        .ceil()
}

/// The SVG element around `body`: white background, `width` × `height`.
fn document(width: f64, height: f64, body: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="DejaVu Sans, Verdana, sans-serif" font-size="{FONT}">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    s.push_str(body);
    s.push_str("</svg>\n");
    s
}

const POWERS: [f64; 10] = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9];

/// A tick step of 1, 2 or 5 times a power of ten giving about `target` steps over
/// `span`: `(numerator, exponent)`, the step being `numerator · 10^exponent`.
fn nice_step(span: f64, target: f64) -> (u64, i32) {
    let raw = if span > 0.0 { span / target } else { 1.0 };
    let mut exp = 0i32;
    while exp < 9 && raw >= 10.0 * pow10(exp) {
        exp += 1;
    }
    while exp > -9 && raw < pow10(exp) {
        exp -= 1;
    }
    let m = raw / pow10(exp);
    match m {
        m if m <= 1.0 => (1, exp),
        m if m <= 2.0 => (2, exp),
        m if m <= 5.0 => (5, exp),
        _ => (1, exp + 1),
    }
}

fn pow10(exp: i32) -> f64 {
    if exp >= 0 {
        POWERS[exp as usize]
    } else {
        1.0 / POWERS[(-exp) as usize]
    }
}

/// `i` steps of `(numerator, exponent)`, exactly as a decimal would say it.
fn tick_value(i: i64, (num, exp): (u64, i32)) -> f64 {
    let n = (i * num as i64) as f64;
    if exp >= 0 {
        n * POWERS[exp as usize]
    } else {
        n / POWERS[(-exp) as usize]
    }
}

/// The ticks from `lo` to `hi` (both included when they fall on a step), with labels
/// of as many decimals as the step needs.
fn ticks(lo: f64, hi: f64, step: (u64, i32)) -> Vec<(f64, String)> {
    let size = tick_value(1, step);
    let decimals = if step.1 < 0 { (-step.1) as usize } else { 0 };
    let mut i = (lo / size).ceil() as i64;
    let mut out = Vec::new();
    loop {
        let v = tick_value(i, step);
        // A hair of slack: `hi` computed from the same decimal may round just below it.
        if v > hi + size * 1e-9 {
            return out;
        }
        let label = format!("{v:.decimals$}");
        let label = if label.trim_start_matches(['-', '0', '.']).is_empty() {
            "0".to_string()
        } else {
            label
        };
        out.push((v, label));
        i += 1;
    }
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
    let secs = |ns: u64| ns as f64 / 1e9;
    let subtitle = format!(
        "limit {} per {} s · ticks: arrivals (grey), admitted / released (colour) · dashed: window boundaries",
        scenario.limit,
        secs(scenario.window)
    );
    let width = width_for(&[(scenario.description, TITLE), (&subtitle, MUTED)]);
    let name = |o: &Outcome| o.name.replace('-', " ");
    let mut rows: Vec<(String, &[u64], &str)> = vec![(
        format!("arrivals ({})", scenario.arrivals.len()),
        &scenario.arrivals,
        "#888",
    )];
    for (i, o) in outcomes.iter().enumerate() {
        rows.push((
            format!("{} ({})", name(o), o.admitted),
            &o.passed,
            COLORS[i % COLORS.len()],
        ));
    }
    // The left margin holds the widest row or bar label.
    let widest = rows
        .iter()
        .map(|(label, _, _)| text_width(label, FONT, false))
        .chain(outcomes.iter().map(|o| text_width(&name(o), FONT, false)))
        .fold(0.0, f64::max);
    let left = (PAD + widest + 12.0).ceil();
    let right = width - 30.0;
    let span = (last - first).max(1) as f64;
    let x = |t: u64| left + (t - first) as f64 / span * (right - left);
    let top = 70.0;
    let bars_top = top + rows.len() as f64 * ROW + 60.0;
    let bar_h = 22.0;
    let height = bars_top + outcomes.len() as f64 * (bar_h + 10.0) + 60.0;

    let mut s = String::new();
    text(
        &mut s,
        PAD,
        28.0,
        Anchor::Start,
        TITLE,
        scenario.description,
    );
    text(&mut s, PAD, 50.0, Anchor::Start, MUTED, &subtitle);
    // Time axis: ticks at a round step, window boundaries dashed.
    let axis_y = top + rows.len() as f64 * ROW - 10.0;
    let _ = writeln!(
        s,
        r##"<line x1="{left}" y1="{axis_y}" x2="{right}" y2="{axis_y}" stroke="#333"/>"##
    );
    let boundaries = (last / scenario.window).saturating_sub(first / scenario.window);
    if boundaries <= 200 {
        let mut k = first.div_ceil(scenario.window);
        while k * scenario.window <= last {
            let xx = x(k * scenario.window);
            let _ = writeln!(
                s,
                r##"<line x1="{xx:.1}" y1="{top}" x2="{xx:.1}" y2="{axis_y}" stroke="#999" stroke-dasharray="4 3"/>"##
            );
            k += 1;
        }
    }
    let step = nice_step(secs(last - first), 10.0);
    for (v, label) in ticks(secs(first), secs(last), step) {
        let t = (v * 1e9).round() as u64;
        let xx = x(t.clamp(first, last));
        let _ = writeln!(
            s,
            r##"<line x1="{xx:.1}" y1="{axis_y}" x2="{xx:.1}" y2="{:.1}" stroke="#333"/>"##,
            axis_y + 5.0
        );
        text(
            &mut s,
            xx,
            axis_y + 19.0,
            Anchor::Middle,
            MUTED,
            &format!("{label} s"),
        );
    }
    for (i, (label, times, color)) in rows.iter().enumerate() {
        let y = top + i as f64 * ROW;
        text(&mut s, left - 10.0, y + 18.0, Anchor::End, BODY, label);
        for &t in *times {
            let _ = writeln!(
                s,
                r#"<rect x="{:.1}" y="{:.1}" width="2" height="26" fill="{color}" fill-opacity="0.8"/>"#,
                x(t) - 1.0,
                y + 2.0
            );
        }
    }
    // Max-in-window bars against the limit; room on the right for the longest number.
    let most = outcomes
        .iter()
        .map(|o| o.max_in_window)
        .max()
        .unwrap_or(0)
        .max(scenario.limit) as f64;
    let room = text_width(&format!("{most}"), FONT, false) + 12.0;
    let bw = |v: f64| v / most * (right - left - room);
    text(
        &mut s,
        PAD,
        bars_top - 16.0,
        Anchor::Start,
        HEADING,
        &format!("Most let through in any {} s", secs(scenario.window)),
    );
    for (i, o) in outcomes.iter().enumerate() {
        let y = bars_top + i as f64 * (bar_h + 10.0);
        let w = bw(o.max_in_window as f64);
        text(&mut s, left - 10.0, y + 16.0, Anchor::End, BODY, &name(o));
        let _ = writeln!(
            s,
            r#"<rect x="{left}" y="{y:.1}" width="{w:.1}" height="{bar_h}" fill="{}"/>"#,
            COLORS[i % COLORS.len()],
        );
        text(
            &mut s,
            left + w + 6.0,
            y + 16.0,
            Anchor::Start,
            BODY,
            &o.max_in_window.to_string(),
        );
    }
    let lx = left + bw(scenario.limit as f64);
    let bars_end = bars_top + outcomes.len() as f64 * (bar_h + 10.0);
    let _ = writeln!(
        s,
        r##"<line x1="{lx:.1}" y1="{:.1}" x2="{lx:.1}" y2="{bars_end:.1}" stroke="#111" stroke-width="2" stroke-dasharray="6 3"/>"##,
        bars_top - 6.0,
    );
    text(
        &mut s,
        lx,
        bars_end + 16.0,
        Anchor::Middle,
        BODY,
        &format!("limit {}", scenario.limit),
    );
    document(width, height, &s)
}

/// One line of a [`Panel`].
#[derive(Debug, Clone)]
pub struct Series {
    /// Its name in the legend.
    pub name: String,
    /// Its colour (an index into the palette, so one policy keeps one colour across
    /// panels).
    pub color: usize,
    /// Drawn dashed (a reference, such as the policy compared against).
    pub dashed: bool,
    /// `(x, y)` in the order to join them.
    pub points: Vec<(f64, f64)>,
    /// A dot at each point (measured points, not a curve), and in the legend.
    pub dots: bool,
}

impl Series {
    /// A solid line.
    pub fn new(name: impl Into<String>, color: usize, points: Vec<(f64, f64)>) -> Self {
        Self {
            name: name.into(),
            color,
            dashed: false,
            points,
            dots: false,
        }
    }

    /// The same line with a dot at each point.
    pub fn dotted(mut self) -> Self {
        self.dots = true;
        self
    }

    /// The same line, dashed.
    pub fn dashed(self) -> Self {
        self.dashed_if(true)
    }

    /// The same line, dashed when `reference` (the one the others are compared with).
    pub fn dashed_if(mut self, reference: bool) -> Self {
        self.dashed |= reference;
        self
    }
}

/// One plot of a [`figure`]: lines over a shared x axis.
#[derive(Debug, Clone)]
pub struct Panel {
    /// The panel's heading.
    pub heading: String,
    /// Under the x axis.
    pub x_label: String,
    /// Above the y axis.
    pub y_label: String,
    /// The lines.
    pub series: Vec<Series>,
    /// A vertical mark: where the experiment's own parameter lies, and its label.
    pub marker: Option<(f64, String)>,
}

const PANEL_H: f64 = 310.0;
const LEGEND_ROW: f64 = 20.0;
const SWATCH: f64 = 24.0;

/// One or more panels under a title, each a line chart with its legend on the right;
/// the y axes start at zero.
pub fn figure(title: &str, subtitle: &str, panels: &[Panel]) -> String {
    figure_on(title, subtitle, panels, false)
}

/// [`figure`] with a base-2 logarithmic x axis (thread counts): the points and the
/// marks are placed at `log2(x)`, and the ticks fall on the powers of two, labelled
/// as whole numbers (x must be above 0).
pub fn figure_log2_x(title: &str, subtitle: &str, panels: &[Panel]) -> String {
    let logged: Vec<Panel> = panels
        .iter()
        .map(|p| Panel {
            series: p
                .series
                .iter()
                .map(|s| Series {
                    points: s
                        .points
                        .iter()
                        .map(|&(x, y)| (x.max(1e-9).log2(), y))
                        .collect(),
                    ..s.clone()
                })
                .collect(),
            marker: p
                .marker
                .clone()
                .map(|(x, label)| (x.max(1e-9).log2(), label)),
            ..p.clone()
        })
        .collect();
    figure_on(title, subtitle, &logged, true)
}

fn figure_on(title: &str, subtitle: &str, panels: &[Panel], log2_x: bool) -> String {
    let width = width_for(&[(title, TITLE), (subtitle, MUTED)]);
    let scales: Vec<Scale> = panels
        .iter()
        .map(|p| {
            let mut scale = Scale::of(p);
            if log2_x {
                scale.powers_of_two();
            }
            scale
        })
        .collect();
    // One left margin and one legend column for all panels, so their axes line up.
    let tick_w = scales
        .iter()
        .flat_map(|sc| sc.y_ticks.iter())
        .map(|(_, label)| text_width(label, FONT, false))
        .fold(0.0, f64::max);
    let left = (PAD + tick_w + 10.0).ceil();
    let legend_w = panels
        .iter()
        .flat_map(|p| p.series.iter())
        .map(|s| text_width(&s.name, FONT, false))
        .fold(0.0, f64::max)
        + SWATCH
        + 6.0;
    let right = (width - PAD - legend_w - 24.0).floor();
    let mut s = String::new();
    text(&mut s, PAD, 28.0, Anchor::Start, TITLE, title);
    text(&mut s, PAD, 50.0, Anchor::Start, MUTED, subtitle);
    let mut y0 = 66.0;
    for (panel, scale) in panels.iter().zip(&scales) {
        draw_panel(&mut s, panel, scale, y0, left, right);
        y0 += PANEL_H;
    }
    document(width, y0 + 4.0, &s)
}

/// A panel's ranges and ticks.
struct Scale {
    x: (f64, f64),
    y_max: f64,
    x_ticks: Vec<(f64, String)>,
    y_ticks: Vec<(f64, String)>,
}

impl Scale {
    fn of(panel: &Panel) -> Self {
        let points = || panel.series.iter().flat_map(|s| s.points.iter().copied());
        let x_lo = points().map(|p| p.0).fold(f64::INFINITY, f64::min);
        let x_hi = points().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
        let (x_lo, x_hi) = if x_lo < x_hi {
            (x_lo, x_hi)
        } else {
            (x_lo.min(0.0), x_lo.max(0.0) + 1.0)
        };
        // A sweep that starts just above zero is drawn from zero.
        let x_lo = if x_lo > 0.0 && x_lo <= 0.2 * (x_hi - x_lo) {
            0.0
        } else {
            x_lo
        };
        let top = points().map(|p| p.1).fold(0.0, f64::max);
        // Rounded up to a whole tick, one more if the highest point would touch the top.
        let step = nice_step(top, 5.0);
        let size = tick_value(1, step);
        let mut y_max = (top / size).ceil().max(1.0) * size;
        if y_max < top * 1.04 {
            y_max += size;
        }
        Self {
            x: (x_lo, x_hi),
            y_max,
            x_ticks: ticks(x_lo, x_hi, nice_step(x_hi - x_lo, 10.0)),
            y_ticks: ticks(0.0, y_max, step),
        }
    }
}

impl Scale {
    /// The x axis of log2 values: from the whole power below the lowest point to the
    /// one above the highest, a tick at each, labelled as the power itself (1, 2, 4…).
    fn powers_of_two(&mut self) {
        let (lo, hi) = (
            self.x.0.floor(),
            self.x.1.ceil().max(self.x.0.floor() + 1.0),
        );
        self.x = (lo, hi);
        self.x_ticks = (lo as i32..=hi as i32)
            .map(|k| (f64::from(k), format!("{}", 2f64.powi(k))))
            .collect();
    }
}

fn draw_panel(s: &mut String, panel: &Panel, scale: &Scale, y0: f64, left: f64, right: f64) {
    let plot_top = y0 + 58.0;
    let plot_bottom = y0 + 240.0;
    // Zero sits a few pixels above the axis, so a line at zero stays visible.
    let zero = plot_bottom - 5.0;
    let (x_lo, x_hi) = scale.x;
    let x = |v: f64| left + (v - x_lo) / (x_hi - x_lo) * (right - left);
    let y = |v: f64| zero - v / scale.y_max * (zero - plot_top);
    text(s, PAD, y0 + 18.0, Anchor::Start, HEADING, &panel.heading);
    text(s, PAD, y0 + 44.0, Anchor::Start, MUTED, &panel.y_label);
    for (v, label) in &scale.y_ticks {
        let yy = y(*v);
        let _ = writeln!(
            s,
            r##"<line x1="{left}" y1="{yy:.1}" x2="{right}" y2="{yy:.1}" stroke="#e4e4e4"/>"##
        );
        text(s, left - 8.0, yy + 4.0, Anchor::End, MUTED, label);
    }
    for (v, label) in &scale.x_ticks {
        let xx = x(*v);
        let _ = writeln!(
            s,
            r##"<line x1="{xx:.1}" y1="{plot_bottom}" x2="{xx:.1}" y2="{:.1}" stroke="#333"/>"##,
            plot_bottom + 5.0
        );
        text(s, xx, plot_bottom + 19.0, Anchor::Middle, MUTED, label);
    }
    let _ = writeln!(
        s,
        r##"<path d="M{left},{plot_top} V{plot_bottom} H{right}" fill="none" stroke="#333"/>"##
    );
    text(
        s,
        (left + right) / 2.0,
        plot_bottom + 40.0,
        Anchor::Middle,
        MUTED,
        &panel.x_label,
    );
    for series in &panel.series {
        let color = COLORS[series.color % COLORS.len()];
        let dash = if series.dashed {
            r#" stroke-dasharray="7 4""#
        } else {
            ""
        };
        let points: Vec<String> = series
            .points
            .iter()
            .map(|&(px, py)| format!("{:.1},{:.1}", x(px), y(py)))
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2"{dash} stroke-linejoin="round"/>"#,
            points.join(" ")
        );
        if series.dots {
            for &(px, py) in &series.points {
                let _ = writeln!(
                    s,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="3.5" fill="{color}"/>"#,
                    x(px),
                    y(py)
                );
            }
        }
    }
    if let Some((at, label)) = &panel.marker {
        let xx = x(*at);
        let _ = writeln!(
            s,
            r##"<line x1="{xx:.1}" y1="{plot_top}" x2="{xx:.1}" y2="{plot_bottom}" stroke="#111" stroke-dasharray="3 3"/>"##
        );
        // Beside the mark, on whichever side has room.
        let w = text_width(label, FONT, false);
        let (lx, anchor) = if xx + 6.0 + w <= right {
            (xx + 6.0, Anchor::Start)
        } else {
            (xx - 6.0, Anchor::End)
        };
        text(s, lx, plot_top + 12.0, anchor, BODY, label);
    }
    // The legend, one row per line, right of the plot.
    let lx = right + 24.0;
    for (i, series) in panel.series.iter().enumerate() {
        let ly = plot_top + 12.0 + i as f64 * LEGEND_ROW;
        let color = COLORS[series.color % COLORS.len()];
        let dash = if series.dashed {
            r#" stroke-dasharray="7 4""#
        } else {
            ""
        };
        let _ = writeln!(
            s,
            r#"<line x1="{lx}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{color}" stroke-width="3"{dash}/>"#,
            ly - 4.0,
            lx + SWATCH,
            ly - 4.0
        );
        if series.dots {
            let _ = writeln!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3.5" fill="{color}"/>"#,
                lx + SWATCH / 2.0,
                ly - 4.0
            );
        }
        text(s, lx + SWATCH + 6.0, ly, Anchor::Start, BODY, &series.name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_fall_on_round_steps() {
        // The smallest round step that gives at most `target` steps.
        assert_eq!(nice_step(60.0, 10.0), (1, 1));
        assert_eq!(nice_step(0.6, 10.0), (1, -1));
        assert_eq!(nice_step(0.6, 12.0), (5, -2));
        assert_eq!(nice_step(120.0, 10.0), (2, 1));
        assert_eq!(nice_step(100.0, 5.0), (2, 1));
        let t = ticks(59.7, 60.3, (5, -2));
        assert_eq!(t.first().unwrap().1, "59.70");
        assert_eq!(t.last().unwrap().1, "60.30");
        assert_eq!(t.len(), 13);
        let t = ticks(0.0, 100.0, (2, 1));
        assert_eq!(t.len(), 6);
        assert_eq!(t[0].1, "0");
    }

    #[test]
    fn widths_follow_the_font() {
        assert_eq!(text_width("", FONT, false), 0.0);
        assert!(text_width("m", FONT, false) > text_width("i", FONT, false));
        assert!(text_width("abc", FONT, true) > text_width("abc", FONT, false));
    }
}
