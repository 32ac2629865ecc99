//! Traces written by real processes through the library's writer (`SOFTPREEMPT_TRACE`,
//! `SOFTPREEMPT_PROFILE`), flushed at exit or cut short by SIGKILL, then merged by
//! `softpreempt trace merge` into one timeline.

mod common;

use std::path::Path;
use std::process::Stdio;

use common::*;
use serde_json::Value;
use softpreempt_platform::trace::{self, profile, Arg};

/// Child roles. `writer`: a few events of each kind and profile counts, then a normal
/// exit without calling `flush` (the exit handler must write them). `killed`: enough
/// events to flush by size, then waits to be killed.
#[test]
#[ignore = "child role, started by the other tests"]
fn trace_child() {
    let role = std::env::var("CLI_TEST_ROLE").expect("CLI_TEST_ROLE");
    assert!(trace::enabled(), "SOFTPREEMPT_TRACE is set");
    let queue = format!("queue {role}");
    let t0 = trace::now_ns();
    trace::name_queue(&queue, if role == "writer-hp" { "high" } else { "low" });
    match role.as_str() {
        "writer-hp" | "writer-lp" => {
            trace::grant_wait(&queue, t0, t0 + 1_000);
            trace::grant(&queue, t0 + 1_000, false);
            let args = [("rows", Arg::from(64u64)), ("of", Arg::from(256u64))];
            trace::slice(&queue, "mandel", t0 + 1_000, t0 + 50_000, &args);
            trace::preempted(
                &queue,
                "mandel",
                t0 + 50_000,
                &[("rows_done", 64u64.into())],
            );
            assert!(profile::enabled());
            let run = |pieces, device_ns, max_piece_ns, yields| profile::Launch {
                pieces,
                device_ns,
                max_piece_ns,
                yields,
                not_asked: false,
            };
            profile::launch("mandel", &"low", run(4, 40_000, 12_000, 3));
            profile::launch("mandel", &"low", run(2, 20_000, 11_000, 0));
            profile::launch("vadd", &"high", run(1, 500, 500, 0));
        }
        "killed" => {
            for i in 0..5_000u64 {
                trace::slice(&queue, "k", t0 + i * 100, t0 + i * 100 + 50, &[]);
            }
            println!("{READY}");
            loop {
                std::thread::park();
            }
        }
        other => panic!("unknown role {other}"),
    }
}

fn child(role: &str, traces: &Path, profile: &Path, config: &Path) -> std::process::Command {
    let mut c = child_command("trace_child", role);
    c.env("SOFTPREEMPT_TRACE", traces)
        .env("SOFTPREEMPT_PROFILE", profile)
        // Hermetic: no system config.
        .env("SOFTPREEMPT_CONFIG", config);
    c
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}\n{text}", path.display()))
}

fn events(v: &Value) -> &Vec<Value> {
    v["traceEvents"].as_array().unwrap()
}

#[test]
fn processes_write_traces_and_profiles_that_merge_into_one_timeline() {
    let dir = tempfile::tempdir().unwrap();
    let (traces, profile_file, config) = (
        dir.path().join("traces"),
        dir.path().join("profile.jsonl"),
        dir.path().join("empty.toml"),
    );
    std::fs::write(&config, "").unwrap();
    let mut pids = Vec::new();
    for role in ["writer-hp", "writer-lp"] {
        let mut c = child(role, &traces, &profile_file, &config);
        let mut p = c.stdout(Stdio::null()).spawn().unwrap();
        pids.push(p.id() as u64);
        assert!(p.wait().unwrap().success(), "{role}");
    }

    // One valid file per process, named after it, with its names and events.
    for pid in &pids {
        let v = read_json(&traces.join(format!("softpreempt-{pid}.json")));
        let evs = events(&v);
        let kinds: Vec<(&str, &str)> = evs
            .iter()
            .map(|e| (e["ph"].as_str().unwrap(), e["name"].as_str().unwrap()))
            .collect();
        for want in [
            ("M", "process_name"),
            ("M", "thread_name"),
            ("M", "thread_sort_index"),
            ("X", "wait for grant"),
            ("i", "grant"),
            ("X", "mandel"),
            ("i", "preempted"),
        ] {
            assert!(kinds.contains(&want), "{want:?} missing in {kinds:?}");
        }
        assert!(evs.iter().all(|e| e["pid"] == *pid));
        let process = evs.iter().find(|e| e["name"] == "process_name").unwrap();
        assert!(process["args"]["name"]
            .as_str()
            .unwrap()
            .ends_with(&format!("(pid {pid})")));
    }

    let merged = dir.path().join("merged.json");
    let o = run(
        [
            std::ffi::OsStr::new("trace"),
            "merge".as_ref(),
            traces.as_os_str(),
            "-o".as_ref(),
            merged.as_os_str(),
        ],
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with("merged 2 trace file(s), 14 events"),
        "{}",
        stdout(&o)
    );
    let v = read_json(&merged);
    let evs = events(&v);
    assert_eq!(evs.len(), 14);
    for pid in &pids {
        assert_eq!(evs.iter().filter(|e| e["pid"] == *pid).count(), 7);
    }
    let names: Vec<&str> = evs
        .iter()
        .filter(|e| e["name"] == "thread_name")
        .map(|e| e["args"]["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"queue writer-hp [high]") && names.contains(&"queue writer-lp [low]"),
        "{names:?}"
    );
    let slice = evs
        .iter()
        .find(|e| e["ph"] == "X" && e["name"] == "mandel")
        .unwrap();
    assert_eq!(slice["dur"].as_f64(), Some(49.0));
    assert_eq!(slice["args"]["rows"], 64);

    // Profiles: one line per kernel and priority, per process.
    let text = std::fs::read_to_string(&profile_file).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4, "{text}");
    let mandel = lines
        .iter()
        .find(|l| l["kernel"] == "mandel" && l["pid"] == pids[0])
        .unwrap();
    assert_eq!(mandel["launches"], 2);
    assert_eq!(mandel["slices"], 6);
    assert_eq!(mandel["yields"], 3);
    assert_eq!(mandel["total_device_ns"], 60_000);
    assert_eq!(mandel["mean_device_ns"], 30_000);
    assert_eq!(mandel["priority"], "low");
}

#[test]
fn a_killed_process_leaves_a_valid_trace() {
    let dir = tempfile::tempdir().unwrap();
    let traces = dir.path().join("traces");
    let config = dir.path().join("empty.toml");
    std::fs::write(&config, "").unwrap();
    let mut p = child("killed", &traces, &dir.path().join("p.jsonl"), &config)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let _out = wait_ready(&mut p);
    p.kill().unwrap();
    p.wait().unwrap();
    let v = read_json(&traces.join(format!("softpreempt-{}.json", p.id())));
    let n = events(&v).len();
    // Everything up to the last size-triggered flush, and not all 5000.
    assert!(n > 100 && n < 5_003, "{n}");
}
