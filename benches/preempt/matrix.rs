//! The benchmark matrix's combined table: reads the JSON reports of one matrix run (one
//! per row, as `scripts/bench-matrix.sh` writes them, plus `benches/pyopencl_pair.py`'s)
//! and writes a markdown table of HP latency ÷ alone (steady state and first second),
//! preemption latency and LP throughput kept, bare driver against SoftPreempt.
//!
//! Reads the reports as untyped JSON, as the plots do, so reports written on another
//! machine (the GPU host) can be combined here.

use super::plot::{self, MatrixBars};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// One line of the table, as cells.
struct Line {
    name: String,
    lp: String,
    hp: String,
    /// bare / SoftPreempt pairs, already formatted.
    cells: [String; 7],
    /// SoftPreempt's yielding launches in the co-run (see [`yield_cell`]).
    yielding: String,
    /// SoftPreempt's LP kept ÷ the bare driver's.
    sp_vs_bare: String,
    bars: Option<MatrixBars>,
}

const HEADER: [&str; 12] = [
    "row",
    "LP",
    "HP",
    "HP p50 ÷ alone, steady",
    "HP p99 ÷ alone, steady",
    "HP p50 ÷ alone, first s",
    "HP p99 ÷ alone, first s",
    "q2s p99 ms, steady",
    "q2s p99 ms, first s",
    "LP kept",
    "SP ÷ bare",
    "SP: LP yields · yield p99 ms · HP wait ms · expired",
];

/// Writes `dir/matrix.md` from `dir/*.json` (in name order) and prints it; with `plots`,
/// draws the matrix's bar charts there.
pub fn write(dir: &Path, plots: Option<&Path>) -> Result<(), String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(format!("no *.json reports in {}", dir.display()));
    }
    let mut lines = Vec::new();
    let mut device = None;
    for f in &files {
        let text = std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?;
        let v: Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", f.display()))?;
        let stem = f.file_stem().and_then(|s| s.to_str()).unwrap_or("?");
        if v.get("table").is_some() {
            lines.push(pyopencl_line(&v, stem));
        } else {
            device = device.or_else(|| v["calibration"]["device"].as_str().map(String::from));
            lines.extend(report_lines(&v, stem));
        }
    }
    let mut md = format!(
        "Benchmark matrix on {}, default configuration. Cells are `bare / SoftPreempt`. \
         \"steady\": the HP next to an LP after the LP's launches from before the HP have \
         drained; \"first s\": the HP's first second after its queue opens next to an LP \
         already running (arrivals pooled); q2s: HP kernel queued to start (profiling); LP \
         kept: LP throughput ÷ LP alone on the bare driver (2 HP + 3 LP: the three LPs \
         together); a list holds one value per HP process. Yielding launches (SoftPreempt's \
         co-run): the LP's launches that left the device on request, their latency from \
         request to off the device (p99, log2 bucket edge), the HP's mean wait for the LP to \
         leave before it submitted, and waits that reached the bound.\n\n",
        device.as_deref().unwrap_or("?")
    );
    md += &format!("| {} |\n", HEADER.join(" | "));
    md += &format!("|{}\n", "---|".repeat(HEADER.len()));
    for l in &lines {
        md += &format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            l.name,
            l.lp,
            l.hp,
            l.cells.join(" | "),
            l.sp_vs_bare,
            l.yielding
        );
    }
    let out = dir.join("matrix.md");
    std::fs::write(&out, &md).map_err(|e| format!("{}: {e}", out.display()))?;
    println!("{md}");
    eprintln!("wrote {}", out.display());
    if let Some(pdir) = plots {
        let bars: Vec<MatrixBars> = lines.into_iter().filter_map(|l| l.bars).collect();
        for f in plot::write_matrix(&bars, device.as_deref().unwrap_or("?"), pdir)? {
            eprintln!("wrote {}", f.display());
        }
    }
    Ok(())
}

/// The successful mode of a report named `name`.
fn mode<'a>(r: &'a Value, name: &str) -> Option<&'a Value> {
    r["modes"]
        .as_array()?
        .iter()
        .find(|m| m["plan"]["mode"] == name && m["error"].is_null())
}

/// Every HP's stats of a mode (the first, then the others of a multi-process mode).
fn hps(m: Option<&Value>) -> Vec<&Value> {
    let Some(m) = m else { return Vec::new() };
    let more = m["hp_more"].as_array().map_or(&[][..], |v| v.as_slice());
    std::iter::once(&m["hp"])
        .filter(|h| !h.is_null())
        .chain(more)
        .collect()
}

fn fmt(v: Option<f64>, prec: usize) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{v:.prec$}"),
        _ => "–".into(),
    }
}

