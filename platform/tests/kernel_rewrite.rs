//! The kernel source rewrite, run for real: each kernel is built by the vendor (PoCL by
//! default, straight through the ocl-icd loader, without SoftPreempt), launched whole from
//! the original source, and launched in slices from the rewritten source with the hidden
//! geometry argument. The outputs must match bit for bit. Each kernel reads the geometry,
//! so the original source launched in the same slices must give other results: that shows
//! the comparison can fail. Rewrites of noisy variants of these sources must build, and a
//! build error must be reported on the same line for the rewrite as for the original.
//!
//! `SOFTPREEMPT_TEST_ICD` names another vendor's `.icd` file (NVIDIA's on the GPU machine).

use opencl_sys::*;
use softpreempt_transform::{analyse_with_options, geometry_arg, rewrite, with_first_group};
use std::ffi::{c_void, CString};
use std::ptr::{null, null_mut};

mod vendor;

#[path = "../../tests/rewrite_corpus/mod.rs"]
mod corpus;
use corpus::*;

use vendor::{bytes, ok, Cl};

/// A kernel argument.
#[derive(Clone)]
enum Arg {
    /// A read-only buffer with this content.
    In(Vec<u8>),
    /// A buffer of this many bytes, filled with a pattern first; compared afterwards.
    Out(usize),
    /// `__local` memory of this many bytes.
    Local(usize),
    /// A value passed by value.
    Val(Vec<u8>),
}

struct Case {
    name: &'static str,
    source: &'static str,
    headers: &'static [(&'static str, &'static str)],
    options: &'static str,
    kernel: &'static str,
    work_dim: u32,
    offset: [usize; 3],
    global: [usize; 3],
    local: [usize; 3],
    args: Vec<Arg>,
}

/// Test data: small integers (so float sums are exact and order-free) from a fixed seed.
fn data(n: usize, seed: u32) -> Vec<u32> {
    let mut x = seed.wrapping_mul(2_654_435_761) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x % 97
        })
        .collect()
}

fn floats(n: usize, seed: u32) -> Vec<f32> {
    data(n, seed).into_iter().map(|v| v as f32).collect()
}

/// The launch cut into slices along the last dimension, at work-group boundaries:
/// 1 group, then 2, then 3, ... (the last slice takes the rest).
fn slices(c: &Case) -> Vec<([usize; 3], [usize; 3])> {
    let d = c.work_dim as usize - 1;
    let groups = c.global[d].div_ceil(c.local[d]);
    assert!(groups >= 3, "{}: too few groups to slice", c.name);
    let mut out = Vec::new();
    let (mut start, mut size) = (0, 1);
    while start < groups {
        let n = size.min(groups - start);
        let (mut off, mut glob) = (c.offset, c.global);
        off[d] += start * c.local[d];
        glob[d] = (n * c.local[d]).min(c.global[d] - start * c.local[d]);
        out.push((off, glob));
        start += n;
        size += 1;
    }
    out
}

