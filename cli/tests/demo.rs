//! `softpreempt demo --quick`: both child roles, on the bare vendor and through the built
//! library (found next to the binary), through the real ICD loader with PoCL. Needs
//! `cargo build --workspace` first, like the root package's tests.

mod common;

use common::*;

#[test]
fn quick_demo_runs_every_scenario_and_checks_the_results() {
    let o = run(["demo", "--quick", "--samples", "3"], &[]);
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(o.status.success(), "stdout:\n{out}\nstderr:\n{err}");
    for row in [
        "HP alone, bare vendor",
        "HP + LP, bare vendor",
        "HP alone, through SoftPreempt",
        "HP + LP, through SoftPreempt",
    ] {
        let line = out
            .lines()
            .find(|l| l.starts_with(row))
            .unwrap_or_else(|| panic!("no row {row}:\n{out}"));
        // p50, p99 and the LP rate (or "-" when there is no LP).
        assert!(line.contains(" ms") || line.contains(" µs"), "{line}");
    }
    assert!(
        out.contains("results bit-identical on every path: yes"),
        "{out}"
    );
    assert!(
        out.contains("the HP alone pays ") && out.contains("% p50 through SoftPreempt"),
        "{out}"
    );
    // Without a terminal, the progress goes to stderr one phase per line.
    assert!(
        err.contains("HP + LP, through SoftPreempt: starting the LP process"),
        "{err}"
    );
}

/// Without `--quick` the demo first sizes both workloads on the bare vendor's device, so
/// that a launch takes long enough to show anything there (a GPU runs the CPU-sized
/// images in microseconds): it grows an image until a launch takes at least half its
/// target (LP 150 ms), or reaches the largest size, and says what it chose.
#[test]
fn the_demo_sizes_its_workloads_for_the_device() {
    let o = run(["demo", "--samples", "2"], &[]);
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(o.status.success(), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        err.contains("sizing the workloads for this device"),
        "{err}"
    );
    let sized = out
        .lines()
        .find(|l| l.starts_with("(sized for this device:"))
        .unwrap_or_else(|| panic!("no sizing line:\n{out}"));
    let lp = out
        .lines()
        .find(|l| l.starts_with("LP: "))
        .unwrap_or_else(|| panic!("no workload line:\n{out}"));
    // "LP: {w}x{w} Mandelbrot, {iters} iterations, ..."
    let width: usize = lp[4..].split('x').next().unwrap().parse().unwrap();
    let iters: usize = lp
        .split(", ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{lp}"));
    assert!(
        width >= 1024 && iters >= 512,
        "never smaller than the start: {lp}"
    );
    let took = sized
        .split("took ")
        .nth(1)
        .and_then(|s| s.split(" (LP)").next())
        .unwrap_or_else(|| panic!("{sized}"));
    let ms = match took.split_once(' ') {
        Some((v, "ms")) => v.parse::<f64>().unwrap(),
        Some((v, "s")) => v.parse::<f64>().unwrap() * 1e3,
        _ => 0.0,
    };
    assert!(
        ms >= 75.0 || (width == 8192 && iters == 1 << 16),
        "stopped growing short of the target: {sized}"
    );
    assert!(
        out.contains("results bit-identical on every path: yes"),
        "{out}"
    );
}

/// `SOFTPREEMPT_DEMO_TIMELINE`: each hp and lp child writes one `start_ns end_ns` line per
/// measured launch, named by its role, path and pid, so that a run's tail can be set beside
/// the other process's launches (`scripts/demo-timeline.py`).
#[test]
fn the_demo_writes_each_launch_s_times_where_asked() {
    let dir = tempfile::tempdir().unwrap();
    let o = run(
        ["demo", "--quick", "--samples", "3"],
        &[("SOFTPREEMPT_DEMO_TIMELINE", dir.path().as_os_str())],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let kinds: Vec<&str> = names
        .iter()
        .map(|n| n.rsplit_once('-').unwrap().0)
        .collect();
    // An HP alone and one next to the LP on each path; an LP for each co-run.
    assert_eq!(
        kinds,
        [
            "hp-bare",
            "hp-bare",
            "hp-layered",
            "hp-layered",
            "lp-bare",
            "lp-layered"
        ],
        "{names:?}"
    );
    for n in &names {
        let text = std::fs::read_to_string(dir.path().join(n)).unwrap();
        let spans: Vec<(u128, u128)> = text
            .lines()
            .map(|l| {
                let (a, b) = l.split_once(' ').unwrap_or_else(|| panic!("{n}: {l}"));
                (a.parse().unwrap(), b.parse().unwrap())
            })
            .collect();
        if n.starts_with("hp-") {
            assert_eq!(spans.len(), 3, "{n}: one line per sample:\n{text}");
        } else {
            assert!(!spans.is_empty(), "{n}: the LP's launches");
        }
        // Each launch ends after it starts, and the next starts after it ends.
        assert!(spans.iter().all(|(s, e)| s <= e), "{n}:\n{text}");
        assert!(spans.windows(2).all(|w| w[0].1 <= w[1].0), "{n}:\n{text}");
    }
}
