//! Issue 4: a sliced launch gives bit-identical results to an unsliced one. This binary runs
//! with `slice = "always"` and a tiny target slice (50 µs), so every sliceable NDRange on
//! the SoftPreempt platform is cut into many slices (slow start: 1, 2, 4... work-group
//! rows); each kernel of the corpus is run on SoftPreempt and on the bare PoCL platform
//! (never sliced) in the same process, and the outputs are compared bit for bit.

mod common;
mod managed_common;

use common::{bare_platform, ok, Env};
use managed_common as mc;
use opencl_sys::*;
use std::ffi::c_void;
use std::path::Path;
use std::time::Duration;

/// Slicing is under test here: yielding launches (the default for kernels the yielding
/// rewrite takes) are off; `tests/managed_yield.rs` has them.
const SCHED: &str = "slice = \"always\"\ntarget_slice_us = 50\nyielding = \"never\"";

/// Configures the process (once) and serializes the tests (statistics are per process).
fn setup() -> (&'static Path, std::sync::MutexGuard<'static, ()>) {
    let dir = mc::init(SCHED);
    (dir, mc::serial())
}

/// Runs `f` on the bare vendor and on SoftPreempt; the outputs must be identical.
#[track_caller]
fn same_on_both<T: PartialEq + std::fmt::Debug>(what: &str, f: impl Fn(&Env) -> Vec<T>) {
    let bare = f(&Env::new(bare_platform()));
    let sp = f(&Env::sp());
    assert!(
        bare == sp,
        "{what}: sliced result differs from bare PoCL: {}",
        mc::first_difference(&bare, &sp)
    );
}

fn kernel(env: &Env, src: &str, name: &str) -> cl_kernel {
    let prog =
        mc::build(env, &format!("{}{src}", mc::MIX_CL), "").unwrap_or_else(|e| panic!("{e}"));
    env.kernel(prog, name)
}

/// A buffer of `n` u32 filled with a sentinel, so writes outside the range show.
fn sentinel(env: &Env, n: usize) -> cl_mem {
    mc::filled(env, n, 0xDEAD_BEEFu32)
}

// ---------------------------------------------------------------------------------------
// Geometry: 1D/2D/3D, offsets, NULL and explicit local sizes.

/// Writes out[gid] = mix(gid), within the whole buffer (sentinel elsewhere).
const ELEMENTWISE_1D: &str = r#"
__kernel void k(__global uint* out, uint iters) {
    size_t i = get_global_id(0);
    out[i] = mix((uint)i * 7u + 1u, iters);
}
"#;

fn run_1d(env: &Env, offset: Option<usize>, global: usize, local: Option<usize>) -> Vec<u32> {
    let k = kernel(env, ELEMENTWISE_1D, "k");
    let n = offset.unwrap_or(0) + global + 64;
    let out = sentinel(env, n);
    mc::arg(k, 0, out);
    mc::arg(k, 1, 64u32);
    let off = offset.map(|o| [o]);
    let loc = local.map(|l| [l]);
    ok(mc::enqueue(
        env.queue,
        k,
        off.as_ref().map(|o| &o[..]),
        &[global],
        loc.as_ref().map(|l| &l[..]),
        &[],
        None,
    ));
    let v = env.read::<u32>(out, n);
    mc::release_mems(&[out]);
    v
}

#[test]
fn one_dimension_explicit_local() {
    let _g = setup();
    // 1037 groups of 64: not a power of two, so slices of 1, 2, 4... rows never divide it.
    same_on_both("1D local 64", |e| run_1d(e, None, 64 * 1037, Some(64)));
}

#[test]
fn one_dimension_null_local_prime_global() {
    let _g = setup();
    // A prime global size with NULL local: the layer must pick a local size that divides
    // it (or slice at work-item granularity) and still cover every item exactly once.
    same_on_both("1D NULL local, global 100003", |e| {
        run_1d(e, None, 100_003, None)
    });
}

#[test]
fn one_dimension_with_offset() {
    let _g = setup();
    same_on_both("1D offset 17, local 32", |e| {
        run_1d(e, Some(17), 32 * 2049, Some(32))
    });
    same_on_both("1D offset 1000, NULL local", |e| {
        run_1d(e, Some(1000), 50_000, None)
    });
}

