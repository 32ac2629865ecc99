//! Child processes of the soak harness: this same binary re-run in a role (the role travels
//! as JSON in `SOFTPREEMPT_SOAK_ROLE`), watched through its `@soak key=value` lines on
//! stdout, with its stderr kept for the log-line checks. Closing a child's stdin tells it
//! to stop; a parent that dies closes it too, so no child outlives the harness for long.

use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Environment variable carrying a child's [`Role`]; its presence makes a child.
pub const ROLE_ENV: &str = "SOFTPREEMPT_SOAK_ROLE";
/// The segment directory of the child's configuration (so it can read its own statistics).
pub const SHM_ENV: &str = "SOFTPREEMPT_SOAK_SHM";
/// Prefix of the children's protocol lines.
pub const MARK: &str = "@soak ";

/// What a child does.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Role {
    /// A verified OpenCL client (see `worker.rs`).
    Worker(crate::worker::Spec),
    /// Calls entry points with bad input, one forked child per call (see `badapi.rs`).
    BadApi { sp: bool },
    /// A client that forks without exec (see `worker.rs`).
    Fork(crate::worker::Spec),
}

/// Where the children find the library, the loader's vendors directory and the
/// configuration: set by the parent for every child.
#[derive(Clone, Debug)]
pub struct Setting {
    pub vendors: PathBuf,
    pub config: PathBuf,
    pub shm_dir: PathBuf,
}

impl Setting {
    /// A private directory holding a config file with `sched` lines and the segments.
    pub fn new(root: &Path, tag: &str, sched: &str, vendors: &Path) -> Setting {
        let dir = root.join(tag);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("soak directory");
        let shm_dir = dir.join("shm");
        std::fs::create_dir_all(&shm_dir).expect("shm directory");
        let config = dir.join("softpreempt.toml");
        std::fs::write(
            &config,
            format!(
                "version = 1\n[sched]\nshm_dir = \"{}\"\n{sched}\n",
                shm_dir.display()
            ),
        )
        .expect("config file");
        Setting {
            vendors: vendors.to_path_buf(),
            config,
            shm_dir,
        }
    }
}

/// What the parent knows of a child, updated by its reader threads.
#[derive(Default)]
pub struct Seen {
    /// Verified iterations so far.
    pub progress: AtomicU64,
    /// Last phase announced (`start`, `context`, `queue`, `build`, `loop`, ...).
    pub phase: Mutex<String>,
    /// Every protocol line (key, value).
    pub fields: Mutex<Vec<(String, String)>>,
    /// Lines on stdout that are not protocol lines (the layer must never write there).
    pub stray_stdout: Mutex<Vec<String>>,
    /// Everything on stderr.
    pub stderr: Mutex<Vec<String>>,
}

impl Seen {
    pub fn phase(&self) -> String {
        self.phase.lock().unwrap().clone()
    }
    pub fn field(&self, key: &str) -> Option<String> {
        let f = self.fields.lock().unwrap();
        f.iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    }
    pub fn stderr_lines(&self) -> Vec<String> {
        self.stderr.lock().unwrap().clone()
    }
}

/// A running child.
pub struct Proc {
    pub child: Child,
    stdin: Option<ChildStdin>,
    pub seen: Arc<Seen>,
    pub label: String,
    /// Set when the harness killed it on purpose.
    pub killed: bool,
}

/// How a child ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum End {
    Clean,
    /// Killed by the harness.
    Killed,
    /// Reported a wrong result (exit 3).
    Wrong(String),
    /// Died of a signal or failed otherwise.
    Crashed(String),
    /// Did not finish within the bound (then killed).
    Hung,
}

/// A verified worker at `priority` (`SOFTPREEMPT_PRIORITY`), labelled by it.
pub fn spawn_worker(set: &Setting, spec: crate::worker::Spec, priority: &str) -> Proc {
    spawn(
        &Role::Worker(spec),
        set,
        &[("SOFTPREEMPT_PRIORITY", priority.to_string())],
        priority,
    )
}

pub fn spawn(role: &Role, set: &Setting, env: &[(&str, String)], label: &str) -> Proc {
    let mut cmd = Command::new(std::env::current_exe().expect("own executable"));
    cmd.env(
        ROLE_ENV,
        serde_json::to_string(role).expect("role serializes"),
    );
    spawn_cmd(cmd, set, env, label)
}

