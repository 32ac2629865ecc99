//! Issue 4: two real processes at different priorities share the device through the real
//! loader. The low-priority one saturates it with long sliceable launches; the
//! high-priority one issues short ones. Shown through the arbiter's statistics (never
//! through timing): the high one never queued behind more than `max_inflight` low slices,
//! the low one was sliced and yielded, and both computed the right results. A low process
//! killed with SIGKILL mid-launch never blocks the high one.
//!
//! The test binary re-runs itself in the child roles (`SP_PROC_ROLE`).

mod common;
mod managed_common;

use common::{ok, Env};
use managed_common as mc;
use opencl_sys::*;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const MAX_INFLIGHT: u64 = 2;
/// Slicing, the fallback for kernels that do not yield: yielding launches are off here
/// (`tests/managed_yield.rs` has them), and so is the CPU idle class, under which a low
/// queue's launches need no grant (`tests/managed_cpu_idle.rs` has it).
const SCHED: &str =
    "slice = \"contended\"\ntarget_slice_us = 200\nmax_inflight = 2\nhp_linger_us = 500\n\
                     yielding = \"never\"\ncpu_idle_class = false";
const ROLE: &str = "SP_PROC_ROLE";
const STOP: &str = "SP_PROC_STOP";

/// A child's report line on stdout: `@proc key=value ...`.
fn report(fields: &[(&str, u64)]) {
    let s: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
    println!("@proc {}", s.join(" "));
}

fn parse(line: &str) -> Vec<(String, u64)> {
    line.trim_start_matches("@proc ")
        .split_whitespace()
        .filter_map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.to_string(), v.parse().unwrap_or(0)))
        })
        .collect()
}

fn get(fields: &[(String, u64)], key: &str) -> u64 {
    fields
        .iter()
        .find(|(k, _)| k == key)
        .map_or_else(|| panic!("no {key} in {fields:?}"), |(_, v)| *v)
}

fn fill_kernel(env: &Env) -> cl_kernel {
    let prog = mc::build(env, &format!("{}{}", mc::MIX_CL, mc::FILL_CL), "")
        .unwrap_or_else(|e| panic!("{e}"));
    env.kernel(prog, "fill")
}

/// This process's own client statistics (the queue's), read from the segment.
fn mine(dir: &Path) -> (u64, u64, u64, u64) {
    let cs = mc::clients_of(dir, std::process::id());
    let sum = |f: fn(&softpreempt_sched::ClientStats) -> u64| cs.iter().map(f).sum::<u64>();
    (
        sum(|c| c.slices),
        sum(|c| c.yields),
        sum(|c| c.grants),
        cs.iter().map(|c| c.behind_max).max().unwrap_or(0),
    )
}

/// The low-priority role: long launches, two queued at a time, until the stop file exists.
fn low(dir: &Path) {
    let env = Env::sp();
    let k = fill_kernel(&env);
    // Long enough to be cut into several 200 µs slices: a GPU runs this shape in
    // microseconds, so it gets 128 times the work-items.
    let n = if mc::is_gpu(&env) {
        64 * 65536
    } else {
        64 * 512
    };
    let out = env.buffer(n * 4);
    mc::arg(k, 0, out);
    mc::arg(k, 2, 1500u32);
    let stop = std::env::var(STOP).unwrap();
    let mut launches = 0u64;
    let mut seed = 0u32;
    println!("@proc ready=1");
    // Until told to stop (a minute at most, should the parent be gone).
    let start = std::time::Instant::now();
    while !Path::new(&stop).exists() && start.elapsed() < Duration::from_secs(60) {
        seed += 1;
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
        launches += 1;
        if launches.is_multiple_of(2) {
            mc::finish(env.queue);
        }
    }
    // The last launch's results must be exact, sliced or not.
    if let Some(m) = mc::check_fill(&env.read::<u32>(out, n), 0, seed, 1500) {
        panic!("low-priority results: {m}");
    }
    let (slices, yields, grants, _) = mine(dir);
    report(&[
        ("launches", launches),
        ("slices", slices),
        ("yields", yields),
        ("grants", grants),
    ]);
}

/// The high-priority role: short launches with gaps, each waited for.
fn high(dir: &Path) {
    let env = Env::sp();
    let k = fill_kernel(&env);
    let n = 64 * 4;
    let out = env.buffer(n * 4);
    mc::arg(k, 0, out);
    mc::arg(k, 2, 200u32);
    for i in 0..60u32 {
        mc::arg(k, 1, i);
        ok(mc::enqueue(
            env.queue,
            k,
            None,
            &[n],
            Some(&[64]),
            &[],
            None,
        ));
        if let Some(m) = mc::check_fill(&env.read::<u32>(out, n), 0, i, 200) {
            panic!("high-priority results: {m}");
        }
        std::thread::sleep(Duration::from_millis(3));
    }
    let (_, _, _, behind) = mine(dir);
    report(&[("behind_max", behind)]);
}

