//! Programs through the real loader, side by side with bare PoCL: creation (source,
//! binary, built-in kernels, IL), build / compile / link with notifications, info queries
//! that return handles, kernels in a program, bad handles and reference counts.

mod common;

use common::*;
use opencl_sys::cl_icd::cl_icd_dispatch;
use opencl_sys::*;
use std::ffi::{c_char, c_void, CString};
use std::ptr::{null, null_mut};
use std::sync::Mutex;

const SCALE_SRC: &str =
    "__kernel void scale(__global int *o, int f) { int i = get_global_id(0); o[i] = i * f; }";

/// Creates a program from source without building it.
fn source(ctx: cl_context, src: &str) -> (cl_program, cl_int) {
    let c = CString::new(src).unwrap();
    let p = c.as_ptr();
    let mut err = 0;
    // SAFETY: one NUL-terminated string.
    let prog = unsafe { clCreateProgramWithSource(ctx, 1, &p, null(), &mut err) };
    (prog, err)
}

fn build(p: cl_program, d: cl_device_id, opts: &str) -> cl_int {
    let o = CString::new(opts).unwrap();
    // SAFETY: a program, one device and an options string.
    unsafe { clBuildProgram(p, 1, &d, o.as_ptr(), None, null_mut()) }
}

fn prog_info(p: cl_program, q: cl_program_info) -> Vec<u8> {
    info_bytes(|s, v, r| unsafe { clGetProgramInfo(p, q, s, v, r) })
}

fn prog_uint(p: cl_program, q: cl_program_info) -> cl_uint {
    info_scalar(|s, v, r| unsafe { clGetProgramInfo(p, q, s, v, r) })
}

fn build_log(p: cl_program, d: cl_device_id) -> String {
    cstr(&info_bytes(|s, v, r| unsafe {
        clGetProgramBuildInfo(p, d, CL_PROGRAM_BUILD_LOG, s, v, r)
    }))
}

fn release(p: cl_program) {
    // SAFETY: a program the test owns.
    ok(unsafe { clReleaseProgram(p) });
}

fn handles<H: Copy>(b: &[u8]) -> Vec<H> {
    b.chunks_exact(std::mem::size_of::<H>())
        // SAFETY: the chunk holds one H.
        .map(|c| unsafe { (c.as_ptr() as *const H).read_unaligned() })
        .collect()
}

/// Runs `scale(o, f)` over `n` items of `prog` and returns the output.
fn run_scale(env: &Env, prog: cl_program, name: &str, n: usize, f: Option<cl_int>) -> Vec<cl_int> {
    let k = env.kernel(prog, name);
    let out = env.buffer(n * 4);
    // SAFETY: a valid kernel, buffer and scalar.
    unsafe {
        ok(clSetKernelArg(
            k,
            0,
            std::mem::size_of::<cl_mem>(),
            &out as *const cl_mem as *const c_void,
        ));
        if let Some(f) = f {
            ok(clSetKernelArg(
                k,
                1,
                4,
                &f as *const cl_int as *const c_void,
            ));
        }
        ok(clEnqueueNDRangeKernel(
            env.queue,
            k,
            1,
            null(),
            &n,
            null(),
            0,
            null(),
            null_mut(),
        ));
    }
    let v = env.read::<cl_int>(out, n);
    // SAFETY: objects the test owns.
    unsafe {
        ok(clReleaseKernel(k));
        ok(clReleaseMemObject(out));
    }
    v
}

