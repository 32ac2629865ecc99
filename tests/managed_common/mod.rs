//! Shared set-up for the managed-queue tests (issue 4): one SoftPreempt configuration per
//! test binary (a TOML file named by `SOFTPREEMPT_CONFIG`, written before the process's
//! first OpenCL call), a private arbiter directory per binary, small launch helpers, and
//! readers of the arbiter's statistics (through `softpreempt_sched::inspect`, which reads
//! the segments without registering).
#![allow(dead_code)]

use crate::common;
use opencl_sys::*;
pub use softpreempt_sched::ClientStats;
use softpreempt_sched::{inspect, list_segments};
use std::ffi::{c_void, CString};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// A fresh private directory for arbiter segments, named by the pid. Pids are reused: a
/// directory left by an earlier run of the same pid (its segment, its stop file) is
/// removed first. Leftovers of that kind made `memory_reserve` fail now and then on a
/// machine that had run the suite many times (its children read the old stop file and
/// segment).
pub fn private_dir(tag: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!(
        "softpreempt-managed-{}-{tag}-{n}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes a config file: `version = 1`, then `[sched]` with `shm_dir` and `sched` (more
/// `key = value` lines of the `[sched]` table).
pub fn write_config(dir: &Path, sched: &str) -> PathBuf {
    let path = dir.join("softpreempt.toml");
    std::fs::write(
        &path,
        format!(
            "version = 1\n[sched]\nshm_dir = \"{}\"\n{sched}\n",
            dir.display()
        ),
    )
    .unwrap();
    path
}

/// Configures this process once (before its first OpenCL call) with the `[sched]` lines
/// `sched` and a private shm dir, then points the loader at SoftPreempt and PoCL. Returns
/// the shm dir. Every test of a binary must pass the same `sched`.
pub fn init(sched: &str) -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = private_dir("shm");
        let cfg = write_config(&dir, sched);
        std::env::set_var("SOFTPREEMPT_CONFIG", &cfg);
        std::env::set_var("SOFTPREEMPT_SHM_DIR", &dir);
        std::env::remove_var("SOFTPREEMPT_PRIORITY");
        common::setup();
        dir
    })
}

/// Serializes the tests of one binary: statistics are per process, so a test that reads
/// them must not see another test's launches.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

// ---------------------------------------------------------------------------------------
// Statistics.

/// Every client of every segment in `dir`.
pub fn all_clients(dir: &Path) -> Vec<ClientStats> {
    let Ok(paths) = list_segments(dir) else {
        return Vec::new();
    };
    paths
        .iter()
        .filter_map(|p| inspect(p).ok())
        .flat_map(|s| s.clients)
        .collect()
}

/// The clients of process `pid` in `dir`.
pub fn clients_of(dir: &Path, pid: u32) -> Vec<ClientStats> {
    all_clients(dir)
        .into_iter()
        .filter(|c| c.pid == pid)
        .collect()
}

/// The sum of `f` over `clients` at priority level `level` ("low", "normal", "high"), or
/// over all of them with `None`.
pub fn sum_of(clients: &[ClientStats], level: Option<&str>, f: fn(&ClientStats) -> u64) -> u64 {
    clients
        .iter()
        .filter(|c| level.is_none_or(|l| at_level(c, l)))
        .map(f)
        .sum()
}

/// Whether client `c` is at priority level `level` ("low", "normal", "high").
pub fn at_level(c: &ClientStats, level: &str) -> bool {
    c.priority.map(|p| p.to_string()).as_deref() == Some(level)
}

/// This process's clients at priority level `level` ("low", "normal", "high").
pub fn clients_at(dir: &Path, level: &str) -> Vec<ClientStats> {
    clients_of(dir, std::process::id())
        .into_iter()
        .filter(|c| at_level(c, level))
        .collect()
}

/// A queue of `env` with the priority hint `level` (cl_khr_priority_hints).
pub fn priority_queue(env: &common::Env, level: cl_queue_priority_khr) -> cl_command_queue {
    let props = [
        CL_QUEUE_PRIORITY_KHR as cl_queue_properties,
        level as cl_queue_properties,
        0,
    ];
    let mut err = 0;
    // SAFETY: a live context and device, a zero-terminated property list.
    let q = unsafe {
        clCreateCommandQueueWithProperties(env.context, env.device, props.as_ptr(), &mut err)
    };
    common::ok(err);
    q
}

/// Total `slices` of this process's clients.
pub fn my_slices(dir: &Path) -> u64 {
    clients_of(dir, std::process::id())
        .iter()
        .map(|c| c.slices)
        .sum()
}