fn spawn(role: &str, priority: &str, stop: &Path) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_role", "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .env(STOP, stop)
        .env("SOFTPREEMPT_PRIORITY", priority)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Reads the child's `@proc` lines until one has `key`.
fn read_until(c: &mut Child, key: &str) -> Vec<(String, u64)> {
    let out = c.stdout.as_mut().unwrap();
    let mut r = BufReader::new(out);
    let mut line = String::new();
    loop {
        line.clear();
        let n = r.read_line(&mut line).unwrap();
        assert!(n > 0, "child exited before reporting {key}");
        // The test harness may have printed "test child_role ... " before it.
        if let Some(at) = line.find("@proc ") {
            let f = parse(&line[at..]);
            if f.iter().any(|(k, _)| k == key) {
                return f;
            }
        }
    }
}

/// Not a test on its own: the children's entry point (does nothing without the role).
#[test]
fn child_role() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    // The parent's configuration and arbiter directory, inherited through the environment.
    let dir = Path::new(Box::leak(
        std::env::var("SOFTPREEMPT_SHM_DIR")
            .unwrap()
            .into_boxed_str(),
    ));
    common::setup();
    match role.as_str() {
        "low" => low(dir),
        "high" => high(dir),
        other => panic!("unknown role {other}"),
    }
}

#[test]
fn high_priority_never_queues_behind_more_than_max_inflight_low_slices() {
    if std::env::var(ROLE).is_ok() {
        return;
    }
    // One pair of processes at a time: `behind_max` counts every lower client's slices,
    // and both tests' low children share the segment.
    let _one = mc::serial();
    // The children find the same directory through the environment set here.
    let dir = mc::init(SCHED).to_path_buf();
    let stop = dir.join("stop");
    let mut lo = spawn("low", "low", &stop);
    read_until(&mut lo, "ready");
    std::thread::sleep(Duration::from_millis(200));
    let mut hi = spawn("high", "high", &stop);
    let h = read_until(&mut hi, "behind_max");
    assert!(hi.wait().unwrap().success(), "high-priority child failed");
    std::fs::write(&stop, b"").unwrap();
    let l = read_until(&mut lo, "launches");
    assert!(lo.wait().unwrap().success(), "low-priority child failed");
    let behind = get(&h, "behind_max");
    eprintln!("high {h:?} low {l:?}");
    assert!(
        behind <= MAX_INFLIGHT,
        "the high-priority queue was behind {behind} low-priority slices (max_inflight {MAX_INFLIGHT})"
    );
    // The low one was really cut into slices while the high one was registered, and had
    // to wait for it: otherwise the bound above would prove nothing.
    let (launches, slices, yields) = (get(&l, "launches"), get(&l, "slices"), get(&l, "yields"));
    assert!(
        slices > launches,
        "low-priority launches were not sliced: {l:?}"
    );
    assert!(
        yields > 0,
        "the low-priority queue never waited for the high one: {l:?}"
    );
}

#[test]
fn killed_low_priority_process_never_blocks_the_high_one() {
    if std::env::var(ROLE).is_ok() {
        return;
    }
    let _one = mc::serial();
    let dir = mc::init(SCHED).to_path_buf();
    let stop = dir.join("never");
    let mut lo = spawn("low", "low", &stop);
    read_until(&mut lo, "ready");
    std::thread::sleep(Duration::from_millis(300));
    // SIGKILL while it holds grants and slices are in flight.
    lo.kill().unwrap();
    lo.wait().unwrap();
    let mut hi = spawn("high", "high", &stop);
    read_until(&mut hi, "behind_max");
    assert!(
        hi.wait().unwrap().success(),
        "high-priority child failed after the low one was killed"
    );
    // The dead client is seen as dead (and its slot reclaimed once someone waits), never as
    // a live holder of the device.
    let dead = lo.id();
    let of_dead: Vec<_> = mc::all_clients(&dir)
        .into_iter()
        .filter(|c| c.pid == dead)
        .collect();
    assert!(
        of_dead
            .iter()
            .all(|c| c.state.as_str() == "reclaimed" || c.process_alive == Some(false)),
        "the killed process still looks alive: {}",
        mc::describe(&dir)
    );
}
