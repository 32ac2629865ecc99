//! Issue 13: program binaries (architecture rule 9). The application gets the bare
//! driver's binary of its own program; what the layer learned from the source lives in
//! the per-user program store under that binary. So a second process that loads the
//! binary (as pyopencl or OpenCV do from their caches) sees every kernel query answered
//! as on the bare driver, gets bit-identical results, and has every kernel sliced that a
//! source build would slice. This binary runs with `slice = "always"` and a tiny target
//! slice, so every sliceable launch is cut into many slices, counted by the arbiter.

mod common;
mod managed_common;

use common::{bare_platform, ok, Env};
use managed_common as mc;
use opencl_sys::*;
use std::ffi::{c_void, CString};
use std::path::{Path, PathBuf};
use std::ptr::{null, null_mut};

/// Slicing is under test here: yielding launches (the default for kernels the yielding
/// rewrite takes) are off; `tests/managed_yield.rs` has them.
const SCHED: &str = "slice = \"always\"\ntarget_slice_us = 50\nyielding = \"never\"";

/// Several kernels in one program: one that reads no geometry, two that do (rewritten).
/// `BIAS` comes from the build options, which the stored rewrite must keep.
const MULTI: &str = r#"
kernel void plain_add(global uint* o, uint k) {
    size_t i = get_global_id(0);
    o[i] = o[i] * 3u + k + (uint)i + BIAS;
}
kernel void groups(global uint* o, uint k) {
    size_t i = get_global_id(0);
    o[i] += (uint)get_group_id(0) * 1000u + (uint)get_num_groups(0) + k + BIAS;
}
kernel void sizes(global uint* o, uint k) {
    size_t i = get_global_id(0);
    o[i] = ((uint)get_global_size(0) * 7u + (uint)get_global_offset(0) + k) ^ o[i];
}
"#;
const MULTI_KERNELS: &[&str] = &["plain_add", "groups", "sizes"];

/// `clCompileProgram` units (one with a header) for `clLinkProgram`.
const HEADER_NAME: &str = "scale.h";
const HEADER: &str = "#define SCALE 7u\n";
const UNIT_A: &str = r#"#include "scale.h"
kernel void linked_groups(global uint* o, uint k) {
    size_t i = get_global_id(0);
    o[i] += (uint)get_group_id(0) * SCALE + (uint)get_num_groups(0) + k;
}
"#;
const UNIT_B: &str = r#"
kernel void linked_plain(global uint* o, uint k) {
    size_t i = get_global_id(0);
    o[i] = o[i] * 5u + k + BIAS;
}
"#;
const LINKED_KERNELS: &[&str] = &["linked_groups", "linked_plain"];

const OPTIONS: &str = "-DBIAS=3u -cl-kernel-arg-info";
// Long enough on a fast CPU that a 50 µs target always cuts it: the timing model rightly
// predicts a short launch whole within one slice, and at 1 << 14 items this trivial kernel
// fitted one on a 2-vCPU EPYC (the "sliced" checks failed in 5 runs of 12; 2 of 12 at
// 1 << 18; none of 15 at 1 << 20).
const GLOBAL: usize = 1 << 20;
const LOCAL: usize = 64;

fn setup() -> (&'static Path, std::sync::MutexGuard<'static, ()>) {
    let dir = mc::init(SCHED);
    (dir, mc::serial())
}

fn source_program(env: &Env, src: &str) -> cl_program {
    let c = CString::new(src).unwrap();
    let ptr = c.as_ptr();
    let mut err = 0;
    // SAFETY: one NUL-terminated source string.
    let p = unsafe { clCreateProgramWithSource(env.context, 1, &ptr, null(), &mut err) };
    ok(err);
    p
}