/// out[y * w + x] = f(x, y), the row width passed as an argument (not get_global_size,
/// which would make the kernel unsliceable).
const ELEMENTWISE_2D: &str = r#"
__kernel void k(__global uint* out, uint w) {
    size_t x = get_global_id(0), y = get_global_id(1);
    out[y * w + x] = mix((uint)(x * 131u + y), 16u);
}
"#;

fn run_2d(
    env: &Env,
    offset: Option<[usize; 2]>,
    global: [usize; 2],
    local: Option<[usize; 2]>,
) -> Vec<u32> {
    let k = kernel(env, ELEMENTWISE_2D, "k");
    let o = offset.unwrap_or([0, 0]);
    let (w, h) = (o[0] + global[0], o[1] + global[1]);
    let out = sentinel(env, w * h);
    mc::arg(k, 0, out);
    mc::arg(k, 1, w as u32);
    ok(mc::enqueue(
        env.queue,
        k,
        offset.as_ref().map(|o| &o[..]),
        &global,
        local.as_ref().map(|l| &l[..]),
        &[],
        None,
    ));
    let v = env.read::<u32>(out, w * h);
    mc::release_mems(&[out]);
    v
}

#[test]
fn two_dimensions() {
    let _g = setup();
    // The second dimension has the most groups (slices cut along it) ...
    same_on_both("2D local 8x2", |e| run_2d(e, None, [64, 390], Some([8, 2])));
    // ... and here the first one does.
    same_on_both("2D local 16x4, offset (3, 5)", |e| {
        run_2d(e, Some([3, 5]), [16 * 37, 4 * 5], Some([16, 4]))
    });
    same_on_both("2D NULL local, odd sizes, offset (1, 2)", |e| {
        run_2d(e, Some([1, 2]), [333, 77], None)
    });
}

const ELEMENTWISE_3D: &str = r#"
__kernel void k(__global uint* out, uint w, uint h) {
    size_t x = get_global_id(0), y = get_global_id(1), z = get_global_id(2);
    out[(z * h + y) * w + x] = mix((uint)(x + 1000u * y + 1000000u * z), 8u);
}
"#;

fn run_3d(
    env: &Env,
    offset: Option<[usize; 3]>,
    global: [usize; 3],
    local: Option<[usize; 3]>,
) -> Vec<u32> {
    let k = kernel(env, ELEMENTWISE_3D, "k");
    let o = offset.unwrap_or([0; 3]);
    let (w, h, d) = (o[0] + global[0], o[1] + global[1], o[2] + global[2]);
    let out = sentinel(env, w * h * d);
    mc::arg(k, 0, out);
    mc::arg(k, 1, w as u32);
    mc::arg(k, 2, h as u32);
    ok(mc::enqueue(
        env.queue,
        k,
        offset.as_ref().map(|o| &o[..]),
        &global,
        local.as_ref().map(|l| &l[..]),
        &[],
        None,
    ));
    let v = env.read::<u32>(out, w * h * d);
    mc::release_mems(&[out]);
    v
}

#[test]
fn three_dimensions() {
    let _g = setup();
    same_on_both("3D local 4x4x2, offset (1, 2, 3)", |e| {
        run_3d(e, Some([1, 2, 3]), [16, 12, 2 * 41], Some([4, 4, 2]))
    });
    same_on_both("3D NULL local", |e| run_3d(e, None, [30, 7, 53], None));
    same_on_both("3D widest along x", |e| {
        run_3d(e, None, [8 * 45, 3, 2], Some([8, 1, 2]))
    });
}