#[test]
fn info_queries_return_our_wrappers() {
    let env = Env::sp();
    let bare = Env::new(bare_platform());
    let p = env.program(SCALE_SRC);
    let bp = bare.program(SCALE_SRC);
    assert_eq!(
        handles::<cl_context>(&prog_info(p, CL_PROGRAM_CONTEXT)),
        vec![env.context]
    );
    assert_eq!(
        handles::<cl_device_id>(&prog_info(p, CL_PROGRAM_DEVICES)),
        vec![env.device]
    );
    for q in [
        CL_PROGRAM_NUM_DEVICES,
        CL_PROGRAM_NUM_KERNELS as cl_program_info,
    ] {
        assert_eq!(prog_info(p, q), prog_info(bp, q), "query {q:#x}");
    }
    for q in [CL_PROGRAM_SOURCE, CL_PROGRAM_KERNEL_NAMES] {
        assert_eq!(
            cstr(&prog_info(p, q)),
            cstr(&prog_info(bp, q)),
            "query {q:#x}"
        );
    }
    let status = |p: cl_program, d| -> cl_build_status {
        info_scalar(|s, v, r| unsafe {
            clGetProgramBuildInfo(p, d, CL_PROGRAM_BUILD_STATUS, s, v, r)
        })
    };
    assert_eq!(status(p, env.device), CL_BUILD_SUCCESS);
    assert_eq!(status(p, env.device), status(bp, bare.device));
    // Spec size rules on a handle-valued answer: too small is CL_INVALID_VALUE.
    let mut one = 0u8;
    // SAFETY: one byte offered for a pointer-sized answer.
    let rc = unsafe {
        clGetProgramInfo(
            p,
            CL_PROGRAM_CONTEXT,
            1,
            &mut one as *mut u8 as *mut c_void,
            null_mut(),
        )
    };
    assert_eq!(rc, CL_INVALID_VALUE);
    release(p);
    release(bp);
}

static NOTES: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

unsafe extern "C" fn note(p: cl_program, user: *mut c_void) {
    NOTES.lock().unwrap().push((p as usize, user as usize));
}

/// The notifications recorded with user data `tag`.
fn notes(tag: usize) -> Vec<usize> {
    NOTES
        .lock()
        .unwrap()
        .iter()
        .filter(|n| n.1 == tag)
        .map(|n| n.0)
        .collect()
}