/// `UNIT_A` (with its header) and `UNIT_B` compiled, then linked.
fn compile_and_link(env: &Env) -> cl_program {
    let opts = CString::new(OPTIONS).unwrap();
    let header = source_program(env, HEADER);
    let name = CString::new(HEADER_NAME).unwrap();
    let mut names = [name.as_ptr()];
    let a = source_program(env, UNIT_A);
    let b = source_program(env, UNIT_B);
    // SAFETY: valid programs, device, header list and names.
    unsafe {
        ok(clCompileProgram(
            a,
            1,
            &env.device,
            opts.as_ptr(),
            1,
            &header,
            names.as_mut_ptr(),
            None,
            null_mut(),
        ));
        ok(clCompileProgram(
            b,
            1,
            &env.device,
            opts.as_ptr(),
            0,
            null(),
            null_mut(),
            None,
            null_mut(),
        ));
    }
    let inputs = [a, b];
    let mut err = 0;
    // SAFETY: valid context, device and compiled inputs.
    let linked = unsafe {
        clLinkProgram(
            env.context,
            1,
            &env.device,
            null(),
            2,
            inputs.as_ptr(),
            None,
            null_mut(),
            &mut err,
        )
    };
    ok(err);
    // SAFETY: our programs; the link holds what it needs.
    unsafe {
        clReleaseProgram(header);
        clReleaseProgram(a);
        clReleaseProgram(b);
    }
    linked
}

/// One info answer: the status, and the bytes when it succeeded.
fn answer(f: impl Fn(usize, *mut c_void, *mut usize) -> cl_int) -> (cl_int, Vec<u8>) {
    let mut size = 0;
    let rc = f(0, null_mut(), &mut size);
    if rc != CL_SUCCESS {
        return (rc, Vec::new());
    }
    let mut buf = vec![0u8; size];
    let rc = f(size, buf.as_mut_ptr() as *mut c_void, null_mut());
    (rc, buf)
}

/// Every query an application may make of a kernel, with its answer.
fn kernel_queries(k: cl_kernel, device: cl_device_id) -> Vec<(String, cl_int, Vec<u8>)> {
    let mut out = Vec::new();
    for (what, param) in [
        ("NUM_ARGS", CL_KERNEL_NUM_ARGS),
        ("FUNCTION_NAME", CL_KERNEL_FUNCTION_NAME),
        ("ATTRIBUTES", CL_KERNEL_ATTRIBUTES),
    ] {
        // SAFETY: a query with the buffer and sizes `answer` passes.
        let (rc, v) = answer(|s, v, r| unsafe { clGetKernelInfo(k, param, s, v, r) });
        out.push((what.to_string(), rc, v));
    }
    let n: cl_uint = common::info_scalar(|s, v, r| {
        // SAFETY: a query into a cl_uint.
        unsafe { clGetKernelInfo(k, CL_KERNEL_NUM_ARGS, s, v, r) }
    });
    // One past the last argument too: the hidden one must not show.
    for i in 0..=n {
        for (what, param) in [
            ("ARG_ADDRESS_QUALIFIER", CL_KERNEL_ARG_ADDRESS_QUALIFIER),
            ("ARG_ACCESS_QUALIFIER", CL_KERNEL_ARG_ACCESS_QUALIFIER),
            ("ARG_TYPE_NAME", CL_KERNEL_ARG_TYPE_NAME),
            ("ARG_TYPE_QUALIFIER", CL_KERNEL_ARG_TYPE_QUALIFIER),
            ("ARG_NAME", CL_KERNEL_ARG_NAME),
        ] {
            // SAFETY: a query with the buffer and sizes `answer` passes.
            let (rc, v) = answer(|s, v, r| unsafe { clGetKernelArgInfo(k, i, param, s, v, r) });
            out.push((format!("{what}[{i}]"), rc, v));
        }
    }
    for (what, param) in [
        ("WORK_GROUP_SIZE", CL_KERNEL_WORK_GROUP_SIZE),
        ("COMPILE_WORK_GROUP_SIZE", CL_KERNEL_COMPILE_WORK_GROUP_SIZE),
        ("LOCAL_MEM_SIZE", CL_KERNEL_LOCAL_MEM_SIZE),
        (
            "PREFERRED_WORK_GROUP_SIZE_MULTIPLE",
            CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE,
        ),
    ] {
        // SAFETY: a query with the buffer and sizes `answer` passes.
        let (rc, v) =
            answer(|s, v, r| unsafe { clGetKernelWorkGroupInfo(k, device, param, s, v, r) });
        out.push((what.to_string(), rc, v));
    }
    out
}

fn assert_same_queries(
    name: &str,
    bare: &[(String, cl_int, Vec<u8>)],
    sp: &[(String, cl_int, Vec<u8>)],
) {
    assert_eq!(bare.len(), sp.len(), "{name}: number of queries");
    for (b, s) in bare.iter().zip(sp) {
        assert_eq!(
            b, s,
            "{name}: kernel query {} differs from the bare driver",
            b.0
        );
    }
}

