//! PNG plots of a preemption report (the JSON that `--json` writes): the HP latency CDF of
//! every mode, HP p99 against the target slice time, and LP throughput against it.
//!
//! Reads the report as untyped JSON, so a report written on another machine (the GPU
//! host, which has no fonts) can be drawn here with `--plot-from`.

use plotters::coord::Shift;
use plotters::prelude::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

const SIZE: (u32, u32) = (960, 600);
const FONT: &str = "sans-serif";

/// Fonts tried in order (`SOFTPREEMPT_PLOT_FONT` first): plotters draws text with
/// ab_glyph from a TrueType file, so no fontconfig is needed.
const FONT_FILES: [&str; 4] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
];

fn load_font() -> Result<(), String> {
    let env = std::env::var("SOFTPREEMPT_PLOT_FONT").ok();
    let path = env
        .iter()
        .map(String::as_str)
        .chain(FONT_FILES)
        .find(|p| Path::new(p).is_file())
        .ok_or("no TrueType font found for the plots (set SOFTPREEMPT_PLOT_FONT)")?;
    let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    // plotters keeps fonts for the life of the process.
    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    plotters::style::register_font(FONT, FontStyle::Normal, bytes)
        .map_err(|_| format!("{path}: not a font"))
}

/// One mode's row, as far as the plots need it.
struct Row<'a> {
    label: &'a str,
    mode: &'a str,
    target_us: Option<f64>,
    hp_ms: Vec<f64>,
    hp_p99: Option<f64>,
    lp_vs_alone: Option<f64>,
}

fn rows(report: &Value) -> Vec<Row<'_>> {
    let modes = report["modes"].as_array().map_or(&[][..], |v| v.as_slice());
    modes
        .iter()
        .filter(|m| m["error"].is_null())
        .map(|m| {
            let mut hp_ms: Vec<f64> = m["hp"]["samples"]
                .as_array()
                .map_or(&[][..], |v| v.as_slice())
                .iter()
                .filter_map(|s| s["turnaround_ms"].as_f64())
                .collect();
            hp_ms.sort_by(f64::total_cmp);
            Row {
                label: m["label"].as_str().unwrap_or("?"),
                mode: m["plan"]["mode"].as_str().unwrap_or("?"),
                target_us: m["plan"]["sched"]["target_slice_us"].as_f64(),
                hp_ms,
                hp_p99: m["hp"]["p99_ms"].as_f64(),
                lp_vs_alone: m["lp_vs_alone"].as_f64(),
            }
        })
        .collect()
}

fn title(report: &Value, what: &str) -> String {
    let c = &report["calibration"];
    format!(
        "{what}: {} (LP {:.1} ms, HP {:.2} ms)",
        c["device"].as_str().unwrap_or("?"),
        c["lp_ms"].as_f64().unwrap_or(f64::NAN),
        c["hp_ms"].as_f64().unwrap_or(f64::NAN)
    )
}

/// Writes the plots into `dir`; returns the files written.
pub fn write_all(
    report: &Value,
    dir: &Path,
    default_target_us: u64,
) -> Result<Vec<PathBuf>, String> {
    load_font()?;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let rows = rows(report);
    let mut out = Vec::new();
    let p = dir.join("latency_cdf.png");
    latency_cdf(report, &rows, &p).map_err(|e| format!("{}: {e}", p.display()))?;
    out.push(p);
    // A SoftPreempt co-run without an explicit target ran at the default.
    let sliced: Vec<(f64, &Row)> = rows
        .iter()
        .filter(|r| r.mode == "corun-sp")
        .map(|r| (r.target_us.unwrap_or(default_target_us as f64), r))
        .collect();
    if !sliced.is_empty() {
        let p = dir.join("hp_p99_vs_target.png");
        p99_vs_target(report, &rows, &sliced, &p).map_err(|e| format!("{}: {e}", p.display()))?;
        out.push(p);
        let p = dir.join("lp_vs_target.png");
        lp_vs_target(report, &sliced, &p).map_err(|e| format!("{}: {e}", p.display()))?;
        out.push(p);
    }
    Ok(out)
}

type Res = Result<(), Box<dyn std::error::Error>>;

fn canvas(
    path: &Path,
) -> Result<DrawingArea<BitMapBackend<'_>, Shift>, Box<dyn std::error::Error>> {
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    Ok(root)
}

/// A chart with the common caption, margins and label areas.
fn builder<'a, 'b>(
    root: &'a DrawingArea<BitMapBackend<'b>, Shift>,
    caption: &str,
) -> ChartBuilder<'a, 'b, BitMapBackend<'b>> {
    let mut b = ChartBuilder::on(root);
    b.caption(caption, (FONT, 20))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(56);
    b
}