fn wait_for(pred: impl Fn() -> bool) -> bool {
    for _ in 0..2000 {
        if pred() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    pred()
}

#[test]
fn build_notify_gets_app_program_and_user_data() {
    let env = Env::sp();
    let (p, err) = source(env.context, SCALE_SRC);
    ok(err);
    // SAFETY: a valid program and device, a callback with tagged user data.
    ok(unsafe { clBuildProgram(p, 1, &env.device, null(), Some(note), 0xB001 as *mut c_void) });
    assert!(wait_for(|| !notes(0xB001).is_empty()));
    assert_eq!(notes(0xB001), vec![p as usize]);
    assert_eq!(run_scale(&env, p, "scale", 4, Some(5)), vec![0, 5, 10, 15]);
    // A failing build notifies too (PoCL always does): the app's program again.
    let (bad, err) = source(env.context, "__kernel void k( { }");
    ok(err);
    // SAFETY: as above.
    let rc = unsafe { clBuildProgram(bad, 0, null(), null(), Some(note), 0xB002 as *mut c_void) };
    assert_eq!(rc, CL_BUILD_PROGRAM_FAILURE);
    assert!(wait_for(|| !notes(0xB002).is_empty()));
    assert_eq!(notes(0xB002), vec![bad as usize]);
    release(p);
    release(bad);
}

/// Compiles `src` with optional header programs, notifying with `tag`.
fn compile(p: cl_program, d: cl_device_id, headers: &[(cl_program, &str)], tag: usize) -> cl_int {
    let names: Vec<CString> = headers.iter().map(|h| CString::new(h.1).unwrap()).collect();
    let mut name_ptrs: Vec<*const c_char> = names.iter().map(|n| n.as_ptr()).collect();
    let progs: Vec<cl_program> = headers.iter().map(|h| h.0).collect();
    let (hp, np) = if headers.is_empty() {
        (null(), null_mut())
    } else {
        (progs.as_ptr(), name_ptrs.as_mut_ptr())
    };
    // SAFETY: matching header/name arrays of `headers.len()` items.
    unsafe {
        clCompileProgram(
            p,
            1,
            &d,
            null(),
            headers.len() as cl_uint,
            hp,
            np,
            Some(note),
            tag as *mut c_void,
        )
    }
}

fn link(
    ctx: cl_context,
    d: cl_device_id,
    inputs: &[cl_program],
    notify: Option<usize>,
) -> (cl_program, cl_int) {
    let mut err = 0;
    let (f, data): (Option<unsafe extern "C" fn(cl_program, *mut c_void)>, _) = match notify {
        Some(tag) => (Some(note), tag as *mut c_void),
        None => (None, null_mut()),
    };
    // SAFETY: `inputs.len()` programs, one device.
    let p = unsafe {
        clLinkProgram(
            ctx,
            1,
            &d,
            null(),
            inputs.len() as cl_uint,
            inputs.as_ptr(),
            f,
            data,
            &mut err,
        )
    };
    (p, err)
}

/// Header program + two compiled programs, linked: the kernel works, and every
/// notification carries the application's programs and user data.
fn compile_and_link(env: &Env, tag: usize) -> Vec<cl_int> {
    let (header, err) = source(env.context, "#define FACTOR 3\n");
    ok(err);
    let (lib, err) = source(
        env.context,
        "#include \"factor.h\"\nint scale_by(int x) { return x * FACTOR; }\n",
    );
    ok(err);
    let (main, err) = source(
        env.context,
        "int scale_by(int x);\n__kernel void run(__global int *o) { int i = get_global_id(0); o[i] = scale_by(i); }\n",
    );
    ok(err);
    ok(compile(lib, env.device, &[(header, "factor.h")], tag + 1));
    ok(compile(main, env.device, &[], tag + 2));
    let (linked, err) = link(env.context, env.device, &[lib, main], Some(tag + 3));
    ok(err);
    assert!(wait_for(|| !notes(tag + 3).is_empty()));
    assert_eq!(notes(tag + 1), vec![lib as usize]);
    assert_eq!(notes(tag + 2), vec![main as usize]);
    assert_eq!(
        notes(tag + 3),
        vec![linked as usize],
        "link notification names the returned program"
    );
    assert_eq!(
        handles::<cl_context>(&prog_info(linked, CL_PROGRAM_CONTEXT)),
        vec![env.context]
    );
    assert_eq!(
        handles::<cl_device_id>(&prog_info(linked, CL_PROGRAM_DEVICES)),
        vec![env.device]
    );
    let (plain, err) = link(env.context, env.device, &[lib, main], None);
    ok(err);
    let out = run_scale(env, linked, "run", 5, None);
    assert_eq!(run_scale(env, plain, "run", 5, None), out);
    for p in [header, lib, main, linked, plain] {
        release(p);
    }
    out
}

#[test]
fn compile_with_header_and_link_gives_working_kernel() {
    let env = Env::sp();
    assert_eq!(compile_and_link(&env, 0xC000), vec![0, 3, 6, 9, 12]);
}

#[test]
fn link_errors_match_bare() {
    let run = |env: &Env, tag: usize| {
        let (main, err) = source(
            env.context,
            "int missing(int);\n__kernel void k(__global int *o) { o[0] = missing(1); }",
        );
        ok(err);
        ok(compile(main, env.device, &[], tag));
        let (p, link_err) = link(env.context, env.device, &[main], Some(tag + 1));
        assert!(wait_for(|| !notes(tag + 1).is_empty()));
        let notified = notes(tag + 1);
        if !p.is_null() {
            assert_eq!(notified, vec![p as usize]);
            release(p);
        }
        // Not a compiled program: the vendor's code, and its notification.
        let (src_only, err) = source(env.context, SCALE_SRC);
        ok(err);
        let (p2, err2) = link(env.context, env.device, &[src_only], None);
        if !p2.is_null() {
            release(p2); // NVIDIA links it anyway; the codes are compared with bare below
        }
        // No input programs at all.
        let mut err3 = 0;
        // SAFETY: an empty input list on purpose.
        let p3 = unsafe {
            clLinkProgram(
                env.context,
                0,
                null(),
                null(),
                0,
                null(),
                None,
                null_mut(),
                &mut err3,
            )
        };
        assert!(p3.is_null());
        release(main);
        release(src_only);
        (p.is_null(), link_err, notified.len(), err2, err3)
    };
    let sp = run(&Env::sp(), 0xD000);
    let bare = run(&Env::new(bare_platform()), 0xD100);
    assert_eq!(sp, bare);
    assert_ne!(sp.1, CL_SUCCESS, "an unresolved symbol must fail the link");
}

#[test]
fn binaries_round_trip() {
    let env = Env::sp();
    let p = env.program(SCALE_SRC);
    let sizes: Vec<usize> = handles(&prog_info(p, CL_PROGRAM_BINARY_SIZES));
    assert_eq!(sizes.len(), 1);
    assert!(sizes[0] > 0);
    let mut bin = vec![0u8; sizes[0]];
    let mut ptrs = [bin.as_mut_ptr()];
    // SAFETY: an array of one pointer to `sizes[0]` writable bytes.
    ok(unsafe {
        clGetProgramInfo(
            p,
            CL_PROGRAM_BINARIES,
            std::mem::size_of_val(&ptrs),
            ptrs.as_mut_ptr() as *mut c_void,
            null_mut(),
        )
    });
    let len = bin.len();
    let bptr = bin.as_ptr();
    let mut status = -1;
    let mut err = 0;
    // SAFETY: one device, one binary of `len` bytes.
    let p2 = unsafe {
        clCreateProgramWithBinary(
            env.context,
            1,
            &env.device,
            &len,
            &bptr,
            &mut status,
            &mut err,
        )
    };
    ok(err);
    assert_eq!(status, CL_SUCCESS);
    assert_eq!(
        handles::<cl_device_id>(&prog_info(p2, CL_PROGRAM_DEVICES)),
        vec![env.device]
    );
    ok(build(p2, env.device, ""));
    assert_eq!(
        run_scale(&env, p2, "scale", 6, Some(7)),
        vec![0, 7, 14, 21, 28, 35]
    );
    // Bad binaries and device lists get the vendor's (or the spec's) codes, as bare.
    let bad = |ctx: cl_context, d: cl_device_id, n: cl_uint, list: bool| {
        let junk = [1u8, 2, 3, 4];
        let (jl, jp) = (junk.len(), junk.as_ptr());
        let (mut st, mut err) = (0, 0);
        let devs = [d];
        let l = if list { devs.as_ptr() } else { null() };
        // SAFETY: a junk binary of `jl` bytes for up to one device.
        let p = unsafe { clCreateProgramWithBinary(ctx, n, l, &jl, &jp, &mut st, &mut err) };
        // PoCL rejects the junk at once; NVIDIA accepts it and fails the build later.
        if !p.is_null() {
            release(p);
        }
        (err, if n == 1 && list { st } else { 0 })
    };
    let b = Env::new(bare_platform());
    for (n, list) in [(1, true), (0, false), (1, false), (0, true)] {
        assert_eq!(
            bad(env.context, env.device, n, list),
            bad(b.context, b.device, n, list),
            "n={n} list={list}"
        );
    }
    release(p);
    release(p2);
}

#[test]
fn builtin_kernels_il_and_specialization_match_bare() {
    let run = |env: &Env| {
        let mut out = Vec::new();
        let names = cstr(&info_bytes(|s, v, r| unsafe {
            clGetDeviceInfo(env.device, CL_DEVICE_BUILT_IN_KERNELS, s, v, r)
        }));
        let first = names.split(';').next().unwrap_or("").to_string();
        for name in [first.as_str(), "no.such.kernel"] {
            let c = CString::new(name).unwrap();
            let mut err = 0;
            // SAFETY: one device, a kernel-name list.
            let p = unsafe {
                clCreateProgramWithBuiltInKernels(env.context, 1, &env.device, c.as_ptr(), &mut err)
            };
            out.push(err);
            if !p.is_null() {
                assert_eq!(
                    handles::<cl_context>(&prog_info(p, CL_PROGRAM_CONTEXT)),
                    vec![env.context]
                );
                release(p);
            }
        }
        let il = [0x07230203u32, 0x00010000, 0, 1, 0];
        let mut err = 0;
        // SAFETY: `il` is readable for its byte length.
        let p = unsafe {
            clCreateProgramWithIL(
                env.context,
                il.as_ptr() as *const c_void,
                std::mem::size_of_val(&il),
                &mut err,
            )
        };
        out.push(err);
        if !p.is_null() {
            release(p);
        }
        let prog = env.program(SCALE_SRC);
        let v: cl_int = 1;
        // SAFETY: a 4-byte value.
        out.push(unsafe {
            clSetProgramSpecializationConstant(prog, 0, 4, &v as *const cl_int as *const c_void)
        });
        release(prog);
        out
    };
    assert_eq!(run(&Env::sp()), run(&Env::new(bare_platform())));
}

static RELEASED: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

unsafe extern "C" fn on_release(p: cl_program, user: *mut c_void) {
    RELEASED.lock().unwrap().push((p as usize, user as usize));
}

#[test]
fn release_callback_matches_bare() {
    let run = |env: &Env, tag: usize| {
        let (p, err) = source(env.context, SCALE_SRC);
        ok(err);
        // SAFETY: a valid program and callback.
        #[allow(deprecated)]
        let rc = unsafe { clSetProgramReleaseCallback(p, Some(on_release), tag as *mut c_void) };
        // SAFETY: NULL callback on purpose.
        #[allow(deprecated)]
        let rc_null = unsafe { clSetProgramReleaseCallback(p, None, null_mut()) };
        release(p);
        if rc == CL_SUCCESS {
            assert!(wait_for(|| RELEASED
                .lock()
                .unwrap()
                .iter()
                .any(|r| r.1 == tag)));
            assert_eq!(
                *RELEASED
                    .lock()
                    .unwrap()
                    .iter()
                    .find(|r| r.1 == tag)
                    .unwrap(),
                (p as usize, tag)
            );
        }
        (rc, rc_null)
    };
    assert_eq!(
        run(&Env::sp(), 0xE001),
        run(&Env::new(bare_platform()), 0xE002)
    );
}

#[test]
fn kernels_in_program_are_wrapped() {
    let src = format!("{SCALE_SRC}\n__kernel void other(__global float *x) {{ x[0] = 1.0f; }}");
    let run = |env: &Env| {
        let p = env.program(&src);
        let mut n = 0;
        // SAFETY: counting only.
        ok(unsafe { clCreateKernelsInProgram(p, 0, null_mut(), &mut n) });
        let mut short = [null_mut(); 1];
        // SAFETY: an array of one, too short on purpose.
        let short_rc = unsafe { clCreateKernelsInProgram(p, 1, short.as_mut_ptr(), null_mut()) };
        let mut ks = vec![null_mut(); n as usize + 2];
        let mut made = 0;
        // SAFETY: room for more kernels than there are.
        ok(unsafe { clCreateKernelsInProgram(p, ks.len() as cl_uint, ks.as_mut_ptr(), &mut made) });
        let mut names = Vec::new();
        for &k in &ks[..made as usize] {
            let prog: cl_program =
                info_scalar(|s, v, r| unsafe { clGetKernelInfo(k, CL_KERNEL_PROGRAM, s, v, r) });
            assert_eq!(prog, p);
            names.push(cstr(&info_bytes(|s, v, r| unsafe {
                clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME, s, v, r)
            })));
            // SAFETY: a kernel the test owns.
            ok(unsafe { clReleaseKernel(k) });
        }
        names.sort();
        let (unbuilt, err) = source(env.context, SCALE_SRC);
        ok(err);
        // SAFETY: counting on an unbuilt program.
        let unbuilt_rc = unsafe { clCreateKernelsInProgram(unbuilt, 0, null_mut(), &mut n) };
        release(unbuilt);
        release(p);
        (made, names, short_rc, unbuilt_rc)
    };
    let sp = run(&Env::sp());
    assert_eq!(sp.0, 2);
    assert_eq!(sp, run(&Env::new(bare_platform())));
}