fn input(n: usize) -> Vec<u32> {
    (0..n as u32)
        .map(|i| i.wrapping_mul(2_654_435_761) ^ 0x5bd1_e995)
        .collect()
}

/// Runs `k` over `GLOBAL` items (local size `LOCAL`) on `input()`, and reads it back.
fn run(env: &Env, k: cl_kernel) -> Vec<u32> {
    // Several waves on a GPU, where no slice is narrower than one.
    let global = mc::sliceable_items(env, GLOBAL);
    let data = input(global);
    let buf = env.buffer(global * 4);
    env.write(buf, &data);
    mc::arg(k, 0, buf);
    mc::arg(k, 1, 11u32);
    // SAFETY: a valid queue and kernel, one dimension.
    ok(unsafe {
        clEnqueueNDRangeKernel(
            env.queue,
            k,
            1,
            null(),
            &global,
            &LOCAL,
            0,
            null(),
            null_mut(),
        )
    });
    let got = env.read::<u32>(buf, global);
    mc::release_mems(&[buf]);
    got
}

/// Runs `k` through SoftPreempt; `sliced` says whether the arbiter must count slices.
fn run_sp(dir: &Path, sp: &Env, k: cl_kernel, sliced: bool, what: &str) -> Vec<u32> {
    let warm = mc::filled(sp, 4, 0u32);
    mc::finish(sp.queue);
    // Counted by client: tests that run beside this one (a_second_process... while its
    // child runs) release queues of this process, whose counts then leave the segment.
    let before = mc::slice_counts(dir);
    let got = run(sp, k);
    if sliced {
        mc::eventually(
            &format!("{what}: launch sliced\n{}", mc::describe(dir)),
            std::time::Duration::from_secs(10),
            || mc::slices_since(dir, &before) >= 2,
        );
    } else {
        std::thread::sleep(std::time::Duration::from_millis(100));
        let slices = mc::slices_since(dir, &before);
        assert!(slices <= 1, "{what}: sliced ({slices} slices)");
    }
    mc::release_mems(&[warm]);
    got
}

/// Kernel `name` of a bare program and of a SoftPreempt one: the same query answers, the
/// same results, sliced (or not) as `sliced` says.
fn same_kernel(
    dir: &Path,
    (bare, pb): (&Env, cl_program),
    (sp, ps): (&Env, cl_program),
    name: &str,
    sliced: bool,
) {
    let kb = bare.kernel(pb, name);
    let ks = sp.kernel(ps, name);
    assert_same_queries(
        name,
        &kernel_queries(kb, bare.device),
        &kernel_queries(ks, sp.device),
    );
    let want = run(bare, kb);
    let got = run_sp(dir, sp, ks, sliced, name);
    assert!(want == got, "{name}: {}", mc::first_difference(&want, &got));
    // SAFETY: our kernels.
    unsafe {
        clReleaseKernel(kb);
        clReleaseKernel(ks);
    }
}

/// Loads `bin` on the bare platform and through SoftPreempt, and checks each kernel:
/// the same query answers, the same results, sliced (or not) as `sliced` says.
fn check_binary(dir: &Path, bin: &[u8], kernels: &[&str], sliced: bool) {
    let bare = Env::new(bare_platform());
    let sp = Env::sp();
    let pb = mc::program_from_binary(&bare, bin, OPTIONS);
    let ps = mc::program_from_binary(&sp, bin, OPTIONS);
    for (what, param) in [
        ("KERNEL_NAMES", CL_PROGRAM_KERNEL_NAMES),
        ("NUM_KERNELS", CL_PROGRAM_NUM_KERNELS),
        ("BINARY_SIZES", CL_PROGRAM_BINARY_SIZES),
    ] {
        // SAFETY: queries with the buffer and sizes `answer` passes.
        let b = answer(|s, v, r| unsafe { clGetProgramInfo(pb, param, s, v, r) });
        // SAFETY: as above.
        let s = answer(|s, v, r| unsafe { clGetProgramInfo(ps, param, s, v, r) });
        assert_eq!(b, s, "CL_PROGRAM_{what} differs from the bare driver");
    }
    assert!(
        mc::binary_of(ps) == mc::binary_of(pb),
        "the binary of a program loaded from a binary is the bare driver's"
    );
    for name in kernels {
        same_kernel(dir, (&bare, pb), (&sp, ps), name, sliced);
    }
    // SAFETY: our programs.
    unsafe {
        clReleaseProgram(pb);
        clReleaseProgram(ps);
    }
}

