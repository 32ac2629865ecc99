//! Issue 7 through the real loader: with `SOFTPREEMPT_TRACE` and `SOFTPREEMPT_PROFILE` set,
//! a process whose launches are sliced writes a Chrome trace with one event per slice
//! (named after the kernel, on its queue's named track) and a profile line per kernel,
//! while its results stay exact. The work runs in a child process (this binary in the
//! `SP_TRACE_ROLE` role), because both files are completed when the queue is released.
//!
//! Each piece says how the layer saw it complete (`own_event`): by its own vendor event only
//! where the application's event needs one (a profiling queue), else by a barrier's after it.
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
use std::ffi::c_void;
use std::path::Path;
use std::process::Command;

const ROLE: &str = "SP_TRACE_ROLE";
const DIRECT_ROLE: &str = "SP_TRACE_DIRECT_ROLE";
const IDLE_ROLE: &str = "SP_TRACE_IDLE_ROLE";
const BLOCKING_ROLE: &str = "SP_TRACE_BLOCKING_ROLE";
const LEARN_ROLE: &str = "SP_TRACE_LEARN_ROLE";
const TRACKING_ROLE: &str = "SP_TRACE_TRACKING_ROLE";
/// The lone launches of the learning test, and how many of them a GPU queue cuts
/// (`managed::LEARN_ALONE`).
const LEARN_LAUNCHES: u32 = 20;
const LEARN_ALONE: u64 = 16;
/// The long launches of the idle-path test: `LONG_MS` each, timed on the bare vendor first,
/// so that the short one, pushed `PUSH_AFTER_MS` after them, comes while the first runs.
const LONG_ITEMS: usize = 64 * 1024;
const LONG_MS: u64 = 150;
const PUSH_AFTER_MS: u64 = 30;
const SHORT_LAUNCHES: u32 = 40;
/// Launches after those, each by a kernel object of its own (OpenCV's way).
const FRESH_LAUNCHES: u32 = 8;
const N: usize = 64 * 256;
const ITERS: u32 = 400;
const LAUNCHES: u32 = 3;

/// The child: sliced launches of `fill`, checked, then the queue is released.
#[test]
fn child_role() {
    if std::env::var_os(ROLE).is_none() {
        return;
    }
    let (env, k, n) = sliced_fill();
    // The parent checks that the slices tile the launches of this size.
    println!("@items {n}");
    fill_checked(&env, k, n, ITERS, LAUNCHES, false);
    // Env's drop releases the queue: the submitter stops and flushes both files.
}

/// A child's setup: every launch through the FIFO, cut into 200 µs slices; `fill` built on
/// the SoftPreempt platform, and how many items a launch of it covers.
fn sliced_fill() -> (Env, cl_kernel, usize) {
    mc::init("slice = \"always\"\ntarget_slice_us = 200");
    let env = Env::sp();
    let prog = mc::build(&env, &format!("{}{}", mc::MIX_CL, mc::FILL_CL), "")
        .unwrap_or_else(|e| panic!("{e}"));
    let k = env.kernel(prog, "fill");
    let n = mc::sliceable_items(&env, N);
    (env, k, n)
}

/// The child of the completion test: every launch through the FIFO (`slice = "always"`),
/// two of `fill` on `Env`'s profiling queue with the application's event, whose times must
/// span the launch, then two on a queue without profiling, the first with the
/// application's event (waited for), the second without; each result checked.
#[test]
fn tracking_child_role() {
    if std::env::var_os(TRACKING_ROLE).is_none() {
        return;
    }
    let (env, k, n) = sliced_fill();
    let out = env.buffer(n * 4);
    mc::arg(k, 0, out);
    mc::arg(k, 2, ITERS);
    let mut err = 0;
    // SAFETY: the Env's live context and device; default properties.
    let plain = unsafe {
        clCreateCommandQueueWithProperties(env.context, env.device, std::ptr::null(), &mut err)
    };
    ok(err);
    for (q, profiled) in [(env.queue, true), (plain, false)] {
        for seed in 1..=2u32 {
            mc::arg(k, 1, seed);
            let mut ev: cl_event = std::ptr::null_mut();
            let asks = profiled || seed == 1;
            ok(mc::enqueue(
                q,
                k,
                None,
                &[n],
                Some(&[64]),
                &[],
                asks.then_some(&mut ev),
            ));
            if asks {
                // SAFETY: the event just returned.
                ok(unsafe { clWaitForEvents(1, &ev) });
                let status: cl_int = common::info_scalar(|s, v, r| {
                    // SAFETY: the live event; a cl_int answer.
                    unsafe { clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, s, v, r) }
                });
                assert_eq!(status, CL_COMPLETE as cl_int);
                if profiled {
                    let at = |what| -> u64 {
                        common::info_scalar(|s, v, r| {
                            // SAFETY: the live, complete event of a profiling queue.
                            unsafe { clGetEventProfilingInfo(ev, what, s, v, r) }
                        })
                    };
                    let (start, end) =
                        (at(CL_PROFILING_COMMAND_START), at(CL_PROFILING_COMMAND_END));
                    assert!(0 < start && start < end, "times {start}..{end}");
                }
                // SAFETY: ours, released once.
                ok(unsafe { clReleaseEvent(ev) });
            }
            mc::finish(q);
            if let Some(m) = mc::check_fill(&env.read_on::<u32>(q, out, n), 0, seed, ITERS) {
                panic!("results (profiling {profiled}, seed {seed}): {m}");
            }
        }
    }
    // SAFETY: the queue made above, drained.
    ok(unsafe { clReleaseCommandQueue(plain) });
}

