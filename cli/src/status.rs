//! `softpreempt status`: every arbiter segment this user can read, per device the clients
//! registered on it, read without registering (like `top`, it changes nothing).
//!
//! Exit status: 0 when at least one segment was read, or when there is none (nothing uses
//! SoftPreempt now); 1 when the directory cannot be read, or when segments exist but none
//! could be read because of errors (another layout version, corruption). Segments of other
//! users that this user may not read are counted in a note, not treated as errors.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};
use softpreempt_platform::config;
use softpreempt_sched::{
    inspect, list_segments, ClientState, ClientStats, Level, SchedError, SegmentSnapshot,
};

use crate::args::{failed, parse, CliError, Spec};
use crate::units::{bytes, duration_ns};

pub const USAGE: &str =
    "softpreempt status [--json] [--watch] [--interval SECS] [--count N] [--dir DIR]";

const SPEC: Spec = Spec {
    command: "status",
    flags: &["--json", "--watch"],
    options: &["--interval", "--count", "--dir"],
    short: &[("-w", "--watch"), ("-n", "--interval")],
    max_positional: 0,
    trailing: false,
};

/// One look at the segment directory.
pub(crate) struct Report {
    pub dir: PathBuf,
    pub segments: Vec<SegmentSnapshot>,
    /// Segments that could not be read, with a one-line reason.
    pub errors: Vec<(PathBuf, String)>,
    /// Segments of other users, unreadable by design.
    pub denied: usize,
}

impl Report {
    fn failed(&self) -> bool {
        self.segments.is_empty() && !self.errors.is_empty()
    }
}

pub(crate) fn collect(dir: &Path) -> Result<Report, CliError> {
    let paths = list_segments(dir).or_else(|e| failed(format!("cannot list segments: {e}")))?;
    let mut r = Report {
        dir: dir.to_path_buf(),
        segments: Vec::new(),
        errors: Vec::new(),
        denied: 0,
    };
    for p in paths {
        match inspect(&p) {
            Ok(s) => r.segments.push(s),
            Err(SchedError::Io { ref source, .. })
                if source.kind() == std::io::ErrorKind::PermissionDenied =>
            {
                r.denied += 1
            }
            Err(e) => r.errors.push((p, e.to_string())),
        }
    }
    Ok(r)
}

/// The state shown: the slot's own, or `dead` when its owner is gone but nobody has
/// reclaimed the slot yet (the next waiter on the device will).
pub(crate) fn state(c: &ClientStats) -> &'static str {
    if c.state != ClientState::Reclaimed && c.lock_held == Some(false) {
        "dead"
    } else {
        c.state.as_str()
    }
}

pub(crate) fn priority(c: &ClientStats) -> String {
    c.priority.map_or_else(|| "?".into(), |p| p.to_string())
}

fn client_json(c: &ClientStats) -> Value {
    json!({
        "slot": c.slot,
        "pid": c.pid,
        "exe": c.exe,
        "queue": c.label,
        "priority": priority(c),
        "state": state(c),
        "alive": c.lock_held.unwrap_or(true) && c.state != ClientState::Reclaimed,
        "demand": c.demand,
        "inflight": c.inflight,
        "grants": c.grants,
        "slices": c.slices,
        "yields": c.yields,
        "wait_ns": c.wait_ns,
        "busy_ns": c.busy_ns,
        "piece_ns": c.piece_ns,
        "handbacks": c.handbacks,
        "handback_ns": c.handback_ns,
        "handback_max_ns": c.handback_max_ns,
        "on_device": c.on_device,
        "yields_done": c.yields_done,
        "yield_p50_ns": c.yield_p50_ns,
        "yield_p99_ns": c.yield_p99_ns,
        "cannot_yield": c.cannot_yield,
        "handshake_waits": c.hs_waits,
        "handshake_wait_ns": c.hs_wait_ns,
        "handshake_wait_max_ns": c.hs_wait_max_ns,
        "handshake_expired": c.hs_expired,
        "handshake_lapsed": c.hs_lapsed,
        "memory": c.memory,
        "mem_bytes": c.mem_bytes,
        "mem_objects": c.mem_objects,
        "mem_peak": c.mem_peak,
        "mem_refusals": c.mem_refusals,
    })
}