const BINARIES_DIR: &str = "SP_TEST_BINARIES_DIR";

/// The first process builds from source through SoftPreempt (a program of several
/// kernels, and a `clCompileProgram`/`clLinkProgram` one) and writes the binaries; the
/// second loads them.
#[test]
fn a_second_process_loads_the_binaries_as_the_bare_driver_and_slices_them() {
    let (dir, g) = setup();
    let sp = Env::sp();
    let bare = Env::new(bare_platform());
    let multi = mc::build(&sp, MULTI, OPTIONS).unwrap();
    let linked = compile_and_link(&sp);
    let bare_programs = [
        mc::build(&bare, MULTI, OPTIONS).unwrap(),
        compile_and_link(&bare),
    ];
    // Through SoftPreempt, every kernel of the source build answers as bare, and is
    // sliced.
    for ((p, names), pb) in [(multi, MULTI_KERNELS), (linked, LINKED_KERNELS)]
        .into_iter()
        .zip(bare_programs)
    {
        for name in names {
            same_kernel(dir, (&bare, pb), (&sp, p), name, true);
        }
    }
    // The rewritten programs' own binaries are kept beside their entries.
    let blobs = |e: &PathBuf| e.extension().is_some_and(|x| x == "bin");
    let before = store_files().into_iter().filter(blobs).count();
    let out = mc::private_dir("binaries");
    std::fs::write(out.join("multi.bin"), mc::binary_of(multi)).unwrap();
    std::fs::write(out.join("linked.bin"), mc::binary_of(linked)).unwrap();
    // Written on a thread of the layer, after the entries.
    eventually("one rewritten binary per program", || {
        store_files().into_iter().filter(blobs).count() == before + 2
    });
    // SAFETY: our programs.
    unsafe {
        clReleaseProgram(multi);
        clReleaseProgram(linked);
    }
    drop(g);
    mc::run_child(
        "second_process",
        (BINARIES_DIR, out.as_os_str()),
        "second process ok",
    );
}

/// The second process of the test above.
#[test]
fn second_process() {
    let Some(bins) = std::env::var_os(BINARIES_DIR).map(PathBuf::from) else {
        return;
    };
    let (dir, _g) = setup();
    let read = |f: &str| std::fs::read(bins.join(f)).unwrap();
    check_binary(dir, &read("multi.bin"), MULTI_KERNELS, true);
    check_binary(dir, &read("linked.bin"), LINKED_KERNELS, true);
    println!("second process ok");
}

/// A binary built on the bare platform loads through SoftPreempt, and one built through
/// SoftPreempt loads on the bare platform: they are the same binary.
#[test]
fn binaries_cross_between_the_bare_platform_and_softpreempt() {
    let (dir, _g) = setup();
    let src = MULTI.replace("1000u", "1001u");
    let bare = Env::new(bare_platform());
    let sp = Env::sp();
    let pb = mc::build(&bare, &src, OPTIONS).unwrap();
    let ps = mc::build(&sp, &src, OPTIONS).unwrap();
    let (bin_bare, bin_sp) = (mc::binary_of(pb), mc::binary_of(ps));
    // The bare one through SoftPreempt (the same bytes as ours: known to the store).
    check_binary(dir, &bin_bare, MULTI_KERNELS, bin_bare == bin_sp);
    // Ours on the bare platform.
    runs_on_bare_as_its_own(&bare, pb, &bin_bare, &bin_sp);
}

/// `bin_sp` (MULTI built through SoftPreempt) loads and runs on the bare platform as the
/// bare driver's program `pb` (binary `bin_bare`) of the same source, and on PoCL is the
/// same binary (PoCL gives the same binary for the same source and options).
fn runs_on_bare_as_its_own(bare: &Env, pb: cl_program, bin_bare: &[u8], bin_sp: &[u8]) {
    let loaded = mc::program_from_binary(bare, bin_sp, OPTIONS);
    for name in MULTI_KERNELS {
        let want = run(bare, bare.kernel(pb, name));
        let got = run(bare, bare.kernel(loaded, name));
        assert!(want == got, "{name}: {}", mc::first_difference(&want, &got));
    }
    if mc::is_pocl() {
        assert!(bin_bare == bin_sp, "the same binary as the bare driver's");
    }
}