/// One side of a cell: one value, or one per HP process.
fn side(values: &[Option<f64>], prec: usize) -> String {
    if values.is_empty() {
        return "–".into();
    }
    values
        .iter()
        .map(|v| fmt(*v, prec))
        .collect::<Vec<_>>()
        .join("; ")
}

fn pair(bare: &[Option<f64>], sp: &[Option<f64>], prec: usize) -> String {
    format!("{} / {}", side(bare, prec), side(sp, prec))
}

/// The worst (largest) of several values, for the bar charts.
fn worst(v: &[Option<f64>]) -> Option<f64> {
    v.iter().flatten().copied().reduce(f64::max)
}

/// The yielding-launch figures of a SoftPreempt mode: LP yields, yield p99, the HP's mean
/// handshake wait, expired bounds.
fn yield_cell(m: Option<&Value>) -> String {
    let Some(m) = m else { return "–".into() };
    let (lp, hp) = (&m["lp"]["arbiter"], &m["hp"]["arbiter"]);
    if lp.is_null() && hp.is_null() {
        return "–".into();
    }
    let waits = hp["hs_waits"].as_u64().unwrap_or(0);
    let wait = (waits > 0).then(|| hp["hs_wait_ms"].as_f64().unwrap_or(0.0) / waits as f64);
    format!(
        "{} · {} · {} · {}",
        lp["yields_done"].as_u64().unwrap_or(0),
        fmt(lp["yield_p99_ms"].as_f64(), 3),
        fmt(wait, 3),
        hp["hs_expired"].as_u64().unwrap_or(0)
    )
}

/// The lines of one `preempt` report: its co-run row, and LP-alone and idle-HP lines when
/// it ran those modes.
fn report_lines(r: &Value, stem: &str) -> Vec<Line> {
    let o = &r["options"];
    let c = &r["calibration"];
    let name = o["label"].as_str().unwrap_or(stem).to_string();
    let kind = c["lp"]["kind"].as_str().unwrap_or("compute");
    let lp = match o["lp_waves"].as_u64() {
        Some(w) => format!(
            "{kind} {:.1} ms, {w} long waves",
            c["lp_ms"].as_f64().unwrap_or(0.0)
        ),
        None => format!("{kind} {:.2} ms", c["lp_ms"].as_f64().unwrap_or(0.0)),
    };
    let hp = format!(
        "{} × {:.2} ms / {} ms",
        o["hp_burst"].as_u64().unwrap_or(1),
        c["hp_ms"].as_f64().unwrap_or(0.0),
        o["gap_ms"].as_f64().unwrap_or(0.0)
    );
    let alone = &mode(r, "hp-alone").map_or(Value::Null, |m| m["hp"].clone());
    let lp_base = mode(r, "lp-bare").and_then(|m| m["lp"]["per_s"].as_f64());
    let ratio = |hs: &[&Value], key: &str| -> Vec<Option<f64>> {
        hs.iter()
            .map(|h| Some(h[key].as_f64()? / alone[key].as_f64()?))
            .collect()
    };
    let field = |hs: &[&Value], key: &str| -> Vec<Option<f64>> {
        hs.iter().map(|h| h[key].as_f64()).collect()
    };
    let kept = |m: Option<&Value>| -> Vec<Option<f64>> {
        m.map(|m| m["lp"]["per_s"].as_f64().zip(lp_base).map(|(x, b)| x / b))
            .into_iter()
            .collect()
    };
    let multi = mode(r, "multi-sp").is_some() || mode(r, "multi-bare").is_some();
    let (bare, sp) = if multi {
        (mode(r, "multi-bare"), mode(r, "multi-sp"))
    } else {
        (mode(r, "corun-bare"), mode(r, "corun-sp"))
    };
    let (arr_bare, arr_sp) = (mode(r, "arrival-bare"), mode(r, "arrival-sp"));
    let mut out = Vec::new();
    if bare.is_some() || sp.is_some() || arr_bare.is_some() || arr_sp.is_some() {
        let (hb, hs) = (hps(bare), hps(sp));
        let (ab, asp) = (hps(arr_bare), hps(arr_sp));
        let (kb, ks) = (kept(bare), kept(sp));
        let vs = kb
            .first()
            .copied()
            .flatten()
            .zip(ks.first().copied().flatten())
            .map(|(b, s)| s / b);
        out.push(Line {
            name: if multi {
                format!("{name} (2 HP + 3 LP)")
            } else {
                name.clone()
            },
            lp: lp.clone(),
            hp: hp.clone(),
            cells: [
                pair(&ratio(&hb, "p50_ms"), &ratio(&hs, "p50_ms"), 2),
                pair(&ratio(&hb, "p99_ms"), &ratio(&hs, "p99_ms"), 2),
                pair(&ratio(&ab, "p50_ms"), &ratio(&asp, "p50_ms"), 2),
                pair(&ratio(&ab, "p99_ms"), &ratio(&asp, "p99_ms"), 2),
                pair(
                    &field(&hb, "queue_to_start_p99_ms"),
                    &field(&hs, "queue_to_start_p99_ms"),
                    3,
                ),
                pair(
                    &field(&ab, "queue_to_start_p99_ms"),
                    &field(&asp, "queue_to_start_p99_ms"),
                    3,
                ),
                pair(&kb, &ks, 3),
            ],
            sp_vs_bare: fmt(vs, 2),
            yielding: yield_cell(sp),
            bars: Some(MatrixBars {
                name: name.clone(),
                hp_p99_steady: (worst(&ratio(&hb, "p99_ms")), worst(&ratio(&hs, "p99_ms"))),
                hp_p99_first: (worst(&ratio(&ab, "p99_ms")), worst(&ratio(&asp, "p99_ms"))),
                lp_kept: (worst(&kb), worst(&ks)),
            }),
        });
    }
    for (m, what) in [
        ("lp-sp", "LP alone through SoftPreempt"),
        ("lp-sp-idle-hp", "LP with an idle registered HP"),
    ] {
        let Some(k) = kept(mode(r, m)).first().copied().flatten() else {
            continue;
        };
        let dash = "– / –".to_string();
        out.push(Line {
            name: format!("{name}: {what}"),
            lp: lp.clone(),
            hp: "–".into(),
            cells: [
                dash.clone(),
                dash.clone(),
                dash.clone(),
                dash.clone(),
                dash.clone(),
                dash,
                format!("1.000 / {}", fmt(Some(k), 3)),
            ],
            sp_vs_bare: fmt(Some(k), 3),
            yielding: yield_cell(mode(r, m)),
            bars: None,
        });
    }
    out
}