#[test]
fn build_errors_match_bare() {
    let run = |env: &Env| {
        let mut out = Vec::new();
        let (bad, err) = source(
            env.context,
            "__kernel void k(__global int *o) { o[0] = undefined_thing; }",
        );
        ok(err);
        out.push(build(bad, env.device, ""));
        out.push(info_scalar(|s, v, r| unsafe {
            clGetProgramBuildInfo(bad, env.device, CL_PROGRAM_BUILD_STATUS, s, v, r)
        }));
        assert!(
            build_log(bad, env.device).contains("undefined_thing"),
            "log: {}",
            build_log(bad, env.device)
        );
        let (p, err) = source(env.context, SCALE_SRC);
        ok(err);
        out.push(build(p, env.device, "-this-is-not-an-option"));
        // SAFETY: mismatched device count and list on purpose.
        out.push(unsafe { clBuildProgram(p, 1, null(), null(), None, null_mut()) });
        // SAFETY: as above.
        out.push(unsafe { clBuildProgram(p, 0, &env.device, null(), None, null_mut()) });
        // SAFETY: user data without a callback.
        out.push(unsafe { clBuildProgram(p, 0, null(), null(), None, 0x10 as *mut c_void) });
        ok(build(p, env.device, ""));
        let mut err = 0;
        let name = CString::new("no_such_kernel").unwrap();
        // SAFETY: an unknown kernel name.
        let k = unsafe { clCreateKernel(p, name.as_ptr(), &mut err) };
        assert!(k.is_null());
        out.push(err);
        // SAFETY: a NULL kernel name.
        let k = unsafe { clCreateKernel(p, null(), &mut err) };
        assert!(k.is_null());
        out.push(err);
        // SAFETY: count of zero.
        let q = unsafe { clCreateProgramWithSource(env.context, 0, null_mut(), null(), &mut err) };
        assert!(q.is_null());
        out.push(err);
        release(bad);
        release(p);
        out
    };
    let sp = run(&Env::sp());
    assert_eq!(sp[0], CL_BUILD_PROGRAM_FAILURE);
    assert_eq!(sp, run(&Env::new(bare_platform())));
    // A header count without headers: the spec's CL_INVALID_VALUE from the layer (bare
    // PoCL 3.1 dereferences the NULL list and crashes, so there is nothing to compare).
    let env = Env::sp();
    let p = env.program(SCALE_SRC);
    // SAFETY: mismatched header count on purpose; the layer rejects it before the vendor.
    let rc = unsafe {
        clCompileProgram(
            p,
            0,
            null(),
            null(),
            1,
            null(),
            null_mut(),
            None,
            null_mut(),
        )
    };
    assert_eq!(rc, CL_INVALID_VALUE);
    release(p);
}