/// Once a process has asked for binaries, a rewritten build builds the application's own
/// program beside it (in a private context of the layer, on a thread): its binaries are
/// still the bare driver's, whether asked at once, after a rebuild, or never (the
/// program released while that build may still run).
#[test]
fn binaries_built_beside_the_rewritten_program_are_the_bare_drivers() {
    let (dir, _g) = setup();
    let bare = Env::new(bare_platform());
    let sp = Env::sp();
    // The process asks for binaries: later builds start their own program beside.
    let first = mc::build(&sp, &MULTI.replace("1000u", "1012u"), OPTIONS).unwrap();
    mc::binary_of(first);
    // Released unasked, right after its build.
    let unasked = mc::build(&sp, &MULTI.replace("1000u", "1013u"), OPTIONS).unwrap();
    // SAFETY: our programs.
    unsafe {
        clReleaseProgram(first);
        clReleaseProgram(unasked);
    }
    let src = MULTI.replace("1000u", "1014u");
    let ps = mc::build(&sp, &src, OPTIONS).unwrap();
    let pb = mc::build(&bare, &src, OPTIONS).unwrap();
    // Built again before the binaries are read: they are the last build's.
    let opts = CString::new(OPTIONS).unwrap();
    // SAFETY: a valid program with no kernels attached, its device and options.
    ok(unsafe { clBuildProgram(ps, 1, &sp.device, opts.as_ptr(), None, null_mut()) });
    let (bin_sp, bin_bare) = (mc::binary_of(ps), mc::binary_of(pb));
    // It answers every kernel query as the bare driver's, and its kernels are sliced.
    for name in MULTI_KERNELS {
        same_kernel(dir, (&bare, pb), (&sp, ps), name, true);
    }
    // Ours loads and runs on the bare platform as the bare driver's own.
    runs_on_bare_as_its_own(&bare, pb, &bin_bare, &bin_sp);
}