/// This process's clients' `slices`, each by its slot and label, for [`slices_since`].
pub fn slice_counts(dir: &Path) -> Vec<((usize, String), u64)> {
    clients_of(dir, std::process::id())
        .into_iter()
        .map(|c| ((c.slot, c.label), c.slices))
        .collect()
}

/// Slices this process's clients reported since `before` ([`slice_counts`]). A client's
/// count leaves the segment with it, so a queue released in between (another test's, in
/// the same process) would make a plain sum such as [`my_slices`] fall: only the clients
/// registered now count, each from where it stood in `before` (0 if it is new).
pub fn slices_since(dir: &Path, before: &[((usize, String), u64)]) -> u64 {
    slice_counts(dir)
        .into_iter()
        .map(|(id, n)| {
            let was = before.iter().find(|(b, _)| *b == id).map_or(0, |b| b.1);
            n.saturating_sub(was)
        })
        .sum()
}

/// A readable dump of a directory's clients, for failure messages.
pub fn describe(dir: &Path) -> String {
    let segs = list_segments(dir).unwrap_or_default();
    let mut s = format!("{} segment(s) in {}:", segs.len(), dir.display());
    for c in all_clients(dir) {
        s += &format!(
            "\n  pid {} label {:?} prio {:?} state {} grants {} slices {} yields {} inflight {}",
            c.pid,
            c.label,
            c.priority.map(|p| p.to_string()),
            c.state.as_str(),
            c.grants,
            c.slices,
            c.yields,
            c.inflight
        );
    }
    s
}

