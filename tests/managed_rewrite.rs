//! Issue 5: kernels that read the launch geometry (`get_group_id`, `get_num_groups`,
//! `get_global_size`, `get_global_offset`, `get_global_linear_id`) are built from rewritten
//! source and sliced, with results identical to the bare vendor. This binary runs with
//! `slice = "always"` and a tiny target slice, so every sliceable launch on SoftPreempt is
//! cut into many slices; each corpus kernel is run on SoftPreempt and on the bare PoCL
//! platform (never sliced) in the same process, and the outputs are compared bit for bit.
//! The arbiter's statistics show that the launches were really sliced: a kernel whose
//! geometry came from the slice instead of the launch would give other results (the
//! rewrite tests in `platform/tests/kernel_rewrite.rs` show that for the same kernels).

mod common;
mod managed_common;
mod rewrite_corpus;

use common::{bare_platform, ok, Env};
use managed_common as mc;
use opencl_sys::*;
use rewrite_corpus::*;
use std::ffi::{c_void, CString};
use std::path::Path;
use std::ptr::{null, null_mut};

// Slices at any work-group boundary, on a GPU too: the rewrite must hold wherever a
// launch is cut.
/// Slicing is under test here: yielding launches are off (`tests/managed_yield.rs`).
const SCHED: &str =
    "slice = \"always\"\ntarget_slice_us = 50\nwave_work_groups = 1\nyielding = \"never\"";

fn setup() -> (&'static Path, std::sync::MutexGuard<'static, ()>) {
    let dir = mc::init(SCHED);
    (dir, mc::serial())
}

/// A kernel argument.
#[derive(Clone)]
enum Arg {
    /// A buffer with this content (read back and compared afterwards too).
    Buf(Vec<u8>),
    /// `__local` memory of this many bytes.
    Local(usize),
    /// A value passed by value.
    Val(Vec<u8>),
}

#[derive(Clone)]
struct Case {
    source: &'static str,
    options: &'static str,
    kernel: &'static str,
    offset: Vec<usize>,
    global: Vec<usize>,
    local: Option<Vec<usize>>,
    args: Vec<Arg>,
}

fn bytes<T: Copy>(v: &[T]) -> Vec<u8> {
    // SAFETY: plain numeric data viewed as its bytes.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
        .to_vec()
}

/// Deterministic pseudo-random words.
fn words(n: usize, seed: u32) -> Vec<u32> {
    let mut x = seed.wrapping_mul(2_654_435_761).wrapping_add(12345);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        })
        .collect()
}

fn small_ints(n: usize, seed: u32) -> Vec<u8> {
    bytes(
        &words(n, seed)
            .iter()
            .map(|w| (w % 201) as i32 - 100)
            .collect::<Vec<i32>>(),
    )
}

fn floats(n: usize, seed: u32) -> Vec<u8> {
    bytes(
        &words(n, seed)
            .iter()
            .map(|w| (w % 1000) as f32 / 7.0)
            .collect::<Vec<f32>>(),
    )
}

/// A buffer of `n` bytes of a pattern (so writes that should not happen show).
fn out(n: usize) -> Arg {
    Arg::Buf(vec![0xA5; n])
}

fn val<T: Copy>(v: T) -> Arg {
    Arg::Val(bytes(&[v]))
}

/// Whether launches with a NULL local size may be sliced: the kernel's results do not
/// depend on the work-group size (the layer's analysis; here a conservative text check).
fn work_group_independent(source: &str) -> bool {
    ![
        "get_local_",
        "get_group_id",
        "get_num_groups",
        "barrier",
        "local ",
    ]
    .iter()
    .any(|w| source.contains(w))
}

/// Builds the case's program on `env`, runs it once, and reads back every buffer.
///
/// The kernel is released: the slice planner forgets what it learned about a released
/// kernel, so a new kernel at the same address starts afresh (with one work-group row,
/// growing, so it is always cut). Leaking them instead exhausts NVIDIA's contexts.
fn run(env: &Env, c: &Case, local: Option<&[usize]>) -> Vec<Vec<u8>> {
    let prog = mc::build(env, c.source, c.options).unwrap_or_else(|e| panic!("{e}"));
    let k = env.kernel(prog, c.kernel);
    let outs = launch(env, c, k, local);
    // SAFETY: our own kernel and program, no longer used.
    unsafe {
        clReleaseKernel(k);
        clReleaseProgram(prog);
    }
    outs
}