/// Waits until `done` holds: what a thread of the layer writes in the background (a
/// bound for a stuck thread, not a speed target).
fn eventually(what: &str, done: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "never: {what}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Every file of this process tree's program store.
fn store_files() -> Vec<PathBuf> {
    let dir = PathBuf::from(std::env::var_os("XDG_CACHE_HOME").unwrap())
        .join("softpreempt")
        .join("programs");
    std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

/// Every file of this process tree's program store named `*.{ext}`.
fn store_files_of(ext: &str) -> Vec<PathBuf> {
    store_files()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect()
}

/// Every entry file of this process tree's program store.
fn store_entries() -> Vec<PathBuf> {
    store_files_of("json")
}

/// A truncated or corrupt store entry is a miss: the binary loads and runs as the bare
/// driver's, unsliced.
#[test]
fn corrupt_store_entries_are_misses() {
    let (dir, _g) = setup();
    let src = MULTI.replace("1000u", "1002u");
    let sp = Env::sp();
    let p = mc::build(&sp, &src, OPTIONS).unwrap();
    let before: Vec<PathBuf> = store_entries();
    let bin = mc::binary_of(p);
    let fresh: Vec<PathBuf> = store_entries()
        .into_iter()
        .filter(|e| !before.contains(e))
        .collect();
    assert_eq!(fresh.len(), 1, "one store entry for one binary");
    // The entry names the rewritten binary once a thread of the layer has written it.
    let named = || {
        String::from_utf8_lossy(&std::fs::read(&fresh[0]).unwrap())
            .contains("\"rewritten_binary\":\"")
    };
    eventually("the entry names its rewritten binary", named);
    let whole = std::fs::read(&fresh[0]).unwrap();
    for (how, bytes) in [
        ("truncated", whole[..whole.len() / 2].to_vec()),
        ("corrupt", {
            let mut b = whole.clone();
            let i = b.len() - 10;
            b[i] ^= 0x41;
            b
        }),
    ] {
        std::fs::write(&fresh[0], &bytes).unwrap();
        check_binary(dir, &bin, MULTI_KERNELS, false);
        eprintln!("{how} entry: a miss");
    }
    // Written whole again, it is a hit.
    std::fs::write(&fresh[0], &whole).unwrap();
    check_binary(dir, &bin, MULTI_KERNELS, true);
    // A corrupt rewritten binary: the entry's recipe is compiled instead.
    let text = String::from_utf8_lossy(&whole).into_owned();
    let sha = text
        .split("\"rewritten_binary\":\"")
        .nth(1)
        .and_then(|t| t.get(..64))
        .expect("the entry names its rewritten binary");
    let blob = fresh[0].with_file_name(format!("{sha}.bin"));
    let good = std::fs::read(&blob).unwrap();
    std::fs::write(&blob, &good[..good.len() / 2]).unwrap();
    check_binary(dir, &bin, MULTI_KERNELS, true);
    std::fs::write(&blob, &good).unwrap();
    // SAFETY: our program.
    unsafe { clReleaseProgram(p) };
}

/// What the build notification of the test below saw.
struct Seen {
    returned: std::sync::atomic::AtomicBool,
    calls: std::sync::atomic::AtomicU32,
    after_return: std::sync::atomic::AtomicBool,
    program: std::sync::atomic::AtomicPtr<c_void>,
    status: std::sync::atomic::AtomicI32,
    kernel_ok: std::sync::atomic::AtomicBool,
}

extern "C" fn build_done(p: cl_program, data: *mut c_void) {
    use std::sync::atomic::Ordering::SeqCst;
    // SAFETY: `data` is the test's `Seen`, alive until the test has seen the call.
    let seen = unsafe { &*(data as *const Seen) };
    // A synchronous build would call back before clBuildProgram returned: wait (a while)
    // for the test to say it has returned.
    let t0 = std::time::Instant::now();
    while !seen.returned.load(SeqCst) && t0.elapsed() < std::time::Duration::from_secs(5) {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    seen.after_return.store(seen.returned.load(SeqCst), SeqCst);
    let device: cl_device_id = common::info_scalar(|s, v, r| {
        // SAFETY: a query into one device handle (the program has one device).
        unsafe { clGetProgramInfo(p, CL_PROGRAM_DEVICES, s, v, r) }
    });
    let status: cl_build_status = common::info_scalar(|s, v, r| {
        // SAFETY: a query into a cl_build_status.
        unsafe { clGetProgramBuildInfo(p, device, CL_PROGRAM_BUILD_STATUS, s, v, r) }
    });
    seen.status.store(status, SeqCst);
    // Applications create their kernels from the notification.
    let name = CString::new("groups").unwrap();
    let mut err = 0;
    // SAFETY: the program the notification names, and a kernel name.
    let k = unsafe { clCreateKernel(p, name.as_ptr(), &mut err) };
    if err == CL_SUCCESS {
        // SAFETY: the kernel just created.
        unsafe { clReleaseKernel(k) };
    }
    seen.kernel_ok.store(err == CL_SUCCESS, SeqCst);
    seen.program.store(p, SeqCst);
    seen.calls.fetch_add(1, SeqCst);
}

/// A rewritten build with a notification runs on after `clBuildProgram` returns, as a
/// bare build may; the application hears of its own program once, built.
#[test]
fn a_rewritten_build_with_a_notification_runs_on() {
    use std::sync::atomic::Ordering::SeqCst;
    let (dir, _g) = setup();
    let sp = Env::sp();
    let src = MULTI.replace("1000u", "1003u");
    let p = source_program(&sp, &src);
    let seen = Box::new(Seen {
        returned: false.into(),
        calls: 0.into(),
        after_return: false.into(),
        program: std::sync::atomic::AtomicPtr::new(null_mut()),
        status: 0.into(),
        kernel_ok: false.into(),
    });
    let opts = CString::new(OPTIONS).unwrap();
    // SAFETY: valid program, device and options; `seen` outlives the notification.
    ok(unsafe {
        clBuildProgram(
            p,
            1,
            &sp.device,
            opts.as_ptr(),
            Some(build_done),
            &*seen as *const Seen as *mut c_void,
        )
    });
    // The build may still be running: the status says so, or that it is done.
    let status: cl_build_status = common::info_scalar(|s, v, r| {
        // SAFETY: a query into a cl_build_status.
        unsafe { clGetProgramBuildInfo(p, sp.device, CL_PROGRAM_BUILD_STATUS, s, v, r) }
    });
    assert!(
        status == CL_BUILD_IN_PROGRESS || status == CL_BUILD_SUCCESS,
        "status {status}"
    );
    seen.returned.store(true, SeqCst);
    mc::eventually(
        "the build notification",
        std::time::Duration::from_secs(30),
        || seen.calls.load(SeqCst) > 0,
    );
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert_eq!(seen.calls.load(SeqCst), 1, "notified once");
    assert!(
        seen.after_return.load(SeqCst),
        "notified after clBuildProgram returned"
    );
    assert_eq!(seen.program.load(SeqCst), p, "the application's program");
    assert_eq!(seen.status.load(SeqCst), CL_BUILD_SUCCESS);
    assert!(
        seen.kernel_ok.load(SeqCst),
        "kernels are created from the notification"
    );
    // The rewritten build it was: its geometry kernels are sliced, with bare results.
    let bare = Env::new(bare_platform());
    let pb = mc::build(&bare, &src, OPTIONS).unwrap();
    for name in ["groups", "sizes"] {
        let want = run(&bare, bare.kernel(pb, name));
        let got = run_sp(dir, &sp, sp.kernel(p, name), true, name);
        assert!(want == got, "{name}: {}", mc::first_difference(&want, &got));
    }
}

const READ_ONLY: &str = "SP_TEST_READ_ONLY_STORE";

/// A store that cannot be written (a read-only file system) does no harm: builds, binaries
/// and results are as bare; a binary loaded again is only not sliced.
#[test]
fn a_read_only_store_is_no_harm() {
    let _g = setup();
    mc::run_child(
        "read_only_store_child",
        (READ_ONLY, std::ffi::OsStr::new("1")),
        "read-only child ok",
    );
}

/// The process of the test above, with its store on a read-only file system.
#[test]
fn read_only_store_child() {
    if std::env::var_os(READ_ONLY).is_none() {
        return;
    }
    // Before the first OpenCL call, which reads the configuration.
    std::env::set_var("SOFTPREEMPT_STORE", "/proc/softpreempt-store");
    let (dir, _g) = setup();
    let sp = Env::sp();
    let src = MULTI.replace("1000u", "1004u");
    let p = mc::build(&sp, &src, OPTIONS).unwrap();
    let bin = mc::binary_of(p);
    check_binary(dir, &bin, MULTI_KERNELS, false);
    println!("read-only child ok");
}

/// A kernel with a required work-group size that reads the launch geometry (so it is
/// rewritten).
const REQUIRED: &str = r#"
kernel __attribute__((reqd_work_group_size(2, 1, 1)))
void required(global uint* o, uint k) {
    size_t i = get_global_id(0);
    o[i] = (uint)get_group_id(0) * 3u + (uint)get_local_id(0) + k;
}
"#;

/// The application reads a program's binaries and then launches its kernel, which has a
/// required work-group size, as OpenCV does: the bare driver makes the binaries in that
/// call, before the launch, and so must the layer make the rewritten program's (for the
/// store). PoCL before 7.0 (`pocl_release_dlhandle_cache`) finds the compiled work-group
/// function a finished command releases by kernel and local size only; making a
/// program's binaries puts a generic one of each kernel, with the required size as its
/// local size and no reference, first in that cache, so a command of that kernel that
/// ended meanwhile released it instead of its own: `Assertion found->ref_count > 0`
/// (SIGABRT; OpenCV's chaos run, once in CI). The layer made that binary on a thread,
/// while the application's launches of the program ran. Whether such an abort comes is
/// down to timing; the order is not: the binary must be stored when the call returns.
#[test]
fn binaries_asked_before_a_launch_are_made_before_it() {
    let _g = setup();
    let sp = Env::sp();
    let p = mc::build(&sp, REQUIRED, "").unwrap();
    let before = store_files_of("bin");
    mc::binary_of(p);
    let stored_at_once = store_files_of("bin").iter().any(|b| !before.contains(b));
    let k = sp.kernel(p, "required");
    let out = sp.buffer(8 * 4);
    mc::arg(k, 0, out);
    mc::arg(k, 1, 5u32);
    ok(mc::enqueue(sp.queue, k, None, &[8], Some(&[2]), &[], None));
    let got = sp.read::<u32>(out, 8);
    let want: Vec<u32> = (0..8).map(|i| i / 2 * 3 + i % 2 + 5).collect();
    assert_eq!(got, want);
    assert!(
        stored_at_once,
        "the rewritten binary was stored after the binaries call returned"
    );
    mc::release_mems(&[out]);
    // SAFETY: our kernel and program.
    unsafe {
        clReleaseKernel(k);
        clReleaseProgram(p);
    }
}