/// `launches` launches of `fill` (`k`) over `n` items on `env`'s queue, seeds 1 on, each
/// finished before the next when `one_at_a_time`; then the output is checked.
fn fill_checked(env: &Env, k: cl_kernel, n: usize, iters: u32, launches: u32, one_at_a_time: bool) {
    let out = env.buffer(n * 4);
    mc::arg(k, 0, out);
    mc::arg(k, 2, iters);
    for seed in 1..=launches {
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
        if one_at_a_time {
            mc::finish(env.queue);
        }
    }
    mc::finish(env.queue);
    if let Some(m) = mc::check_fill(&env.read::<u32>(out, n), 0, launches, iters) {
        panic!("results: {m}");
    }
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
    // Then OpenCV's way: a kernel object for each launch, made once the kernel is known to
    // be short, so it records no argument values.
    for seed in 1..=FRESH_LAUNCHES {
        let k = env.kernel(prog, "fill");
        mc::arg(k, 0, out);
        mc::arg(k, 1, seed);
        mc::arg(k, 2, 1u32);
        ok(mc::enqueue(low, k, None, &[64], Some(&[64]), &[], None));
        mc::finish(low);
        // SAFETY: the kernel object made above, released once.
        ok(unsafe { clReleaseKernel(k) });
        if let Some(m) = mc::check_fill(&env.read::<u32>(out, 64), 0, seed, 1) {
            panic!("results: {m}");
        }
    }
    for q in [high, low] {
        // SAFETY: queues this function created.
        ok(unsafe { clReleaseCommandQueue(q) });
    }
}

/// The child of the idle-path test: on a low queue next to an idle high one (so launches
/// not yet measured go through the FIFO), two long launches sent whole, then, while the
/// first runs, a short one.
#[test]
fn idle_child_role() {
    if std::env::var_os(IDLE_ROLE).is_none() {
        return;
    }
    mc::init("slice = \"never\"");
    let iters = long_iters();
    let env = Env::sp();
    let high = mc::priority_queue(&env, CL_QUEUE_PRIORITY_HIGH_KHR);
    let low = mc::priority_queue(&env, CL_QUEUE_PRIORITY_LOW_KHR);
    let prog = mc::build(&env, &format!("{}{}", mc::MIX_CL, mc::FILL_CL), "")
        .unwrap_or_else(|e| panic!("{e}"));
    let (long, short) = (env.kernel(prog, "fill"), env.kernel(prog, "fill"));
    let (a, b) = (env.buffer(LONG_ITEMS * 4), env.buffer(64 * 4));
    mc::arg(long, 0, a);
    mc::arg(long, 2, iters);
    mc::arg(short, 0, b);
    mc::arg(short, 1, 2u32);
    mc::arg(short, 2, 1u32);
    for seed in [3u32, 1] {
        mc::arg(long, 1, seed);
        ok(mc::enqueue(
            low,
            long,
            None,
            &[LONG_ITEMS],
            Some(&[64]),
            &[],
            None,
        ));
    }
    // SAFETY: a queue this function created.
    ok(unsafe { clFlush(low) });
    std::thread::sleep(std::time::Duration::from_millis(PUSH_AFTER_MS));
    ok(mc::enqueue(low, short, None, &[64], Some(&[64]), &[], None));
    mc::finish(low);
    // Their first items only: the host twin of a long launch is slow.
    if let Some(m) = mc::check_fill(&env.read::<u32>(a, 64), 0, 1, iters) {
        panic!("results: {m}");
    }
    if let Some(m) = mc::check_fill(&env.read::<u32>(b, 64), 0, 2, 1) {
        panic!("results: {m}");
    }
    for q in [high, low] {
        // SAFETY: queues this function created.
        ok(unsafe { clReleaseCommandQueue(q) });
    }
}

