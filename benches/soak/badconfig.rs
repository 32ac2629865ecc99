//! Scenario 5, a bad configuration file: malformed TOML, huge and negative values, wrong
//! types, out-of-range values, unknown keys. An application keeps running with exact
//! results, the layer writes exactly one line on stderr and nothing on stdout; and
//! `softpreempt config check FILE` fails with a one-line error.

use crate::procs::{spawn, Role, Setting};
use crate::worker::Spec;
use crate::Outcome;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const CASES: [(&str, &str); 9] = [
    (
        "malformed TOML",
        "version = 1\n[sched\nslice = \"always\"\n",
    ),
    ("unterminated string", "version = 1\nlog = \"error\n"),
    (
        "huge integer",
        "version = 1\n[sched]\ntarget_slice_us = 99999999999999999999999\n",
    ),
    (
        "negative value",
        "version = 1\n[sched]\nmax_inflight = -1\n",
    ),
    (
        "out of range",
        "version = 1\n[sched]\ntarget_slice_us = 1\n",
    ),
    ("wrong type", "version = 1\n[sched]\nslice = 3\n"),
    ("unknown key", "version = 1\nno_such_key = true\n"),
    (
        "unknown table key",
        "version = 1\n[sched]\nslcie = \"always\"\n",
    ),
    ("future version", "version = 99\n"),
];

/// The `softpreempt` CLI next to this build (debug first).
fn cli() -> Option<std::path::PathBuf> {
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
    ["debug", "release"]
        .iter()
        .map(|p| target.join(p).join("softpreempt"))
        .find(|p| p.exists())
}

pub fn run(
    root: &Path,
    vendors: &Path,
    bound: Duration,
    items: usize,
    iters: u32,
    smoke: bool,
) -> Outcome {
    let mut out = Outcome::new("bad config");
    let cli = cli();
    if cli.is_none() {
        out.note("target/*/softpreempt not built: config check not tried".into());
    }
    for (i, (name, text)) in CASES.iter().enumerate() {
        if smoke && ![0, 3, 6].contains(&i) {
            continue;
        }
        out.tried += 1;
        let set = Setting::new(root, &format!("config-{i}"), "", vendors);
        std::fs::write(&set.config, text).expect("config file");
        let spec = Spec {
            sp: true,
            iterations: Some(2),
            items,
            iters,
            seed: i as u32,
        };
        let mut w = spawn(&Role::Worker(spec), &set, &[], "config");
        let end = w.finish(bound);
        out.record(name, end, Some((w.progress(), 2)));
        let err = w.seen.stderr_lines();
        let stray = w.seen.stray_stdout.lock().unwrap().clone();
        if err.len() != 1 || !stray.is_empty() {
            out.wrong += 1;
            out.note(format!(
                "{name}: the application saw {} stderr line(s) {err:?} and stdout {stray:?}",
                err.len()
            ));
        } else if i == 0 {
            out.example_lines.push(err[0].clone());
        }
        if let Some(cli) = &cli {
            let o = Command::new(cli)
                .args(["config", "check"])
                .arg(&set.config)
                .output()
                .expect("run softpreempt");
            let stderr = String::from_utf8_lossy(&o.stderr);
            let lines: Vec<&str> = stderr.lines().collect();
            if o.status.success() || lines.len() != 1 || !o.stdout.is_empty() {
                out.wrong += 1;
                out.note(format!(
                    "{name}: `softpreempt config check` exited {:?} with stderr {lines:?} and \
                     {} bytes on stdout",
                    o.status.code(),
                    o.stdout.len()
                ));
            } else if i == 0 {
                out.example_lines
                    .push(format!("config check: {}", lines[0]));
            }
        }
    }
    out
}
