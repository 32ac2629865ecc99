//! Issue 25, device memory by priority, as users meet it: real processes through the
//! loader on PoCL, whose device memory is limited to 1 GiB (`POCL_MEMORY_LIMIT=1`) so
//! that a reserve is reached with little memory. A low-priority process that allocates
//! in a loop gets `CL_MEM_OBJECT_ALLOCATION_FAILURE` where it would eat into the memory
//! reserved for the high level, keeps running, and allocates again once it frees; the
//! high one gets its whole reserve; a killed process's bytes come back; sub-buffers,
//! `CL_MEM_USE_HOST_PTR` buffers, images and SVM are counted as docs/design.md says; a
//! bad setting is one error line and counting only; no reserve, no refusal; a cap bounds
//! a level, and a `[[memory.device]]` table naming the device replaces `[memory]`'s
//! levels; pyopencl sees its `MemoryError`.
//!
//! The test binary re-runs itself in the child roles (`SP_MEM_ROLE`); each test has its
//! own configuration and arbiter directory. Everything is read from the arbiter's
//! segments and the children's reports, never from timing.

mod common;
mod managed_common;

use managed_common as mc;
use opencl_sys::*;
use softpreempt_sched::{inspect, list_segments, ClientStats, SegmentSnapshot};
use std::ffi::c_void;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const ROLE: &str = "SP_MEM_ROLE";
const CHUNK: &str = "SP_MEM_CHUNK";
const COUNT: &str = "SP_MEM_COUNT";
const STOP: &str = "SP_MEM_STOP";
const HIGH_QUEUE: &str = "SP_MEM_HIGH_QUEUE";
const MIB: u64 = 1 << 20;
/// PoCL's device memory in these tests: `POCL_MEMORY_LIMIT=1` (GiB).
const DEVICE: u64 = 1 << 30;
/// The reserve for `high` in most tests, half the device: a low process gets the rest.
const RESERVE: &str = "[memory]\nreserve = { high = \"50%\" }\n";

// ---------------------------------------------------------------------------------------
// The children.

/// A report line on stdout: `@mem key=value ...` (values are i64: CL errors are negative).
fn report(fields: &[(&str, i64)]) {
    let s: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
    println!("@mem {}", s.join(" "));
}

fn env_u64(name: &str) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn buffer(ctx: cl_context, flags: cl_mem_flags, size: usize, host: *mut c_void) -> (cl_mem, i32) {
    let mut err = 0;
    // SAFETY: a live context; `host` is NULL or `size` bytes the caller keeps alive.
    let m = unsafe { clCreateBuffer(ctx, flags, size, host, &mut err) };
    (m, err)
}

fn release(m: cl_mem) {
    // SAFETY: a live buffer of ours, released once.
    assert_eq!(unsafe { clReleaseMemObject(m) }, CL_SUCCESS);
}

/// Blocks until the parent creates the stop file (or 60 s pass).
fn wait_for_stop() {
    let stop = std::env::var(STOP).unwrap();
    mc::eventually("the stop file", Duration::from_secs(60), || {
        Path::new(&stop).exists()
    });
}