/// The child of the blocking-transfer test, with control words in a device buffer written
/// through a second queue (as on NVIDIA; `SOFTPREEMPT_TEST_BUFFER_WORDS`) and every launch
/// a yielding run asked to stop at random (`yielding = "chaos"`): while a long launch of
/// queue `a` runs, the same thread reads from queue `b` of the same context, blocking, over
/// and over; then once more after `a` is done. It prints how many reads overlapped the
/// launch (`@reads N`). Each read must give the data, and the launch its results; then
/// twelve more launches on the queue must give theirs.
#[test]
fn blocking_child_role() {
    if std::env::var_os(BLOCKING_ROLE).is_none() {
        return;
    }
    // Before the layer's first look at it (the first OpenCL call comes after).
    std::env::set_var("SOFTPREEMPT_TEST_BUFFER_WORDS", "1");
    mc::init("slice = \"always\"\nyielding = \"chaos\"");
    let env = Env::sp();
    let mut err = CL_SUCCESS;
    // SAFETY: the environment's live context and device.
    let b = unsafe {
        clCreateCommandQueueWithProperties(env.context, env.device, std::ptr::null(), &mut err)
    };
    ok(err);
    let prog = mc::build(&env, &format!("{}{}", mc::MIX_CL, mc::FILL_CL), "")
        .unwrap_or_else(|e| panic!("{e}"));
    let k = env.kernel(prog, "fill");
    let n = LONG_ITEMS;
    let out = env.buffer(n * 4);
    mc::arg(k, 0, out);
    mc::arg(k, 1, 7u32);
    mc::arg(k, 2, ITERS);
    const WORDS: usize = 1024;
    let data: Vec<u32> = (0..WORDS as u32)
        .map(|i| i.wrapping_mul(2_654_435_761))
        .collect();
    let small = env.buffer(WORDS * 4);
    env.write(small, &data);
    let mut ev: cl_event = std::ptr::null_mut();
    ok(mc::enqueue(
        env.queue,
        k,
        None,
        &[n],
        Some(&[64]),
        &[],
        Some(&mut ev),
    ));
    // SAFETY: the environment's queue.
    ok(unsafe { clFlush(env.queue) });
    let mut got = vec![0u32; WORDS];
    let mut read = || {
        got.fill(0);
        // SAFETY: a blocking read of `small` into `got`, on queue `b`.
        ok(unsafe {
            clEnqueueReadBuffer(
                b,
                small,
                CL_TRUE,
                0,
                WORDS * 4,
                got.as_mut_ptr() as *mut c_void,
                0,
                std::ptr::null(),
                std::ptr::null_mut(),
            )
        });
        assert_eq!(got, data, "{}", mc::first_difference(&got, &data));
    };
    let mut reads = 0;
    while mc::status(ev) != CL_COMPLETE as cl_int {
        read();
        reads += 1;
    }
    // SAFETY: the launch's event.
    ok(unsafe { clReleaseEvent(ev) });
    mc::finish(env.queue);
    read();
    println!("@reads {reads}");
    if let Some(m) = mc::check_fill(&env.read::<u32>(out, n), 0, 7, ITERS) {
        panic!("results: {m}");
    }
    // More runs on the queue than its control keeps source words for its writes (8).
    fill_checked(&env, k, 4096, ITERS, 12, false);
    // SAFETY: the queue this function created.
    ok(unsafe { clReleaseCommandQueue(b) });
}

