//! Issue 17: managed queues of one process never deadlock, whatever their cross-queue
//! dependencies. A seeded random program drives three low-priority queues (two in-order,
//! one out-of-order) and one high-priority queue of one context, with `slice = "always"`
//! and a short slice target, so every low launch is deferred and cut into pieces while a
//! higher priority is registered on the device. Its commands wait on each other's events
//! across queues, on user events the program sets only later, and on markers, barriers and
//! `clEnqueueWaitForEvents`; direct commands (non-blocking reads) wait on deferred ones.
//!
//! Every result is checked exactly (each launch writes a fresh buffer, from a seed or from
//! an earlier buffer it waits for), and each program must finish within a generous bound:
//! a hang fails the test (with the seed to replay it) instead of hanging the suite.

mod common;
mod managed_common;

use common::{ok, Env};
use managed_common as mc;
use opencl_sys::*;
use std::ffi::c_void;
use std::time::Duration;

/// Slicing is under test here: yielding launches (the default for kernels the yielding
/// rewrite takes) are off; `tests/managed_yield.rs` has them.
const SCHED: &str = "slice = \"always\"\ntarget_slice_us = 50\nyielding = \"never\"";

/// Items per buffer: 64 work-groups of 64, so a launch is cut into several slices.
const N: usize = 4096;
const ITERS: u32 = 64;

/// A small deterministic generator (xorshift64*), so a failing seed replays exactly.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const KERNELS: &str = r#"
__kernel void inc(__global const uint* in, __global uint* out) {
    size_t i = get_global_id(0);
    out[i] = in[i] + 1u;
}
"#;

/// What the program has made so far.
struct World {
    queues: Vec<cl_command_queue>,
    /// Every event so far (command and user events), any queue.
    events: Vec<cl_event>,
    /// User events not yet set.
    unset: Vec<cl_event>,
    /// Buffers with their producing event and expected contents.
    buffers: Vec<(cl_mem, cl_event, Vec<u32>)>,
    /// Non-blocking reads: host memory, the expected contents.
    reads: Vec<(Box<[u32]>, Vec<u32>)>,
}

fn queue(env: &Env, props: &[cl_queue_properties]) -> cl_command_queue {
    let mut err = 0;
    // SAFETY: a live context and device, a zero-terminated property list.
    let q = unsafe {
        clCreateCommandQueueWithProperties(env.context, env.device, props.as_ptr(), &mut err)
    };
    ok(err);
    q
}

/// Three low queues and one high, or four plain ones where `hints` is false (bare PoCL
/// has no cl_khr_priority_hints).
fn queues(env: &Env, hints: bool) -> Vec<cl_command_queue> {
    let ooo = CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE as cl_queue_properties;
    let hint = |level: cl_queue_properties| {
        if hints {
            vec![CL_QUEUE_PRIORITY_KHR as cl_queue_properties, level]
        } else {
            Vec::new()
        }
    };
    let mut high = hint(CL_QUEUE_PRIORITY_HIGH_KHR as cl_queue_properties);
    high.push(0);
    let low = |extra: &[cl_queue_properties]| {
        let mut p = hint(CL_QUEUE_PRIORITY_LOW_KHR as cl_queue_properties);
        p.extend_from_slice(extra);
        p.push(0);
        p
    };
    vec![
        queue(env, &low(&[])),
        queue(env, &low(&[])),
        queue(
            env,
            &low(&[CL_QUEUE_PROPERTIES as cl_queue_properties, ooo]),
        ),
        queue(env, &high),
    ]
}

/// Up to three events picked from everything made so far.
fn pick_waits(w: &World, rng: &mut Rng) -> Vec<cl_event> {
    let mut v = Vec::new();
    for _ in 0..rng.below(4) {
        if w.events.is_empty() {
            break;
        }
        let e = w.events[rng.below(w.events.len())];
        if !v.contains(&e) {
            v.push(e);
        }
    }
    v
}

fn ptr(v: &[cl_event]) -> *const cl_event {
    if v.is_empty() {
        std::ptr::null()
    } else {
        v.as_ptr()
    }
}

