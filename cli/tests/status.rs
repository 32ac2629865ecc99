//! `softpreempt status` while real client processes are registered with an arbiter: one
//! running, one waiting behind it, one idle; then one is killed and shows as dead, and
//! once reclaimed as reclaimed. Also: unreadable segments and an empty directory; and
//! `metrics` and `exporter`, checked against `status --json` and by `promtool`.

mod common;

use std::io::{BufReader, Read};
use std::path::Path;
use std::process::{Child, ChildStdout, Stdio};
use std::time::Duration;

use common::*;
use serde_json::Value;
use softpreempt_sched::{Arbiter, ArbiterOptions, ClientInfo, MemoryPolicy};

const DEVICE: &str = "cli-test-device";
const MIB64: u64 = 64 << 20;

fn options(dir: &Path) -> ArbiterOptions {
    ArbiterOptions {
        shm_dir: dir.to_path_buf(),
        ..Default::default()
    }
}

/// Child roles: register on the arbiter in `SHM`, then `hold` (idle), `run` (hold a
/// grant) or `wait` (block in acquire), or as a memory client `memory` (hold 64 MiB of a
/// 1 GiB device and have a second allocation refused); print `ready` and stay until
/// stdin closes.
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
    let info = if role == "memory" {
        info.for_memory()
    } else {
        info
    };
    let client = arb.register(info).unwrap();
    match role.as_str() {
        "hold" => println!("{READY}"),
        "memory" => {
            let policy = MemoryPolicy {
                device_bytes: 1 << 30,
                reserve: [0, 0, 1 << 29],
                cap: [None; 3],
            };
            client.charge_memory(MIB64, &policy).unwrap();
            client.charge_memory(1 << 29, &policy).unwrap_err();
            println!("{READY}");
        }
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

/// `softpreempt CMD --dir DIR`'s standard output; the command must succeed.
fn output_of(cmd: &str, dir: &Path) -> String {
    let o = softpreempt()
        .args([cmd, "--dir"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o)
}

/// The row of `pid` in `status`' table.
fn row_of(text: &str, pid: u64) -> &str {
    text.lines()
        .find(|l| l.split_whitespace().next() == Some(&pid.to_string()))
        .unwrap_or_else(|| panic!("no row for {pid}:\n{text}"))
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
    let text = output_of("status", dir.path());
    assert!(
        text.contains(&format!("device {DEVICE}: 3 client(s)")),
        "{text}"
    );
    for (pid, words) in [
        (hp.pid(), ["run-queue", "high", "running"]),
        (lp.pid(), ["wait-queue", "low", "waiting"]),
        (idle.pid(), ["hold-queue", "normal:2", "idle"]),
    ] {
        let row = row_of(&text, pid);
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
    let supported = softpreempt_sched::consts::VERSION;
    assert!(
        err.contains(&format!(
            "layout version 99, this build supports {supported}"
        )),
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

/// The samples of a Prometheus text exposition: `name{labels}` → value.
fn samples(text: &str) -> std::collections::HashMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').unwrap_or_else(|| panic!("bad line {l}"));
            (
                k.to_string(),
                v.parse().unwrap_or_else(|_| panic!("bad value in {l}")),
            )
        })
        .collect()
}

/// The one sample of `family` whose labels include `pid="PID"`.
fn sample_of(s: &std::collections::HashMap<String, f64>, family: &str, pid: u64) -> f64 {
    let tag = format!("pid=\"{pid}\"");
    let hits: Vec<f64> = s
        .iter()
        .filter(|(k, _)| k.starts_with(&format!("{family}{{")) && k.contains(&tag))
        .map(|(_, v)| *v)
        .collect();
    assert_eq!(hits.len(), 1, "{family} for pid {pid}: {hits:?}");
    hits[0]
}

/// `promtool check metrics` on `text`: required where the test command installs
/// Prometheus (SOFTPREEMPT_REQUIRE_PROMTOOL=1), else run when promtool is there.
fn promtool_check(text: &str) {
    use std::io::Write as _;
    let child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            assert!(
                std::env::var_os("SOFTPREEMPT_REQUIRE_PROMTOOL").is_none(),
                "promtool is required here: {e}"
            );
            eprintln!("promtool not found ({e}): exposition checked by this test only");
            return;
        }
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "promtool check metrics: {}{}\n{text}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Each client's counters in `metrics` lie between two `status --json` looks taken
/// around it (they only grow), and its gauges and labels equal them.
fn check_against_status(text: &str, before: &Value, after: &Value, pids: &[u64]) {
    let s = samples(text);
    assert_eq!(s["softpreempt_up"], 1.0);
    assert_eq!(s["softpreempt_segments"], 1.0);
    assert_eq!(
        s[&format!("softpreempt_device_clients{{device=\"{DEVICE}\"}}")],
        pids.len() as f64
    );
    for &pid in pids {
        let (b, a) = (client(before, pid), client(after, pid));
        for (family, key, scale) in [
            ("softpreempt_client_grants_total", "grants", 1.0),
            ("softpreempt_client_slices_total", "slices", 1.0),
            ("softpreempt_client_yields_total", "yields", 1.0),
            ("softpreempt_client_wait_seconds_total", "wait_ns", 1e-9),
            ("softpreempt_client_busy_seconds_total", "busy_ns", 1e-9),
            ("softpreempt_client_handbacks_total", "handbacks", 1.0),
            ("softpreempt_client_inflight_slices", "inflight", 1.0),
        ] {
            let v = sample_of(&s, family, pid);
            let lo = b[key].as_f64().unwrap() * scale;
            let hi = a[key].as_f64().unwrap() * scale;
            assert!(
                lo - 1e-12 <= v && v <= hi + 1e-12,
                "{family} of {pid}: {v} not in [{lo}, {hi}]"
            );
        }
        let info = format!(
            "softpreempt_client_info{{device=\"{DEVICE}\",slot=\"{}\",pid=\"{pid}\",queue=\"{}\",priority=\"{}\",exe=\"cli-status-test\",state=\"{}\"}}",
            a["slot"],
            a["queue"].as_str().unwrap(),
            a["priority"].as_str().unwrap(),
            a["state"].as_str().unwrap()
        );
        assert_eq!(s.get(&info), Some(&1.0), "{info} not in\n{text}");
        assert_eq!(
            sample_of(&s, "softpreempt_client_demand", pid),
            f64::from(u8::from(a["demand"].as_bool().unwrap()))
        );
    }
}

#[test]
fn metrics_match_status_and_pass_promtool() {
    let dir = tempfile::tempdir().unwrap();
    let hp = Role::start("run", "high", dir.path());
    let lp = Role::start("wait", "low", dir.path());
    let idle = Role::start("hold", "normal:2", dir.path());
    until_state(dir.path(), lp.pid(), "waiting");
    let before = status_json(dir.path());
    let o = softpreempt()
        .args(["metrics", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let after = status_json(dir.path());
    let text = stdout(&o);
    check_against_status(&text, &before, &after, &[hp.pid(), lp.pid(), idle.pid()]);
    promtool_check(&text);
    // Every family is documented.
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/deployment.md"),
    )
    .unwrap();
    for family in text.lines().filter_map(|l| l.strip_prefix("# TYPE ")) {
        let name = family.split_whitespace().next().unwrap();
        assert!(
            doc.contains(&format!("`{name}`")),
            "{name} is not in docs/deployment.md"
        );
    }
}

/// Sends one HTTP/1.0 request to `addr`; the whole response.
fn http_get(addr: &str, path: &str) -> String {
    use std::io::Write as _;
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// The status code of an HTTP response (`HTTP/1.x 200 OK` → `200`).
fn status_code(response: &str) -> &str {
    response.split_whitespace().nth(1).unwrap_or("")
}

#[test]
fn exporter_serves_the_metrics_over_loopback_despite_a_bad_segment() {
    use std::io::BufRead as _;
    let dir = tempfile::tempdir().unwrap();
    let hp = Role::start("run", "high", dir.path());
    let lp = Role::start("wait", "low", dir.path());
    std::fs::write(dir.path().join("softpreempt-0-garbage"), b"not a segment").unwrap();
    until_state(dir.path(), lp.pid(), "waiting");
    let mut exporter = softpreempt()
        .args(["exporter", "--listen", "127.0.0.1:0", "--dir"])
        .arg(dir.path())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Killed whatever happens below.
    struct Kill(Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut err = BufReader::new(exporter.stderr.take().unwrap());
    let exporter = Kill(exporter);
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();

    let before = status_json(dir.path());
    let response = http_get(&addr, "/metrics");
    let after = status_json(dir.path());
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert_eq!(status_code(head), "200", "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4; charset=utf-8"),
        "{head}"
    );
    check_against_status(body, &before, &after, &[hp.pid(), lp.pid()]);
    assert_eq!(samples(body)["softpreempt_segment_errors"], 1.0);
    promtool_check(body);
    // The bad segment is logged, one line a scrape, and the exporter goes on.
    line.clear();
    err.read_line(&mut line).unwrap();
    assert!(line.contains("softpreempt-0-garbage has size 13"), "{line}");
    assert_eq!(status_code(&http_get(&addr, "/nothing")), "404");
    assert!(http_get(&addr, "/metrics").contains("softpreempt_up 1"));
    drop(exporter);
}

#[test]
fn device_memory_shows_per_client_and_level_in_status_and_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let hp = Role::start("hold", "high", dir.path());
    let mem = Role::start("memory", "low", dir.path());
    let s = status_json(dir.path());
    let m = &s["segments"][0]["memory"];
    assert_eq!(m["device_bytes"], 1u64 << 30);
    assert_eq!(m["levels"]["low"]["bytes"], MIB64);
    assert_eq!(m["levels"]["low"]["refusals"], 1);
    assert_eq!(m["levels"]["high"]["bytes"], 0);
    let c = client(&s, mem.pid());
    assert_eq!(
        (c["memory"].as_bool(), c["mem_bytes"].as_u64()),
        (Some(true), Some(MIB64))
    );
    assert_eq!(
        (c["mem_objects"].as_u64(), c["mem_refusals"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(client(&s, hp.pid())["memory"], false);

    let text = output_of("status", dir.path());
    assert!(
        text.contains("memory: high 0 B, normal 0 B, low 64.0 MiB of 1.00 GiB; refused: low 1"),
        "{text}"
    );
    let row = row_of(&text, mem.pid());
    assert!(row.trim_end().ends_with("64.0 MiB"), "{row}");

    let text = output_of("metrics", dir.path());
    let s = samples(&text);
    let level =
        |family: &str, l: &str| s[&format!("{family}{{device=\"{DEVICE}\",priority=\"{l}\"}}")];
    assert_eq!(level("softpreempt_level_memory_bytes", "low"), MIB64 as f64);
    assert_eq!(level("softpreempt_level_memory_bytes", "high"), 0.0);
    assert_eq!(level("softpreempt_level_memory_refusals_total", "low"), 1.0);
    assert_eq!(
        s[&format!("softpreempt_device_memory_bytes{{device=\"{DEVICE}\"}}")],
        (1u64 << 30) as f64
    );
    assert_eq!(
        sample_of(&s, "softpreempt_client_memory_bytes", mem.pid()),
        MIB64 as f64
    );
    assert_eq!(
        sample_of(&s, "softpreempt_client_memory_refusals_total", mem.pid()),
        1.0
    );
    // Memory families are for memory clients only.
    let hp_tag = format!("pid=\"{}\"", hp.pid());
    assert!(
        !text
            .lines()
            .any(|l| l.starts_with("softpreempt_client_memory_bytes{") && l.contains(&hp_tag)),
        "{text}"
    );
    promtool_check(&text);
}
