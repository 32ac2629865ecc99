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
    /// Yielding launches never asked to yield: their groups outlast the driver's own
    /// hand-over, so a higher priority does not wait for them (why a kernel that runs as
    /// persistent groups still shows no yields).
    pub not_asked: u64,
    /// Launches of a managed queue sent straight to the vendor, not through its software
    /// FIFO (so not measured, and not in `launches`): alone, or short ones under the
    /// direct budget while a higher priority is registered.
    pub direct: u64,
    /// Of those, launches that claimed the direct budget (a higher priority was
    /// registered): each is watched to its completion.
    pub direct_claimed: u64,
    /// Of those, launches by kernel objects that record their argument values, which a
    /// yielding launch replays (`Kernel::records`): what the kernel's launches pay for
    /// the chance to yield, the recording, while they are not known to be short.
    pub direct_recorded: u64,
    /// Launches through the FIFO that went as the application's kernel, not as its
    /// yielding entry, because the entry's runs were measured slower
    /// (`managed::yielding::entry_pays`).
    pub entry_slower: u64,
    /// Yielding launches on a CPU device that ran the kernel's second flat entry, the one
    /// PoCL may compile with the body's loops interchanged, because its runs were measured
    /// faster (`managed::yielding::pick_entry`).
    pub second_entry: u64,
}

/// What one launch did, as `launch` counts it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Launch {
    /// Pieces submitted (1 for a launch sent whole; the runs of a yielding launch).
    pub pieces: u64,
    /// Device time of all pieces, ns (0 where unknown).
    pub device_ns: u64,
    /// The longest piece, ns (0 where unknown).
    pub max_piece_ns: u64,
    /// Pieces that ended in a yield.
    pub yields: u64,
    /// A yielding launch whose groups were too long to be asked (see `not_asked`).
    pub not_asked: bool,
}

impl Launch {
    /// A launch sent whole whose device time is not measured.
    pub const WHOLE: Launch = Launch {
        pieces: 1,
        device_ns: 0,
        max_piece_ns: 0,
        yields: 0,
        not_asked: false,
    };
}

/// Statistics by (kernel name, priority), in name order.
#[derive(Debug, Default)]
pub struct ProfileTable {
    kernels: BTreeMap<(String, String), KernelStats>,
}

impl ProfileTable {
    /// Counts one launch.
    pub fn add(&mut self, kernel: &str, priority: &str, l: &Launch) {
        let key = (kernel.to_string(), priority.to_string());
        let s = self.kernels.entry(key).or_default();
        s.launches += 1;
        s.slices += l.pieces;
        s.yields += l.yields;
        s.device_ns += l.device_ns;
        s.max_piece_ns = s.max_piece_ns.max(l.max_piece_ns);
        s.not_asked += u64::from(l.not_asked);
    }

    /// Counts one launch sent straight to the vendor (`claimed`: under the direct budget;
    /// `recorded`: by a kernel object that records its argument values).
    pub fn add_direct(&mut self, kernel: &str, priority: &str, claimed: bool, recorded: bool) {
        let key = (kernel.to_string(), priority.to_string());
        let s = self.kernels.entry(key).or_default();
        s.direct += 1;
        s.direct_claimed += u64::from(claimed);
        s.direct_recorded += u64::from(recorded);
    }

    /// Counts one launch that went as the application's kernel because its yielding entry
    /// runs slower.
    pub fn add_entry_slower(&mut self, kernel: &str, priority: &str) {
        self.bump(kernel, priority, |s| s.entry_slower += 1);
    }

    /// Counts one yielding launch that ran the kernel's second flat entry.
    pub fn add_second_entry(&mut self, kernel: &str, priority: &str) {
        self.bump(kernel, priority, |s| s.second_entry += 1);
    }