/// One random program of `steps` commands; panics on a wrong result. Returns the slices
/// its queues submitted (read from the arbiter before they are released).
fn program(env: &Env, fill: cl_kernel, inc: cl_kernel, seed: u64, steps: usize) -> (u64, u64) {
    let mut rng = Rng::new(seed);
    let bare = env.platform == common::bare_platform();
    let mut w = World {
        queues: queues(env, !bare),
        events: Vec::new(),
        unset: Vec::new(),
        buffers: Vec::new(),
        reads: Vec::new(),
    };
    for _ in 0..steps {
        let q = w.queues[rng.below(w.queues.len())];
        let mut waits = pick_waits(&w, &mut rng);
        let mut ev: cl_event = std::ptr::null_mut();
        match rng.below(100) {
            // A launch from a seed into a fresh buffer.
            0..=29 => {
                let out = env.buffer(N * 4);
                let s = rng.next() as u32;
                mc::arg(fill, 0, out);
                mc::arg(fill, 1, s);
                mc::arg(fill, 2, ITERS);
                ok(mc::enqueue(
                    q,
                    fill,
                    None,
                    &[N],
                    Some(&[64]),
                    &waits,
                    Some(&mut ev),
                ));
                w.buffers.push((out, ev, mc::fill_expected(N, s, ITERS)));
            }
            // A launch reading an earlier buffer (waiting for it) into a fresh one.
            30..=49 if !w.buffers.is_empty() => {
                let (src, dep, ref want) = w.buffers[rng.below(w.buffers.len())];
                let want: Vec<u32> = want.iter().map(|x| x.wrapping_add(1)).collect();
                waits.push(dep);
                let out = env.buffer(N * 4);
                mc::arg(inc, 0, src);
                mc::arg(inc, 1, out);
                ok(mc::enqueue(
                    q,
                    inc,
                    None,
                    &[N],
                    Some(&[64]),
                    &waits,
                    Some(&mut ev),
                ));
                w.buffers.push((out, ev, want));
            }
            // A user event, set some steps later.
            50..=57 => {
                let mut err = 0;
                // SAFETY: a live context.
                ev = unsafe { clCreateUserEvent(env.context, &mut err) };
                ok(err);
                w.unset.push(ev);
            }
            58..=67 if !w.unset.is_empty() => {
                let u = w.unset.swap_remove(rng.below(w.unset.len()));
                // SAFETY: a user event of ours, set once.
                ok(unsafe { clSetUserEventStatus(u, CL_COMPLETE as cl_int) });
                continue;
            }
            // Markers and barriers with wait lists.
            68..=74 => {
                // SAFETY: a live queue, a live wait list, an event out-pointer.
                ok(unsafe {
                    clEnqueueMarkerWithWaitList(q, waits.len() as cl_uint, ptr(&waits), &mut ev)
                });
            }
            75..=79 => {
                // SAFETY: as above.
                ok(unsafe {
                    clEnqueueBarrierWithWaitList(q, waits.len() as cl_uint, ptr(&waits), &mut ev)
                });
            }
            // Bare PoCL aborts on the 1.1 call; its 1.2 equivalent stands in there.
            80..=83 if !waits.is_empty() && bare => {
                // SAFETY: a live queue and wait list.
                ok(unsafe {
                    clEnqueueBarrierWithWaitList(
                        q,
                        waits.len() as cl_uint,
                        waits.as_ptr(),
                        std::ptr::null_mut(),
                    )
                });
                continue;
            }
            80..=83 if !waits.is_empty() => {
                // SAFETY: a live queue and a non-empty list of live events (the 1.1 call
                // takes a mutable pointer but does not write through it).
                #[allow(deprecated)]
                ok(unsafe {
                    clEnqueueWaitForEvents(q, waits.len() as cl_uint, waits.as_mut_ptr())
                });
                continue;
            }
            // A direct command (non-blocking read) waiting on a deferred one.
            84..=93 if !w.buffers.is_empty() => {
                let (src, dep, ref want) = w.buffers[rng.below(w.buffers.len())];
                let want = want.clone();
                waits.push(dep);
                let mut host = vec![0u32; N].into_boxed_slice();
                // SAFETY: a live queue and buffer; `host` stays alive (in `w.reads`, never
                // moved: a boxed slice) until the queues finish.
                ok(unsafe {
                    clEnqueueReadBuffer(
                        q,
                        src,
                        CL_FALSE,
                        0,
                        N * 4,
                        host.as_mut_ptr() as *mut c_void,
                        waits.len() as cl_uint,
                        ptr(&waits),
                        &mut ev,
                    )
                });
                w.reads.push((host, want));
            }
            _ => {
                // SAFETY: a live queue.
                ok(unsafe { clFlush(q) });
                continue;
            }
        }
        w.events.push(ev);
    }
    // Whatever is still waiting on a user event can run now.
    for u in w.unset.drain(..) {
        // SAFETY: a user event of ours, set once.
        ok(unsafe { clSetUserEventStatus(u, CL_COMPLETE as cl_int) });
    }
    for &q in &w.queues {
        mc::finish(q);
    }
    for (i, &e) in w.events.iter().enumerate() {
        let kind: cl_command_type = common::info_scalar(|s, v, r| unsafe {
            clGetEventInfo(e, CL_EVENT_COMMAND_TYPE, s, v, r)
        });
        assert_eq!(
            mc::status(e),
            CL_COMPLETE,
            "event {i} (seed {seed}), command type {kind:#x}"
        );
    }
    for (i, (m, _, want)) in w.buffers.iter().enumerate() {
        let got: Vec<u32> = env.read(*m, N);
        assert!(
            got == *want,
            "buffer {i} (seed {seed}): {}",
            mc::first_difference(&got, want)
        );
    }
    for (i, (got, want)) in w.reads.iter().enumerate() {
        assert!(
            got[..] == want[..],
            "read {i} (seed {seed}): {}",
            mc::first_difference(got, want)
        );
    }
    // Read before the queues go: their clients' statistics go with them.
    let dir = mc::init(SCHED);
    let mine = mc::clients_of(dir, std::process::id());
    let done = (
        mc::sum_of(&mine, None, |c| c.slices),
        mc::sum_of(&mine, None, |c| c.yields_done),
    );
    for e in w.events {
        // SAFETY: events the program owns, released once.
        ok(unsafe { clReleaseEvent(e) });
    }
    mc::release_mems(&w.buffers.iter().map(|b| b.0).collect::<Vec<_>>());
    for q in w.queues {
        // SAFETY: queues the program owns.
        ok(unsafe { clReleaseCommandQueue(q) });
    }
    done
}

