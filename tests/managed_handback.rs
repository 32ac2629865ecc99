//! Issue 12 (hand-back): a high-priority direct command's demand ends as soon as the
//! application sees the command complete, not when the vendor's completion callback gets
//! round to it (NVIDIA delivers those milliseconds late, and until then every lower
//! priority stays off an idle device). Shown through the arbiter's statistics: right
//! after `clWaitForEvents`, `clFinish`, a status poll that reads `CL_COMPLETE` or a
//! blocking read behind the command on its in-order queue, the high client no longer
//! demands the device. The layer's test hook
//! `SOFTPREEMPT_TEST_LATE_CALLBACK_MS` makes PoCL's callbacks as late as NVIDIA's, so the
//! callback alone cannot pass the test.

mod common;
mod managed_common;

use common::{ok, Env};
use managed_common as mc;
use opencl_sys::*;

/// No linger, so a client whose demand ended reads `idle` at once.
const SCHED: &str = "hp_linger_us = 0";

/// The high client's state, as `softpreempt status` shows it.
fn high_state(dir: &std::path::Path) -> String {
    mc::clients_at(dir, "high")
        .into_iter()
        .next()
        .map(|c| c.state.as_str().to_string())
        .unwrap_or_else(|| panic!("no high client: {}", mc::describe(dir)))
}

#[test]
fn demand_ends_when_the_application_sees_completion() {
    std::env::set_var("SOFTPREEMPT_TEST_LATE_CALLBACK_MS", "2000");
    let dir = mc::init(SCHED);
    let _g = mc::serial();
    let env = Env::sp();
    // A registered low queue: the high queue's direct commands are then watched.
    let low = mc::priority_queue(&env, CL_QUEUE_PRIORITY_LOW_KHR);
    let high = mc::priority_queue(&env, CL_QUEUE_PRIORITY_HIGH_KHR);
    let prog = mc::build(&env, &format!("{}{}", mc::MIX_CL, mc::FILL_CL), "")
        .unwrap_or_else(|e| panic!("{e}"));
    let k = env.kernel(prog, "fill");
    let out = env.buffer(256 * 4);
    mc::arg(k, 0, out);
    mc::arg(k, 1, 7u32);
    mc::arg(k, 2, 1000u32);
    let launch = || {
        let mut ev = std::ptr::null_mut();
        ok(mc::enqueue(
            high,
            k,
            None,
            &[256],
            Some(&[64]),
            &[],
            Some(&mut ev),
        ));
        ev
    };
    // The kernel's first launch goes through the submitter (it teaches the timing model
    // that the launch is short); the ones after it go direct, which is what is tested.
    let first = launch();
    mc::finish(high);
    // SAFETY: our event, released once.
    ok(unsafe { clReleaseEvent(first) });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while high_state(dir) != "idle" {
        assert!(
            std::time::Instant::now() < deadline,
            "the submitter never retired the first launch\n{}",
            mc::describe(dir)
        );
        std::thread::yield_now();
    }
    let mut back = [0u32; 4];
    for i in 0..40 {
        let ev = launch();
        match i % 4 {
            // SAFETY: one live event.
            0 => ok(unsafe { clWaitForEvents(1, &ev) }),
            1 => mc::finish(high),
            2 => while mc::status(ev) != CL_COMPLETE {},
            // A blocking read behind it on the in-order queue: the launch is complete
            // when the read returns (an OpenCV request ends so, in `UMat::get`).
            // SAFETY: a live buffer of 256 u32, read into a local array of 4.
            _ => ok(unsafe {
                clEnqueueReadBuffer(
                    high,
                    out,
                    CL_TRUE,
                    0,
                    std::mem::size_of_val(&back),
                    back.as_mut_ptr().cast(),
                    0,
                    std::ptr::null(),
                    std::ptr::null_mut(),
                )
            }),
        }
        let state = high_state(dir);
        assert!(
            state == "idle" || state == "lingering",
            "launch {i}: the high client still demands the device after its command was \
             seen complete ({state})\n{}",
            mc::describe(dir)
        );
        // SAFETY: our event, released once.
        ok(unsafe { clReleaseEvent(ev) });
    }
    for q in [high, low] {
        // SAFETY: queues the test owns.
        ok(unsafe { clReleaseCommandQueue(q) });
    }
}