/// Polls `cond` every 10 ms until it holds; panics after `limit` (a liveness bound, never
/// a performance assertion).
#[track_caller]
pub fn eventually(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for: {what}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

// ---------------------------------------------------------------------------------------
// OpenCL helpers.

/// Builds `src` with `options`; the build log on failure.
pub fn build(env: &common::Env, src: &str, options: &str) -> Result<cl_program, String> {
    let c = CString::new(src).unwrap();
    let o = CString::new(options).unwrap();
    let ptr = c.as_ptr();
    let mut err = 0;
    // SAFETY: one NUL-terminated source string.
    let prog =
        unsafe { clCreateProgramWithSource(env.context, 1, &ptr, std::ptr::null(), &mut err) };
    assert_eq!(err, CL_SUCCESS);
    // SAFETY: valid program, device and options string.
    let rc =
        unsafe { clBuildProgram(prog, 1, &env.device, o.as_ptr(), None, std::ptr::null_mut()) };
    if rc != CL_SUCCESS {
        let log = common::info_bytes(|s, v, r| unsafe {
            clGetProgramBuildInfo(prog, env.device, CL_PROGRAM_BUILD_LOG, s, v, r)
        });
        return Err(format!("build failed ({rc}): {}", common::cstr(&log)));
    }
    Ok(prog)
}

/// Runs test `name` of this test binary in a child process with `env` set (the test does
/// nothing without it), and checks that it passed and printed `marker`.
pub fn run_child(name: &str, env: (&str, &std::ffi::OsStr), marker: &str) {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(env.0, env.1)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains(marker),
        "{}\n{text}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The binary of a built program (one device).
pub fn binary_of(p: cl_program) -> Vec<u8> {
    // SAFETY: a vendor info query with the buffer and sizes info_* passes.
    let size: usize = common::info_scalar(|s, v, r| unsafe {
        clGetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, s, v, r)
    });
    let mut bin = vec![0u8; size];
    let mut ptr = bin.as_mut_ptr();
    // SAFETY: one device, one buffer of its binary's size.
    common::ok(unsafe {
        clGetProgramInfo(
            p,
            CL_PROGRAM_BINARIES,
            std::mem::size_of::<*mut u8>(),
            &mut ptr as *mut *mut u8 as *mut c_void,
            std::ptr::null_mut(),
        )
    });
    bin
}

/// A program created from `bin` (one device) and built with `options`.
pub fn program_from_binary(env: &common::Env, bin: &[u8], options: &str) -> cl_program {
    let bin_ptr = bin.as_ptr();
    let (mut status, mut err) = (0, 0);
    // SAFETY: one device, one binary of `bin.len()` bytes.
    let p = unsafe {
        clCreateProgramWithBinary(
            env.context,
            1,
            &env.device,
            &bin.len(),
            &bin_ptr as *const *const u8 as *mut *const u8,
            &mut status,
            &mut err,
        )
    };
    common::ok(err);
    common::ok(status);
    let o = CString::new(options).unwrap();
    // SAFETY: valid program, device and options.
    common::ok(unsafe {
        clBuildProgram(p, 1, &env.device, o.as_ptr(), None, std::ptr::null_mut())
    });
    p
}

/// A built program from `bin`, and its kernel `name`.
pub fn from_binary(env: &common::Env, bin: &[u8], name: &str) -> cl_kernel {
    let p = program_from_binary(env, bin, "");
    let k = env.kernel(p, name);
    // SAFETY: the kernel holds its program.
    unsafe { clReleaseProgram(p) };
    k
}

/// Sets a plain (by value) kernel argument.
#[track_caller]
pub fn arg<T: Copy>(k: cl_kernel, i: u32, v: T) {
    // SAFETY: `v` lives for the call and its size is passed.
    let rc = unsafe {
        clSetKernelArg(
            k,
            i,
            std::mem::size_of::<T>(),
            &v as *const T as *const c_void,
        )
    };
    assert_eq!(rc, CL_SUCCESS, "clSetKernelArg({i})");
}

/// Sets a `__local` kernel argument of `bytes`.
#[track_caller]
pub fn local_arg(k: cl_kernel, i: u32, bytes: usize) {
    // SAFETY: a NULL value with a size declares local memory.
    let rc = unsafe { clSetKernelArg(k, i, bytes, std::ptr::null()) };
    assert_eq!(rc, CL_SUCCESS, "clSetKernelArg({i}, local)");
}

/// Enqueues an NDRange on `q`; returns the status (and the event when `ev` is given).
pub fn enqueue(
    q: cl_command_queue,
    k: cl_kernel,
    offset: Option<&[usize]>,
    global: &[usize],
    local: Option<&[usize]>,
    waits: &[cl_event],
    ev: Option<&mut cl_event>,
) -> cl_int {
    if let Some(o) = offset {
        assert_eq!(o.len(), global.len());
    }
    if let Some(l) = local {
        assert_eq!(l.len(), global.len());
    }
    // SAFETY: every pointer is NULL or a live slice of `global.len()` entries; the wait
    // list is a live slice; the event out pointer is NULL or a live cl_event.
    unsafe {
        clEnqueueNDRangeKernel(
            q,
            k,
            global.len() as cl_uint,
            offset.map_or(std::ptr::null(), |o| o.as_ptr()),
            global.as_ptr(),
            local.map_or(std::ptr::null(), |l| l.as_ptr()),
            waits.len() as cl_uint,
            if waits.is_empty() {
                std::ptr::null()
            } else {
                waits.as_ptr()
            },
            ev.map_or(std::ptr::null_mut(), |e| e as *mut cl_event),
        )
    }
}

/// A buffer of `bytes` filled with `fill` (blocking write).
pub fn filled<T: Copy>(env: &common::Env, n: usize, fill: T) -> cl_mem {
    let m = env.buffer(n * std::mem::size_of::<T>());
    env.write(m, &vec![fill; n]);
    m
}

/// `clFinish` on `q`, asserting success.
#[track_caller]
pub fn finish(q: cl_command_queue) {
    // SAFETY: a live queue.
    common::ok(unsafe { clFinish(q) });
}

/// `CL_EVENT_COMMAND_EXECUTION_STATUS`.
pub fn status(e: cl_event) -> cl_int {
    common::info_scalar(|s, v, r| unsafe {
        clGetEventInfo(e, CL_EVENT_COMMAND_EXECUTION_STATUS, s, v, r)
    })
}

/// One profiling value, or the error.
pub fn profiling(e: cl_event, what: cl_profiling_info) -> Result<cl_ulong, cl_int> {
    let mut v: cl_ulong = 0;
    // SAFETY: one cl_ulong out.
    let rc = unsafe {
        clGetEventProfilingInfo(
            e,
            what,
            std::mem::size_of::<cl_ulong>(),
            &mut v as *mut cl_ulong as *mut c_void,
            std::ptr::null_mut(),
        )
    };
    if rc == CL_SUCCESS {
        Ok(v)
    } else {
        Err(rc)
    }
}

/// Releases handles, ignoring the status (clean-up only).
pub fn release_mems(ms: &[cl_mem]) {
    for &m in ms {
        // SAFETY: each handle was created by the test and is released once.
        unsafe { clReleaseMemObject(m) };
    }
}

/// Whether the device supports non-uniform work-groups (OpenCL 2.0+ and the 3.0 query).
pub fn non_uniform_supported(env: &common::Env) -> bool {
    let mut v: cl_bool = 0;
    // SAFETY: one cl_bool out; an error means "not supported".
    let rc = unsafe {
        clGetDeviceInfo(
            env.device,
            CL_DEVICE_NON_UNIFORM_WORK_GROUP_SUPPORT,
            std::mem::size_of::<cl_bool>(),
            &mut v as *mut cl_bool as *mut c_void,
            std::ptr::null_mut(),
        )
    };
    rc == CL_SUCCESS && v == CL_TRUE
}

// ---------------------------------------------------------------------------------------
// A deterministic integer workload, the same on the host and on the device.

/// OpenCL C of [`mix`]: a few integer operations per iteration, no floating point, so
/// results are bit-exact whatever the vectorization.
pub const MIX_CL: &str = r#"
uint mix(uint x, uint n) {
    for (uint i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        x ^= x >> 13;
    }
    return x;
}
"#;

/// Host twin of [`MIX_CL`].
pub fn mix(mut x: u32, n: u32) -> u32 {
    for _ in 0..n {
        x = x.wrapping_mul(1664525).wrapping_add(1013904223);
        x ^= x >> 13;
    }
    x
}

/// `out[i] = mix(i ^ seed, iters)` over a 1D launch: sliceable (reads only
/// get_global_id).
pub const FILL_CL: &str = r#"
__kernel void fill(__global uint* out, uint seed, uint iters) {
    size_t i = get_global_id(0);
    out[i] = mix((uint)i ^ seed, iters);
}
"#;

/// Host expectation of [`FILL_CL`] over `n` items.
pub fn fill_expected(n: usize, seed: u32, iters: u32) -> Vec<u32> {
    (0..n as u32).map(|i| mix(i ^ seed, iters)).collect()
}

/// The first index where two results differ, for failure messages.
pub fn first_difference<T: PartialEq + std::fmt::Debug>(a: &[T], b: &[T]) -> String {
    if a.len() != b.len() {
        return format!("lengths differ: {} vs {}", a.len(), b.len());
    }
    match a.iter().zip(b).position(|(x, y)| x != y) {
        Some(i) => format!(
            "first difference at index {i} of {}: {:?} vs {:?} ({} differences)",
            a.len(),
            a[i],
            b[i],
            a.iter().zip(b).filter(|(x, y)| x != y).count()
        ),
        None => "identical".into(),
    }
}

/// Checks a [`FILL_CL`] result at a stride of indices (the host twin is slow in debug
/// builds); a message naming the first wrong index, or `None`.
pub fn check_fill(got: &[u32], start: usize, seed: u32, iters: u32) -> Option<String> {
    let idx = (start..got.len())
        .step_by(61)
        .chain([got.len().saturating_sub(1)]);
    for i in idx {
        let want = mix(i as u32 ^ seed, iters);
        if got[i] != want {
            return Some(format!(
                "index {i} of {}: got {:#x}, want {want:#x} (seed {seed}, iters {iters})",
                got.len(),
                got[i]
            ));
        }
    }
    None
}

/// Whether the vendor under test is PoCL (the default; `SOFTPREEMPT_TEST_VENDOR` names
/// another). Where a vendor departs from the spec, tests pin PoCL's answers only.
pub fn is_pocl() -> bool {
    common::vendor_name().contains("Portable Computing Language")
}

/// `n` work-items, or on a GPU at least eight full waves of them (compute units × 2048
/// resident work-items each): SoftPreempt never cuts a slice narrower than one wave, so a
/// launch meant to be sliced must span several.
pub fn sliceable_items(env: &common::Env, n: usize) -> usize {
    if !is_gpu(env) {
        return n;
    }
    // SAFETY: a valid device and a cl_uint out value.
    let cus: cl_uint = common::info_scalar(|s, v, r| unsafe {
        clGetDeviceInfo(env.device, CL_DEVICE_MAX_COMPUTE_UNITS, s, v, r)
    });
    n.max(8 * cus as usize * 2048)
}

/// Whether `env`'s device is a GPU (launches there are far faster than on PoCL's CPU
/// device, so tests that need launches long enough to slice make them larger).
pub fn is_gpu(env: &common::Env) -> bool {
    // SAFETY: a valid device and a cl_device_type out value.
    let t: cl_device_type = common::info_scalar(|s, v, r| unsafe {
        clGetDeviceInfo(env.device, CL_DEVICE_TYPE, s, v, r)
    });
    t & CL_DEVICE_TYPE_GPU as cl_device_type != 0
}

// ---------------------------------------------------------------------------------------
// CPU devices' threads and a high-priority child.

/// `SCHED_IDLE` in `sched_getscheduler`'s numbering (Linux).
pub const SCHED_IDLE: u32 = 5;
/// `SCHED_BATCH` in `sched_getscheduler`'s numbering (Linux).
pub const SCHED_BATCH: u32 = 3;

/// This process's threads in the idle scheduling class (field 41 of
/// `/proc/self/task/*/stat`, read after the command name, which may hold spaces).
pub fn idle_threads() -> usize {
    thread_policies()
        .iter()
        .filter(|(_, p)| *p == SCHED_IDLE)
        .count()
}

/// Each thread of this process: its name and its scheduling policy.
pub fn thread_policies() -> Vec<(String, u32)> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("stat")).ok())
        .filter_map(|s| {
            let (open, close) = (s.find('(')?, s.rfind(')')?);
            let name = s.get(open + 1..close)?.to_string();
            // Fields from the 3rd on: the policy (41st) is the 39th of them.
            let policy = s[close + 1..].split_whitespace().nth(38)?.parse().ok()?;
            Some((name, policy))
        })
        .collect()
}

