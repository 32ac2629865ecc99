//! Issue 7 through the real loader: with `SOFTPREEMPT_TRACE` and `SOFTPREEMPT_PROFILE` set,
//! a process whose launches are sliced writes a Chrome trace with one event per slice
//! (named after the kernel, on its queue's named track) and a profile line per kernel,
//! while its results stay exact. The work runs in a child process (this binary in the
//! `SP_TRACE_ROLE` role), because both files are completed when the queue is released.

mod common;
mod managed_common;

use common::{ok, Env};
use managed_common as mc;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

const ROLE: &str = "SP_TRACE_ROLE";
const N: usize = 64 * 256;
const ITERS: u32 = 400;
const LAUNCHES: u32 = 3;

/// The child: sliced launches of `fill`, checked, then the queue is released.
#[test]
fn child_role() {
    if std::env::var_os(ROLE).is_none() {
        return;
    }
    mc::init("slice = \"always\"\ntarget_slice_us = 200");
    let env = Env::sp();
    let prog = mc::build(&env, &format!("{}{}", mc::MIX_CL, mc::FILL_CL), "")
        .unwrap_or_else(|e| panic!("{e}"));
    let k = env.kernel(prog, "fill");
    let n = mc::sliceable_items(&env, N);
    // The parent checks that the slices tile the launches of this size.
    println!("@items {n}");
    let out = env.buffer(n * 4);
    mc::arg(k, 0, out);
    mc::arg(k, 2, ITERS);
    for seed in 1..=LAUNCHES {
        mc::arg(k, 1, seed);
        ok(mc::enqueue(
            env.queue,
            k,
            None,
            &[n],
            Some(&[64]),
            &[],
            None,
        ));
    }
    mc::finish(env.queue);
    if let Some(m) = mc::check_fill(&env.read::<u32>(out, n), 0, LAUNCHES, ITERS) {
        panic!("results: {m}");
    }
    // Env's drop releases the queue: the submitter stops and flushes both files.
}

fn read_trace(dir: &Path) -> Vec<Value> {
    let files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    assert_eq!(files.len(), 1, "one trace file per process: {files:?}");
    let text = std::fs::read_to_string(&files[0]).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    v["traceEvents"].as_array().expect("traceEvents").clone()
}

#[test]
fn sliced_launches_appear_in_the_trace_and_the_profile() {
    if std::env::var_os(ROLE).is_some() {
        return;
    }
    let dir = mc::private_dir("trace");
    let traces = dir.join("traces");
    let profile = dir.join("profile.jsonl");
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["child_role", "--exact", "--nocapture", "--test-threads=1"])
        .env(ROLE, "1")
        .env("SOFTPREEMPT_TRACE", &traces)
        .env("SOFTPREEMPT_PROFILE", &profile);
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "child failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    let items: usize = String::from_utf8_lossy(&out.stdout)
        .lines()
        // libtest may print "test child_role ... " on the same line first.
        .find_map(|l| {
            l.split("@items ")
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or(N);
    let events = read_trace(&traces);
    let slices: Vec<&Value> = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == "slice")
        .collect();
    assert!(
        slices.iter().all(|e| e["name"] == "fill"),
        "slices are named after the kernel: {slices:?}"
    );
    // slice = "always" with a 200 µs target cuts each launch into several pieces.
    assert!(
        slices.len() > LAUNCHES as usize,
        "{} slice events for {LAUNCHES} launches",
        slices.len()
    );
    let groups: u64 = slices
        .iter()
        .map(|e| e["args"]["work_groups"].as_u64().expect("work_groups"))
        .sum();
    assert_eq!(
        groups,
        LAUNCHES as u64 * (items / 64) as u64,
        "slices tile the launches"
    );
    // The slices sit on a track that the thread-name metadata names after the queue.
    let tid = &slices[0]["tid"];
    assert!(
        events
            .iter()
            .any(|e| e["ph"] == "M" && e["name"] == "thread_name" && &e["tid"] == tid),
        "the slices' track is named: {events:?}"
    );

    let text = std::fs::read_to_string(&profile).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let fill: Vec<&Value> = lines.iter().filter(|l| l["kernel"] == "fill").collect();
    assert_eq!(fill.len(), 1, "{lines:?}");
    assert_eq!(fill[0]["launches"], LAUNCHES);
    assert_eq!(fill[0]["slices"].as_u64(), Some(slices.len() as u64));
    assert_eq!(fill[0]["priority"], "normal");
    assert!(fill[0]["total_device_ns"].as_u64().unwrap() > 0);
}
