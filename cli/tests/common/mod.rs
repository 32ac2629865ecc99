//! Helpers for driving the built `softpreempt` binary, and for re-running the test binary
//! itself as a child process in a "role" (see `child_command`).
#![allow(dead_code)]

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Output};

/// The binary under test.
pub fn softpreempt() -> Command {
    Command::new(env!("CARGO_BIN_EXE_softpreempt"))
}

/// Runs `softpreempt ARGS` with `env` added.
pub fn run<I, S>(args: I, env: &[(&str, &OsStr)]) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut c = softpreempt();
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("the softpreempt binary runs")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A failure as the CLI promises it: exit `code`, exactly one line on stderr starting
/// with `softpreempt: `, no panic. Returns that line.
pub fn one_line_error(o: &Output, code: i32) -> String {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(code), "stderr: {err}");
    assert_eq!(err.lines().count(), 1, "one line expected, got:\n{err}");
    assert!(err.starts_with("softpreempt: "), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    err.trim_end().to_string()
}

/// The test binary itself, running only the ignored test `entry` with `ROLE=role`.
/// The entry test reads the role and does that part.
pub fn child_command(entry: &str, role: &str) -> Command {
    let mut c = Command::new(std::env::current_exe().expect("test binary path"));
    c.args([
        entry,
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("CLI_TEST_ROLE", role);
    c
}

/// The marker a child role prints once it is set up.
pub const READY: &str = "role-ready";

/// Waits until `child` (stdout piped) prints [`READY`]; keeps its stdout open.
pub fn wait_ready(child: &mut Child) -> BufReader<ChildStdout> {
    let mut out = BufReader::new(child.stdout.take().expect("stdout piped"));
    let mut line = String::new();
    while !line.contains(READY) {
        line.clear();
        assert_ne!(
            out.read_line(&mut line).unwrap(),
            0,
            "child role ended early"
        );
    }
    out
}

/// A snapshot of every file (path, mode, content) and directory under `root`, to check
/// that something was restored exactly.
pub fn tree(root: &Path) -> Vec<(String, u32, Vec<u8>)> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let md = std::fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            let mode = md.permissions().mode();
            if md.is_dir() {
                out.push((rel + "/", mode, Vec::new()));
                stack.push(p);
            } else {
                out.push((rel, mode, std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}