#[test]
fn global_not_divisible_by_local() {
    let _g = setup();
    let probe = Env::sp();
    if mc::non_uniform_supported(&probe) {
        // Non-uniform work-groups (OpenCL 2.0+): the last group is partial, and the slice
        // that holds it must keep it partial.
        same_on_both("non-uniform 1D", |e| {
            let prog = mc::build(
                e,
                &format!("{}{ELEMENTWISE_1D}", mc::MIX_CL),
                "-cl-std=CL2.0",
            )
            .unwrap_or_else(|m| panic!("{m}"));
            let k = e.kernel(prog, "k");
            let n = 64 * 100 + 37 + 64;
            let out = sentinel(e, n);
            mc::arg(k, 0, out);
            mc::arg(k, 1, 8u32);
            ok(mc::enqueue(
                e.queue,
                k,
                None,
                &[64 * 100 + 37],
                Some(&[64]),
                &[],
                None,
            ));
            e.read::<u32>(out, n)
        });
    } else {
        // Uniform-only device: the launch is refused, synchronously, with the bare
        // driver's code (even though SoftPreempt defers the command).
        let code = |e: &Env| {
            let k = kernel(e, ELEMENTWISE_1D, "k");
            let out = sentinel(e, 7000);
            mc::arg(k, 0, out);
            mc::arg(k, 1, 8u32);
            let rc = mc::enqueue(e.queue, k, None, &[64 * 100 + 37], Some(&[64]), &[], None);
            mc::finish(e.queue);
            vec![rc]
        };
        same_on_both("global not divisible by local (uniform-only device)", code);
        eprintln!("note: no non-uniform work-group support; checked the error path only");
    }
}

// ---------------------------------------------------------------------------------------
// Local memory, barriers, atomics, images.

