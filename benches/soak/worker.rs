//! The verified OpenCL client that every scenario runs: two kernels per iteration, both
//! checked exactly on the host. `fill` reads only `get_global_id` (sliced as is); `geo`
//! reads `get_group_id`, `get_local_id` and `get_num_groups`, so a sliced launch goes
//! through the kernel rewrite. A buffer written by the host before each iteration and read
//! back after it puts transfers between the launches. Progress goes to the parent as
//! `@soak progress=N` after each verified iteration; a wrong value is `@soak wrong=...`
//! and exit status 3.

use crate::common::{self, Env};
use crate::managed_common::{mix, MIX_CL};
use crate::procs::{say, stop_flag};
use opencl_sys::*;
use serde::{Deserialize, Serialize};
use std::ffi::CString;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// What a worker runs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Spec {
    /// Through SoftPreempt (else the bare vendor platform).
    pub sp: bool,
    /// Iterations to run; `None`: until stdin closes.
    pub iterations: Option<u64>,
    /// Work-items per launch (a multiple of 64).
    pub items: usize,
    /// Loop length of the integer mix per work-item (launch length).
    pub iters: u32,
    /// Seed of this worker's data.
    pub seed: u32,
}

impl Spec {
    /// A worker through SoftPreempt.
    pub fn sp(iterations: Option<u64>, items: usize, iters: u32, seed: u32) -> Spec {
        Spec {
            sp: true,
            iterations,
            items,
            iters,
            seed,
        }
    }
}

const LOCAL: usize = 64;

/// The two kernels, after `managed_common::MIX_CL` (the integer mix, host twin `mix`).
const KERNELS: &str = r#"
__kernel void fill(__global uint* out, uint seed, uint iters) {
    size_t i = get_global_id(0);
    out[i] = mix((uint)i ^ seed, iters);
}
__kernel void geo(__global const uint* src, __global uint* out, uint seed, uint iters) {
    size_t g = get_global_id(0);
    uint v = (uint)get_group_id(0) * 1000003u + (uint)get_local_id(0);
    out[g] = src[g] ^ mix(v ^ seed, iters) ^ ((uint)get_num_groups(0) << 20);
}
"#;

fn die(what: &str, rc: cl_int) -> ! {
    eprintln!("soak worker: {what} failed with {rc}");
    std::process::exit(4);
}

fn check(what: &str, rc: cl_int) {
    if rc != CL_SUCCESS {
        die(what, rc);
    }
}

/// The platform named `name` (without touching the test helpers' loader set-up: the
/// parent already pointed the loader at the right vendors directory).
pub fn platform(sp: bool) -> cl_platform_id {
    let name = if sp {
        "SoftPreempt".to_string()
    } else {
        common::vendor_name()
    };
    let mut n = 0;
    // SAFETY: two-call pattern with valid out pointers.
    unsafe {
        check(
            "clGetPlatformIDs",
            clGetPlatformIDs(0, std::ptr::null_mut(), &mut n),
        );
        let mut v = vec![std::ptr::null_mut(); n as usize];
        check(
            "clGetPlatformIDs",
            clGetPlatformIDs(n, v.as_mut_ptr(), std::ptr::null_mut()),
        );
        v.into_iter()
            .find(|&p| common::platform_string(p, CL_PLATFORM_NAME) == name)
            .unwrap_or_else(|| {
                eprintln!("soak worker: no '{name}' platform");
                std::process::exit(4)
            })
    }
}

/// Context and in-order queue, announcing the phases (a kill may land in any of them).
pub fn env(sp: bool) -> Env {
    say("phase=platform");
    let p = platform(sp);
    say("phase=context");
    let (device, context) = common::context(p);
    let mut err = 0;
    // The queue registers with the arbiter (and may create the segment).
    say("phase=queue");
    // SAFETY: valid context and device, default properties.
    let queue =
        unsafe { clCreateCommandQueueWithProperties(context, device, std::ptr::null(), &mut err) };
    check("clCreateCommandQueueWithProperties", err);
    Env {
        platform: p,
        device,
        context,
        queue,
    }
}

pub struct Kernels {
    pub fill: cl_kernel,
    pub geo: cl_kernel,
    pub src: cl_mem,
    pub out: cl_mem,
    pub out2: cl_mem,
}

