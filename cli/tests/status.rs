//! `softpreempt status` while real client processes are registered with an arbiter: one
//! running, one waiting behind it, one idle; then one is killed and shows as dead, and
//! once reclaimed as reclaimed. Also: unreadable segments and an empty directory.

mod common;

use std::io::{BufReader, Read};
use std::path::Path;
use std::process::{Child, ChildStdout, Stdio};
use std::time::Duration;

use common::*;
use serde_json::Value;
use softpreempt_sched::{Arbiter, ArbiterOptions, ClientInfo};

const DEVICE: &str = "cli-test-device";

fn options(dir: &Path) -> ArbiterOptions {
    ArbiterOptions {
        shm_dir: dir.to_path_buf(),
        ..Default::default()
    }
}

/// Child roles: register on the arbiter in `SHM`, then `hold` (idle), `run` (hold a
/// grant) or `wait` (block in acquire); print `ready` and stay until stdin closes.
#[test]
#[ignore = "child role, started by the other tests"]
fn status_child() {
    let role = std::env::var("CLI_TEST_ROLE").expect("CLI_TEST_ROLE");
    let dir = std::env::var("SHM").expect("SHM");
    let priority = std::env::var("PRIORITY").expect("PRIORITY");
    std::thread::spawn(|| {
        let _ = std::io::stdin().read(&mut [0u8; 1]);
        std::process::exit(0);
    });
    let arb = Arbiter::open(DEVICE, &options(Path::new(&dir))).unwrap();
    let info = ClientInfo::new(priority.parse().unwrap())
        .with_label(&format!("{role}-queue"))
        .with_exe("cli-status-test");
    let client = arb.register(info).unwrap();
    match role.as_str() {
        "hold" => println!("{READY}"),
        "run" => {
            let grant = client.acquire(Duration::from_secs(60)).unwrap();
            println!("{READY}");
            std::mem::forget(grant);
        }
        "wait" => {
            println!("{READY}");
            loop {
                // Blocked by the higher-priority client's demand until it goes.
                if let Ok(g) = client.acquire(Duration::from_secs(60)) {
                    std::mem::forget(g);
                }
            }
        }
        other => panic!("unknown role {other}"),
    }
    loop {
        std::thread::park();
    }
}

/// A child role that is killed when the test ends, whatever happens.
struct Role {
    child: Child,
    _out: BufReader<ChildStdout>,
}

impl Role {
    fn start(role: &str, priority: &str, dir: &Path) -> Role {
        let mut child = child_command("status_child", role)
            .env("SHM", dir)
            .env("PRIORITY", priority)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let out = wait_ready(&mut child);
        Role { child, _out: out }
    }

    fn pid(&self) -> u64 {
        self.child.id() as u64
    }
}