/// Starts this test binary's `test` (a role calling [`high_child`]) as a child with
/// `role_var` set and `stop_var` naming the file that stops it.
pub fn spawn_high(test: &str, role_var: &str, stop_var: &str, stop: &Path) -> std::process::Child {
    std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(role_var, "high")
        .env(stop_var, stop)
        .spawn()
        .unwrap()
}

/// The body of a high-priority child role (nothing without `role_var`): it registers a
/// high queue on the device, runs one short launch, and waits for the file named by
/// `stop_var`, with the parent's configuration and arbiter directory (inherited through
/// the environment).
pub fn high_child(role_var: &str, stop_var: &str) {
    if std::env::var(role_var).is_err() {
        return;
    }
    common::setup();
    let env = common::Env::sp();
    let q = priority_queue(&env, CL_QUEUE_PRIORITY_HIGH_KHR);
    let prog = build(&env, &format!("{MIX_CL}{FILL_CL}"), "").unwrap_or_else(|e| panic!("{e}"));
    let k = env.kernel(prog, "fill");
    arg(k, 0, env.buffer(1024 * 4));
    arg(k, 1, 3u32);
    arg(k, 2, 100u32);
    common::ok(enqueue(q, k, None, &[1024], Some(&[64]), &[], None));
    finish(q);
    let stop = std::env::var_os(stop_var).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !Path::new(&stop).exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    // SAFETY: the queue this child owns.
    common::ok(unsafe { clReleaseCommandQueue(q) });
}