/// The child of the learning test: a lone queue (nothing else registered), treated as a
/// GPU's for cutting (`SOFTPREEMPT_TEST_GPU_PIECES`), launches `fill` of about 50 ms
/// (several default pieces of a CPU device, 8 ms) `LEARN_LAUNCHES` times, one at a time.
#[test]
fn learn_child_role() {
    if std::env::var_os(LEARN_ROLE).is_none() {
        return;
    }
    // At the defaults: yielding launches too. On PoCL a flat entry of `fill` runs several
    // times faster than the kernel itself, and while one timing model learned from both
    // forms, the entry's runs soon called the launches short, and they went direct before
    // the count this test is about (the kernel's own model is now kept apart).
    mc::init("");
    let iters = (long_iters() / 3).max(1);
    let env = Env::sp();
    let prog = mc::build(&env, &format!("{}{}", mc::MIX_CL, mc::FILL_CL), "")
        .unwrap_or_else(|e| panic!("{e}"));
    let k = env.kernel(prog, "fill");
    // Each launch is decided with nothing of the queue in software (commands behind a
    // launch in the FIFO go through it too, to keep their order).
    fill_checked(&env, k, LONG_ITEMS, iters, LEARN_LAUNCHES, true);
}

/// The `iters` that make a `fill` of `LONG_ITEMS` take about `LONG_MS` on the bare vendor.
fn long_iters() -> u32 {
    mc::fill_iters_for(LONG_ITEMS, LONG_MS as f64)
}

/// The parent side of a test with a child role `var`: `None` in the child (where the
/// parent test has nothing to do), else a fresh directory named `tag` for its files.
fn parent_dir(var: &str, tag: &str) -> Option<std::path::PathBuf> {
    if std::env::var_os(var).is_some() {
        return None;
    }
    Some(mc::private_dir(tag))
}

/// Runs this binary's `role` test in a child with `var` set and the trace and profile in
/// `dir`; returns its standard output.
fn run_role(role: &str, var: &str, dir: &Path) -> String {
    run_role_with(role, var, dir, &[])
}

/// [`run_role`] with more variables set in the child.
fn run_role_with(role: &str, var: &str, dir: &Path, vars: &[(&str, &str)]) -> String {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([role, "--exact", "--nocapture", "--test-threads=1"])
        .envs(vars.iter().copied())
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
    let Some(dir) = parent_dir(ROLE, "trace") else {
        return;
    };
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

/// A piece is tracked by its own vendor event only on a queue whose application event
/// needs its times (profiling on, the event asked for); on other queues, with or without
/// the application's event, by a barrier's after it, which keeps NVIDIA's hand-over of the
/// device to another process as prompt as without the layer (`core::managed::completion`).
/// The events and results stay exact either way (the child checks them).
#[test]
fn pieces_carry_their_own_event_only_where_the_application_needs_its_times() {
    let Some(dir) = parent_dir(TRACKING_ROLE, "trace-tracking") else {
        return;
    };
    run_role("tracking_child_role", TRACKING_ROLE, &dir);
    let events = read_trace(&dir.join("traces"));
    let slices: Vec<&Value> = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == "slice")
        .collect();
    // One track per queue, each with one way of tracking its pieces.
    let mut tracks: Vec<(String, u64)> = slices
        .iter()
        .map(|e| {
            let own = e["args"]["own_event"].as_u64().expect("own_event");
            (e["tid"].to_string(), own)
        })
        .collect();
    tracks.sort();
    tracks.dedup();
    let mut owns: Vec<u64> = tracks.iter().map(|t| t.1).collect();
    owns.sort();
    assert_eq!(owns, [0, 1], "two queues, one way each: {tracks:?}");
    // The profiling queue is the first opened, its pieces the first retired.
    assert_eq!(slices[0]["args"]["own_event"], 1, "{:?}", slices[0]);
    assert_eq!(slices.last().unwrap()["args"]["own_event"], 0);
}

/// Below this mean device time (host-observed, per piece through the FIFO, a cold first
/// one left out) the layer calls a CPU device's kernel short and stops recording argument
/// values for its new kernel objects: half of `yielding::MIN_YIELD_NS`
/// (`yielding::note_prediction`). The first piece is left out where it is the longest, as
/// the timing model leaves out a first launch that a later one shows cold
/// (`TimingModel::COLD_FACTOR`): a cold first launch of this 64-item kernel took 3.5 ms
/// (PoCL compiling its work-group function) and alone put the mean of ten pieces at 0.41
/// ms, the others 60 µs; a fresh CI clone's three attempts all had means of 0.32-0.78 ms
/// so. A slow piece later on is not left out, by the model or here: leaving out the
/// longest wherever it was (2.1-3.2 ms at the fifth or second piece, a loaded machine's
/// hiccup) read means of 44-82 µs where the layer's model, rightly, held 250-390, and the
/// test failed in 5 of about 50 runs on PoCL (session 53).
const SHORT_NS: u64 = 250_000;