/// The context and kernels, handed to the watchdog threads. The kernels' arguments are
/// set by one program at a time (the programs run one after another).
#[derive(Clone, Copy)]
struct Shared(&'static Env, cl_kernel, cl_kernel);
// SAFETY: OpenCL handles may be used from any thread; one program uses them at a time.
unsafe impl Send for Shared {}

/// Runs `f` in a thread and fails if it does not return within `limit` (a liveness bound:
/// every program here takes well under a second on the bare driver).
fn within(limit: Duration, what: String, f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        let _ = tx.send(r);
    });
    match rx.recv_timeout(limit) {
        Ok(Ok(())) => {}
        Ok(Err(p)) => std::panic::resume_unwind(p),
        Err(_) => panic!("{what}: no progress within {limit:?} (a deadlock)"),
    }
}

/// The same programs with yielding launches at random moments (issue 23's chaos setting):
/// every launch of an in-order queue runs as persistent groups that are asked to stop at a
/// random moment and resume from their ticket. Run in a child process of this binary,
/// which is configured once per process.
const CHAOS_SCHED: &str = "slice = \"always\"\ntarget_slice_us = 50\nyielding = \"chaos\"";
/// Set in that child.
const CHAOS_ENV: &str = "SOFTPREEMPT_TEST_STRESS_CHAOS";

#[test]
fn cross_queue_dependencies_never_deadlock() {
    let dir = mc::init(SCHED);
    let (slices, _) = stress(40);
    // The programs really ran through the scheduler: pieces were cut and granted.
    assert!(slices > 0, "{}", mc::describe(dir));
}

#[test]
fn cross_queue_dependencies_never_deadlock_while_launches_yield() {
    const NAME: &str = "cross_queue_dependencies_never_deadlock_while_launches_yield";
    if std::env::var_os(CHAOS_ENV).is_none() {
        mc::run_child(NAME, (CHAOS_ENV, "1".as_ref()), "yields done: ");
        return;
    }
    mc::init(CHAOS_SCHED);
    let (_, yields) = stress(30);
    // Yields happened (the persistent entries build on a thread, so the first launches
    // are sliced): launches stopped on request and resumed with exact results.
    assert!(yields > 0, "no launch yielded");
    println!("yields done: {yields}");
}

/// Runs `seeds` random programs (SOFTPREEMPT_STRESS_SEEDS overrides) through SoftPreempt
/// and a few on the bare driver; returns the pieces the scheduler cut and the yields done.
fn stress(seeds: u64) -> (u64, u64) {
    let _g = mc::serial();
    let seeds: u64 = std::env::var("SOFTPREEMPT_STRESS_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(seeds);
    // Leaked: the programs run in watchdog threads, and a hung one may outlive the test.
    let env: &'static Env = Box::leak(Box::new(Env::sp()));
    let prog = mc::build(env, &format!("{}{}{KERNELS}", mc::MIX_CL, mc::FILL_CL), "")
        .unwrap_or_else(|e| panic!("{e}"));
    let kernels = Shared(env, env.kernel(prog, "fill"), env.kernel(prog, "inc"));
    let totals = std::sync::Arc::new(std::sync::Mutex::new((0, 0)));
    for seed in 0..seeds {
        let what = format!("seed {seed} (SOFTPREEMPT_STRESS_SEEDS replays from 0)");
        let totals = totals.clone();
        within(Duration::from_secs(60), what, move || {
            let Shared(env, fill, inc) = { kernels };
            let (slices, yields) = program(env, fill, inc, seed, 60);
            let mut t = totals.lock().unwrap();
            *t = (t.0 + slices, t.1 + yields);
        });
    }
    // The programs are legal OpenCL: the bare driver runs them too (a few seeds suffice).
    let bare: &'static Env = Box::leak(Box::new(Env::new(common::bare_platform())));
    let prog = mc::build(bare, &format!("{}{}{KERNELS}", mc::MIX_CL, mc::FILL_CL), "")
        .unwrap_or_else(|e| panic!("{e}"));
    let kernels = Shared(bare, bare.kernel(prog, "fill"), bare.kernel(prog, "inc"));
    for seed in 0..seeds.min(5) {
        within(
            Duration::from_secs(60),
            format!("bare, seed {seed}"),
            move || {
                let Shared(env, fill, inc) = { kernels };
                program(env, fill, inc, seed, 60);
            },
        );
    }
    let totals = *totals.lock().unwrap();
    totals
}