/// Allocates `COUNT` buffers of `CHUNK` bytes, stopping at the first failure; reports
/// how many it got and the error. After a failure it frees one buffer, allocates again,
/// and writes and reads that buffer through a queue: the process keeps working.
fn fill() {
    let env = common::Env::sp();
    let ctx = env.context;
    // A queue marked high before the first allocation (`SP_MEM_HIGH_QUEUE`).
    if std::env::var_os(HIGH_QUEUE).is_some() {
        mc::priority_queue(&env, CL_QUEUE_PRIORITY_HIGH_KHR);
    }
    let chunk = env_u64(CHUNK) as usize;
    let mut held = Vec::new();
    let mut error = 0;
    for _ in 0..env_u64(COUNT) {
        match buffer(
            ctx,
            CL_MEM_READ_WRITE as cl_mem_flags,
            chunk,
            std::ptr::null_mut(),
        ) {
            (m, CL_SUCCESS) => held.push(m),
            (_, e) => {
                error = e;
                break;
            }
        }
    }
    let mut fields = vec![("ok", held.len() as i64), ("error", error as i64)];
    if error != 0 {
        // At the limit, bad sizes still get the spec's error, not the policy's refusal.
        let max: cl_ulong = common::info_scalar(|s, v, r| {
            // SAFETY: the device's limit, into the scalar info_scalar provides.
            unsafe { clGetDeviceInfo(env.device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, s, v, r) }
        });
        let rw = CL_MEM_READ_WRITE as cl_mem_flags;
        for (name, size) in [("zero", 0), ("huge", max as usize + 1)] {
            fields.push((name, buffer(ctx, rw, size, std::ptr::null_mut()).1 as i64));
        }
        release(held.pop().unwrap());
        let (m, again) = buffer(
            ctx,
            CL_MEM_READ_WRITE as cl_mem_flags,
            chunk,
            std::ptr::null_mut(),
        );
        fields.push(("again", again as i64));
        if again == CL_SUCCESS {
            let data: Vec<u32> = (0..1024).collect();
            env.write(m, &data);
            fields.push(("rw", i64::from(env.read::<u32>(m, 1024) == data)));
            held.push(m);
        }
    }
    report(&fields);
    wait_for_stop();
    held.into_iter().for_each(release);
}

/// This process's memory client's bytes and objects, from the segment.
/// This process's memory clients: their bytes, objects and number.
fn own_memory() -> (u64, u64, u64) {
    let dir = std::env::var("SOFTPREEMPT_SHM_DIR").unwrap();
    let me = std::process::id();
    clients(Path::new(&dir))
        .into_iter()
        .filter(|c| c.pid == me && c.memory && c.state.as_str() != "reclaimed")
        .fold((0, 0, 0), |(b, o, n), c| {
            (b + c.mem_bytes, o + c.mem_objects, n + 1)
        })
}

/// Sub-buffers, host-pointer buffers, images and SVM, each reported as the bytes and
/// objects counted after it.
fn kinds() {
    let (_, ctx) = common::context(common::sp_platform());
    let step = |name: &str| {
        let (b, o, n) = own_memory();
        println!("@mem step={name} bytes={b} objects={o} clients={n}");
    };
    let rw = CL_MEM_READ_WRITE as cl_mem_flags;
    let (parent, e) = buffer(ctx, rw, MIB as usize, std::ptr::null_mut());
    assert_eq!(e, CL_SUCCESS);
    step("buffer");
    let region = cl_buffer_region {
        origin: 0,
        size: (MIB / 2) as usize,
    };
    let mut err = 0;
    // SAFETY: a live buffer and a region inside it.
    let sub = unsafe {
        clCreateSubBuffer(
            parent,
            rw,
            CL_BUFFER_CREATE_TYPE_REGION,
            (&region as *const cl_buffer_region).cast(),
            &mut err,
        )
    };
    assert_eq!(err, CL_SUCCESS);
    step("sub_buffer");
    let mut host = vec![0u8; MIB as usize];
    let (hosted, e) = buffer(
        ctx,
        rw | CL_MEM_USE_HOST_PTR as cl_mem_flags,
        MIB as usize,
        host.as_mut_ptr().cast(),
    );
    assert_eq!(e, CL_SUCCESS);
    step("use_host_ptr");
    let format = cl_image_format {
        image_channel_order: CL_RGBA,
        image_channel_data_type: CL_UNSIGNED_INT8,
    };
    // SAFETY: cl_image_desc is plain data; all-zero is its "unset" value.
    let mut desc: cl_image_desc = unsafe { std::mem::zeroed() };
    desc.image_type = CL_MEM_OBJECT_IMAGE2D;
    desc.image_width = 64;
    desc.image_height = 64;
    // SAFETY: valid format and descriptor, no host pointer.
    let image = unsafe { clCreateImage(ctx, rw, &format, &desc, std::ptr::null_mut(), &mut err) };
    if err == CL_SUCCESS {
        step("image");
        release(image);
    }
    // SAFETY: the allocator of a live context; a NULL answer means no SVM here.
    let svm = unsafe { clSVMAlloc(ctx, CL_MEM_READ_WRITE as cl_svm_mem_flags, MIB as usize, 0) };
    if !svm.is_null() {
        step("svm");
        // SAFETY: freed once, on its own context.
        unsafe { clSVMFree(ctx, svm) };
    }
    release(sub);
    step("sub_released");
    release(parent);
    release(hosted);
    drop(host);
    step("all_released");
    // SAFETY: the context, released once; nothing of it is used after.
    unsafe { clReleaseContext(ctx) };
    step("context_released");
}

