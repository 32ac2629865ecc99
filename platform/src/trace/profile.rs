//! Per-kernel statistics (`SOFTPREEMPT_PROFILE=FILE`): launches, slices and device time
//! per kernel name and priority, appended to FILE as JSON lines.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::{exit, Switch};

/// Totals of one (kernel, priority).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelStats {
    /// Launches (enqueue calls).
    pub launches: u64,
    /// Pieces submitted to the device (1 for an unsliced launch; the runs of a yielding
    /// launch).
    pub slices: u64,
    /// Times a yielding launch stopped on request and later resumed from its ticket (the
    /// counter `yielding = "chaos"` runs check).
    pub yields: u64,
    /// Device time of all slices, ns.
    pub device_ns: u64,
    /// The longest piece (a slice, or a launch sent whole), ns: the preemption
    /// granularity a higher priority met behind this kernel.
    pub max_piece_ns: u64,
}

/// Statistics by (kernel name, priority), in name order.
#[derive(Debug, Default)]
pub struct ProfileTable {
    kernels: BTreeMap<(String, String), KernelStats>,
}

impl ProfileTable {
    /// Counts one launch.
    pub fn add(
        &mut self,
        kernel: &str,
        priority: &str,
        slices: u64,
        device_ns: u64,
        max_piece_ns: u64,
        yields: u64,
    ) {
        let key = (kernel.to_string(), priority.to_string());
        let s = self.kernels.entry(key).or_default();
        s.launches += 1;
        s.slices += slices;
        s.yields += yields;
        s.device_ns += device_ns;
        s.max_piece_ns = s.max_piece_ns.max(max_piece_ns);
    }

    /// The totals of `kernel` at `priority`.
    pub fn get(&self, kernel: &str, priority: &str) -> Option<KernelStats> {
        self.kernels
            .get(&(kernel.to_string(), priority.to_string()))
            .copied()
    }

    /// One JSON line per kernel since the last call, tagged with the process; then
    /// starts counting afresh, so appending after every call never counts twice.
    pub fn take_lines(&mut self, pid: u32, exe: &str) -> String {
        let mut out = String::new();
        for ((kernel, priority), s) in std::mem::take(&mut self.kernels) {
            let line = serde_json::json!({
                "kernel": kernel,
                "priority": priority,
                "launches": s.launches,
                "slices": s.slices,
                "yields": s.yields,
                "total_device_ns": s.device_ns,
                "mean_device_ns": s.device_ns / s.launches.max(1),
                "mean_piece_ns": s.device_ns / s.slices.max(1),
                "max_piece_ns": s.max_piece_ns,
                "pid": pid,
                "exe": exe,
            });
            out.push_str(&line.to_string());
            out.push('\n');
        }
        out
    }
}

/// Appends `lines` with one write, so that lines of processes sharing the file do not
/// interleave.
pub fn append(path: &Path, lines: &str) -> std::io::Result<()> {
    if lines.is_empty() {
        return Ok(());
    }
    let mut f = OpenOptions::new().create(true).append(true).open(path)?;
    f.write_all(lines.as_bytes())
}

static PROFILING: Switch = Switch::new();
static TABLE: Mutex<Option<(PathBuf, ProfileTable)>> = Mutex::new(None);

/// Whether `SOFTPREEMPT_PROFILE` (or `trace.profile`) is set; one atomic load after the
/// first call.
pub fn enabled() -> bool {
    PROFILING.get(|| {
        let mut table = TABLE.lock().unwrap_or_else(|p| p.into_inner());
        if table.is_none() {
            let Some(path) = crate::config::config().trace.profile.clone() else {
                return false;
            };
            *table = Some((path, ProfileTable::default()));
            exit::register();
        }
        true
    })
}

/// Counts one launch of `kernel` at `priority`: `slices` pieces, `device_ns` in all, the
/// longest piece `max_piece_ns` (0 where unknown), `yields` of them ended by a yield.
pub fn launch(
    kernel: &str,
    priority: &dyn std::fmt::Display,
    slices: u64,
    device_ns: u64,
    max_piece_ns: u64,
    yields: u64,
) {
    if !enabled() {
        return;
    }
    let mut table = TABLE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, t)) = table.as_mut() {
        t.add(
            kernel,
            &priority.to_string(),
            slices,
            device_ns,
            max_piece_ns,
            yields,
        );
    }
}

/// Appends the lines counted since the last flush.
pub fn flush() {
    if !enabled() {
        return;
    }
    let mut table = TABLE.lock().unwrap_or_else(|p| p.into_inner());
    let Some((path, t)) = table.as_mut() else {
        return;
    };
    let lines = t.take_lines(std::process::id(), &exit::exe_name());
    if let Err(e) = append(path, &lines) {
        crate::error_once!(
            "profile-write",
            "softpreempt: cannot append to profile file {}: {e}",
            path.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_json_with_means_and_never_count_twice() {
        let mut t = ProfileTable::default();
        t.add("mandel", "low", 4, 4_000, 1_500, 3);
        t.add("mandel", "low", 2, 2_000, 1_200, 0);
        t.add("mandel", "high", 1, 500, 500, 0);
        assert_eq!(
            t.get("mandel", "low"),
            Some(KernelStats {
                launches: 2,
                slices: 6,
                yields: 3,
                device_ns: 6_000,
                max_piece_ns: 1_500,
            })
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("profile.jsonl");
        append(&path, &t.take_lines(9, "app")).unwrap();
        append(&path, &t.take_lines(9, "app")).unwrap();
        t.add("vadd", "normal", 1, 10, 10, 0);
        append(&path, &t.take_lines(9, "app")).unwrap();

        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 3, "{text}");
        let low = &lines[1];
        assert_eq!(
            (low["kernel"].as_str(), low["priority"].as_str()),
            (Some("mandel"), Some("low"))
        );
        assert_eq!(low["launches"], 2);
        assert_eq!(low["slices"], 6);
        assert_eq!(low["yields"], 3);
        assert_eq!(low["total_device_ns"], 6000);
        assert_eq!(low["mean_device_ns"], 3000);
        assert_eq!(low["mean_piece_ns"], 1000);
        assert_eq!(low["max_piece_ns"], 1500);
        assert_eq!(low["pid"], 9);
        assert_eq!(lines[2]["kernel"], "vadd");
    }
}
