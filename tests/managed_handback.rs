//! Issue 12 (hand-back) and issue 24: a high-priority direct command's demand ends as soon
//! as the application sees the command complete, not when a vendor completion callback
//! gets round to it (NVIDIA delivers those milliseconds late, and until then every lower
//! priority stays off an idle device), and the layer asks the vendor for no event or
//! callback to learn it. Shown through the arbiter's statistics, with a lower client busy
//! throughout: right after `clWaitForEvents`, `clFinish`, a status poll that reads
//! `CL_COMPLETE`, a blocking read behind the command on its in-order queue, or the
//! application's own completion callback, the high client no longer demands the device;
//! and a command the application never synchronises with still ends its demand (the
//! layer's fallback). The layer's test hook `SOFTPREEMPT_TEST_LATE_CALLBACK_MS` makes
//! any callback of the layer's own a minute late, so such a callback cannot pass these
//! tests.

mod common;
mod managed_common;

use common::{ok, Env};
use managed_common as mc;
use opencl_sys::*;

/// No linger, so a client whose demand ended reads `idle` at once.
const SCHED: &str = "hp_linger_us = 0";

/// How late the layer's own completion callbacks are handled (the test hook).
const LATE_MS: &str = "60000";

/// The high client's demand flag, as `softpreempt status` shows it.
fn high_demands(dir: &std::path::Path) -> bool {
    mc::clients_at(dir, "high").into_iter().any(|c| c.demand)
}

/// A low queue kept busy for the whole test: a launch of about three seconds of work,
/// which the layer cuts into pieces that hold back while the high queue demands the
/// device, so a lower client is busy (demand, pieces in flight) at every high command,
/// and each one is watched. Returns the queue and the launch's event.
fn busy_low(env: &common::Env, prog: cl_program) -> (cl_command_queue, cl_event) {
    let items = mc::sliceable_items(env, 1 << 14);
    let iters = mc::fill_iters_for(items, 3000.0);
    let low = mc::priority_queue(env, CL_QUEUE_PRIORITY_LOW_KHR);
    let k = env.kernel(prog, "fill");
    mc::arg(k, 0, env.buffer(items * 4));
    mc::arg(k, 1, 5u32);
    mc::arg(k, 2, iters);
    let mut ev = std::ptr::null_mut();
    ok(mc::enqueue(
        low,
        k,
        None,
        &[items],
        Some(&[64]),
        &[],
        Some(&mut ev),
    ));
    // SAFETY: a live queue.
    ok(unsafe { clFlush(low) });
    (low, ev)
}

/// The busy low launch outlasted what was tested (else the test proved nothing).
fn still_busy(low_ev: cl_event, dir: &std::path::Path) {
    assert_ne!(
        mc::status(low_ev),
        CL_COMPLETE,
        "the low launch ended before the test did: make it longer\n{}",
        mc::describe(dir)
    );
}

/// The high queue's fill kernel, its output set and its first two launches (which go
/// through the submitter to teach the timing model that the launch is short: a model
/// resting on the first launch alone sends nothing direct) retired, so the launches after
/// them go direct, which is what is tested.
fn high_fill(
    env: &common::Env,
    dir: &std::path::Path,
    high: cl_command_queue,
    prog: cl_program,
) -> (cl_kernel, cl_mem) {
    let k = env.kernel(prog, "fill");
    let out = env.buffer(256 * 4);
    mc::arg(k, 0, out);
    mc::arg(k, 1, 7u32);
    mc::arg(k, 2, 1000u32);
    for _ in 0..2 {
        ok(mc::enqueue(high, k, None, &[256], Some(&[64]), &[], None));
        mc::finish(high);
    }
    mc::eventually(
        "the submitter retires the first launches",
        std::time::Duration::from_secs(10),
        || high_state(dir) == "idle",
    );
    (k, out)
}

/// The high client's state, as `softpreempt status` shows it.
fn high_state(dir: &std::path::Path) -> String {
    mc::clients_at(dir, "high")
        .into_iter()
        .next()
        .map(|c| c.state.as_str().to_string())
        .unwrap_or_else(|| panic!("no high client: {}", mc::describe(dir)))
}

/// One test's objects: the high queue (with its fill kernel and output, once the kernel's
/// first launch retired, when asked), and the busy low queue with its launch's event.
struct Pair {
    dir: &'static std::path::Path,
    _serial: std::sync::MutexGuard<'static, ()>,
    env: Env,
    high: cl_command_queue,
    fill: Option<(cl_kernel, cl_mem)>,
    low: cl_command_queue,
    low_ev: cl_event,
}

fn pair(with_fill: bool) -> Pair {
    std::env::set_var("SOFTPREEMPT_TEST_LATE_CALLBACK_MS", LATE_MS);
    let dir = mc::init(SCHED);
    let serial = mc::serial();
    let env = Env::sp();
    let prog = mc::build(&env, &format!("{}{}", mc::MIX_CL, mc::FILL_CL), "")
        .unwrap_or_else(|e| panic!("{e}"));
    let high = mc::priority_queue(&env, CL_QUEUE_PRIORITY_HIGH_KHR);
    let fill = with_fill.then(|| high_fill(&env, dir, high, prog));
    let (low, low_ev) = busy_low(&env, prog);
    Pair {
        dir,
        _serial: serial,
        env,
        high,
        fill,
        low,
        low_ev,
    }
}

impl Pair {
    /// The high fill launch of [`pair`]`(true)`, with its event.
    fn launch(&self) -> cl_event {
        let (k, _) = self.fill.expect("made with the fill kernel");
        let mut ev = std::ptr::null_mut();
        ok(mc::enqueue(
            self.high,
            k,
            None,
            &[256],
            Some(&[64]),
            &[],
            Some(&mut ev),
        ));
        ev
    }