/// The legend's sample of a series drawn in `color`.
fn mark(color: RGBAColor) -> impl Fn((i32, i32)) -> PathElement<(i32, i32)> {
    move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(3))
}

fn legend<'a, 'b: 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, BitMapBackend<'b>, CT>,
    position: SeriesLabelPosition,
) -> Res {
    chart
        .configure_series_labels()
        .position(position)
        .label_font((FONT, 14))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

fn latency_cdf(report: &Value, rows: &[Row], path: &Path) -> Res {
    let with_hp: Vec<&Row> = rows.iter().filter(|r| !r.hp_ms.is_empty()).collect();
    let lo = with_hp
        .iter()
        .map(|r| r.hp_ms[0])
        .fold(f64::INFINITY, f64::min);
    let hi = with_hp
        .iter()
        .map(|r| r.hp_ms[r.hp_ms.len() - 1])
        .fold(0.0, f64::max);
    let (lo, hi) = if lo.is_finite() && hi > 0.0 {
        (lo.max(1e-3) * 0.8, hi * 1.25)
    } else {
        (0.01, 1.0)
    };
    let root = canvas(path)?;
    let mut chart = builder(&root, &title(report, "HP turnaround CDF"))
        .build_cartesian_2d((lo..hi).log_scale(), 0.0..1.0)?;
    chart
        .configure_mesh()
        .x_desc("HP request turnaround (ms, log scale)")
        .y_desc("fraction of requests")
        .label_style((FONT, 14))
        .draw()?;
    for (i, r) in with_hp.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let n = r.hp_ms.len() as f64;
        let pts = r
            .hp_ms
            .iter()
            .enumerate()
            .map(|(k, &v)| (v, (k + 1) as f64 / n));
        chart
            .draw_series(LineSeries::new(pts, color.stroke_width(2)))?
            .label(r.label)
            .legend(mark(color));
    }
    legend(&mut chart, SeriesLabelPosition::LowerRight)?;
    root.present()?;
    Ok(())
}

/// x range for target-slice plots (log scale), padded.
fn target_range(sliced: &[(f64, &Row)]) -> std::ops::Range<f64> {
    let lo = sliced.iter().map(|s| s.0).fold(f64::INFINITY, f64::min);
    let hi = sliced.iter().map(|s| s.0).fold(0.0, f64::max);
    lo.max(1.0) * 0.7..hi.max(lo + 1.0) * 1.4
}