/// The line of a `benches/pyopencl_pair.py --json` report: two unmodified pyopencl
/// processes (binary cache warm).
fn pyopencl_line(r: &Value, stem: &str) -> Line {
    let t = &r["table"];
    let alone = &t["hp-alone"];
    let ratio = |row: &str, key: &str| -> Vec<Option<f64>> {
        vec![t[row][key]
            .as_f64()
            .zip(alone[key].as_f64())
            .map(|(x, a)| x / a)]
    };
    let base = t["lp-alone"]["lp_rate"].as_f64();
    let kept = |row: &str| vec![t[row]["lp_rate"].as_f64().zip(base).map(|(x, b)| x / b)];
    let field = |row: &str, key: &str| vec![t[row][key].as_f64()];
    let (kb, ks) = (kept("corun-bare"), kept("corun-sp"));
    let vs = kb[0].zip(ks[0]).map(|(b, s)| s / b);
    let o = &r["options"];
    let lp = match o["lp_waves"].as_u64().filter(|&w| w > 0) {
        Some(w) => format!(
            "pyopencl spin {:.1} ms, {w} long waves",
            r["lp"]["ms"].as_f64().unwrap_or(0.0)
        ),
        None => format!(
            "pyopencl spin {:.1} ms",
            r["lp"]["ms"].as_f64().unwrap_or(0.0)
        ),
    };
    Line {
        name: format!("{stem} (real client)"),
        lp,
        hp: format!(
            "1 × {:.2} ms / {} ms",
            r["hp"]["ms"].as_f64().unwrap_or(0.0),
            o["gap_ms"].as_f64().map_or("?".into(), |g| g.to_string())
        ),
        cells: [
            pair(
                &ratio("corun-bare", "hp_p50"),
                &ratio("corun-sp", "hp_p50"),
                2,
            ),
            pair(
                &ratio("corun-bare", "hp_p99"),
                &ratio("corun-sp", "hp_p99"),
                2,
            ),
            pair(
                &ratio("corun-bare", "first_p50"),
                &ratio("corun-sp", "first_p50"),
                2,
            ),
            pair(
                &ratio("corun-bare", "first_p99"),
                &ratio("corun-sp", "first_p99"),
                2,
            ),
            pair(
                &field("corun-bare", "q2s_p99"),
                &field("corun-sp", "q2s_p99"),
                3,
            ),
            pair(
                &field("corun-bare", "first_q2s_p99"),
                &field("corun-sp", "first_q2s_p99"),
                3,
            ),
            pair(&kb, &ks, 3),
        ],
        sp_vs_bare: fmt(vs, 2),
        yielding: "–".into(),
        bars: Some(MatrixBars {
            name: "pyopencl".into(),
            hp_p99_steady: (
                ratio("corun-bare", "hp_p99")[0],
                ratio("corun-sp", "hp_p99")[0],
            ),
            hp_p99_first: (
                ratio("corun-bare", "first_p99")[0],
                ratio("corun-sp", "first_p99")[0],
            ),
            lp_kept: (kb[0], ks[0]),
        }),
    }
}
