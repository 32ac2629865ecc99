//! Issue 7 through the real loader: with `SOFTPREEMPT_TRACE` and `SOFTPREEMPT_PROFILE` set,
//! a process whose launches are sliced writes a Chrome trace with one event per slice
//! (named after the kernel, on its queue's named track) and a profile line per kernel,
//! while its results stay exact. The work runs in a child process (this binary in the
//! `SP_TRACE_ROLE` role), because both files are completed when the queue is released.
//!
//! Launches that go straight to the vendor instead of through the FIFO are counted too (the
//! profile's `direct` and `direct_claimed`, a "direct launch" instant in the trace): a low
//! queue next to an idle high one sends its short launches direct under the budget.

mod common;
mod managed_common;

use common::{ok, Env};
use managed_common as mc;
use opencl_sys::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

const ROLE: &str = "SP_TRACE_ROLE";
const DIRECT_ROLE: &str = "SP_TRACE_DIRECT_ROLE";
const SHORT_LAUNCHES: u32 = 40;
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

/// The child of the direct-launch test: a high queue (registered, idle) and a low one on
/// the same device; short launches on the low one, each waited for.
#[test]
fn direct_child_role() {
    if std::env::var_os(DIRECT_ROLE).is_none() {
        return;
    }
    // The direct budget is the slice target: a large one, so that a launch fits it however
    // slow this machine runs it (a cold CI machine's PoCL took 0.3-0.8 ms a launch, past
    // the default 250 µs, and sent all of them through the FIFO).
    mc::init("target_slice_us = 100000");
    let env = Env::sp();
    let high = mc::priority_queue(&env, CL_QUEUE_PRIORITY_HIGH_KHR);
    let low = mc::priority_queue(&env, CL_QUEUE_PRIORITY_LOW_KHR);
    let prog = mc::build(&env, &format!("{}{}", mc::MIX_CL, mc::FILL_CL), "")
        .unwrap_or_else(|e| panic!("{e}"));
    let k = env.kernel(prog, "fill");
    let out = env.buffer(64 * 4);
    mc::arg(k, 0, out);
    mc::arg(k, 2, 1u32);
    for seed in 1..=SHORT_LAUNCHES {
        mc::arg(k, 1, seed);
        ok(mc::enqueue(low, k, None, &[64], Some(&[64]), &[], None));
        mc::finish(low);
    }
    if let Some(m) = mc::check_fill(&env.read::<u32>(out, 64), 0, SHORT_LAUNCHES, 1) {
        panic!("results: {m}");
    }
    for q in [high, low] {
        // SAFETY: queues this function created.
        ok(unsafe { clReleaseCommandQueue(q) });
    }
}

/// Runs this binary's `role` test in a child with `var` set and the trace and profile in
/// `dir`; returns its standard output.
fn run_role(role: &str, var: &str, dir: &Path) -> String {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([role, "--exact", "--nocapture", "--test-threads=1"])
        .env(var, "1")
        .env("SOFTPREEMPT_TRACE", dir.join("traces"))
        .env("SOFTPREEMPT_PROFILE", dir.join("profile.jsonl"));
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "child failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn read_profile(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
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
    let stdout = run_role("child_role", ROLE, &dir);

    let items: usize = stdout
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

    let lines = read_profile(&profile);
    let fill: Vec<&Value> = lines.iter().filter(|l| l["kernel"] == "fill").collect();
    assert_eq!(fill.len(), 1, "{lines:?}");
    assert_eq!(fill[0]["launches"], LAUNCHES);
    // slice = "always": every launch goes through the FIFO.
    assert_eq!(fill[0]["direct"], 0, "{lines:?}");
    assert_eq!(fill[0]["slices"].as_u64(), Some(slices.len() as u64));
    assert_eq!(fill[0]["priority"], "normal");
    assert!(fill[0]["total_device_ns"].as_u64().unwrap() > 0);
}

#[test]
fn direct_launches_are_counted_in_the_profile_and_the_trace() {
    if std::env::var_os(DIRECT_ROLE).is_some() {
        return;
    }
    let dir = mc::private_dir("trace-direct");
    run_role("direct_child_role", DIRECT_ROLE, &dir);
    let lines = read_profile(&dir.join("profile.jsonl"));
    let fill: Vec<&Value> = lines
        .iter()
        .filter(|l| l["kernel"] == "fill" && l["priority"] == "low")
        .collect();
    assert_eq!(fill.len(), 1, "{lines:?}");
    let count = |k: &str| {
        fill[0][k]
            .as_u64()
            .unwrap_or_else(|| panic!("{k}: {lines:?}"))
    };
    // Every launch is counted once: through the FIFO (measured) or direct.
    assert_eq!(
        count("launches") + count("direct"),
        SHORT_LAUNCHES as u64,
        "{lines:?}"
    );
    // The first launches teach the timing model through the FIFO; once the kernel is known
    // to be short, it goes direct under the budget the idle high queue sets.
    assert!(count("direct_claimed") > 0, "{lines:?}");
    assert!(count("direct_claimed") <= count("direct"), "{lines:?}");
    let events = read_trace(&dir.join("traces"));
    let direct: Vec<&Value> = events
        .iter()
        .filter(|e| e["ph"] == "i" && e["cat"] == "direct")
        .collect();
    assert_eq!(direct.len() as u64, count("direct"), "{events:?}");
    assert!(direct.iter().all(|e| e["args"]["kernel"] == "fill"));
    let claimed = direct
        .iter()
        .filter(|e| e["args"]["claimed"] == true)
        .count();
    assert_eq!(claimed as u64, count("direct_claimed"));
}