/// Levels from the most urgent down, as the memory lines list them.
pub(crate) const LEVELS_DOWN: [Level; 3] = [Level::High, Level::Normal, Level::Low];

/// Does the device show memory (a process counted some, or something was refused)?
fn has_memory(s: &SegmentSnapshot) -> bool {
    s.clients.iter().any(|c| c.memory) || s.mem_refusals.iter().any(|&n| n > 0)
}

/// Device memory per level: bytes held by live processes, and refusals.
fn memory_json(s: &SegmentSnapshot) -> Value {
    let held = s.mem_bytes_by_level();
    let levels: serde_json::Map<String, Value> = LEVELS_DOWN
        .iter()
        .map(|l| {
            let i = l.index();
            let v = json!({"bytes": held[i], "refusals": s.mem_refusals[i]});
            (l.as_str().to_string(), v)
        })
        .collect();
    json!({"device_bytes": s.mem_device_bytes, "levels": levels})
}

/// `memory: high 512.0 MiB, normal 0 B, low 1.00 GiB of 4.00 GiB; refused: low 3`.
fn memory_line(s: &SegmentSnapshot) -> String {
    let held = s.mem_bytes_by_level();
    let parts: Vec<String> = LEVELS_DOWN
        .iter()
        .map(|l| format!("{l} {}", bytes(held[l.index()])))
        .collect();
    let mut line = format!("memory: {}", parts.join(", "));
    if s.mem_device_bytes > 0 {
        line += &format!(" of {}", bytes(s.mem_device_bytes));
    }
    let refused: Vec<String> = LEVELS_DOWN
        .iter()
        .filter(|l| s.mem_refusals[l.index()] > 0)
        .map(|l| format!("{l} {}", s.mem_refusals[l.index()]))
        .collect();
    if !refused.is_empty() {
        line += &format!("; refused: {}", refused.join(", "));
    }
    line
}

fn to_json(r: &Report) -> Value {
    let segments: Vec<Value> = r
        .segments
        .iter()
        .map(|s| {
            json!({
                "device": s.device_key,
                "path": s.path,
                "slots": s.slot_count,
                "total_grants": s.total_grants,
                "reclaims": s.reclaims,
                "memory": memory_json(s),
                "clients": s.clients.iter().map(client_json).collect::<Vec<_>>(),
            })
        })
        .collect();
    let errors: Vec<Value> = r
        .errors
        .iter()
        .map(|(p, e)| json!({"path": p, "error": e}))
        .collect();
    json!({"dir": r.dir, "segments": segments, "errors": errors, "unreadable_other_users": r.denied})
}

/// One line of the table: the header and every client share the column widths.
macro_rules! row {
    ($out:expr, $($v:expr),+ $(,)?) => {{
        let _ = writeln!(
            $out,
            "  {:>8}  {:<16} {:<16} {:<9} {:<9} {:>8} {:>7} {:>10} {:>10} {:>9} {:>9} {:>8} {:>9} {:>9} {:>8} {:>10}",
            $($v),+
        );
    }};
}