impl Drop for Role {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `status --json`, with the segment directory given through the environment (the
/// config path every process uses).
fn status_json(dir: &Path) -> Value {
    let o = run(
        ["status", "--json"],
        &[("SOFTPREEMPT_SHM_DIR", dir.as_os_str())],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_str(&stdout(&o)).unwrap()
}

fn client(status: &Value, pid: u64) -> Value {
    status["segments"][0]["clients"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["pid"] == pid)
        .cloned()
        .unwrap_or_else(|| panic!("pid {pid} not in {status}"))
}

/// Polls until `pid` is in `state`: the waiter blocks a moment after saying ready.
/// Fails with the last status seen, after a bound far above what it needs.
fn until_state(dir: &Path, pid: u64, state: &str) -> Value {
    let mut last = Value::Null;
    for _ in 0..400 {
        last = status_json(dir);
        if client(&last, pid)["state"] == state {
            return last;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("pid {pid} never reached {state}: {last}");
}

#[test]
fn shows_running_waiting_idle_dead_and_reclaimed_clients() {
    let dir = tempfile::tempdir().unwrap();
    let hp = Role::start("run", "high", dir.path());
    let lp = Role::start("wait", "low", dir.path());
    let mut idle = Role::start("hold", "normal:2", dir.path());

    let s = until_state(dir.path(), lp.pid(), "waiting");
    assert_eq!(s["segments"].as_array().unwrap().len(), 1);
    assert_eq!(s["segments"][0]["device"], DEVICE);
    assert_eq!(s["errors"].as_array().unwrap().len(), 0);
    let h = client(&s, hp.pid());
    assert_eq!(
        (h["state"].as_str(), h["priority"].as_str()),
        (Some("running"), Some("high"))
    );
    assert_eq!(
        (h["queue"].as_str(), h["exe"].as_str()),
        (Some("run-queue"), Some("cli-status-test"))
    );
    assert_eq!(h["inflight"], 1);
    let l = client(&s, lp.pid());
    assert_eq!(l["priority"], "low");
    assert!(l["yields"].as_u64().unwrap() >= 1, "{l}");
    let i = client(&s, idle.pid());
    assert_eq!(
        (i["state"].as_str(), i["priority"].as_str()),
        (Some("idle"), Some("normal:2"))
    );
    assert_eq!(i["alive"], true);

    // The table says the same.
    let o = run(["status", "--dir"], &[]);
    one_line_error(&o, 2);
    let o = softpreempt()
        .args(["status", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    let text = stdout(&o);
    assert!(o.status.success());
    assert!(
        text.contains(&format!("device {DEVICE}: 3 client(s)")),
        "{text}"
    );
    for (pid, words) in [
        (hp.pid(), ["run-queue", "high", "running"]),
        (lp.pid(), ["wait-queue", "low", "waiting"]),
        (idle.pid(), ["hold-queue", "normal:2", "idle"]),
    ] {
        let row = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(&pid.to_string()))
            .unwrap_or_else(|| panic!("no row for {pid}:\n{text}"));
        for w in words {
            assert!(row.split_whitespace().any(|x| x == w), "{w} not in {row}");
        }
    }

    // Killed: its lock is gone at once, so status sees it dead before anyone reclaims.
    idle.child.kill().unwrap();
    idle.child.wait().unwrap();
    let i = client(&status_json(dir.path()), idle.pid());
    assert_eq!(
        (i["state"].as_str(), i["alive"].as_bool()),
        (Some("dead"), Some(false))
    );

    // The waiting client sweeps dead peers once per liveness interval: on a loaded
    // machine it may have reclaimed the slot already.
    let arb = Arbiter::open(DEVICE, &options(dir.path())).unwrap();
    assert!(arb.reclaim_dead() <= 1);
    let s = status_json(dir.path());
    let i = client(&s, idle.pid());
    assert_eq!(
        (i["state"].as_str(), i["alive"].as_bool()),
        (Some("reclaimed"), Some(false))
    );
    assert_eq!(s["segments"][0]["reclaims"], 1);
    // The others are untouched.
    assert_eq!(client(&s, hp.pid())["state"], "running");
}

#[test]
fn unreadable_segments_are_one_line_each_and_fail_only_when_nothing_is_read() {
    let dir = tempfile::tempdir().unwrap();
    {
        // A real segment, left behind after its last client went.
        let arb = Arbiter::open(DEVICE, &options(dir.path())).unwrap();
        drop(
            arb.register(ClientInfo::new("low".parse().unwrap()))
                .unwrap(),
        );
    }
    let real = std::fs::read_dir(dir.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut bytes = std::fs::read(&real).unwrap();
    // The layout version sits right after the magic.
    bytes[4..8].copy_from_slice(&99u32.to_le_bytes());
    std::fs::write(dir.path().join("softpreempt-0-other-version"), &bytes).unwrap();
    std::fs::write(dir.path().join("softpreempt-0-garbage"), b"not a segment").unwrap();

    let o = softpreempt()
        .args(["status", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "one segment was readable: {}",
        stderr(&o)
    );
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 2, "{err}");
    assert!(
        err.contains("layout version 99, this build supports 1"),
        "{err}"
    );
    assert!(err.contains("softpreempt-0-garbage has size 13"), "{err}");
    assert!(stdout(&o).contains(&format!("device {DEVICE}: 0 client(s)")));

    std::fs::remove_file(&real).unwrap();
    let o = softpreempt()
        .args(["status", "--json", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let json: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(json["errors"].as_array().unwrap().len(), 2);
    let last = stderr(&o).lines().last().unwrap().to_string();
    assert!(
        last.starts_with("softpreempt: none of the 2 segment(s)"),
        "{last}"
    );
}

#[test]
fn empty_and_missing_directories() {
    let dir = tempfile::tempdir().unwrap();
    let o = softpreempt()
        .args(["status", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(stdout(&o).starts_with("no SoftPreempt device is in use"));
    // --watch with --count stops by itself: one JSON document per refresh.
    let o = softpreempt()
        .args([
            "status",
            "--json",
            "--watch",
            "--interval",
            "0.01",
            "--count",
            "3",
            "--dir",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success());
    let docs: Vec<Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(docs.len(), 3);
    let o = run(["status", "--dir", "/nonexistent/softpreempt-shm"], &[]);
    let err = one_line_error(&o, 1);
    assert!(err.contains("/nonexistent/softpreempt-shm"), "{err}");
}
