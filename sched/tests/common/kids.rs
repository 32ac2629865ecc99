//! Child processes for the multi-process tests: the test binary re-executes itself with
//! `SP_ROLE` set, and its `child_main` test runs that role (see multiprocess.rs).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use softpreempt_sched::{Arbiter, ArbiterOptions, Client, ClientInfo, Priority};

use super::{eventually, TestDir};

/// Generous liveness limit for anything a child should do.
pub const LIVENESS: Duration = Duration::from_secs(30);

pub fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

pub fn env_u64(name: &str, default: u64) -> u64 {
    env(name).and_then(|v| v.parse().ok()).unwrap_or(default)
}

pub fn touch(path: &Path) {
    std::fs::write(path, b"").unwrap();
}

/// What a child process was started as, with its device's arbiter open.
pub struct Role {
    pub name: String,
    pub dir: PathBuf,
    pub label: String,
    pub pri: Priority,
    pub arb: Arbiter,
}

impl Role {
    /// In a child (`SP_ROLE` set, by `spawn`): its role; `None` in the test run itself.
    pub fn of_child(key: &str) -> Option<Role> {
        let name = env("SP_ROLE")?;
        let dir = PathBuf::from(env("SP_DIR").unwrap());
        Some(Role {
            name,
            label: env("SP_LABEL").unwrap(),
            pri: env("SP_PRI").unwrap().parse().unwrap(),
            arb: Arbiter::open(key, &child_opts(&dir)).unwrap(),
            dir,
        })
    }

    /// Registers a client with the role's priority and label.
    pub fn register(&self) -> Client {
        self.arb
            .register(ClientInfo::new(self.pri).with_label(&self.label))
            .unwrap()
    }

    /// Tells the test that this child is ready (`<label>.ready` in the directory).
    pub fn ready(&self) {
        touch(&self.dir.join(format!("{}.ready", self.label)));
    }
}

/// A child's options: the segment exists already, so only the local ones matter.
pub fn child_opts(dir: &Path) -> ArbiterOptions {
    ArbiterOptions {
        shm_dir: dir.to_path_buf(),
        hp_linger: Duration::ZERO,
        liveness_interval: Duration::from_millis(20),
        ..Default::default()
    }
}

pub struct Kid(pub Child);

impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Kid {
    pub fn kill9(&mut self) {
        // SAFETY: kill(2) on the pid of a child we spawned and have not reaped.
        let r = unsafe { libc::kill(self.0.id() as libc::pid_t, libc::SIGKILL) };
        assert_eq!(r, 0);
        let _ = self.0.wait();
    }

    /// Sends `sig` (SIGSTOP, SIGCONT, ...) to the child.
    pub fn signal(&self, sig: libc::c_int) {
        // SAFETY: kill(2) on the pid of a child we spawned and have not reaped.
        let r = unsafe { libc::kill(self.0.id() as libc::pid_t, sig) };
        assert_eq!(r, 0);
    }

    /// Stops the child (SIGSTOP) and waits until it is stopped: the signal is delivered
    /// asynchronously, and a child still running could answer a request meanwhile.
    pub fn stop(&self) {
        self.signal(libc::SIGSTOP);
        let stat = format!("/proc/{}/stat", self.0.id());
        eventually("the child stops", LIVENESS, || {
            std::fs::read_to_string(&stat).is_ok_and(|s| {
                s.rsplit_once(')')
                    .is_some_and(|(_, rest)| rest.trim_start().starts_with('T'))
            })
        });
    }

    pub fn wait_ok(&mut self, what: &str) {
        let mut status = None;
        eventually(what, LIVENESS, || {
            status = self.0.try_wait().unwrap();
            status.is_some()
        });
        assert!(status.unwrap().success(), "{what}: child failed");
    }
}

pub fn spawn(dir: &TestDir, role: &str, pri: &str, label: &str, extra: &[(&str, String)]) -> Kid {
    spawn_in(&[], dir, role, pri, label, extra)
}

/// `spawn`, the child run under `wrap` (a command that runs the rest of its arguments,
/// e.g. `unshare --ipc`).
pub fn spawn_in(
    wrap: &[&str],
    dir: &TestDir,
    role: &str,
    pri: &str,
    label: &str,
    extra: &[(&str, String)],
) -> Kid {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = match wrap.split_first() {
        Some((first, rest)) => {
            let mut c = Command::new(first);
            c.args(rest).arg(&exe);
            c
        }
        None => Command::new(&exe),
    };
    cmd.args(["child_main", "--exact", "--nocapture", "--test-threads=1"])
        .env("SP_ROLE", role)
        .env("SP_DIR", &dir.0)
        .env("SP_PRI", pri)
        .env("SP_LABEL", label)
        .stdout(Stdio::null());
    for (k, v) in extra {
        cmd.env(k, v);
    }
    Kid(cmd.spawn().unwrap())
}