/// Our dispatch table, read from one of our handles as the loader reads it, so calls with
/// handles the loader would route elsewhere (or crash on) still reach the layer.
fn table(h: *mut c_void) -> &'static cl_icd_dispatch {
    // SAFETY: `h` is one of our live handles; the ICD ABI puts the table pointer first.
    unsafe { &**(h as *const *const cl_icd_dispatch) }
}

unsafe extern "C" fn never(_p: cl_program, _u: *mut c_void) {}

/// NULL, a stack address, a bare-PoCL program, a released program and a context passed as
/// a program all get CL_INVALID_PROGRAM from every entry point taking one.
#[test]
fn invalid_program_handles() {
    let env = Env::sp();
    let bare = Env::new(bare_platform());
    let bare_prog = bare.program(SCALE_SRC);
    let t = table(env.context);
    let mut stack = [0usize; 16];
    let check = |p: cl_program, what: &str| {
        let mut out = [0u8; 64];
        let o = out.as_mut_ptr() as *mut c_void;
        let mut err = 0;
        let name = c"scale";
        let v = 0u32;
        // SAFETY: every call goes through our table; the layer must reject `p` unread.
        unsafe {
            let codes = [
                t.clRetainProgram.unwrap()(p),
                t.clReleaseProgram.unwrap()(p),
                t.clBuildProgram.unwrap()(p, 0, null(), null(), None, null_mut()),
                t.clCompileProgram.unwrap()(
                    p,
                    0,
                    null(),
                    null(),
                    0,
                    null(),
                    null_mut(),
                    None,
                    null_mut(),
                ),
                t.clGetProgramInfo.unwrap()(p, CL_PROGRAM_CONTEXT, 64, o, null_mut()),
                t.clGetProgramBuildInfo.unwrap()(
                    p,
                    env.device,
                    CL_PROGRAM_BUILD_STATUS,
                    64,
                    o,
                    null_mut(),
                ),
                t.clCreateKernelsInProgram.unwrap()(p, 0, null_mut(), null_mut()),
                t.clSetProgramReleaseCallback.unwrap()(p, Some(never), null_mut()),
                t.clSetProgramSpecializationConstant.unwrap()(
                    p,
                    0,
                    4,
                    &v as *const u32 as *const c_void,
                ),
            ];
            assert_eq!(codes, [CL_INVALID_PROGRAM; 9], "{what}");
            assert!(t.clCreateKernel.unwrap()(p, name.as_ptr(), &mut err).is_null());
            assert_eq!(err, CL_INVALID_PROGRAM, "{what}");
            // As a header or link input.
            let (good, e) = source(env.context, SCALE_SRC);
            ok(e);
            let hn = [c"h.h".as_ptr()];
            let rc = t.clCompileProgram.unwrap()(
                good,
                0,
                null(),
                null(),
                1,
                &p,
                hn.as_ptr() as *mut _,
                None,
                null_mut(),
            );
            assert_eq!(rc, CL_INVALID_PROGRAM, "{what} as a header");
            let l = t.clLinkProgram.unwrap()(
                env.context,
                0,
                null(),
                null(),
                1,
                &p,
                None,
                null_mut(),
                &mut err,
            );
            assert!(l.is_null());
            assert_eq!(err, CL_INVALID_PROGRAM, "{what} as a link input");
            release(good);
        }
    };
    check(null_mut(), "NULL");
    check(stack.as_mut_ptr() as cl_program, "stack address");
    check(bare_prog, "bare PoCL program");
    check(env.context as cl_program, "context as cl_program");
    let (gone, err) = source(env.context, SCALE_SRC);
    ok(err);
    release(gone);
    check(gone, "released program");
    // SAFETY: a released handle on purpose; the wrapper still routes to us.
    assert_eq!(unsafe { clRetainProgram(gone) }, CL_INVALID_PROGRAM);
    release(bare_prog);
}