/// Not a test on its own: the children's entry point (does nothing without the role).
#[test]
fn child_role() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    common::setup();
    match role.as_str() {
        "fill" => fill(),
        "kinds" => kinds(),
        other => panic!("unknown role {other}"),
    }
}

// ---------------------------------------------------------------------------------------
// The parent's side.

struct Setup {
    dir: PathBuf,
    config: PathBuf,
}

/// A private arbiter directory and a configuration with the `[memory]` text `memory`.
fn setup(tag: &str, memory: &str) -> Setup {
    common::setup();
    let dir = mc::private_dir(tag);
    // `[memory]` after the `[sched]` table that write_config opens.
    let config = mc::write_config(&dir, memory);
    Setup { dir, config }
}

impl Setup {
    fn stop(&self) -> PathBuf {
        self.dir.join("stop")
    }

    fn command(&self, priority: &str) -> Command {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args(["--exact", "child_role", "--nocapture", "--test-threads=1"])
            .env("SOFTPREEMPT_CONFIG", &self.config)
            .env("SOFTPREEMPT_SHM_DIR", &self.dir)
            .env("SOFTPREEMPT_PRIORITY", priority)
            .env("POCL_MEMORY_LIMIT", "1")
            .env(STOP, self.stop())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        common::point_loader(&mut cmd, "memory");
        cmd
    }

    /// A `fill` child: `count` buffers of `chunk` bytes at `priority`.
    fn fill_command(&self, priority: &str, chunk: u64, count: u64) -> Command {
        let mut cmd = self.command(priority);
        cmd.env(ROLE, "fill")
            .env(CHUNK, chunk.to_string())
            .env(COUNT, count.to_string());
        cmd
    }

    /// Starts a `fill` child.
    fn fill(&self, priority: &str, chunk: u64, count: u64) -> Child {
        self.fill_command(priority, chunk, count).spawn().unwrap()
    }

    /// A child that holds `count` chunks of 32 MiB at `priority`, all granted.
    fn holder(&self, priority: &str, count: u64) -> Child {
        let mut c = self.fill(priority, 32 * MIB, count);
        let r = read_report(&mut c);
        assert_eq!(
            (field(&r, "ok"), field(&r, "error")),
            (count as i64, 0),
            "{r:?}"
        );
        c
    }

    fn segment(&self) -> SegmentSnapshot {
        let paths = list_segments(&self.dir).unwrap();
        assert_eq!(paths.len(), 1, "one device, one segment: {paths:?}");
        inspect(&paths[0]).unwrap()
    }

    /// Lets every child go, and checks that each exits cleanly; their stderr.
    fn finish(&self, children: Vec<Child>) -> Vec<String> {
        std::fs::write(self.stop(), b"").unwrap();
        children
            .into_iter()
            .map(|c| {
                let out = c.wait_with_output().unwrap();
                let err = String::from_utf8_lossy(&out.stderr).into_owned();
                assert!(out.status.success(), "a child failed: {err}");
                err
            })
            .collect()
    }
}

fn clients(dir: &Path) -> Vec<ClientStats> {
    mc::all_clients(dir)
}

/// Reads the child's `@mem` line.
fn read_report(c: &mut Child) -> Vec<(String, i64)> {
    let mut r = BufReader::new(c.stdout.as_mut().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            r.read_line(&mut line).unwrap() > 0,
            "child exited before reporting"
        );
        if let Some(at) = line.find("@mem ") {
            return line[at + 5..]
                .split_whitespace()
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.parse().unwrap_or(i64::MIN)))
                .collect();
        }
    }
}