/// Runs `kernel` of `program` as the given launches (with the hidden geometry argument at
/// `hidden`, if any) and returns the content of every `Out` buffer.
fn run(
    c: &Case,
    program: cl_program,
    hidden: Option<u32>,
    launches: &[([usize; 3], [usize; 3])],
) -> Vec<Vec<u8>> {
    let cl = Cl::get();
    let name = CString::new(c.kernel).unwrap();
    let mut err = 0;
    // SAFETY: a built program and a NUL-terminated kernel name.
    let kernel = unsafe { clCreateKernel(program, name.as_ptr(), &mut err) };
    ok(err, "clCreateKernel");
    let mut mems = Vec::new();
    for (i, a) in c.args.iter().enumerate() {
        let init: Vec<u8> = match a {
            Arg::In(b) => b.clone(),
            Arg::Out(n) => (0..*n).map(|j| (j * 7 + 0xA5) as u8).collect(),
            Arg::Local(_) | Arg::Val(_) => Vec::new(),
        };
        let value = match a {
            Arg::In(_) | Arg::Out(_) => {
                // SAFETY: a host pointer to `init.len()` bytes, copied at creation.
                let mem = unsafe {
                    clCreateBuffer(
                        cl.context,
                        CL_MEM_COPY_HOST_PTR,
                        init.len(),
                        init.as_ptr() as *mut c_void,
                        &mut err,
                    )
                };
                ok(err, "clCreateBuffer");
                mems.push((mem, matches!(a, Arg::Out(_)).then_some(init.len())));
                Some(bytes(&[mem]))
            }
            Arg::Local(_) => None,
            Arg::Val(v) => Some(v.clone()),
        };
        let size = match (a, &value) {
            (Arg::Local(n), _) => *n,
            (_, v) => v.as_ref().map_or(0, Vec::len),
        };
        let ptr = value
            .as_ref()
            .map_or(null(), |v| v.as_ptr() as *const c_void);
        // SAFETY: `ptr` holds `size` bytes (or is NULL for local memory).
        ok(
            unsafe { clSetKernelArg(kernel, i as cl_uint, size, ptr) },
            "clSetKernelArg",
        );
    }
    let (whole, size) = geometry_arg(c.work_dim, c.offset, c.global, c.local);
    for (off, glob) in launches {
        if let Some(index) = hidden {
            // Each piece's first group, as the layer sets it (`with_first_group`).
            let mut value = whole.clone();
            let first: [usize; 3] =
                std::array::from_fn(|d| (off[d] - c.offset[d]) / c.local[d].max(1));
            with_first_group(&mut value, first);
            // SAFETY: `value` holds `size` bytes.
            ok(
                unsafe { clSetKernelArg(kernel, index, size, value.as_ptr() as *const c_void) },
                "clSetKernelArg (geometry)",
            );
        }
        // SAFETY: three-element arrays, whatever the dimension count.
        let rc = unsafe {
            clEnqueueNDRangeKernel(
                cl.queue,
                kernel,
                c.work_dim,
                off.as_ptr(),
                glob.as_ptr(),
                c.local.as_ptr(),
                0,
                null(),
                null_mut(),
            )
        };
        ok(rc, "clEnqueueNDRangeKernel");
    }
    let mut results = Vec::new();
    for (mem, out) in mems {
        if let Some(n) = out {
            let mut buf = vec![0u8; n];
            // SAFETY: a blocking read into a buffer of `n` bytes.
            let rc = unsafe {
                clEnqueueReadBuffer(
                    cl.queue,
                    mem,
                    CL_TRUE,
                    0,
                    n,
                    buf.as_mut_ptr() as *mut c_void,
                    0,
                    null(),
                    null_mut(),
                )
            };
            ok(rc, "clEnqueueReadBuffer");
            results.push(buf);
        }
        // SAFETY: our buffer, no longer used (the read above was blocking).
        unsafe { clReleaseMemObject(mem) };
    }
    // SAFETY: our kernel, no longer used.
    unsafe { clReleaseKernel(kernel) };
    results
}

