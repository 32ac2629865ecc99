//! A GPU queue next to a registered higher priority that has been idle for the active
//! window (500 ms) sends its launches as it does alone: only a kernel's first 16 long
//! launches through the FIFO (in pieces, to learn the kernel), the rest whole and direct.
//! It records its activity meanwhile, so the higher one's next command finds it active
//! and raises demand, and its launches after that command go through the FIFO again.
//! Shown through the low process's profile (launches through the FIFO, and direct), never
//! through timing. Two real processes (this binary in child roles); PoCL stands in for a
//! GPU through the test hook `SOFTPREEMPT_TEST_GPU_PIECES`, with its threads left out of
//! the idle class (`cpu_idle_class = false`), which would take the CPU device's own path.

mod common;
mod managed_common;

use common::{ok, Env};
use managed_common as mc;
use opencl_sys::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const ROLE: &str = "SP_IDLE_HIGHER_ROLE";
const SYNC: &str = "SP_IDLE_HIGHER_SYNC";
/// A kernel's long launches a lone GPU queue cuts to learn it (`managed::LEARN_ALONE`).
const LEARN_ALONE: u64 = 16;
/// The low queue's launches while the higher priority is idle (then, after a pause, a
/// few more), and after its command.
const IDLE_LAUNCHES: u32 = 20;
const LATE_LAUNCHES: u32 = 4;
const AFTER_LAUNCHES: u32 = 3;
const ITEMS: usize = 64 * 1024;
/// About how long each of the low queue's launches takes on the bare vendor: several
/// pieces of a GPU (2 ms), a small part of the active window.
const LAUNCH_MS: u64 = 60;

fn sync_dir() -> PathBuf {
    PathBuf::from(std::env::var_os(SYNC).expect("sync dir"))
}

/// Waits (up to a minute) for the other process's file `name`.
fn wait_file(name: &str) {
    let path = sync_dir().join(name);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !path.exists() {
        assert!(Instant::now() < deadline, "no {name} within a minute");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn post_file(name: &str) {
    post_file_in(&sync_dir(), name);
}

fn fill(env: &Env) -> (cl_kernel, cl_mem) {
    let prog = mc::build(env, &format!("{}{}", mc::MIX_CL, mc::FILL_CL), "")
        .unwrap_or_else(|e| panic!("{e}"));
    (env.kernel(prog, "fill"), env.buffer(ITEMS * 4))
}

/// Launches `fill` of `items` on `q` with `seed` and waits for it.
fn launch(q: cl_command_queue, k: cl_kernel, out: cl_mem, items: usize, seed: u32, iters: u32) {
    mc::arg(k, 0, out);
    mc::arg(k, 1, seed);
    mc::arg(k, 2, iters);
    ok(mc::enqueue(q, k, None, &[items], Some(&[64]), &[], None));
    mc::finish(q);
}

/// Not a test on its own: the high-priority child. It registers and runs one short
/// launch, idles until the low child asks, then sends one more and waits to be stopped.
#[test]
fn high_role() {
    if std::env::var(ROLE).as_deref() != Ok("high") {
        return;
    }
    common::setup();
    let mut env = Env::sp();
    env.close_queue();
    let q = mc::priority_queue(&env, CL_QUEUE_PRIORITY_HIGH_KHR);
    let (k, out) = fill(&env);
    launch(q, k, out, 1024, 1, 10);
    post_file("high-ready");
    wait_file("high-go");
    launch(q, k, out, 1024, 2, 10);
    post_file("high-sent");
    wait_file("high-stop");
    // SAFETY: the queue this child owns.
    ok(unsafe { clReleaseCommandQueue(q) });
}

/// Not a test on its own: the low-priority child, its queue taken for a GPU's.
#[test]
fn low_role() {
    if std::env::var(ROLE).as_deref() != Ok("low") {
        return;
    }
    common::setup();
    let iters = mc::fill_iters_for(ITEMS, LAUNCH_MS as f64);
    let mut env = Env::sp();
    env.close_queue();
    let q = mc::priority_queue(&env, CL_QUEUE_PRIORITY_LOW_KHR);
    let (k, out) = fill(&env);
    wait_file("high-ready");
    // The higher priority idle past the active window.
    std::thread::sleep(Duration::from_millis(800));
    for seed in 0..IDLE_LAUNCHES {
        launch(q, k, out, ITEMS, 100 + seed, iters);
    }
    // Past the window after the last launch that took a grant (the learning ones), so
    // only the direct launches' own record can show the high child this one's activity.
    std::thread::sleep(Duration::from_millis(800));
    for seed in 0..LATE_LAUNCHES {
        launch(q, k, out, ITEMS, 150 + seed, iters);
    }
    post_file("high-go");
    wait_file("high-sent");
    for seed in 0..AFTER_LAUNCHES {
        launch(q, k, out, ITEMS, 200 + seed, iters);
    }
    post_file("high-stop");
    let got: Vec<u32> = env.read_on(q, out, ITEMS);
    assert_eq!(
        mc::check_fill(&got, 0, 200 + AFTER_LAUNCHES - 1, iters),
        None
    );
    // SAFETY: the queue this child owns.
    ok(unsafe { clReleaseCommandQueue(q) });
}

fn child(role: &str, dir: &Path, cfg: &Path) -> Command {
    let test = format!("{role}_role");
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([test.as_str(), "--exact", "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .env(SYNC, dir)
        .env("SOFTPREEMPT_CONFIG", cfg)
        .env("SOFTPREEMPT_SHM_DIR", dir)
        .env_remove("SOFTPREEMPT_PRIORITY");
    cmd
}

#[test]
fn a_gpu_queue_goes_as_alone_while_the_higher_priority_is_idle() {
    if std::env::var_os(ROLE).is_some() {
        return;
    }
    common::setup();
    let dir = mc::private_dir("idle-higher");
    let cfg = mc::write_config(&dir, "cpu_idle_class = false");
    let mut high = child("high", &dir, &cfg).spawn().unwrap();
    let low = child("low", &dir, &cfg)
        .env("SOFTPREEMPT_TEST_GPU_PIECES", "1")
        .env("SOFTPREEMPT_PROFILE", dir.join("profile.jsonl"))
        .output()
        .unwrap();
    if !low.status.success() {
        // Let the high child go before failing.
        post_file_in(&dir, "high-go");
        post_file_in(&dir, "high-stop");
    }
    assert!(high.wait().unwrap().success(), "the high child failed");
    assert!(
        low.status.success(),
        "the low child failed: {}\n{}",
        String::from_utf8_lossy(&low.stdout),
        String::from_utf8_lossy(&low.stderr)
    );
    let text = std::fs::read_to_string(dir.join("profile.jsonl")).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let fill: Vec<&Value> = lines.iter().filter(|l| l["kernel"] == "fill").collect();
    assert_eq!(fill.len(), 1, "{lines:?}");
    let (fifo, direct) = (fill[0]["launches"].as_u64(), fill[0]["direct"].as_u64());
    // Idle higher priority: the learning launches through the FIFO, then direct; after its
    // command, through the FIFO again.
    assert_eq!(
        direct,
        Some(u64::from(IDLE_LAUNCHES + LATE_LAUNCHES) - LEARN_ALONE),
        "launches sent direct: {lines:?}"
    );
    assert_eq!(
        fifo,
        Some(LEARN_ALONE + u64::from(AFTER_LAUNCHES)),
        "launches through the FIFO: {lines:?}"
    );
}

fn post_file_in(dir: &Path, name: &str) {
    std::fs::write(dir.join(name), b"").unwrap();
}