fn p99_vs_target(report: &Value, rows: &[Row], sliced: &[(f64, &Row)], path: &Path) -> Res {
    let refs: Vec<(&str, f64)> = ["hp-alone", "corun-bare", "corun-sp-noslice"]
        .into_iter()
        .filter_map(|m| {
            rows.iter()
                .find(|r| r.mode == m)
                .and_then(|r| Some((m, r.hp_p99?)))
        })
        .collect();
    let pts: Vec<(f64, f64)> = sliced
        .iter()
        .filter_map(|(t, r)| Some((*t, r.hp_p99?)))
        .collect();
    let ymax = pts
        .iter()
        .map(|p| p.1)
        .chain(refs.iter().map(|r| r.1))
        .fold(0.0, f64::max)
        * 1.15;
    let xr = target_range(sliced);
    let root = canvas(path)?;
    let mut chart = builder(&root, &title(report, "HP p99 vs target slice"))
        .build_cartesian_2d(xr.clone().log_scale(), 0.0..ymax.max(1e-3))?;
    chart
        .configure_mesh()
        .x_desc("target slice time (µs, log scale)")
        .y_desc("HP turnaround p99 (ms)")
        .label_style((FONT, 14))
        .draw()?;
    chart
        .draw_series(LineSeries::new(pts.iter().copied(), BLUE.stroke_width(2)))?
        .label("SoftPreempt, sliced")
        .legend(mark(BLUE.to_rgba()));
    chart.draw_series(pts.iter().map(|&p| Circle::new(p, 4, BLUE.filled())))?;
    for (i, (name, v)) in refs.iter().enumerate() {
        let color = [GREEN, RED, MAGENTA][i % 3];
        chart
            .draw_series(LineSeries::new(
                [(xr.start, *v), (xr.end, *v)],
                color.stroke_width(2),
            ))?
            .label(*name)
            .legend(mark(color.to_rgba()));
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    root.present()?;
    Ok(())
}

fn lp_vs_target(report: &Value, sliced: &[(f64, &Row)], path: &Path) -> Res {
    let pts: Vec<(f64, f64)> = sliced
        .iter()
        .filter_map(|(t, r)| Some((*t, r.lp_vs_alone?)))
        .collect();
    let xr = target_range(sliced);
    let root = canvas(path)?;
    let mut chart = builder(&root, &title(report, "LP throughput vs target slice"))
        .build_cartesian_2d(xr.log_scale(), 0.0..1.1)?;
    chart
        .configure_mesh()
        .x_desc("target slice time (µs, log scale)")
        .y_desc("LP launches/s, relative to LP alone (bare)")
        .label_style((FONT, 14))
        .draw()?;
    chart.draw_series(LineSeries::new(pts.iter().copied(), BLUE.stroke_width(2)))?;
    chart.draw_series(pts.iter().map(|&p| Circle::new(p, 4, BLUE.filled())))?;
    root.present()?;
    Ok(())
}

/// One row of the matrix's bar charts: (bare, SoftPreempt) pairs; for several HP
/// processes, the worst of them.
pub struct MatrixBars {
    pub name: String,
    pub hp_p99_steady: (Option<f64>, Option<f64>),
    pub hp_p99_first: (Option<f64>, Option<f64>),
    pub lp_kept: (Option<f64>, Option<f64>),
}

/// The matrix's bar charts into `dir`: HP p99 ÷ alone (steady and first second) and LP
/// throughput kept, bare against SoftPreempt, one group of bars per row.
pub fn write_matrix(rows: &[MatrixBars], device: &str, dir: &Path) -> Result<Vec<PathBuf>, String> {
    load_font()?;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut out = Vec::new();
    let p = dir.join("matrix_hp_p99.png");
    let series = [
        (
            "bare, steady",
            RED.mix(0.55),
            rows.iter().map(|r| r.hp_p99_steady.0).collect(),
        ),
        (
            "SoftPreempt, steady",
            BLUE.mix(0.55),
            rows.iter().map(|r| r.hp_p99_steady.1).collect(),
        ),
        (
            "bare, first second",
            RED.to_rgba(),
            rows.iter().map(|r| r.hp_p99_first.0).collect(),
        ),
        (
            "SoftPreempt, first second",
            BLUE.to_rgba(),
            rows.iter().map(|r| r.hp_p99_first.1).collect(),
        ),
    ];
    bars(
        rows,
        &series,
        &format!("HP p99 ÷ HP alone: {device}"),
        "HP p99 ÷ alone",
        1.0,
        &p,
    )
    .map_err(|e| format!("{}: {e}", p.display()))?;
    out.push(p);
    let p = dir.join("matrix_lp_kept.png");
    let series = [
        (
            "bare",
            RED.to_rgba(),
            rows.iter().map(|r| r.lp_kept.0).collect(),
        ),
        (
            "SoftPreempt",
            BLUE.to_rgba(),
            rows.iter().map(|r| r.lp_kept.1).collect(),
        ),
    ];
    bars(
        rows,
        &series,
        &format!("LP throughput kept: {device}"),
        "LP ÷ LP alone (bare)",
        1.0,
        &p,
    )
    .map_err(|e| format!("{}: {e}", p.display()))?;
    out.push(p);
    Ok(out)
}

type Series = (&'static str, RGBAColor, Vec<Option<f64>>);

/// Grouped bars: one group per row, one bar per series, a dashed reference line at `refv`.
fn bars(
    rows: &[MatrixBars],
    series: &[Series],
    caption: &str,
    y: &str,
    refv: f64,
    path: &Path,
) -> Res {
    let ymax = series
        .iter()
        .flat_map(|s| s.2.iter().flatten())
        .fold(refv, |a, &b| a.max(b))
        * 1.15;
    let n = rows.len().max(1);
    let root = BitMapBackend::new(path, (SIZE.0.max(140 * n as u32), SIZE.1)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = builder(&root, caption).build_cartesian_2d(0.0..n as f64, 0.0..ymax)?;
    let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n * 2 + 1)
        .x_label_formatter(&|x| {
            // Labels at the group centres (i + 0.5) only.
            let i = x.floor() as usize;
            let centre = (x - x.floor() - 0.5).abs() < 1e-6;
            names
                .get(i)
                .filter(|_| centre)
                .map_or(String::new(), |s| s.to_string())
        })
        .y_desc(y)
        .label_style((FONT, 13))
        .draw()?;
    let w = 0.8 / series.len() as f64;
    for (k, (label, color, values)) in series.iter().enumerate() {
        let rects = values.iter().enumerate().filter_map(|(i, v)| {
            let x0 = i as f64 + 0.1 + k as f64 * w;
            v.map(|v| Rectangle::new([(x0, 0.0), (x0 + w * 0.9, v)], color.filled()))
        });
        chart
            .draw_series(rects)?
            .label(*label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled()));
    }
    chart.draw_series(DashedLineSeries::new(
        [(0.0, refv), (n as f64, refv)],
        6,
        4,
        BLACK.stroke_width(1),
    ))?;
    legend(&mut chart, SeriesLabelPosition::UpperRight)?;
    root.present()?;
    Ok(())
}