/// Runs one case: original whole, original sliced (must differ), rewritten sliced (must
/// match the original whole).
fn check(c: &Case) {
    let cl = Cl::get();
    let headers: Vec<(String, String)> = c
        .headers
        .iter()
        .map(|(n, t)| (n.to_string(), t.to_string()))
        .collect();
    let analysis = analyse_with_options(c.source, &headers, c.options);
    assert!(
        analysis.conservative.is_none(),
        "{}: {:?}",
        c.name,
        analysis.conservative
    );
    let info = analysis
        .kernel(c.kernel)
        .unwrap_or_else(|| panic!("{}: kernel not found", c.name));
    assert!(
        !info.geometry.is_empty() && info.unsure.is_none(),
        "{}: {info:?}",
        c.name
    );
    let rewritten = rewrite(&analysis).unwrap_or_else(|| panic!("{}: no rewrite", c.name));
    let hidden = rewritten
        .kernels
        .iter()
        .find(|k| k.0 == c.kernel)
        .map(|k| k.1);
    assert_eq!(
        hidden,
        Some(c.args.len() as u32),
        "{}: hidden argument index",
        c.name
    );

    let original = cl
        .build(c.source, &headers, c.options)
        .unwrap_or_else(|log| panic!("{}: {log}", c.name));
    let new = cl
        .build(&rewritten.source, &rewritten.headers, c.options)
        .unwrap_or_else(|log| {
            panic!(
                "{}: rewritten source does not build:\n{log}\n{}",
                c.name, rewritten.source
            )
        });
    let whole = run(c, original, None, &[(c.offset, c.global)]);
    let cuts = slices(c);
    assert!(cuts.len() >= 3);
    let naive = run(c, original, None, &cuts);
    assert_ne!(
        naive, whole,
        "{}: slicing the original changes nothing, so this case proves nothing",
        c.name
    );
    let sliced = run(c, new, hidden, &cuts);
    same(c, "sliced rewritten kernel", &sliced, &whole);
    // The rewritten kernel launched whole gives the same results too (no contention).
    same(
        c,
        "whole rewritten kernel",
        &run(c, new, hidden, &[(c.offset, c.global)]),
        &whole,
    );
    // SAFETY: our programs, no longer used.
    unsafe {
        clReleaseProgram(original);
        clReleaseProgram(new);
    }
}

/// Asserts equal outputs, showing the first differing 32-bit word.
fn same(c: &Case, what: &str, got: &[Vec<u8>], want: &[Vec<u8>]) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let word = |b: &[u8], j: usize| u32::from_ne_bytes(b[j * 4..j * 4 + 4].try_into().unwrap());
        if let Some(j) = (0..g.len() / 4).find(|&j| word(g, j) != word(w, j)) {
            panic!(
                "{}: {what}: output {i} word {j} is {:#x}, not {:#x}",
                c.name,
                word(g, j),
                word(w, j)
            );
        }
    }
    assert!(got == want, "{}: {what} differs", c.name);
}

fn u32s(v: &[u32]) -> Vec<u8> {
    bytes(v)
}