/// Sets the case's arguments on `k`, launches it once, and reads back every buffer.
fn launch(env: &Env, c: &Case, k: cl_kernel, local: Option<&[usize]>) -> Vec<Vec<u8>> {
    let mut bufs = Vec::new();
    for (i, a) in c.args.iter().enumerate() {
        let i = i as cl_uint;
        match a {
            Arg::Buf(data) => {
                let m = env.buffer(data.len());
                env.write(m, data);
                mc::arg(k, i, m);
                bufs.push((m, data.len()));
            }
            Arg::Local(n) => mc::local_arg(k, i, *n),
            Arg::Val(v) => {
                // SAFETY: `v` holds the value's bytes.
                ok(unsafe { clSetKernelArg(k, i, v.len(), v.as_ptr() as *const c_void) })
            }
        }
    }
    let rc = mc::enqueue(env.queue, k, Some(&c.offset), &c.global, local, &[], None);
    assert_eq!(
        rc, CL_SUCCESS,
        "{}: enqueue (local {local:?}, platform {:?})",
        c.kernel, env.platform
    );
    mc::finish(env.queue);
    let outs = bufs.iter().map(|&(m, n)| env.read::<u8>(m, n)).collect();
    mc::release_mems(&bufs.iter().map(|b| b.0).collect::<Vec<_>>());
    outs
}

/// Runs the case on bare PoCL and on SoftPreempt: identical outputs; the SoftPreempt
/// launch is sliced when `sliced`.
fn same(dir: &Path, c: &Case, local: Option<&[usize]>, sliced: bool) {
    let what = format!("{} local {:?} offset {:?}", c.kernel, local, c.offset);
    let want = run(&Env::new(bare_platform()), c, local);
    let sp = Env::sp();
    let got = sliced_run(dir, &sp, sliced, &what, || run(&sp, c, local));
    for (i, (w, g)) in want.iter().zip(&got).enumerate() {
        assert!(
            w == g,
            "{what}: buffer {i} differs from bare PoCL: {}",
            mc::first_difference(w, g)
        );
    }
}

/// Runs `f` (launches on `sp`), and checks that they were sliced when `sliced`. The
/// queue's arbiter client (whose statistics count slices) is registered first, and read
/// before the queue goes away.
fn sliced_run<T>(dir: &Path, sp: &Env, sliced: bool, what: &str, f: impl FnOnce() -> T) -> T {
    let warm = mc::filled(sp, 4, 0u32);
    mc::finish(sp.queue);
    let before = mc::my_slices(dir);
    let r = f();
    if sliced {
        mc::eventually(
            &format!("{what}: launch sliced\n{}", mc::describe(dir)),
            std::time::Duration::from_secs(10),
            || mc::my_slices(dir) - before >= 2,
        );
    }
    mc::release_mems(&[warm]);
    r
}

/// Each case with its own local size, then with a NULL one (when the kernel allows any
/// local size): always identical to bare, and sliced whenever that keeps results exact.
fn check(c: Case) {
    let (dir, _g) = setup();
    if let Some(l) = &c.local {
        same(dir, &c, Some(l), true);
    }
    if c.local.is_none() || c.null_ok() {
        same(dir, &c, None, work_group_independent(c.source));
    }
}

impl Case {
    fn new(source: &'static str, kernel: &'static str) -> Case {
        Case {
            source,
            options: "",
            kernel,
            offset: Vec::new(),
            global: Vec::new(),
            local: None,
            args: Vec::new(),
        }
    }

    fn at(mut self, offset: &[usize], global: &[usize], local: Option<&[usize]>) -> Case {
        self.offset = offset.to_vec();
        self.global = global.to_vec();
        self.local = local.map(|l| l.to_vec());
        self
    }

    fn args(mut self, args: Vec<Arg>) -> Case {
        self.args = args;
        self
    }