    /// Checks that the low launch outlasted the test, then releases everything.
    fn end(self) {
        still_busy(self.low_ev, self.dir);
        mc::finish(self.low);
        // SAFETY: objects the test owns, released once.
        unsafe {
            ok(clReleaseEvent(self.low_ev));
            ok(clReleaseCommandQueue(self.high));
            ok(clReleaseCommandQueue(self.low));
        }
    }
}

#[test]
fn demand_ends_when_the_application_sees_completion() {
    let p = pair(true);
    let (dir, high) = (p.dir, p.high);
    let (_, out) = p.fill.expect("the fill kernel");
    let mut back = [0u32; 4];
    let mut raised = 0;
    for i in 0..40 {
        let ev = p.launch();
        // Usually seen: the launch is watched (a lower client is busy). Not asserted
        // each time: a descheduled test thread may look after the bound ended it.
        raised += usize::from(high_demands(dir));
        match i % 4 {
            // SAFETY: one live event.
            0 => ok(unsafe { clWaitForEvents(1, &ev) }),
            1 => mc::finish(high),
            2 => while mc::status(ev) != CL_COMPLETE {},
            // A blocking read behind it on the in-order queue: the launch is complete
            // when the read returns (an OpenCV request ends so, in `UMat::get`), and so
            // is the read itself, whose own demand ends with it.
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
    assert!(
        raised > 0,
        "no high launch raised demand: nothing was tested\n{}",
        mc::describe(dir)
    );
    p.end();
}

/// The application's completion callback on its event ends the command's demand before
/// the application hears of it.
#[test]
fn demand_ends_at_the_application_s_completion_callback() {
    let p = pair(true);
    /// What the callback saw: 1 once it ran, 2 if the high client still demanded then.
    static SEEN: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    static DIR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| p.dir.to_path_buf());
    extern "C" fn done(_e: cl_event, _status: cl_int, _data: *mut std::ffi::c_void) {
        let still = high_demands(DIR.get().expect("set before the launch"));
        SEEN.store(
            if still { 2 } else { 1 },
            std::sync::atomic::Ordering::SeqCst,
        );
    }
    for i in 0..10 {
        SEEN.store(0, std::sync::atomic::Ordering::SeqCst);
        let ev = p.launch();
        // SAFETY: a live event; a callback that outlives it (a plain function).
        ok(unsafe {
            clSetEventCallback(ev, CL_COMPLETE as cl_int, Some(done), std::ptr::null_mut())
        });
        // SAFETY: a live queue.
        ok(unsafe { clFlush(p.high) });
        mc::eventually(
            "the completion callback runs",
            std::time::Duration::from_secs(20),
            || SEEN.load(std::sync::atomic::Ordering::SeqCst) != 0,
        );
        assert_eq!(
            SEEN.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "launch {i}: the high client still demanded the device when the application's \
             callback heard its command complete\n{}",
            mc::describe(p.dir)
        );
        // SAFETY: our event, released once.
        ok(unsafe { clReleaseEvent(ev) });
    }
    p.end();
}

/// A command the application never synchronises with (it is flushed, then left) still
/// ends its demand: the layer's bound ends the demand of a queue that does nothing for a
/// while. Without it, only the layer's own callback (a minute late here) would end it.
#[test]
fn demand_ends_for_a_command_nobody_waits_for() {
    let p = pair(true);
    for _ in 0..5 {
        let ev = p.launch();
        // SAFETY: a live queue; our event, released once.
        ok(unsafe { clFlush(p.high) });
        ok(unsafe { clReleaseEvent(ev) });
        mc::eventually(
            "the demand of an unsynchronised command ends",
            std::time::Duration::from_secs(20),
            || !high_demands(p.dir),
        );
    }
    p.end();
}

/// While the application waits in `clFinish` for a long command, its demand holds, however
/// long the wait: only a queue with no command, synchronisation call or poll for a while
/// has its demand ended without seeing completion.
#[test]
fn demand_holds_while_the_application_waits() {
    let p = pair(false);
    // Long enough to outlast the layer's bound (5 ms) many times over on any machine.
    const BYTES: usize = 512 << 20;
    let big = p.env.buffer(BYTES);
    let pattern = 0x5a5a_5a5au32;
    let mut during = 0;
    for _ in 0..3 {
        let mut ev = std::ptr::null_mut();
        // SAFETY: a live queue and buffer, a 4-byte pattern, a size it divides.
        ok(unsafe {
            clEnqueueFillBuffer(
                p.high,
                big,
                (&pattern as *const u32).cast(),
                4,
                0,
                BYTES,
                0,
                std::ptr::null(),
                &mut ev,
            )
        });
        let ev_addr = ev as usize;
        let watcher = std::thread::spawn(move || {
            let ev = ev_addr as cl_event;
            let mut seen = Vec::new();
            loop {
                std::thread::sleep(std::time::Duration::from_millis(15));
                let demands = high_demands(mc::init(SCHED));
                // Only a look taken while the fill still ran says anything.
                if mc::status(ev) == CL_COMPLETE {
                    return seen;
                }
                seen.push(demands);
            }
        });
        mc::finish(p.high);
        let seen = watcher.join().expect("the watcher thread");
        assert!(
            seen.iter().all(|&d| d),
            "the high client's demand ended while the application waited in clFinish for \
             its fill ({seen:?})\n{}",
            mc::describe(p.dir)
        );
        during += seen.len();
        // SAFETY: our event, released once.
        ok(unsafe { clReleaseEvent(ev) });
    }
    assert!(
        during > 0,
        "no look fell inside a fill: nothing was tested\n{}",
        mc::describe(p.dir)
    );
    mc::release_mems(&[big]);
    p.end();
}