macro_rules! cases {
    ($($name:ident: $case:expr;)*) => {
        $(#[test] fn $name() { check(&$case); })*
    };
}

fn case(name: &'static str, source: &'static str, kernel: &'static str, work_dim: u32) -> Case {
    Case {
        name,
        source,
        headers: &[],
        options: "",
        kernel,
        work_dim,
        offset: [0; 3],
        global: [1; 3],
        local: [1; 3],
        args: Vec::new(),
    }
}

cases! {
    reduction_with_local_memory: Case {
        offset: [24, 0, 0], global: [256, 1, 1], local: [16, 1, 1],
        args: vec![Arg::In(bytes(&floats(256, 1))), Arg::Out(16 * 4), Arg::Local(16 * 4)],
        ..case("reduction", REDUCE, "reduce", 1)
    };
    tiled_gemm_2d: Case {
        offset: [8, 12, 0], global: [16, 16, 1], local: [4, 4, 1],
        args: vec![Arg::In(bytes(&floats(16 * 8, 2))), Arg::In(bytes(&floats(8 * 16, 3))), Arg::Out(16 * 16 * 4), Arg::Val(bytes(&[8i32]))],
        ..case("gemm", GEMM, "gemm", 2)
    };
    stencil_2d: Case {
        offset: [3, 5, 0], global: [32, 24, 1], local: [8, 4, 1],
        args: vec![Arg::In(bytes(&floats(32 * 24, 4))), Arg::Out(32 * 24 * 4)],
        ..case("blur", BLUR, "blur", 2)
    };
    stencil_3d: Case {
        offset: [1, 2, 3], global: [8, 8, 8], local: [4, 2, 2],
        args: vec![Arg::In(bytes(&floats(512, 5))), Arg::Out(512 * 4)],
        ..case("heat", HEAT, "heat", 3)
    };
    histogram_with_atomics: Case {
        offset: [100, 0, 0], global: [64, 1, 1], local: [8, 1, 1],
        args: vec![Arg::In(u32s(&data(1000, 6))), Arg::Val(bytes(&[1000u32])), Arg::Out(16 * 4)],
        ..case("hist", HIST, "hist", 1)
    };
    helper_functions: Case {
        offset: [2, 4, 0], global: [8, 12, 1], local: [4, 2, 1],
        args: vec![Arg::Out(8 * 12 * 8)],
        ..case("helpers", HELPERS, "helpers", 2)
    };
    kernel_calling_kernel: Case {
        offset: [2, 4, 0], global: [8, 12, 1], local: [4, 2, 1],
        args: vec![Arg::Out(8 * 12 * 8)],
        ..case("outer", HELPERS, "outer", 2)
    };
    global_linear_id_3d: Case {
        options: "-cl-std=CL3.0",
        offset: [1, 1, 1], global: [4, 4, 8], local: [2, 2, 2],
        args: vec![Arg::Out(4 * 4 * 8 * 4)],
        ..case("linear", LINEAR, "linear", 3)
    };
    dimensions_out_of_range: Case {
        offset: [40, 0, 0], global: [32, 1, 1], local: [4, 1, 1],
        args: vec![Arg::Out(32 * 8 * 8), Arg::Val(bytes(&[1u32])), Arg::Val(bytes(&[2u32]))],
        ..case("dims", DIMS, "dims", 1)
    };
    attributes_and_prototypes: Case {
        offset: [16, 0, 0], global: [64, 1, 1], local: [8, 1, 1],
        args: vec![Arg::Out(64 * 4)],
        ..case("attrs", ATTRS, "attrs", 1)
    };
    attributes_after: Case {
        offset: [16, 0, 0], global: [64, 1, 1], local: [8, 1, 1],
        args: vec![Arg::Out(64 * 4)],
        ..case("attrs_after", ATTRS, "attrs_after", 1)
    };
    macros_and_continuations: Case {
        offset: [5, 0, 0], global: [40, 1, 1], local: [4, 1, 1],
        args: vec![Arg::Out(40 * 4)],
        ..case("macros", MACROS, "macros", 1)
    };
    helper_in_header: Case {
        headers: &[("geom.h", GEOM_H)],
        offset: [9, 0, 0], global: [24, 1, 1], local: [4, 1, 1],
        args: vec![Arg::Out(24 * 4)],
        ..case("with_header", WITH_HEADER, "with_header", 1)
    };
}

/// Non-uniform work-groups (OpenCL 2.0+): the last group is partial, and so is the last
/// slice. Skipped where the device does not support them.
#[test]
fn non_uniform_work_groups() {
    let cl = Cl::get();
    let mut support: cl_bool = 0;
    // SAFETY: a cl_bool out value.
    let rc = unsafe {
        clGetDeviceInfo(
            cl.device,
            CL_DEVICE_NON_UNIFORM_WORK_GROUP_SUPPORT,
            std::mem::size_of::<cl_bool>(),
            &mut support as *mut cl_bool as *mut c_void,
            null_mut(),
        )
    };
    if rc != CL_SUCCESS || support == 0 {
        eprintln!("non-uniform work-groups not supported; skipped");
        return;
    }
    check(&Case {
        options: "-cl-std=CL3.0",
        offset: [3, 0, 0],
        global: [50, 1, 1],
        local: [8, 1, 1],
        args: vec![Arg::Out(50 * 4)],
        ..case("non_uniform", NON_UNIFORM, "non_uniform", 1)
    });
}

/// Past dimension 2 the spec's values hold too (group id and offset 0, sizes 1). Checked
/// against the spec rather than the vendor: PoCL answers 0 for the sizes there.
#[test]
fn dimensions_past_the_third_follow_the_spec() {
    let cl = Cl::get();
    let c = Case {
        offset: [40, 0, 0],
        global: [32, 1, 1],
        local: [4, 1, 1],
        args: vec![
            Arg::Out(32 * 8 * 8),
            Arg::Val(bytes(&[3u32])),
            Arg::Val(bytes(&[u32::MAX])),
        ],
        ..case("dims", DIMS, "dims", 1)
    };
    let rewritten = rewrite(&analyse_with_options(c.source, &[], "")).expect("rewrite");
    let program = cl.build(&rewritten.source, &[], "").expect("build");
    let out = run(&c, program, Some(3), &slices(&c));
    let words: Vec<u64> = out[0]
        .chunks(8)
        .map(|b| u64::from_ne_bytes(b.try_into().unwrap()))
        .collect();
    for (i, item) in words.chunks(8).enumerate() {
        // group id + 10 * groups + 100 * global size + 1000 * offset, for dimensions 3 and 2^32-1.
        assert_eq!(item[2..4], [110, 110], "work-item {i}");
        assert_eq!(item[0], i as u64 / 4 + 100 * 8, "work-item {i}");
    }
    // SAFETY: our program, no longer used.
    unsafe { clReleaseProgram(program) };
}

/// Variants of the cases' sources with harmless noise in random places (comments that name
/// builtins, line splices inside tokens, blank lines, `#if 0` groups, unused macros): when
/// the vendor builds a variant, the rewrite of it (if the rewrite accepts it) must build too.
#[test]
fn rewrites_of_noisy_variants_build() {
    const NOISE: &[&str] = &[
        " ",
        "\n",
        "/* get_group_id(0) */",
        "\\\n",
        "\n#if 0\nit's get_num_groups(0) {\n#endif\n",
        "\n#define UNUSED_G get_global_size(0)\n",
        "\n#define HELPER_G() get_global_offset(0)\n",
    ];
    let cl = Cl::get();
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let mut rand = |n: usize| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % n as u64) as usize
    };
    let (mut built, mut rewritten) = (0, 0);
    for round in 0..40 {
        let base = [REDUCE, GEMM, HELPERS, ATTRS, MACROS][round % 5];
        let mut src = base.to_string();
        for _ in 0..3 {
            // A splice may go anywhere, the rest between tokens (after white space).
            let noise = NOISE[rand(NOISE.len())];
            let at = rand(src.len());
            let fits = noise == "\\\n" || src[..at].ends_with([' ', '\n']);
            if src.is_char_boundary(at) && fits {
                src.insert_str(at, noise);
            }
        }
        let Ok(original) = cl.build(&src, &[], "") else {
            continue;
        };
        built += 1;
        // SAFETY: our program, no longer used.
        unsafe { clReleaseProgram(original) };
        let Some(r) = rewrite(&analyse_with_options(&src, &[], "")) else {
            continue;
        };
        rewritten += 1;
        match cl.build(&r.source, &[], "") {
            // SAFETY: our program, no longer used.
            Ok(p) => unsafe { clReleaseProgram(p) },
            Err(log) => panic!(
                "the rewrite of a variant does not build:\n{log}\n{src}\n---\n{}",
                r.source
            ),
        };
    }
    assert!(
        built >= 30 && rewritten >= 25,
        "{built} variants built, {rewritten} rewritten"
    );
}