/// Child runs the direct-launch test may take: one whose FIFO launches took longer than
/// [`SHORT_NS`] (a 64-item kernel on a heavily loaded machine, or one slow piece after the
/// first: see there) is run again.
const DIRECT_ATTEMPTS: usize = 5;

#[test]
fn direct_launches_are_counted_in_the_profile_and_the_trace() {
    let Some(dir) = parent_dir(DIRECT_ROLE, "trace-direct") else {
        return;
    };
    let mut means = Vec::new();
    for attempt in 0..DIRECT_ATTEMPTS {
        let dir = dir.join(format!("attempt-{attempt}"));
        run_role("direct_child_role", DIRECT_ROLE, &dir);
        let mean = check_direct_counts(&dir);
        if mean < SHORT_NS {
            return;
        }
        // The kernel was not short on this machine just then, so the layer rightly kept
        // recording (under two spinning processes on 2 cores it took milliseconds in 3-4
        // runs of 10): what the rest of the test is about did not arise. Again.
        means.push(mean);
    }
    panic!(
        "the kernel never ran short enough for the layer to call it short \
         (mean device ns of its FIFO pieces but a cold first one, each attempt: {means:?})"
    );
}

/// Checks one run of the direct-launch child whose trace and profile are in `dir`, and
/// returns the mean device time of its pieces through the FIFO but a cold first one (see
/// [`SHORT_NS`]); whether new kernel objects stopped recording is checked only where that
/// mean was short.
fn check_direct_counts(dir: &Path) -> u64 {
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
        (SHORT_LAUNCHES + FRESH_LAUNCHES) as u64,
        "{lines:?}"
    );
    // The first kernel object, made before any launch was known, records its argument
    // values (a yielding launch would replay them).
    assert!(count("direct_recorded") > 0, "{lines:?}");
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
    let pieces = count("slices");
    assert!(pieces >= 2, "the model learns from two launches: {lines:?}");
    // The pieces in the order they ran (the trace's slices), to tell a cold first one.
    let mut slices: Vec<(f64, f64)> = events
        .iter()
        .filter(|e| e["cat"] == "slice" && e["name"] == "fill")
        .map(|e| (e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap()))
        .collect();
    assert_eq!(slices.len() as u64, pieces, "{events:?}");
    slices.sort_by(|a, b| a.0.total_cmp(&b.0));
    let ns: Vec<u64> = slices.iter().map(|s| (s.1 * 1e3) as u64).collect();
    let cold_first = ns[0] == *ns.iter().max().unwrap();
    let kept = &ns[usize::from(cold_first)..];
    let mean = kept.iter().sum::<u64>() / kept.len() as u64;
    if mean < SHORT_NS {
        // The ones made once the kernel was known to be short record nothing.
        assert!(count("direct_recorded") < count("direct"), "{lines:?}");
    }
    mean
}

/// Once its FIFO is empty, the submitter retires the pieces in flight before it gives up
/// the device; a command pushed meanwhile reaches the vendor after the piece being waited
/// for, not after all of them (on an H100, an OpenCV block's first FIFO launch waited for
/// every piece of the block before to be retired, 57-61 us each with their release).
#[test]
fn a_command_pushed_while_pieces_retire_reaches_the_vendor_at_once() {
    let Some(dir) = parent_dir(IDLE_ROLE, "trace-idle") else {
        return;
    };
    run_role("idle_child_role", IDLE_ROLE, &dir);
    let events = read_trace(&dir.join("traces"));
    let pieces: Vec<&Value> = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["name"] == "fill")
        .collect();
    assert_eq!(pieces.len(), 3, "one piece per launch: {events:?}");
    let work_groups = |e: &Value| e["args"]["work_groups"].as_u64().unwrap();
    // Trace times are microseconds on the monotonic clock of `submitted_ns`.
    let end_ns = |e: &Value| (e["ts"].as_f64().unwrap() + e["dur"].as_f64().unwrap()) * 1e3;
    let submitted_ns = |e: &Value| e["args"]["submitted_ns"].as_u64().unwrap() as f64;
    let mut long: Vec<&Value> = pieces
        .iter()
        .copied()
        .filter(|e| work_groups(e) > 1)
        .collect();
    long.sort_by(|a, b| end_ns(a).total_cmp(&end_ns(b)));
    let short = pieces.iter().find(|e| work_groups(e) == 1).expect("short");
    assert_eq!(long.len(), 2, "{events:?}");
    assert!(long
        .iter()
        .all(|e| work_groups(e) == (LONG_ITEMS / 64) as u64));
    assert!(
        end_ns(long[0]) - submitted_ns(long[0]) > 2.0 * PUSH_AFTER_MS as f64 * 1e6,
        "the first long launch must outlast the push ({:.1} ms)",
        (end_ns(long[0]) - submitted_ns(long[0])) / 1e6
    );
    // The submitter waited for the first long launch when the short one came, then sent it
    // before it waited for the second.
    assert!(
        submitted_ns(short) < end_ns(long[1]),
        "the short launch reached the vendor {:.3} ms after the long ones completed",
        (submitted_ns(short) - end_ns(long[1])) / 1e6
    );
}