fn render_text(r: &Report, out: &mut String) {
    use std::fmt::Write as _;
    if r.segments.is_empty() && r.errors.is_empty() {
        let _ = writeln!(
            out,
            "no SoftPreempt device is in use (no segments in {})",
            r.dir.display()
        );
    }
    for s in &r.segments {
        let live = s
            .clients
            .iter()
            .filter(|c| state(c) != "reclaimed" && state(c) != "dead")
            .count();
        let _ = writeln!(
            out,
            "device {}: {live} client(s), {} grants, {} reclaimed  [{}]",
            s.device_key,
            s.total_grants,
            s.reclaims,
            s.path.display()
        );
        if has_memory(s) {
            let _ = writeln!(out, "  {}", memory_line(s));
        }
        row!(
            out,
            "PID",
            "EXECUTABLE",
            "QUEUE",
            "PRIORITY",
            "STATE",
            "SLICES",
            "YIELDS",
            "WAITED",
            "BUSY",
            "PIECE",
            "HANDBACK",
            "YIELDED",
            "YIELD-P99",
            "HS-WAIT",
            "EXPIRED",
            "MEMORY"
        );
        for c in &s.clients {
            row!(
                out,
                c.pid,
                c.exe,
                c.label,
                priority(c),
                state(c),
                c.slices,
                c.yields,
                duration_ns(c.wait_ns),
                duration_ns(c.busy_ns),
                // The preemption granularity: how long a higher priority may wait
                // behind one of this client's pieces.
                if c.piece_ns > 0 {
                    duration_ns(c.piece_ns)
                } else {
                    "-".into()
                },
                // Mean gap from a higher priority's release to this client's next grant.
                match c.handback_ns.checked_div(c.handbacks) {
                    Some(mean) => duration_ns(mean),
                    None => "-".into(),
                },
                // Launches that left the device at a higher priority's request, and how
                // soon (at most; log2 buckets).
                c.yields_done,
                c.yield_p99_ns.map_or_else(|| "-".into(), duration_ns),
                // Mean wait of this client for lower ones to leave the device, and the
                // waits that reached their bound.
                match c.hs_wait_ns.checked_div(c.hs_waits) {
                    Some(mean) => duration_ns(mean),
                    None => "-".into(),
                },
                c.hs_expired,
                // Device memory held by the process's live objects (its memory client).
                if c.memory {
                    bytes(c.mem_bytes)
                } else {
                    "-".into()
                }
            );
        }
    }
    if r.denied > 0 {
        let _ = writeln!(
            out,
            "({} segment(s) of other users are not readable by you)",
            r.denied
        );
    }
}

fn render(r: &Report, as_json: bool) -> String {
    if as_json {
        return to_json(r).to_string() + "\n";
    }
    let mut out = String::new();
    render_text(r, &mut out);
    out
}

/// The segment directory: `--dir`, else the configuration's `sched.shm_dir` (which
/// `SOFTPREEMPT_SHM_DIR` overrides). A broken config is reported and defaults are used,
/// as the library itself does.
pub(crate) fn segment_dir(given: Option<&str>) -> PathBuf {
    if let Some(d) = given {
        return PathBuf::from(d);
    }
    let env = &config::process_env;
    match config::load(env) {
        Ok(eff) => eff.config.sched.shm_dir,
        Err(e) => {
            eprintln!("softpreempt status: warning: {e}; using the default configuration");
            config::Effective::defaults_with_env(env)
                .config
                .sched
                .shm_dir
        }
    }
}

fn number<T: std::str::FromStr>(a: &crate::args::Parsed, opt: &str) -> Result<Option<T>, CliError> {
    a.option(opt)
        .map(|v| {
            v.parse()
                .map_err(|_| CliError::Usage(format!("status: {opt} needs a number, not '{v}'")))
        })
        .transpose()
}

pub fn run(args: &[String]) -> Result<(), CliError> {
    let a = parse(&SPEC, args)?;
    let as_json = a.flag("--json");
    let interval: f64 = number(&a, "--interval")?.unwrap_or(1.0);
    if !(interval.is_finite() && interval > 0.0) {
        return Err(CliError::Usage("status: --interval must be above 0".into()));
    }
    let count: Option<u64> = number(&a, "--count")?;
    let watch = a.flag("--watch") || count.is_some_and(|n| n > 1);
    let dir = segment_dir(a.option("--dir"));
    // SAFETY: isatty only inspects the descriptor.
    let clear = watch && !as_json && unsafe { libc::isatty(1) } == 1;
    let mut shown = 0u64;
    loop {
        let r = collect(&dir)?;
        let mut text = render(&r, as_json);
        if clear {
            text.insert_str(0, "\x1b[H\x1b[2J");
        }
        let mut stdout = std::io::stdout().lock();
        // A closed pipe (`| head`) ends the command quietly.
        if stdout
            .write_all(text.as_bytes())
            .and_then(|_| stdout.flush())
            .is_err()
        {
            return Ok(());
        }
        drop(stdout);
        // The sched crate's messages name the segment already.
        for (_, e) in &r.errors {
            eprintln!("softpreempt status: {}", one_line(e));
        }
        shown += 1;
        if !watch || count.is_some_and(|n| shown >= n) {
            return if r.failed() {
                failed(format!(
                    "none of the {} segment(s) in {} could be read",
                    r.errors.len(),
                    dir.display()
                ))
            } else {
                Ok(())
            };
        }
        std::thread::sleep(Duration::from_secs_f64(interval));
    }
}

pub(crate) fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