pub fn build(env: &Env, items: usize) -> Kernels {
    say("phase=build");
    let c = CString::new(format!("{MIX_CL}{KERNELS}")).unwrap();
    let ptr = c.as_ptr();
    let mut err = 0;
    // SAFETY: one NUL-terminated source string.
    let prog =
        unsafe { clCreateProgramWithSource(env.context, 1, &ptr, std::ptr::null(), &mut err) };
    check("clCreateProgramWithSource", err);
    // SAFETY: valid program and device.
    let rc = unsafe {
        clBuildProgram(
            prog,
            1,
            &env.device,
            std::ptr::null(),
            None,
            std::ptr::null_mut(),
        )
    };
    check("clBuildProgram", rc);
    say("phase=kernels");
    let kernel = |name: &str| {
        let n = CString::new(name).unwrap();
        let mut err = 0;
        // SAFETY: a built program and a kernel name.
        let k = unsafe { clCreateKernel(prog, n.as_ptr(), &mut err) };
        check("clCreateKernel", err);
        k
    };
    let buffer = || {
        let mut err = 0;
        // SAFETY: a plain device buffer.
        let m = unsafe {
            clCreateBuffer(
                env.context,
                CL_MEM_READ_WRITE,
                items * 4,
                std::ptr::null_mut(),
                &mut err,
            )
        };
        check("clCreateBuffer", err);
        m
    };
    Kernels {
        fill: kernel("fill"),
        geo: kernel("geo"),
        src: buffer(),
        out: buffer(),
        out2: buffer(),
    }
}

fn arg<T>(k: cl_kernel, i: u32, v: &T) {
    // SAFETY: `v` lives for the call and its size is passed.
    let rc = unsafe { clSetKernelArg(k, i, std::mem::size_of::<T>(), v as *const T as _) };
    check("clSetKernelArg", rc);
}

fn launch(env: &Env, k: cl_kernel, items: usize) {
    let (g, l) = ([items], [LOCAL]);
    // SAFETY: one-dimensional sizes from live arrays; no events.
    let rc = unsafe {
        clEnqueueNDRangeKernel(
            env.queue,
            k,
            1,
            std::ptr::null(),
            g.as_ptr(),
            l.as_ptr(),
            0,
            std::ptr::null(),
            std::ptr::null_mut(),
        )
    };
    check("clEnqueueNDRangeKernel", rc);
}

/// One iteration: host data in, both kernels, results out, checked exactly. `Err` names
/// the first wrong value.
pub fn iteration(env: &Env, k: &Kernels, spec: &Spec, round: u64) -> Result<(), String> {
    let n = spec.items;
    let seed = spec.seed ^ (round as u32).wrapping_mul(0x9e37_79b9);
    let src: Vec<u32> = (0..n as u32).map(|i| mix(i ^ seed ^ 0x5555, 1)).collect();
    env.write(k.src, &src);
    arg(k.fill, 0, &k.out);
    arg(k.fill, 1, &seed);
    arg(k.fill, 2, &spec.iters);
    launch(env, k.fill, n);
    arg(k.geo, 0, &k.src);
    arg(k.geo, 1, &k.out2);
    arg(k.geo, 2, &seed);
    arg(k.geo, 3, &spec.iters);
    launch(env, k.geo, n);
    let a: Vec<u32> = env.read(k.out, n);
    let b: Vec<u32> = env.read(k.out2, n);
    let groups = (n / LOCAL) as u32;
    for i in 0..n {
        let want = mix(i as u32 ^ seed, spec.iters);
        if a[i] != want {
            return Err(format!("fill[{i}]={:#x},want={want:#x}", a[i]));
        }
        let (g, l) = ((i / LOCAL) as u32, (i % LOCAL) as u32);
        let want = src[i]
            ^ mix(g.wrapping_mul(1000003).wrapping_add(l) ^ seed, spec.iters)
            ^ (groups << 20);
        if b[i] != want {
            return Err(format!("geo[{i}]={:#x},want={want:#x}", b[i]));
        }
    }
    Ok(())
}

