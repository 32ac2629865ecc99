//! The demo's numbers: percentiles, the result table, and the progress bar.

use std::fmt::Write as _;
use std::io::Write as _;

use crate::units::duration_ns;

/// What one scenario measured.
#[derive(Debug, Default)]
pub struct Outcome {
    /// HP latencies, ns, sorted.
    pub latencies: Vec<u64>,
    /// LP launches completed and the seconds they took; `None` without an LP.
    pub lp: Option<(u64, f64)>,
    pub lp_checksum: Option<String>,
    pub hp_checksum: String,
    pub platform: String,
    pub device: String,
}

/// Nearest-rank percentile of sorted values.
pub fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The result table, one row per scenario.
pub fn table(rows: &[(&str, &Outcome)]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<32} {:>11} {:>11} {:>16}",
        "scenario", "HP p50", "HP p99", "LP launches/s"
    );
    for (name, o) in rows {
        let lp = match o.lp {
            Some((n, secs)) if secs > 0.0 => format!("{:.2}", n as f64 / secs),
            Some(_) => "0".into(),
            None => "-".into(),
        };
        let _ = writeln!(
            out,
            "{:<32} {:>11} {:>11} {:>16}",
            name,
            duration_ns(percentile(&o.latencies, 50.0)),
            duration_ns(percentile(&o.latencies, 99.0)),
            lp
        );
    }
    out
}

/// A progress bar on stderr (redrawn in place on a terminal; one line per phase else).
pub struct Progress {
    total: usize,
    done: usize,
    label: String,
    tty: bool,
}

impl Progress {
    pub fn new(total: usize) -> Progress {
        // SAFETY: isatty only inspects the descriptor.
        let tty = unsafe { libc::isatty(2) } == 1;
        Progress {
            total: total.max(1),
            done: 0,
            label: String::new(),
            tty,
        }
    }

    /// Starts a phase.
    pub fn phase(&mut self, label: String) {
        if !self.tty {
            eprintln!("  {label}");
        }
        self.label = label;
        self.draw();
    }

    /// Changes the label within a phase (shown on a terminal only).
    pub fn note(&mut self, label: String) {
        self.label = label;
        self.draw();
    }

    /// One unit of work done.
    pub fn tick(&mut self) {
        self.done = (self.done + 1).min(self.total);
        self.draw();
    }

    fn draw(&self) {
        if !self.tty {
            return;
        }
        const WIDTH: usize = 30;
        let filled = WIDTH * self.done / self.total;
        let bar = format!("{}{}", "#".repeat(filled), "-".repeat(WIDTH - filled));
        let pct = 100 * self.done / self.total;
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K[{bar}] {pct:>3}%  {}", self.label);
        let _ = err.flush();
    }

    /// Clears the bar before the results are printed.
    pub fn finish(&self) {
        if self.tty {
            eprint!("\r\x1b[2K");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), 50);
        assert_eq!(percentile(&v, 99.0), 99);
        assert_eq!(percentile(&[7], 99.0), 7);
        assert_eq!(percentile(&[], 50.0), 0);
        assert_eq!(percentile(&[1, 2, 3], 0.0), 1);
    }

    #[test]
    fn table_rows_show_latency_and_throughput() {
        let o = Outcome {
            latencies: vec![1_000_000, 2_000_000],
            lp: Some((10, 4.0)),
            ..Default::default()
        };
        let t = table(&[("bare vendor", &o)]);
        let row = t.lines().nth(1).unwrap();
        assert!(row.starts_with("bare vendor"), "{t}");
        assert!(
            row.contains("1.00 ms") && row.contains("2.00 ms") && row.ends_with("2.50"),
            "{t}"
        );
    }
}
