//! CPU devices: a low queue's device threads go to the idle scheduling class when a higher
//! priority arrives even while the low process makes no call at all (its one long launch
//! runs whole on the vendor): the process's watcher thread, which wakes on the arbiter
//! (the higher priority's requests, and its own heartbeat), moves them. Before, only the
//! low queue's next command did, which a long launch could put off for its whole length
//! while the arriving higher priority shared the cores with those threads. Shown through
//! the threads' scheduling policy, never through timing.

mod common;
mod managed_common;

use common::{ok, Env};
use managed_common as mc;
use opencl_sys::*;
use std::time::{Duration, Instant};

const ROLE: &str = "SP_CPU_WATCH_ROLE";
const STOP: &str = "SP_CPU_WATCH_STOP";
/// The low launch, timed on the bare vendor: long enough for the child to start and
/// register on any machine, a small part of the test binary's time.
const LAUNCH_MS: f64 = 4000.0;
const ITEMS: usize = 64 * 1024;

/// Not a test on its own: the high-priority child.
#[test]
fn child_role() {
    mc::high_child(ROLE, STOP);
}

#[test]
fn the_watcher_idles_the_threads_while_the_low_queue_is_inside_a_long_launch() {
    if std::env::var(ROLE).is_ok() {
        return;
    }
    // Whole launches: nothing of the layer's runs in this process during the launch but
    // the watcher (no FIFO, no submitter, no yielding run).
    let dir = mc::init("slice = \"never\"\nyielding = \"never\"");
    let mut env = Env::sp();
    if mc::is_gpu(&env) {
        return; // a GPU's kernels run on no thread of ours
    }
    let iters = mc::fill_iters_for(ITEMS, LAUNCH_MS);
    env.close_queue();
    let low = mc::priority_queue(&env, CL_QUEUE_PRIORITY_LOW_KHR);
    let prog = mc::build(&env, &format!("{}{}", mc::MIX_CL, mc::FILL_CL), "")
        .unwrap_or_else(|e| panic!("{e}"));
    let k = env.kernel(prog, "fill");
    let out = env.buffer(ITEMS * 4);
    mc::arg(k, 0, out);
    mc::arg(k, 1, 7u32);
    mc::arg(k, 2, iters);
    let mut ev: cl_event = std::ptr::null_mut();
    ok(mc::enqueue(
        low,
        k,
        None,
        &[ITEMS],
        Some(&[64]),
        &[],
        Some(&mut ev),
    ));
    // SAFETY: a flush of the queue this test owns.
    ok(unsafe { clFlush(low) });
    assert_eq!(
        mc::idle_threads(),
        0,
        "alone, the device threads stay ordinary"
    );

    let stop = dir.join("cpu-watch-stop");
    let _ = std::fs::remove_file(&stop);
    let mut high = mc::spawn_high("child_role", ROLE, STOP, &stop);
    let mut idle_during = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline && mc::status(ev) != CL_COMPLETE as cl_int {
        let registered = mc::all_clients(dir).iter().any(|c| mc::at_level(c, "high"));
        if registered {
            idle_during = idle_during.max(mc::idle_threads());
            if idle_during > 0 {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let still_running = mc::status(ev) != CL_COMPLETE as cl_int;
    mc::finish(low);
    std::fs::write(&stop, b"").unwrap();
    assert!(high.wait().unwrap().success(), "high-priority child failed");
    assert!(
        idle_during > 0,
        "the device threads stayed ordinary while the low launch ran next to the registered \
         higher priority (launch still running at the end of the wait: {still_running})\n{}",
        mc::describe(dir)
    );
    // The watcher, which the higher priority's requests wake, never preempts its thread:
    // it runs in the batch class (`os_priority::no_wakeup_preemption`).
    let watchers: Vec<u32> = mc::thread_policies()
        .into_iter()
        .filter(|(name, _)| name.starts_with("softpreempt-wat"))
        .map(|(_, p)| p)
        .collect();
    assert_eq!(watchers, vec![mc::SCHED_BATCH], "the watcher's policy");
    let got: Vec<u32> = env.read_on(low, out, ITEMS);
    assert_eq!(mc::check_fill(&got, 0, 7, iters), None);
    // SAFETY: objects the test owns.
    unsafe {
        clReleaseEvent(ev);
        clReleaseCommandQueue(low);
    }
}