fn field(r: &[(String, i64)], key: &str) -> i64 {
    r.iter()
        .find(|(k, _)| k == key)
        .map_or_else(|| panic!("no {key} in {r:?}"), |(_, v)| *v)
}

/// Lines of a child's stderr that report a refusal.
fn refusal_lines(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.contains("softpreempt: refused"))
        .collect()
}

// ---------------------------------------------------------------------------------------
// The tests.

#[test]
fn low_is_refused_at_the_high_reserve_recovers_and_high_gets_its_whole_reserve() {
    if std::env::var(ROLE).is_ok() {
        return;
    }
    let s = setup("reserve", RESERVE);
    // Half the device is the high level's: low gets 16 chunks of 32 MiB, not 17.
    let mut low = s.fill("low", 32 * MIB, 64);
    let r = read_report(&mut low);
    assert_eq!(field(&r, "ok"), 16, "{r:?}");
    assert_eq!(field(&r, "error"), CL_MEM_OBJECT_ALLOCATION_FAILURE as i64);
    assert_eq!(
        field(&r, "again"),
        CL_SUCCESS as i64,
        "freed one, allocated again"
    );
    assert_eq!(field(&r, "rw"), 1, "the buffer works after the refusal");
    assert_eq!(field(&r, "zero"), CL_INVALID_BUFFER_SIZE as i64);
    assert_eq!(field(&r, "huge"), CL_INVALID_BUFFER_SIZE as i64);
    // High gets every byte of its reserve, beside a low process at its limit.
    let mut high = s.fill("high", 32 * MIB, 16);
    let r = read_report(&mut high);
    assert_eq!((field(&r, "ok"), field(&r, "error")), (16, 0), "{r:?}");

    let seg = s.segment();
    assert_eq!(seg.mem_bytes_by_level(), [512 * MIB, 0, 512 * MIB]);
    assert_eq!(seg.mem_refusals, [1, 0, 0]);
    assert_eq!(seg.mem_device_bytes, DEVICE);
    let errs = s.finish(vec![low, high]);
    // One clear line, naming the device, the level, the sizes and the setting.
    let lines = refusal_lines(&errs[0]);
    assert_eq!(lines.len(), 1, "{}", errs[0]);
    for want in [
        "refused a buffer of 33554432 bytes",
        "pthread",
        "a low allocation",
        "536870912 bytes reserved for higher levels",
        "reserve = { high = \"50%\" }",
    ] {
        assert!(
            lines[0].contains(want),
            "{want:?} missing from: {}",
            lines[0]
        );
    }
    assert!(refusal_lines(&errs[1]).is_empty(), "{}", errs[1]);
}

#[test]
fn kill_9_of_a_client_returns_its_bytes() {
    if std::env::var(ROLE).is_ok() {
        return;
    }
    let s = setup("kill", RESERVE);
    let mut hog = s.holder("low", 16);
    let hog_pid = hog.id();
    assert_eq!(s.segment().mem_bytes_by_level()[0], 512 * MIB);
    hog.kill().unwrap();
    hog.wait().unwrap();
    // The dead process no longer counts, and its slot is reclaimed by the next low
    // allocation that would otherwise be refused: all 16 of a new process's fit.
    assert_eq!(s.segment().mem_bytes_by_level()[0], 0);
    let mut next = s.fill("low", 32 * MIB, 16);
    let r = read_report(&mut next);
    assert_eq!((field(&r, "ok"), field(&r, "error")), (16, 0), "{r:?}");
    let seg = s.segment();
    assert!(
        seg.clients
            .iter()
            .filter(|c| c.pid == hog_pid)
            .all(|c| c.state.as_str() == "reclaimed"),
        "{:?}",
        seg.clients
    );
    assert_eq!(seg.mem_refusals, [0, 0, 0]);
    s.finish(vec![next]);
}