/// The `iters` that make a [`FILL_CL`] `fill` of `items` (local size 64) take about `ms`
/// on the bare vendor; at least 100. A launch after the first (PoCL compiles at the first),
/// with iterations doubled until it takes at least 10 ms, then the least of three such
/// launches, scaled: tests run beside each other's children, and a timing taken while
/// another process had the cores only ever comes out longer. One trial launch of 100
/// iterations timed once had a test's launches come out about 7 times shorter than meant
/// under CI's load (`a_lone_gpu_queue_cuts_only_the_launches_that_teach`: 7 ms launches,
/// under one piece, that went straight to the vendor after the first).
pub fn fill_iters_for(items: usize, ms: f64) -> u32 {
    const FIRST_TRIAL: u32 = 100;
    const MIN_TRIAL: Duration = Duration::from_millis(10);
    let bare = common::Env::new(common::bare_platform());
    let prog = build(&bare, &format!("{MIX_CL}{FILL_CL}"), "").unwrap_or_else(|e| panic!("{e}"));
    let k = bare.kernel(prog, "fill");
    let out = bare.buffer(items * 4);
    arg(k, 0, out);
    arg(k, 1, 0u32);
    let run = |iters: u32| {
        arg(k, 2, iters);
        let t = Instant::now();
        common::ok(enqueue(
            bare.queue,
            k,
            None,
            &[items],
            Some(&[64]),
            &[],
            None,
        ));
        finish(bare.queue);
        t.elapsed()
    };
    let mut trial = FIRST_TRIAL;
    run(trial);
    while run(trial) < MIN_TRIAL && trial < 1 << 24 {
        trial *= 2;
    }
    let took = (0..3).map(|_| run(trial)).min().unwrap();
    // SAFETY: objects this function created.
    unsafe {
        clReleaseKernel(k);
        clReleaseProgram(prog);
        clReleaseMemObject(out);
    }
    let scale = ms * 1e6 / took.as_nanos().max(1) as f64;
    (f64::from(trial) * scale).clamp(f64::from(FIRST_TRIAL), 1e9) as u32
}