/// The worker role.
pub fn run(spec: &Spec) {
    say("phase=start");
    let stop = stop_flag();
    let env = env(spec.sp);
    let k = build(&env, spec.items);
    say("phase=loop");
    let start = Instant::now();
    let mut done = 0u64;
    // A worker left behind by a dead harness stops within minutes in any case.
    while !stop.load(Ordering::SeqCst) && start.elapsed() < Duration::from_secs(1200) {
        if spec.iterations.is_some_and(|n| done >= n) {
            break;
        }
        if let Err(e) = iteration(&env, &k, spec, done) {
            say(&format!("wrong={e}"));
            std::process::exit(3);
        }
        done += 1;
        say(&format!("progress={done}"));
    }
    say(&format!("slices={} done={done}", own_slices()));
}

/// Slices this process's queues reported to the arbiter (0 on the bare platform). Read
/// before exit: a client's slot is freed, counters and all, when its queue goes.
fn own_slices() -> u64 {
    let Some(dir) = std::env::var_os(crate::procs::SHM_ENV) else {
        return 0;
    };
    let pid = std::process::id();
    softpreempt_sched::list_segments(std::path::Path::new(&dir))
        .unwrap_or_default()
        .iter()
        .filter_map(|p| softpreempt_sched::inspect(p).ok())
        .flat_map(|s| s.clients)
        .filter(|c| c.pid == pid)
        .map(|c| c.slices)
        .sum()
}

/// The fork role: a client with a context and a managed queue forks without exec, in the
/// ways an application might, and goes on working. Each child's fate is reported as
/// `childX=ok|exit:N|signal:N|hung`; the parent must keep producing exact results.
pub fn fork_role(spec: &Spec) {
    say("phase=start");
    let env = env(spec.sp);
    let k = build(&env, spec.items);
    let mut round = 0u64;
    let mut step = |what: &str| {
        if let Err(e) = iteration(&env, &k, spec, round) {
            say(&format!("wrong={what}:{e}"));
            std::process::exit(3);
        }
        round += 1;
        say(&format!("progress={round}"));
    };
    step("before");
    // a: the child leaves at once (_exit: no destructors, as after a failed exec).
    // b: the child lingers 500 ms, holding the inherited descriptors and locks.
    // c: the child runs one launch on the inherited queue (undefined by OpenCL; it must
    //    not hang the parent or the peers, and is bounded by alarm()).
    // d: the child exits through exit(), running atexit handlers and destructors.
    for (name, body) in [
        ("a", ChildBody::ExitNow),
        ("b", ChildBody::Linger),
        ("c", ChildBody::Launch),
        ("d", ChildBody::NormalExit),
    ] {
        // SAFETY: fork; the child only runs `child_body`, which ends in _exit/exit.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            child_body(body, &env, &k, spec);
        }
        if pid < 0 {
            die("fork", -1);
        }
        step(name);
        step(name);
        let mut status = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        let fate = if libc::WIFSIGNALED(status) {
            if libc::WTERMSIG(status) == libc::SIGALRM {
                "hung".to_string()
            } else {
                format!("signal:{}", libc::WTERMSIG(status))
            }
        } else {
            match libc::WEXITSTATUS(status) {
                0 => "ok".to_string(),
                c => format!("exit:{c}"),
            }
        };
        say(&format!("child{name}={fate}"));
        step(name);
    }
    say(&format!("done={round}"));
}

#[derive(Clone, Copy)]
enum ChildBody {
    ExitNow,
    Linger,
    Launch,
    NormalExit,
}

fn child_body(body: ChildBody, env: &Env, k: &Kernels, spec: &Spec) -> ! {
    // A child stuck past the alarm dies of SIGALRM ("hung"). The launching child gets
    // less: on PoCL it blocks for good in the vendor's first blocking call (the driver's
    // worker threads do not exist in a forked child), on the bare driver as well.
    let limit = if matches!(body, ChildBody::Launch) {
        5
    } else {
        20
    };
    // SAFETY: alarm only arms a timer.
    unsafe { libc::alarm(limit) };
    match body {
        ChildBody::ExitNow => {}
        ChildBody::Linger => std::thread::sleep(Duration::from_millis(500)),
        ChildBody::Launch => {
            let code = match iteration(env, k, spec, 1000) {
                Ok(()) => 0,
                Err(_) => 3,
            };
            // SAFETY: leave without running the parent's destructors twice.
            unsafe { libc::_exit(code) };
        }
        ChildBody::NormalExit => std::process::exit(0),
    }
    // SAFETY: as above.
    unsafe { libc::_exit(0) }
}