#[test]
fn sub_buffers_host_pointers_images_and_svm_are_counted_as_documented() {
    if std::env::var(ROLE).is_ok() {
        return;
    }
    let s = setup("kinds", "");
    let out = s.command("normal").env(ROLE, "kinds").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let steps: Vec<(String, u64, u64, u64)> = text
        .lines()
        .filter_map(|l| l.find("@mem step=").map(|at| &l[at + 10..]))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let num = |i: usize| f[i].split_once('=').unwrap().1.parse().unwrap();
            (f[0].to_string(), num(1), num(2), num(3))
        })
        .collect();
    let find = |name: &str| {
        steps
            .iter()
            .find(|s| s.0 == name)
            .unwrap_or_else(|| panic!("no step {name}: {text}"))
    };
    let at = |name: &str| (find(name).1, find(name).2);
    let has = |name: &str| steps.iter().any(|s| s.0 == name);
    assert_eq!(at("buffer"), (MIB, 1));
    // A sub-buffer's bytes are its parent's.
    assert_eq!(at("sub_buffer"), (MIB, 1));
    // A buffer on the application's memory counts its whole size.
    assert_eq!(at("use_host_ptr"), (2 * MIB, 2));
    if has("image") {
        // 64 x 64 RGBA8, as the vendor reports it (CL_MEM_SIZE).
        assert_eq!(at("image"), (2 * MIB + 64 * 64 * 4, 3));
    }
    if has("svm") {
        assert_eq!(at("svm"), (3 * MIB, 3));
    }
    assert_eq!(at("sub_released"), (2 * MIB, 2));
    assert_eq!(at("all_released"), (0, 0));
    // One memory client while the context lives; none once the process released it.
    assert_eq!(find("all_released").3, 1);
    assert_eq!(find("context_released").3, 0);
}

#[test]
fn a_bad_setting_is_one_error_line_and_memory_is_only_counted() {
    if std::env::var(ROLE).is_ok() {
        return;
    }
    let s = setup("bad", "[memory]\nreserve = { high = \"150%\" }\n");
    let mut low = s.fill("low", 32 * MIB, 24);
    let r = read_report(&mut low);
    assert_eq!((field(&r, "ok"), field(&r, "error")), (24, 0), "{r:?}");
    assert_eq!(s.segment().mem_bytes_by_level()[0], 768 * MIB);
    let errs = s.finish(vec![low]);
    let lines: Vec<&str> = errs[0].lines().filter(|l| !l.trim().is_empty()).collect();
    let config_errors: Vec<&&str> = lines
        .iter()
        .filter(|l| l.contains("memory.reserve"))
        .collect();
    assert_eq!(config_errors.len(), 1, "{}", errs[0]);
    assert!(config_errors[0].contains("using defaults"), "{}", errs[0]);
}

#[test]
fn without_a_reserve_nothing_is_refused() {
    if std::env::var(ROLE).is_ok() {
        return;
    }
    let s = setup("off", "");
    let high = s.holder("high", 4);
    let mut low = s.fill("low", 32 * MIB, 24);
    let r = read_report(&mut low);
    assert_eq!((field(&r, "ok"), field(&r, "error")), (24, 0), "{r:?}");
    let seg = s.segment();
    assert_eq!(seg.mem_bytes_by_level(), [768 * MIB, 0, 128 * MIB]);
    assert_eq!(seg.mem_refusals, [0, 0, 0]);
    let errs = s.finish(vec![high, low]);
    assert!(errs.iter().all(|e| refusal_lines(e).is_empty()), "{errs:?}");
}

const PY: &str = r#"
import sys
import pyopencl as cl

plat = [p for p in cl.get_platforms() if p.name == "SoftPreempt"][0]
ctx = cl.Context(plat.get_devices())
held, error = [], "none"
for _ in range(64):
    try:
        held.append(cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 32 << 20))
    except cl.MemoryError as e:
        error = "MemoryError:%d" % e.code
        break
    except cl.Error as e:
        error = "Error:%d" % e.code
        break
ok = len(held)
held.pop().release()
again = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 32 << 20)
q = cl.CommandQueue(ctx)
import numpy as np
a = np.arange(1024, dtype=np.uint32)
b = np.zeros_like(a)
cl.enqueue_copy(q, again, a)
cl.enqueue_copy(q, b, again)
print("@py", ok, error, "rw" if (a == b).all() else "WRONG")
"#;