    fn bump(&mut self, kernel: &str, priority: &str, f: impl FnOnce(&mut KernelStats)) {
        let key = (kernel.to_string(), priority.to_string());
        f(self.kernels.entry(key).or_default());
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
                "not_asked": s.not_asked,
                "total_device_ns": s.device_ns,
                "mean_device_ns": s.device_ns / s.launches.max(1),
                "mean_piece_ns": s.device_ns / s.slices.max(1),
                "max_piece_ns": s.max_piece_ns,
                "direct": s.direct,
                "direct_claimed": s.direct_claimed,
                "direct_recorded": s.direct_recorded,
                "entry_slower": s.entry_slower,
                "second_entry": s.second_entry,
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

/// Counts one launch of `kernel` at `priority`.
pub fn launch(kernel: &str, priority: &dyn std::fmt::Display, l: Launch) {
    if !enabled() {
        return;
    }
    let mut table = TABLE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, t)) = table.as_mut() {
        t.add(kernel, &priority.to_string(), &l);
    }
}

/// Counts one launch of `kernel` at `priority` sent straight to the vendor (`claimed`:
/// under the direct budget; `recorded`: by a kernel object that records its arguments).
pub fn direct(kernel: &str, priority: &dyn std::fmt::Display, claimed: bool, recorded: bool) {
    if !enabled() {
        return;
    }
    let mut table = TABLE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, t)) = table.as_mut() {
        t.add_direct(kernel, &priority.to_string(), claimed, recorded);
    }
}

/// Counts one launch of `kernel` at `priority` that went as the application's kernel
/// because its yielding entry runs slower.
pub fn entry_slower(kernel: &str, priority: &dyn std::fmt::Display) {
    count(|t| t.add_entry_slower(kernel, &priority.to_string()));
}

/// Counts one yielding launch of `kernel` at `priority` that ran its second flat entry.
pub fn second_entry(kernel: &str, priority: &dyn std::fmt::Display) {
    count(|t| t.add_second_entry(kernel, &priority.to_string()));
}

/// Applies `f` to the process's table, when profiling.
fn count(f: impl FnOnce(&mut ProfileTable)) {
    if !enabled() {
        return;
    }
    let mut table = TABLE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, t)) = table.as_mut() {
        f(t);
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
        let run = |pieces, device_ns, max_piece_ns, yields, not_asked| Launch {
            pieces,
            device_ns,
            max_piece_ns,
            yields,
            not_asked,
        };
        let mut t = ProfileTable::default();
        t.add("mandel", "low", &run(4, 4_000, 1_500, 3, false));
        t.add("mandel", "low", &run(2, 2_000, 1_200, 0, true));
        t.add("mandel", "high", &run(1, 500, 500, 0, false));
        assert_eq!(
            t.get("mandel", "low"),
            Some(KernelStats {
                launches: 2,
                slices: 6,
                yields: 3,
                device_ns: 6_000,
                max_piece_ns: 1_500,
                not_asked: 1,
                direct: 0,
                direct_claimed: 0,
                direct_recorded: 0,
                entry_slower: 0,
                second_entry: 0,
            })
        );
        t.add_direct("mandel", "low", true, false);
        t.add_direct("mandel", "low", false, true);
        t.add_entry_slower("mandel", "low");
        t.add_second_entry("mandel", "low");
        t.add_second_entry("mandel", "low");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("profile.jsonl");
        append(&path, &t.take_lines(9, "app")).unwrap();
        append(&path, &t.take_lines(9, "app")).unwrap();
        t.add("vadd", "normal", &run(1, 10, 10, 0, false));
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
        assert_eq!(low["not_asked"], 1);
        assert_eq!(low["total_device_ns"], 6000);
        assert_eq!(low["mean_device_ns"], 3000);
        assert_eq!(low["mean_piece_ns"], 1000);
        assert_eq!(low["max_piece_ns"], 1500);
        assert_eq!(
            (
                low["direct"].as_u64(),
                low["direct_claimed"].as_u64(),
                low["direct_recorded"].as_u64()
            ),
            (Some(2), Some(1), Some(1))
        );
        assert_eq!(low["entry_slower"], 1);
        assert_eq!(low["second_entry"], 2);
        assert_eq!(low["pid"], 9);
        assert_eq!(lines[2]["kernel"], "vadd");
    }
}