#[test]
fn build_errors_keep_their_line_numbers() {
    let cl = Cl::get();
    let src = BROKEN;
    let analysis = analyse_with_options(src, &[], "");
    let rewritten = rewrite(&analysis).expect("rewrite");
    assert_eq!(rewritten.kernels, [("broken".to_string(), 1)]);
    let original = cl
        .build(src, &[], "")
        .expect_err("the original must fail to build");
    let new = cl
        .build(&rewritten.source, &[], "")
        .expect_err("the rewrite must fail to build");
    assert_eq!(error_line(&original), 7, "{original}");
    assert_eq!(error_line(&new), 7, "{new}");
}

/// The program `tests/managed_rewrite.rs` uses for the fallback: the rewrite accepts it,
/// its rewritten source does not build, the original does.
#[test]
fn the_fallback_corpus_program_needs_the_fallback() {
    let cl = Cl::get();
    let r = rewrite(&analyse_with_options(FALLBACK, &[], "")).expect("rewrite");
    assert_eq!(r.kernels, [("fallback".to_string(), 1)]);
    cl.build(&r.source, &[], "")
        .expect_err("the rewrite must not build");
    let original = cl.build(FALLBACK, &[], "").expect("the original builds");
    // SAFETY: our program, no longer used.
    unsafe { clReleaseProgram(original) };
}