/// Spawns `cmd` (this binary in a role, possibly behind `setpriv`) with the setting.
pub fn spawn_cmd(mut cmd: Command, set: &Setting, env: &[(&str, String)], label: &str) -> Proc {
    cmd.env("OCL_ICD_VENDORS", &set.vendors)
        .env_remove("OCL_ICD_FILENAMES")
        .env("SOFTPREEMPT_CONFIG", &set.config)
        .env_remove("SOFTPREEMPT_SHM_DIR")
        .env_remove("SOFTPREEMPT_PRIORITY")
        .env_remove("SOFTPREEMPT_LOG")
        .env(SHM_ENV, &set.shm_dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn a soak child");
    let seen = Arc::new(Seen::default());
    let out = child.stdout.take().unwrap();
    let s = seen.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            match line.strip_prefix(MARK) {
                Some(rest) => {
                    for kv in rest.split_whitespace() {
                        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                        match k {
                            "progress" => {
                                s.progress.store(v.parse().unwrap_or(0), Ordering::SeqCst)
                            }
                            "phase" => *s.phase.lock().unwrap() = v.to_string(),
                            _ => {}
                        }
                        s.fields.lock().unwrap().push((k.into(), v.into()));
                    }
                }
                None => s.stray_stdout.lock().unwrap().push(line),
            }
        }
    });
    let err = child.stderr.take().unwrap();
    let s = seen.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines() {
            let Ok(line) = line else { break };
            s.stderr.lock().unwrap().push(line);
        }
    });
    Proc {
        stdin: child.stdin.take(),
        child,
        seen,
        label: label.to_string(),
        killed: false,
    }
}

impl Proc {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn progress(&self) -> u64 {
        self.seen.progress.load(Ordering::SeqCst)
    }

    /// SIGKILL.
    pub fn kill9(&mut self) {
        self.killed = true;
        let _ = self.child.kill();
    }

    /// Tells the child to stop (closes its stdin).
    pub fn stop(&mut self) {
        self.stdin.take();
    }

    /// Whether it has exited (without reaping more than once).
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Waits up to `limit` for progress to reach `at_least`; false if it did not (or the
    /// child exited first).
    pub fn wait_progress(&mut self, at_least: u64, limit: Duration) -> bool {
        let start = Instant::now();
        loop {
            if self.progress() >= at_least {
                return true;
            }
            if start.elapsed() >= limit || self.exited().is_some() {
                return self.progress() >= at_least;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits up to `limit` for the phase `phase` (or any progress, which comes later).
    pub fn wait_phase(&mut self, phase: &str, limit: Duration) -> bool {
        let start = Instant::now();
        while start.elapsed() < limit {
            if self.seen.phase() == phase || self.progress() > 0 {
                return true;
            }
            if self.exited().is_some() {
                return false;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        false
    }

    /// Waits up to `limit` for the child to exit (kills it after), and classifies the end.
    pub fn finish(&mut self, limit: Duration) -> End {
        let start = Instant::now();
        let status = loop {
            if let Some(st) = self.exited() {
                break st;
            }
            if start.elapsed() >= limit {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return End::Hung;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        // Let the reader threads drain the pipes.
        std::thread::sleep(Duration::from_millis(20));
        classify(status, self.killed, &self.seen)
    }

    /// The last lines of stderr, for notes.
    pub fn stderr_tail(&self) -> String {
        let lines = self.seen.stderr_lines();
        let from = lines.len().saturating_sub(3);
        lines[from..].join(" | ")
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.exited().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn classify(st: ExitStatus, killed: bool, seen: &Seen) -> End {
    if let Some(sig) = st.signal() {
        if killed && sig == libc::SIGKILL {
            return End::Killed;
        }
        return End::Crashed(format!("signal {sig} ({})", signal_name(sig)));
    }
    match st.code() {
        Some(0) => End::Clean,
        Some(3) => End::Wrong(seen.field("wrong").unwrap_or_default()),
        Some(c) => {
            let err = seen.stderr_lines();
            let tail = err
                .iter()
                .rev()
                .find(|l| !l.trim().is_empty())
                .cloned()
                .unwrap_or_default();
            End::Crashed(format!("exit {c}: {tail}"))
        }
        None => End::Crashed("no status".into()),
    }
}

pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGBUS => "SIGBUS",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGKILL => "SIGKILL",
        libc::SIGALRM => "SIGALRM",
        libc::SIGILL => "SIGILL",
        libc::SIGFPE => "SIGFPE",
        libc::SIGTERM => "SIGTERM",
        _ => "other",
    }
}

/// A child's side of the protocol.
pub fn say(fields: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{MARK}{fields}");
    let _ = out.flush();
}

/// A child's stop flag: set when stdin reaches EOF (the parent closed it or died).
pub fn stop_flag() -> Arc<std::sync::atomic::AtomicBool> {
    let flag = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let f = flag.clone();
    std::thread::spawn(move || {
        let mut sink = String::new();
        let stdin = std::io::stdin();
        while stdin
            .lock()
            .read_line(&mut sink)
            .map(|n| n > 0)
            .unwrap_or(false)
        {
            sink.clear();
        }
        f.store(true, Ordering::SeqCst);
    });
    flag
}