#[test]
fn bad_devices_and_contexts() {
    let env = Env::sp();
    let p = env.program(SCALE_SRC);
    let mut stack = [0usize; 16];
    let t = table(env.context);
    let mut out = [0u8; 16];
    // SAFETY: bad device handles through our table on purpose.
    unsafe {
        for d in [
            null_mut(),
            stack.as_mut_ptr() as cl_device_id,
            env.context as cl_device_id,
        ] {
            let rc = t.clGetProgramBuildInfo.unwrap()(
                p,
                d,
                CL_PROGRAM_BUILD_STATUS,
                16,
                out.as_mut_ptr() as *mut c_void,
                null_mut(),
            );
            assert_eq!(rc, CL_INVALID_DEVICE);
            assert_eq!(
                t.clBuildProgram.unwrap()(p, 1, &d, null(), None, null_mut()),
                CL_INVALID_DEVICE
            );
        }
        let mut err = 0;
        let s = [c"x".as_ptr()];
        let q = t.clCreateProgramWithSource.unwrap()(
            stack.as_mut_ptr() as cl_context,
            1,
            s.as_ptr() as *mut _,
            null(),
            &mut err,
        );
        assert!(q.is_null());
        assert_eq!(err, CL_INVALID_CONTEXT);
        let q =
            t.clCreateProgramWithIL.unwrap()(null_mut(), s.as_ptr() as *const c_void, 1, &mut err);
        assert!(q.is_null());
        assert_eq!(err, CL_INVALID_CONTEXT);
    }
    release(p);
}

#[test]
fn reference_counts_match_bare() {
    let run = |env: &Env| {
        let p = env.program(SCALE_SRC);
        let rc = || prog_uint(p, CL_PROGRAM_REFERENCE_COUNT);
        let mut seq = vec![rc()];
        // SAFETY: retaining a live program.
        ok(unsafe { clRetainProgram(p) });
        seq.push(rc());
        let k = env.kernel(p, "scale");
        seq.push(rc());
        release(p);
        seq.push(rc());
        // SAFETY: a kernel the test owns.
        ok(unsafe { clReleaseKernel(k) });
        seq.push(rc());
        release(p);
        seq
    };
    let sp = run(&Env::sp());
    assert_eq!(sp, run(&Env::new(bare_platform())));
    assert_eq!(sp[0], 1);
}