    fn options(mut self, o: &'static str) -> Case {
        self.options = o;
        self
    }

    /// Kernels whose indexing assumes their own local size, or sizes `__local` memory
    /// for it, are not run with a NULL one; nor are those with `reqd_work_group_size`
    /// (PoCL 3.1 answers a NULL local size for them with CL_INVALID_WORK_GROUP_SIZE).
    fn null_ok(&self) -> bool {
        !self.args.iter().any(|a| matches!(a, Arg::Local(_)))
            && ![
                "gemm",
                "gemm_int",
                "transpose",
                "local_hist",
                "groups3d",
                "helpers",
                "outer",
                "reqd16",
                "attrs",
                "attrs_after",
            ]
            .contains(&self.kernel)
    }
}

macro_rules! cases {
    ($($name:ident: $case:expr;)*) => {
        $(#[test] fn $name() { check($case); })*
    };
}

// Launches have hundreds of work-groups or more: the slice planner learns how fast a
// kernel is (per kernel handle, which a later test's kernel may reuse), and a small launch
// of a fast kernel would rightly fit in one slice.
cases! {
    reduce_float_1d: Case::new(REDUCE, "reduce")
        .at(&[32], &[16384], Some(&[16]))
        .args(vec![Arg::Buf(floats(16384, 1)), out(1024 * 4), Arg::Local(16 * 4)]);
    reduce_int_1d: Case::new(REDUCE_INT, "reduce_int")
        .at(&[64], &[32768], Some(&[32]))
        .args(vec![Arg::Buf(bytes(&words(32768 + 64, 2))), out(1024 * 4), Arg::Local(32 * 4)]);
    scan_groups_1d: Case::new(SCAN, "scan_group")
        .at(&[16], &[16384], Some(&[16]))
        .args(vec![Arg::Buf(bytes(&words(16400, 3))), out(16400 * 4), Arg::Local(16 * 4)]);
    gemm_float_2d: Case::new(GEMM, "gemm")
        .at(&[8, 12], &[64, 64], Some(&[4, 4]))
        .args(vec![Arg::Buf(floats(64 * 16, 4)), Arg::Buf(floats(16 * 64, 5)), out(64 * 64 * 4), val(16i32)]);
    gemm_int_2d: Case::new(GEMM_INT, "gemm_int")
        .at(&[16, 8], &[128, 128], Some(&[8, 8]))
        .args(vec![Arg::Buf(small_ints(128 * 32, 6)), Arg::Buf(small_ints(32 * 128, 7)), out(128 * 128 * 4), val(32i32)]);
    transpose_2d: Case::new(TRANSPOSE, "transpose")
        .at(&[8, 16], &[256, 128], Some(&[8, 8]))
        .args(vec![Arg::Buf(bytes(&words(256 * 128, 8))), out(256 * 128 * 4), val(256u32), val(128u32)]);
    blur_2d: Case::new(BLUR, "blur")
        .at(&[3, 5], &[128, 128], Some(&[8, 4]))
        .args(vec![Arg::Buf(floats(128 * 128, 9)), out(128 * 128 * 4)]);
    stencil_1d: Case::new(STENCIL_1D, "stencil1d")
        .at(&[7], &[65536], Some(&[64]))
        .args(vec![Arg::Buf(small_ints(65536, 10)), out(65536 * 4)]);
    heat_3d: Case::new(HEAT, "heat")
        .at(&[1, 2, 3], &[32, 16, 32], Some(&[4, 2, 2]))
        .args(vec![Arg::Buf(floats(16384, 11)), out(16384 * 4)]);
    histogram_atomics: Case::new(HIST, "hist")
        .at(&[100], &[2048], Some(&[8]))
        .args(vec![Arg::Buf(bytes(&words(5000, 12))), val(5000u32), out(16 * 4)]);
    local_histogram: Case::new(LOCAL_HIST, "local_hist")
        .at(&[32], &[8192], Some(&[16]))
        .args(vec![Arg::Buf(bytes(&words(6000, 13))), val(6000u32), out(16 * 4)]);
    grid_stride_loop: Case::new(GRID_STRIDE, "grid_stride")
        .at(&[5], &[8192], Some(&[32]))
        .args(vec![Arg::Buf(small_ints(3000, 14)), Arg::Buf(small_ints(3000, 15)), val(3i32), val(3000u32)]);
    group_atomic_sum: Case::new(GROUP_ATOMIC, "group_atomic_sum")
        .at(&[48], &[16384], Some(&[16]))
        .args(vec![Arg::Buf(small_ints(16432, 16)), out(1040 * 4)]);
    block_ids_2d: Case::new(BLOCK_ID_2D, "block_id_2d")
        .at(&[4, 6], &[256, 256], Some(&[4, 8]))
        .args(vec![out(256 * 256 * 4), val(256u32)]);
    helpers_2d: Case::new(HELPERS, "helpers")
        .at(&[2, 4], &[64, 96], Some(&[4, 2]))
        .args(vec![out(64 * 96 * 8)]);
    kernel_calling_kernel: Case::new(HELPERS, "outer")
        .at(&[2, 4], &[64, 96], Some(&[4, 2]))
        .args(vec![out(64 * 96 * 8)]);
    helper_chain_2d: Case::new(CHAIN, "chain")
        .at(&[3, 1], &[96, 160], Some(&[4, 4]))
        .args(vec![out(96 * 160 * 8)]);
    macros_2d: Case::new(MACRO_GROUP, "macro_group")
        .at(&[1, 2], &[256, 96], Some(&[8, 2]))
        .args(vec![out(256 * 96 * 4)]);
    macros_and_continuations: Case::new(MACROS, "macros")
        .at(&[5], &[4000], Some(&[4]))
        .args(vec![out(4000 * 4)]);
    linear_id_3d: Case::new(LINEAR, "linear")
        .options("-cl-std=CL3.0")
        .at(&[1, 1, 1], &[8, 8, 128], Some(&[2, 2, 2]))
        .args(vec![out(8 * 8 * 128 * 4)]);
    linear_id_2d: Case::new(LINEAR_2D, "linear2d")
        .options("-cl-std=CL3.0")
        .at(&[3, 2], &[64, 256], Some(&[4, 4]))
        .args(vec![out(64 * 256 * 4)]);
    dimensions: Case::new(DIMS, "dims")
        .at(&[40], &[4096], Some(&[4]))
        .args(vec![out(4096 * 8 * 8), val(1u32), val(2u32)]);
    reqd_prototype: Case::new(ATTRS, "attrs")
        .at(&[16], &[8192], Some(&[8]))
        .args(vec![out(8192 * 4)]);
    reqd_attribute_after: Case::new(ATTRS, "attrs_after")
        .at(&[16], &[8192], Some(&[8]))
        .args(vec![out(8192 * 4)]);
    reqd_16: Case::new(REQD16, "reqd16")
        .at(&[32], &[16384], Some(&[16]))
        .args(vec![out(16416 * 4)]);
    multi_plain: Case::new(MULTI, "multi_plain")
        .at(&[8], &[16384], Some(&[16]))
        .args(vec![out(16392 * 4)]);
    multi_group_id: Case::new(MULTI, "multi_gid")
        .at(&[8], &[16384], Some(&[16]))
        .args(vec![out(16392 * 4)]);
    multi_global_size: Case::new(MULTI, "multi_size")
        .at(&[8], &[16384], Some(&[16]))
        .args(vec![out(16392 * 4)]);
    offsets_1d: Case::new(OFFSETS, "offsets")
        .at(&[77], &[32768], Some(&[32]))
        .args(vec![out(32845 * 4)]);
    coords_2d: Case::new(COORDS, "coords")
        .at(&[2, 3], &[256, 128], Some(&[8, 4]))
        .args(vec![out(256 * 128 * 4)]);
    mandelbrot_2d: Case::new(MANDEL, "mandel")
        .at(&[0, 8], &[128, 128], Some(&[8, 8]))
        .args(vec![out(128 * 128 * 4)]);
    group_sort_1d: Case::new(GROUP_SORT, "group_sort")
        .at(&[16], &[8192], Some(&[16]))
        .args(vec![Arg::Buf(bytes(&words(8208, 17))), out(8192 * 4), Arg::Local(16 * 4)]);
    row_sums: Case::new(ROW_SUM, "row_sum")
        .at(&[3], &[4096], Some(&[8]))
        .args(vec![Arg::Buf(small_ints(4096 * 16, 18)), out(4096 * 4), val(16i32)]);
    groups_3d: Case::new(GROUPS_3D, "groups3d")
        .at(&[4, 2, 2], &[16, 16, 64], Some(&[4, 2, 2]))
        .args(vec![out(16 * 16 * 64 * 4)]);
    matvec_rows: Case::new(MATVEC, "matvec")
        .at(&[0], &[512 * 8], Some(&[8]))
        .args(vec![Arg::Buf(small_ints(512 * 40, 19)), Arg::Buf(small_ints(40, 20)), out(512 * 4), val(40i32), Arg::Local(8 * 4)]);
    struct_argument: Case::new(WITH_STRUCT, "with_struct")
        .at(&[10], &[16384], Some(&[16]))
        .args(vec![out(16384 * 4), val([3i32, -7i32])]);
    vector_output: Case::new(VEC4, "vec4")
        .at(&[6], &[8192], Some(&[8]))
        .args(vec![out(8192 * 16)]);
}

// ---------------------------------------------------------------------------------------
// The application's view of a rewritten program.

fn group_ids() -> Case {
    Case::new(BLOCK_ID_2D, "block_id_2d")
        .at(&[4, 6], &[256, 256], Some(&[4, 8]))
        .args(vec![out(256 * 256 * 4), val(256u32)])
}

fn program_info(p: cl_program, what: cl_program_info) -> Vec<u8> {
    // SAFETY: a vendor info query with the buffer and sizes info_* passes.
    common::info_bytes(|s, v, r| unsafe { clGetProgramInfo(p, what, s, v, r) })
}

fn num_args(k: cl_kernel) -> cl_uint {
    // SAFETY: a vendor info query with the buffer and sizes info_* passes.
    common::info_scalar(|s, v, r| unsafe { clGetKernelInfo(k, CL_KERNEL_NUM_ARGS, s, v, r) })
}

/// The build log and status of `src` on `env`.
fn build_log(env: &Env, src: &str) -> (cl_int, String) {
    let c = CString::new(src).unwrap();
    let ptr = c.as_ptr();
    let mut err = 0;
    // SAFETY: one NUL-terminated source string.
    let p = unsafe { clCreateProgramWithSource(env.context, 1, &ptr, null(), &mut err) };
    ok(err);
    // SAFETY: valid program and device.
    let rc = unsafe { clBuildProgram(p, 1, &env.device, null(), None, null_mut()) };
    // SAFETY: a vendor info query with the buffer and sizes info_* passes.
    let log = common::info_bytes(|s, v, r| unsafe {
        clGetProgramBuildInfo(p, env.device, CL_PROGRAM_BUILD_LOG, s, v, r)
    });
    // SAFETY: our program.
    unsafe { clReleaseProgram(p) };
    (rc, common::cstr(&log))
}

#[test]
fn build_errors_keep_their_line_numbers() {
    let _g = setup();
    // Reads the geometry (through a macro and a helper), so it would be rewritten.
    let src = BROKEN;
    let (bare_rc, bare_log) = build_log(&Env::new(bare_platform()), src);
    let (rc, log) = build_log(&Env::sp(), src);
    assert_ne!(bare_rc, CL_SUCCESS);
    assert_eq!(rc, bare_rc, "{log}");
    assert_eq!(error_line(&bare_log), 7, "{bare_log}");
    assert_eq!(error_line(&log), 7, "{log}");
}

#[test]
fn program_source_names_and_argument_counts_are_the_applications() {
    let _g = setup();
    let info = |env: &Env| {
        let p = mc::build(env, MULTI, "-cl-kernel-arg-info").unwrap();
        let source = program_info(p, CL_PROGRAM_SOURCE);
        let names = program_info(p, CL_PROGRAM_KERNEL_NAMES);
        let count = program_info(p, CL_PROGRAM_NUM_KERNELS);
        let mut ks = [null_mut(); 3];
        // SAFETY: room for three kernels.
        ok(unsafe { clCreateKernelsInProgram(p, 3, ks.as_mut_ptr(), null_mut()) });
        let args: Vec<cl_uint> = ks.iter().map(|&k| num_args(k)).collect();
        // SAFETY: a vendor info query with the buffer and sizes info_* passes.
        let log = common::info_bytes(|s, v, r| unsafe {
            clGetProgramBuildInfo(p, env.device, CL_PROGRAM_BUILD_LOG, s, v, r)
        });
        // SAFETY: a vendor info query with the buffer and sizes info_* passes.
        let status: cl_build_status = common::info_scalar(|s, v, r| unsafe {
            clGetProgramBuildInfo(p, env.device, CL_PROGRAM_BUILD_STATUS, s, v, r)
        });
        (source, names, count, args, common::cstr(&log), status)
    };
    let bare = info(&Env::new(bare_platform()));
    let sp = info(&Env::sp());
    assert_eq!(common::cstr(&sp.0), MULTI, "CL_PROGRAM_SOURCE");
    assert_eq!(sp.1, bare.1, "CL_PROGRAM_KERNEL_NAMES");
    assert_eq!(sp.2, bare.2, "CL_PROGRAM_NUM_KERNELS");
    assert_eq!(sp.3, bare.3, "CL_KERNEL_NUM_ARGS");
    assert_eq!(sp.3, [1, 1, 1]);
    // No notes about code the application did not write.
    assert_eq!(sp.4, bare.4, "CL_PROGRAM_BUILD_LOG");
    assert_eq!((sp.5, bare.5), (CL_BUILD_SUCCESS, CL_BUILD_SUCCESS));
}

#[test]
fn the_hidden_argument_is_no_argument() {
    let _g = setup();
    let probe = |env: &Env| {
        let p = mc::build(env, GEMM_INT, "-cl-kernel-arg-info").unwrap();
        let k = env.kernel(p, "gemm_int");
        let name = |i| {
            let mut buf = [0u8; 64];
            // SAFETY: a buffer of the size passed.
            let rc = unsafe {
                clGetKernelArgInfo(
                    k,
                    i,
                    CL_KERNEL_ARG_NAME,
                    buf.len(),
                    buf.as_mut_ptr() as *mut c_void,
                    null_mut(),
                )
            };
            (rc, common::cstr(&buf))
        };
        let x = 7i32;
        // SAFETY: a 4-byte value at each index.
        let set = |i| unsafe { clSetKernelArg(k, i, 4, &x as *const i32 as *const c_void) };
        (num_args(k), name(3), name(4), set(3), set(4), set(5))
    };
    let bare = probe(&Env::new(bare_platform()));
    let sp = probe(&Env::sp());
    assert_eq!(bare.0, 4);
    assert_eq!(sp, bare);
    // PoCL answers as the spec says; NVIDIA's clGetKernelArgInfo says CL_INVALID_VALUE,
    // and SoftPreempt then says the same (compared above).
    if mc::is_pocl() {
        assert_eq!(sp.2 .0, CL_INVALID_ARG_INDEX);
        assert_eq!(sp.4, CL_INVALID_ARG_INDEX);
    }
}

#[test]
fn binaries_round_trip_and_stay_sliceable() {
    let (dir, _g) = setup();
    let c = group_ids();
    let want = run(&Env::new(bare_platform()), &c, c.local.as_deref());
    let sp = Env::sp();
    let p = mc::build(&sp, c.source, "").unwrap();
    let k = mc::from_binary(&sp, &mc::binary_of(p), c.kernel);
    assert_eq!(
        num_args(k),
        2,
        "CL_KERNEL_NUM_ARGS of the kernel from the binary"
    );
    let got = sliced_run(dir, &sp, true, "kernel from a binary", || {
        launch(&sp, &c, k, c.local.as_deref())
    });
    assert!(want == got, "{}", mc::first_difference(&want[0], &got[0]));
    // SAFETY: our program.
    unsafe { clReleaseProgram(p) };
}

const BINARY_FILE: &str = "SP_TEST_REWRITTEN_BINARY";

/// Another process finds what the rewrite learned in the program store, under the bare
/// binary the application was given: its kernels hide the argument, give the same
/// results, and are sliced.
#[test]
fn binaries_loaded_by_another_process_are_sliced() {
    let _g = setup();
    let sp = Env::sp();
    let p = mc::build(&sp, group_ids().source, "").unwrap();
    let file = mc::private_dir("binary").join("rewritten.bin");
    std::fs::write(&file, mc::binary_of(p)).unwrap();
    // SAFETY: our program.
    unsafe { clReleaseProgram(p) };
    mc::run_child(
        "binary_child",
        (BINARY_FILE, file.as_os_str()),
        "binary child ok",
    );
}

/// The other process of [`binaries_loaded_by_another_process_are_sliced`].
#[test]
fn binary_child() {
    let Ok(file) = std::env::var(BINARY_FILE) else {
        return;
    };
    let (dir, _g) = setup();
    let c = group_ids();
    let want = run(&Env::new(bare_platform()), &c, c.local.as_deref());
    let sp = Env::sp();
    let k = mc::from_binary(&sp, &std::fs::read(file).unwrap(), c.kernel);
    assert_eq!(
        num_args(k),
        2,
        "CL_KERNEL_NUM_ARGS of the kernel from the binary"
    );
    let got = sliced_run(dir, &sp, true, "binary from another process", || {
        launch(&sp, &c, k, c.local.as_deref())
    });
    assert!(want == got, "{}", mc::first_difference(&want[0], &got[0]));
    println!("binary child ok");
}

#[test]
fn cloned_kernels_keep_the_geometry() {
    let (dir, _g) = setup();
    let c = group_ids();
    let want = run(&Env::new(bare_platform()), &c, c.local.as_deref());
    let sp = Env::sp();
    let p = mc::build(&sp, c.source, "").unwrap();
    let k = sp.kernel(p, c.kernel);
    let mut err = 0;
    // SAFETY: a valid kernel.
    let clone = unsafe { clCloneKernel(k, &mut err) };
    ok(err);
    assert_eq!(num_args(clone), 2);
    let got = sliced_run(dir, &sp, true, "cloned kernel", || {
        launch(&sp, &c, clone, c.local.as_deref())
    });
    assert!(want == got, "{}", mc::first_difference(&want[0], &got[0]));
    // SAFETY: our objects.
    unsafe {
        clReleaseProgram(p);
    }
}

#[test]
fn rebuilding_with_kernels_attached_fails_as_bare() {
    let _g = setup();
    let rebuild = |env: &Env| {
        let p = mc::build(env, BLOCK_ID_2D, "").unwrap();
        let k = env.kernel(p, "block_id_2d");
        // SAFETY: valid program and device.
        let attached = unsafe { clBuildProgram(p, 1, &env.device, null(), None, null_mut()) };
        // SAFETY: our kernel.
        unsafe { clReleaseKernel(k) };
        // SAFETY: valid program and device.
        let free = unsafe { clBuildProgram(p, 1, &env.device, null(), None, null_mut()) };
        (attached, free)
    };
    let bare = rebuild(&Env::new(bare_platform()));
    assert_eq!(bare, (CL_INVALID_OPERATION, CL_SUCCESS));
    assert_eq!(rebuild(&Env::sp()), bare);
}

/// Counts build notifications and records the program they name.
extern "C" fn notified(p: cl_program, data: *mut c_void) {
    // SAFETY: `data` is the test's (count, program) pair, alive during the build.
    let seen = unsafe { &mut *(data as *mut (u32, cl_program)) };
    seen.0 += 1;
    seen.1 = p;
}

#[test]
fn the_build_notification_comes_once_with_the_applications_program() {
    let _g = setup();
    for src in [BLOCK_ID_2D, FALLBACK] {
        let env = Env::sp();
        let c = CString::new(src).unwrap();
        let ptr = c.as_ptr();
        let mut err = 0;
        // SAFETY: one NUL-terminated source string.
        let p = unsafe { clCreateProgramWithSource(env.context, 1, &ptr, null(), &mut err) };
        ok(err);
        let mut seen: (u32, cl_program) = (0, null_mut());
        // SAFETY: valid program and device; `seen` outlives the build, which PoCL finishes
        // before returning, and is only read after clFinish-like completion below.
        ok(unsafe {
            clBuildProgram(
                p,
                1,
                &env.device,
                null(),
                Some(notified),
                &mut seen as *mut (u32, cl_program) as *mut c_void,
            )
        });
        mc::eventually(
            "the notification",
            std::time::Duration::from_secs(10),
            || {
                // SAFETY: a plain read of a value the callback writes.
                let n = unsafe { std::ptr::read_volatile(&seen.0) };
                n > 0
            },
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(seen, (1, p), "{src}");
        // SAFETY: our program.
        unsafe { clReleaseProgram(p) };
    }
}

/// A program whose rewrite does not build while the original does: it is built from its
/// original source, with results identical to bare and its kernels never sliced; the same
/// kernel without the troublesome macro is sliced.
#[test]
fn a_rewrite_that_does_not_build_falls_back_to_the_original() {
    let (dir, _g) = setup();
    for (src, sliced) in [(FALLBACK, false), (FALLBACK_CONTROL, true)] {
        let c = Case::new(src, "fallback")
            .at(&[8], &[16384], Some(&[16]))
            .args(vec![out(16392 * 4)]);
        let want = run(&Env::new(bare_platform()), &c, c.local.as_deref());
        let sp = Env::sp();
        let before = mc::my_slices(dir);
        let got = sliced_run(dir, &sp, sliced, "fallback control", || {
            run(&sp, &c, c.local.as_deref())
        });
        assert!(want == got, "{}", mc::first_difference(&want[0], &got[0]));
        if !sliced {
            mc::finish(sp.queue);
            std::thread::sleep(std::time::Duration::from_millis(100));
            let slices = mc::my_slices(dir) - before;
            assert!(
                slices <= 1,
                "the fallback program was sliced: {slices} slices"
            );
        }
    }
}

/// Compiles `COMPILED` with its header and links it, on `env`.
fn compile_and_link(env: &Env) -> cl_program {
    let source = |text: &str| {
        let c = CString::new(text).unwrap();
        let ptr = c.as_ptr();
        let mut err = 0;
        // SAFETY: one NUL-terminated source string.
        let p = unsafe { clCreateProgramWithSource(env.context, 1, &ptr, null(), &mut err) };
        ok(err);
        p
    };
    let (main, header) = (source(COMPILED), source(GROUPS_H));
    let name = CString::new("groups.h").unwrap();
    let mut names = [name.as_ptr()];
    // SAFETY: one header program and its include name.
    ok(unsafe {
        clCompileProgram(
            main,
            1,
            &env.device,
            null(),
            1,
            &header,
            names.as_mut_ptr(),
            None,
            null_mut(),
        )
    });
    let mut err = 0;
    // SAFETY: one compiled program.
    let linked = unsafe {
        clLinkProgram(
            env.context,
            1,
            &env.device,
            null(),
            1,
            &main,
            None,
            null_mut(),
            &mut err,
        )
    };
    ok(err);
    // SAFETY: our programs; the linked one holds what it needs.
    unsafe {
        clReleaseProgram(main);
        clReleaseProgram(header);
    }
    linked
}

#[test]
fn compiled_with_headers_and_linked() {
    let (dir, _g) = setup();
    let c = Case::new(COMPILED, "compiled")
        .at(&[8], &[16384], Some(&[16]))
        .args(vec![out(16384 * 4)]);
    let go = |env: &Env| {
        let p = compile_and_link(env);
        let k = env.kernel(p, "compiled");
        assert_eq!(num_args(k), 1);
        let r = launch(env, &c, k, c.local.as_deref());
        // SAFETY: our objects.
        unsafe {
            clReleaseProgram(p);
        }
        r
    };
    let want = go(&Env::new(bare_platform()));
    let sp = Env::sp();
    let got = sliced_run(dir, &sp, true, "compiled and linked", || go(&sp));
    assert!(want == got, "{}", mc::first_difference(&want[0], &got[0]));
}