/// While a yielding run whose yield word only a vendor call can write is on the device, a
/// blocking read of another queue of the process waits apart (a "wait" span on that
/// queue's track: NVIDIA would hold the yield-word write behind it); once no run is,
/// blocking reads go to the vendor as made (at most one span per read that overlapped the
/// run, none for the read after it). Whether a run saw its yield word in time is PoCL's
/// affair here (it may run the second queue's write after the kernel); the spans need runs
/// on the device, which is what they count.
#[test]
fn blocking_transfers_beside_a_yielding_run_wait_apart() {
    let Some(dir) = parent_dir(BLOCKING_ROLE, "trace-blocking") else {
        return;
    };
    let out = run_role("blocking_child_role", BLOCKING_ROLE, &dir);
    let reads: usize = out
        .lines()
        .find_map(|l| l.split_once("@reads ").map(|(_, v)| v))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    let events = read_trace(&dir.join("traces"));
    let waits: Vec<&Value> = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == "wait")
        .collect();
    assert!(
        !waits.is_empty(),
        "no read waited apart of {reads}: {events:?}"
    );
    assert!(
        waits.len() <= reads,
        "{} spans for {reads} reads",
        waits.len()
    );
    assert!(
        waits.iter().all(|e| e["tid"] == waits[0]["tid"]),
        "all on queue b's track: {waits:?}"
    );
    // The asked runs' yields, phase by phase: the word's write (without blocking, from the
    // words `Control` keeps) and the time from it to the run's end. No higher client asked
    // here (chaos did), so there is no request phase.
    let phase = |name: &str| -> Vec<&Value> {
        events
            .iter()
            .filter(|e| e["ph"] == "X" && e["cat"] == "yield" && e["name"] == name)
            .collect()
    };
    let writes = phase("yield: the word's write");
    let drains = phase("yield: written to off the device");
    assert!(!writes.is_empty(), "no yield phases: {events:?}");
    // Each asked run has its write; the phase after it is missing only where the write's
    // call returned after the run was seen to end (asked as it ended).
    assert!(
        !drains.is_empty() && drains.len() <= writes.len(),
        "{writes:?} {drains:?}"
    );
    assert!(phase("yield: request to the write").is_empty());
    // Chaos asks half the runs at once: those stop before their last group, and say so.
    assert!(
        writes.iter().any(|e| e["args"]["stopped"] == true),
        "no asked run stopped early: {writes:?}"
    );
}

/// A lone GPU queue cuts only a kernel's first `LEARN_ALONE` long launches into pieces
/// (what they teach plans its launches once a higher priority comes), then sends them
/// straight to the vendor: on an H200 tinygrad's lone training process kept 0.93 of its
/// bare throughput when every long launch was cut, with every command behind it sent
/// through the submitter.
#[test]
fn a_lone_gpu_queue_cuts_only_the_launches_that_teach() {
    let Some(dir) = parent_dir(LEARN_ROLE, "trace-learn") else {
        return;
    };
    run_role_with(
        "learn_child_role",
        LEARN_ROLE,
        &dir,
        &[("SOFTPREEMPT_TEST_GPU_PIECES", "1")],
    );
    let lines = read_profile(&dir.join("profile.jsonl"));
    let fill: Vec<&Value> = lines.iter().filter(|l| l["kernel"] == "fill").collect();
    assert_eq!(fill.len(), 1, "{lines:?}");
    // Through the FIFO (cut into pieces), then direct.
    assert_eq!(fill[0]["launches"].as_u64(), Some(LEARN_ALONE), "{lines:?}");
    assert_eq!(
        fill[0]["direct"].as_u64(),
        Some(u64::from(LEARN_LAUNCHES) - LEARN_ALONE),
        "{lines:?}"
    );
    assert!(
        fill[0]["slices"].as_u64().unwrap() > LEARN_ALONE,
        "the learning launches are cut into pieces: {lines:?}"
    );
}