#[test]
fn a_pyopencl_client_sees_memory_error_and_carries_on() {
    if std::env::var(ROLE).is_ok() {
        return;
    }
    if !common::has_pyopencl_or_skip() {
        return;
    }
    let s = setup("pyopencl", RESERVE);
    let script = s.dir.join("fill.py");
    std::fs::write(&script, PY).unwrap();
    let mut cmd = s.command("low");
    cmd.env_remove("PYOPENCL_CTX")
        .env("PYOPENCL_NO_CACHE", "1")
        .env("XDG_CACHE_HOME", s.dir.join("cache"));
    // Not the test binary: the Python script in its place.
    let mut py = Command::new(common::python());
    py.arg(&script);
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => py.env(k, v),
            None => py.env_remove(k),
        };
    }
    let out = py.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}\n{err}");
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("@py "))
        .unwrap_or_else(|| panic!("no result: {text}\n{err}"));
    assert_eq!(line, "16 MemoryError:-4 rw", "{err}");
    assert_eq!(refusal_lines(&err).len(), 1, "{err}");
}

#[test]
fn a_cap_bounds_a_level_and_a_device_table_overrides_the_defaults() {
    if std::env::var(ROLE).is_ok() {
        return;
    }
    // PoCL's device name, as the bare driver gives it: the `[[memory.device]]` key.
    common::setup();
    let d = common::device(common::bare_platform());
    let name = common::cstr(&common::info_bytes(|s, v, r| {
        // SAFETY: the device's name, through the buffers info_bytes provides.
        unsafe { clGetDeviceInfo(d, CL_DEVICE_NAME, s, v, r) }
    }));
    let s = setup(
        "cap",
        &format!(
            "{RESERVE}cap = {{ low = \"64 MiB\" }}\n\n[[memory.device]]\ndevice = {name:?}\n\
             reserve = {{ high = \"75%\" }}\n"
        ),
    );
    // Low: its cap (kept from [memory]) before the reserve.
    let mut low = s.fill("low", 32 * MIB, 8);
    let r = read_report(&mut low);
    assert_eq!((field(&r, "ok"), field(&r, "error")), (2, -4), "{r:?}");
    assert_eq!(field(&r, "again"), CL_SUCCESS as i64);
    // Normal: the device's own reserve for high (75%, not [memory]'s 50%) leaves the
    // others 256 MiB, of which low holds 64.
    let mut normal = s.fill("normal", 32 * MIB, 16);
    let r = read_report(&mut normal);
    assert_eq!((field(&r, "ok"), field(&r, "error")), (6, -4), "{r:?}");
    let errs = s.finish(vec![low, normal]);
    let line = refusal_lines(&errs[0]);
    assert!(line[0].contains("cap of 67108864 bytes"), "{}", errs[0]);
    let line = refusal_lines(&errs[1]);
    assert!(
        line[0].contains("805306368 bytes reserved for higher levels"),
        "{}",
        errs[1]
    );
    assert!(line[0].contains("[[memory.device]]"), "{}", errs[1]);
}

#[test]
fn a_queue_marked_high_makes_the_process_memory_high() {
    if std::env::var(ROLE).is_ok() {
        return;
    }
    let s = setup("hint", RESERVE);
    let low = s.holder("low", 16);
    // A normal process would be refused at once here (the rest is high's reserve); one
    // whose queue is high (cl_khr_priority_hints) gets the reserve.
    let mut hinted = s
        .fill_command("normal", 32 * MIB, 16)
        .env(HIGH_QUEUE, "1")
        .spawn()
        .unwrap();
    let r = read_report(&mut hinted);
    assert_eq!((field(&r, "ok"), field(&r, "error")), (16, 0), "{r:?}");
    assert_eq!(s.segment().mem_bytes_by_level(), [512 * MIB, 0, 512 * MIB]);
    s.finish(vec![low, hinted]);
}