/// A tree reduction per work-group in `__local` memory with barriers; one value per group,
/// indexed by get_global_id(0) / get_local_size(0) (not get_group_id, which is
/// unsliceable). Integer arithmetic: exact whatever the order.
const REDUCE: &str = r#"
__kernel void reduce(__global const uint* in, __global uint* out, __local uint* scratch) {
    size_t l = get_local_id(0), n = get_local_size(0);
    scratch[l] = in[get_global_id(0)] * 3u + (uint)l;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (size_t s = n / 2; s > 0; s >>= 1) {
        if (l < s) scratch[l] = scratch[l] * 31u + scratch[l + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (l == 0) out[get_global_id(0) / n] = scratch[0];
}
"#;

#[test]
fn local_memory_and_barriers() {
    let _g = setup();
    for (offset, groups) in [(0usize, 777usize), (128, 301)] {
        same_on_both(
            &format!("reduction, offset {offset}, {groups} groups"),
            |e| {
                let k = kernel(e, REDUCE, "reduce");
                let local = 64;
                let n = offset + groups * local;
                let input: Vec<u32> = (0..n as u32).map(|i| mc::mix(i, 3)).collect();
                let inb = e.buffer(n * 4);
                e.write(inb, &input);
                let outn = n / local + 4;
                let out = sentinel(e, outn);
                mc::arg(k, 0, inb);
                mc::arg(k, 1, out);
                mc::local_arg(k, 2, local * 4);
                let off = [offset];
                ok(mc::enqueue(
                    e.queue,
                    k,
                    (offset > 0).then_some(&off[..]),
                    &[groups * local],
                    Some(&[local]),
                    &[],
                    None,
                ));
                let v = e.read::<u32>(out, outn);
                mc::release_mems(&[inb, out]);
                v
            },
        );
    }
}

const HISTOGRAM: &str = r#"
__kernel void hist(__global const uint* in, __global uint* bins, __global uint* total) {
    uint v = in[get_global_id(0)];
    atomic_inc(&bins[v % 251u]);
    atomic_add(total, v & 7u);
}
"#;

#[test]
fn atomics() {
    let _g = setup();
    same_on_both("histogram with atomic_inc/atomic_add", |e| {
        let k = kernel(e, HISTOGRAM, "hist");
        let n = 128 * 1001;
        let input: Vec<u32> = (0..n as u32).map(|i| mc::mix(i, 5)).collect();
        let inb = e.buffer(n * 4);
        e.write(inb, &input);
        let bins = mc::filled(e, 251, 0u32);
        let total = mc::filled(e, 1, 0u32);
        mc::arg(k, 0, inb);
        mc::arg(k, 1, bins);
        mc::arg(k, 2, total);
        ok(mc::enqueue(e.queue, k, None, &[n], Some(&[128]), &[], None));
        let mut v = e.read::<u32>(bins, 251);
        v.extend(e.read::<u32>(total, 1));
        mc::release_mems(&[inb, bins, total]);
        v
    });
}

const IMAGE: &str = r#"
__constant sampler_t smp = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_CLAMP_TO_EDGE | CLK_FILTER_NEAREST;
__kernel void img(__read_only image2d_t im, __global float4* out, uint w) {
    int x = get_global_id(0), y = get_global_id(1);
    float4 p = read_imagef(im, smp, (int2)(x - 1, y + 1));
    out[y * w + x] = p * 2.0f + (float4)(x, y, 0.5f, 1.0f);
}
"#;

#[test]
fn images() {
    let _g = setup();
    same_on_both("read image, write buffer", |e| {
        let support: cl_bool = common::info_scalar(|s, v, r| unsafe {
            clGetDeviceInfo(e.device, CL_DEVICE_IMAGE_SUPPORT, s, v, r)
        });
        assert_eq!(
            support, CL_TRUE,
            "PoCL supports images; this test needs them"
        );
        let (w, h) = (203usize, 151usize);
        let pixels: Vec<f32> = (0..w * h * 4)
            .map(|i| (mc::mix(i as u32, 2) % 1000) as f32 / 7.0)
            .collect();
        let fmt = cl_image_format {
            image_channel_order: CL_RGBA,
            image_channel_data_type: CL_FLOAT,
        };
        let desc = cl_image_desc {
            image_type: CL_MEM_OBJECT_IMAGE2D,
            image_width: w,
            image_height: h,
            image_depth: 0,
            image_array_size: 0,
            image_row_pitch: 0,
            image_slice_pitch: 0,
            num_mip_levels: 0,
            num_samples: 0,
            buffer: std::ptr::null_mut(),
        };
        let mut err = 0;
        // SAFETY: the host data holds w*h RGBA float pixels and is copied at creation.
        let im = unsafe {
            clCreateImage(
                e.context,
                CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                &fmt,
                &desc,
                pixels.as_ptr() as *mut c_void,
                &mut err,
            )
        };
        ok(err);
        let k = kernel(e, IMAGE, "img");
        let out = e.buffer(w * h * 16);
        mc::arg(k, 0, im);
        mc::arg(k, 1, out);
        mc::arg(k, 2, w as u32);
        ok(mc::enqueue(e.queue, k, None, &[w, h], None, &[], None));
        // Compare the bits, not the float values.
        let v = e.read::<u32>(out, w * h * 4);
        mc::release_mems(&[im, out]);
        v
    });
}

// ---------------------------------------------------------------------------------------
// Unsliceable kernels, argument snapshots, and proof that slicing happens.

/// Reads get_group_id, get_num_groups, get_global_size and get_global_offset: slicing
/// would change them. Kernels that read them are rewritten and sliced (issue 5,
/// `tests/managed_rewrite.rs`), but not this one: a macro that pastes tokens hides which
/// builtins it reads, so the layer must launch it whole.
const GEOMETRY: &str = r#"
#define GET(what) get_##what(0)
__kernel void geo(__global uint* out) {
    size_t i = get_global_id(0);
    out[i - get_global_offset(0)] = (uint)(GET(group_id) * 100000u + get_num_groups(0) * 10u)
        ^ (uint)get_global_size(0) ^ mix((uint)i, 4u);
}
"#;

fn my_grants(dir: &Path) -> u64 {
    mc::clients_of(dir, std::process::id())
        .iter()
        .map(|c| c.grants)
        .sum()
}

#[test]
fn geometry_reading_kernel_is_correct_and_not_sliced() {
    let (dir, _g) = setup();
    let run = |e: &Env| {
        let k = kernel(e, GEOMETRY, "geo");
        let n = 64 * 1500;
        let out = sentinel(e, n + 64);
        mc::arg(k, 0, out);
        ok(mc::enqueue(
            e.queue,
            k,
            Some(&[64]),
            &[n],
            Some(&[64]),
            &[],
            None,
        ));
        let v = e.read::<u32>(out, n + 64);
        mc::release_mems(&[out]);
        v
    };
    let bare = run(&Env::new(bare_platform()));
    let sp = Env::sp();
    // Register the queue's client first (a small command), then count.
    let warm = sentinel(&sp, 4);
    mc::finish(sp.queue);
    let (g0, s0) = (my_grants(dir), mc::my_slices(dir));
    let got = run(&sp);
    mc::finish(sp.queue);
    std::thread::sleep(Duration::from_millis(50));
    let (g1, s1) = (my_grants(dir), mc::my_slices(dir));
    assert!(
        bare == got,
        "get_group_id kernel: {}",
        mc::first_difference(&bare, &got)
    );
    // Launched whole: at most one grant (one unsliced launch through the software FIFO),
    // where slicing would have taken one grant per slice (1500 groups, 50 µs target).
    assert!(
        g1 - g0 <= 1 && s1 - s0 <= 1,
        "a kernel that reads get_group_id was sliced: grants +{}, slices +{}\n{}",
        g1 - g0,
        s1 - s0,
        mc::describe(dir)
    );
    mc::release_mems(&[warm]);
}

#[test]
fn big_launch_is_really_sliced() {
    let (dir, _g) = setup();
    let e = Env::sp();
    let k = kernel(&e, mc::FILL_CL, "fill");
    let n = mc::sliceable_items(&e, 64 * 1024);
    let out = e.buffer(n * 4);
    mc::arg(k, 0, out);
    mc::arg(k, 1, 5u32);
    mc::arg(k, 2, 2000u32);
    // Register the queue's client first (a small command), then count.
    ok(mc::enqueue(e.queue, k, None, &[64], Some(&[64]), &[], None));
    mc::finish(e.queue);
    let (g0, s0) = (my_grants(dir), mc::my_slices(dir));
    ok(mc::enqueue(e.queue, k, None, &[n], Some(&[64]), &[], None));
    let got = e.read::<u32>(out, n);
    if let Some(m) = mc::check_fill(&got, 0, 5, 2000) {
        panic!("sliced fill: {m}");
    }
    // Grants are taken before each slice is submitted: all of them are counted once the
    // command is complete. `slices` is reported when each slice is seen done, which may
    // trail the application's event by a moment.
    let g1 = my_grants(dir);
    assert!(
        g1 - g0 > 1,
        "a 1024-group launch with slice = \"always\" and a 50 µs target took {} grant(s): not sliced\n{}",
        g1 - g0,
        mc::describe(dir)
    );
    mc::eventually(
        "the slices counter to pass 1",
        Duration::from_secs(10),
        || mc::my_slices(dir) - s0 > 1,
    );
    mc::release_mems(&[out]);
}

#[test]
fn arguments_are_captured_at_enqueue() {
    let _g = setup();
    same_on_both("argument snapshot", |e| {
        let k = kernel(e, mc::FILL_CL, "fill");
        let n = 64 * 256;
        let a = mc::filled(e, n, 0u32);
        let b = mc::filled(e, n, 0u32);
        // A long launch first, so the next commands wait in the software FIFO.
        mc::arg(k, 0, a);
        mc::arg(k, 1, 1u32);
        mc::arg(k, 2, 1000u32);
        ok(mc::enqueue(e.queue, k, None, &[n], Some(&[64]), &[], None));
        // Change every argument at once, and launch again.
        mc::arg(k, 0, b);
        mc::arg(k, 1, 2u32);
        mc::arg(k, 2, 7u32);
        ok(mc::enqueue(e.queue, k, None, &[n], Some(&[64]), &[], None));
        // And once more with the scalar only, writing `a`'s second half via an offset.
        mc::arg(k, 0, a);
        mc::arg(k, 1, 9u32);
        ok(mc::enqueue(
            e.queue,
            k,
            Some(&[n / 2]),
            &[n / 2],
            Some(&[64]),
            &[],
            None,
        ));
        mc::arg(k, 1, 1000u32); // set after the last enqueue: must affect nothing
        let mut v = e.read::<u32>(a, n);
        v.extend(e.read::<u32>(b, n));
        let mut want = mc::fill_expected(n / 2, 1, 1000);
        want.extend(mc::fill_expected(n, 9, 7).split_off(n / 2));
        want.extend(mc::fill_expected(n, 2, 7));
        assert!(
            v == want,
            "on {:?}: {}",
            e.platform,
            mc::first_difference(&want, &v)
        );
        mc::release_mems(&[a, b]);
        v
    });
}
