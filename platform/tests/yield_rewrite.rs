//! The yielding-launch rewrite, run for real on the vendor (PoCL by default, straight
//! through the ocl-icd loader, without SoftPreempt; see `vendor/mod.rs`).
//!
//! A seeded generator writes kernels with barriers, `return`s (in loops and switches),
//! `__local` arrays, a `__local` pointer argument and helper functions that read every
//! geometry builtin, and launches them over 1-, 2- and 3-D ranges with and without offsets.
//! Each must give bit-identical outputs (a) whole from the original source, (b) through its
//! entry kernel with no yield, and (c) through its entry kernel with yields forced at random
//! moments: the host writes the yield word into the control words while the launch runs
//! (fine-grained SVM, which the CPU device's kernel reads in place: PoCL 3.1 copies a
//! `CL_MEM_USE_HOST_PTR` buffer at each launch, so a write during one is not seen), and relaunches
//! with a new epoch until the ticket says every virtual group has run. A deliberately wrong
//! geometry must give other outputs, which shows the comparison can fail. The corpus of
//! `tests/rewrite_corpus/` must build after the rewrite.

use opencl_sys::*;
use softpreempt_transform::{
    analyse, yield_geometry_arg, yielding, YieldProgram, TICKET, YIELD_WORD,
};
use std::ffi::{c_void, CString};
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

mod vendor;
use vendor::{ok, Cl};

#[path = "../../tests/rewrite_corpus/mod.rs"]
mod corpus;

#[path = "../../tests/rewrite_corpus/rng.rs"]
mod rng;
use rng::Rng;

/// The pieces a generated kernel is made of (a busy loop makes its groups last long enough
/// for yields to land part way; dimensions past the third are left out: PoCL
/// answers 0 for sizes there, not the spec's 1, see `kernel_rewrite.rs`), in this order (barriers before returns: a
/// kernel with a `return` before a barrier is not rewritten, see the crate's unit tests).
const PRELUDE: &str = "
#define IDX(d) (get_global_id(d) - get_global_offset(d))
ulong geo(uint d) {
    return get_group_id(d) * 7ul + get_num_groups(d) * 131ul + get_global_size(d) * 3ul
        + get_global_offset(d) * 11ul + get_global_id(d) * 13ul + get_local_size(d) * 17ul
        + get_local_id(d) * 19ul;
}
size_t lin(void) { return (IDX(2) * get_global_size(1) + IDX(1)) * get_global_size(0) + IDX(0); }
";
const HEAD: &str = "
kernel void gen(global uint* out, global const uint* in, local uint* scratch, uint salt) {";
const TILE_DECL: &str = "
    local uint tile[64];";
const START: &str = "
    size_t i = lin();
    size_t l = get_local_id(0) + get_local_size(0) * (get_local_id(1) + get_local_size(1) * get_local_id(2));
    size_t n = get_local_size(0) * get_local_size(1) * get_local_size(2);
    uint acc = in[i % 97u] ^ salt ^ (uint)get_work_dim();
    for (uint d = 0; d < 3u; d++)
        acc = acc * 31u + (uint)geo(d);
    for (uint r = 0; r < 200000u + (salt & 255u); r++)
        acc = acc * 1664525u + 1013904223u;";
const SCRATCH: &str = "
    scratch[l] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    acc += scratch[(l + 1) % n] * 3u;
    barrier(CLK_LOCAL_MEM_FENCE);";
const TILE: &str = "
    if (l < 64)
        tile[l] = acc ^ (uint)get_group_id(0);
    barrier(CLK_LOCAL_MEM_FENCE);
    acc += tile[(l * 7u) % min(n, (size_t)64)];
    barrier(CLK_LOCAL_MEM_FENCE);";
const LOOP_RETURN: &str = "
    for (int k = 0; k < 4; k++) {
        if (((acc >> (2 * k)) & 7u) == 3u)
            return;
        acc = acc * 3u + (uint)k;
    }";
const SWITCH_RETURN: &str = "
    switch (acc & 3u) {
    case 1:
        if (i & 1)
            return;
        break;
    default:
        acc ^= 5u;
    }";
const TAIL: &str = "
    out[i] = acc;
}
";

/// One generated case: the program and its launch.
struct Gen {
    source: String,
    work_dim: u32,
    offset: [usize; 3],
    global: [usize; 3],
    local: [usize; 3],
    /// Persistent groups for the entry.
    persistent: usize,
    salt: u32,
    /// The ticket counter's value before the first launch (near the wrap, at times).
    ticket: u32,
}

fn generate(seed: u64) -> Gen {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut source = String::from(PRELUDE) + HEAD;
    let tile = rng.coin();
    if tile {
        source += TILE_DECL;
    }
    source += START;
    if rng.coin() {
        source += SCRATCH;
    }
    if tile {
        source += TILE;
    }
    if rng.coin() {
        source += LOOP_RETURN;
    }
    if rng.coin() {
        source += SWITCH_RETURN;
    }
    source += TAIL;
    let work_dim = 1 + rng.below(3) as u32;
    let (mut offset, mut global, mut local) = ([0; 3], [1; 3], [1; 3]);
    let with_offset = rng.coin();
    for d in 0..work_dim as usize {
        local[d] = [1, 2, 4, 8][rng.below(4)];
        let groups = match work_dim {
            1 => 16 + rng.below(48),
            2 => 3 + rng.below(6),
            _ => 2 + rng.below(3),
        };
        global[d] = groups * local[d];
        offset[d] = if with_offset { rng.below(9) } else { 0 };
    }
    let ticket = if rng.coin() {
        u32::MAX - rng.below(40) as u32
    } else {
        rng.next() as u32
    };
    Gen {
        source,
        work_dim,
        offset,
        global,
        local,
        persistent: 1 + rng.below(3),
        salt: rng.next() as u32,
        ticket,
    }
}

impl Gen {
    fn items(&self) -> usize {
        self.global.iter().product()
    }

    fn groups(&self) -> u32 {
        (0..3)
            .map(|d| self.global[d] / self.local[d])
            .product::<usize>() as u32
    }
}

/// The control words: fine-grained SVM, which host and kernel share while it runs.
struct Control(*mut AtomicU32);

impl Control {
    fn new(ticket: u32) -> Control {
        let flags = CL_MEM_READ_WRITE | CL_MEM_SVM_FINE_GRAIN_BUFFER | CL_MEM_SVM_ATOMICS;
        // SAFETY: a valid context; 64 bytes at the default alignment.
        let p = unsafe { clSVMAlloc(Cl::get().context, flags, 64, 0) } as *mut AtomicU32;
        assert!(
            !p.is_null(),
            "clSVMAlloc (fine-grained, with atomics) failed"
        );
        for i in 0..16 {
            // SAFETY: 16 words allocated above, not yet shared with any kernel.
            unsafe { p.add(i).write(AtomicU32::new(0)) };
        }
        let c = Control(p);
        c.word(TICKET).store(ticket, Ordering::SeqCst);
        c
    }

    fn word(&self, i: usize) -> &AtomicU32 {
        assert!(i < 16);
        // SAFETY: one of the 16 words allocated in `new`, alive as long as `self`;
        // fine-grained SVM with atomics may be accessed by host and kernel at once.
        unsafe { &*self.0.add(i) }
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        // SAFETY: our allocation; the launcher finished its queue before dropping it.
        unsafe { clSVMFree(Cl::get().context, self.0 as *mut c_void) };
    }
}

/// A kernel with its arguments set, and the buffers behind them.
struct Launcher {
    kernel: cl_kernel,
    out: cl_mem,
    input: cl_mem,
    control: Option<Control>,
    items: usize,
}

fn buffer(flags: cl_mem_flags, size: usize, host: *mut c_void) -> cl_mem {
    let mut err = 0;
    // SAFETY: `host` holds `size` bytes (copied, or kept alive by the caller for
    // CL_MEM_USE_HOST_PTR).
    let mem = unsafe { clCreateBuffer(Cl::get().context, flags, size, host, &mut err) };
    ok(err, "clCreateBuffer");
    mem
}

fn set_arg(kernel: cl_kernel, index: u32, size: usize, value: *const c_void) {
    // SAFETY: `value` holds `size` bytes, or is NULL for local memory.
    ok(
        unsafe { clSetKernelArg(kernel, index, size, value) },
        "clSetKernelArg",
    );
}

impl Launcher {
    /// `kernel` of `program`, with the generated kernel's four arguments set; `entry`: it
    /// is an entry kernel, which gets a control buffer starting at ticket `ticket`.
    fn new(g: &Gen, program: cl_program, kernel: &str, entry: bool) -> Launcher {
        let name = CString::new(kernel).unwrap();
        let mut err = 0;
        // SAFETY: a built program and a NUL-terminated name.
        let kernel = unsafe { clCreateKernel(program, name.as_ptr(), &mut err) };
        ok(err, "clCreateKernel");
        let items = g.items();
        let fill: Vec<u32> = (0..items as u32)
            .map(|j| j.wrapping_mul(0x9E37) ^ 0xA5A5)
            .collect();
        let input: Vec<u32> = (0..97u32).map(|j| j.wrapping_mul(2_654_435_761)).collect();
        let out = buffer(
            CL_MEM_COPY_HOST_PTR,
            items * 4,
            fill.as_ptr() as *mut c_void,
        );
        let input = buffer(CL_MEM_COPY_HOST_PTR, 97 * 4, input.as_ptr() as *mut c_void);
        let local_bytes = 4 * g.local.iter().product::<usize>();
        set_arg(kernel, 0, 8, &out as *const cl_mem as *const c_void);
        set_arg(kernel, 1, 8, &input as *const cl_mem as *const c_void);
        set_arg(kernel, 2, local_bytes, null());
        set_arg(kernel, 3, 4, &g.salt as *const u32 as *const c_void);
        let control = entry.then(|| {
            let c = Control::new(g.ticket);
            // SAFETY: an SVM pointer from clSVMAlloc of this context.
            let rc = unsafe { clSetKernelArgSVMPointer(kernel, 5, c.0 as *const c_void) };
            ok(rc, "clSetKernelArgSVMPointer");
            c
        });
        Launcher {
            kernel,
            out,
            input,
            control,
            items,
        }
    }

    fn enqueue(&self, work_dim: u32, offset: &[usize; 3], global: &[usize; 3], local: &[usize; 3]) {
        // SAFETY: three-element arrays, whatever the dimension count.
        let rc = unsafe {
            clEnqueueNDRangeKernel(
                Cl::get().queue,
                self.kernel,
                work_dim,
                offset.as_ptr(),
                global.as_ptr(),
                local.as_ptr(),
                0,
                null(),
                null_mut(),
            )
        };
        ok(rc, "clEnqueueNDRangeKernel");
    }

    fn output(&self) -> Vec<u32> {
        let (mem, words) = (self.out, self.items);
        let mut buf = vec![0u32; words];
        // SAFETY: a blocking read of `words` words into a buffer that holds them.
        let rc = unsafe {
            clEnqueueReadBuffer(
                Cl::get().queue,
                mem,
                CL_TRUE,
                0,
                words * 4,
                buf.as_mut_ptr() as *mut c_void,
                0,
                null(),
                null_mut(),
            )
        };
        ok(rc, "clEnqueueReadBuffer");
        buf
    }

    /// The ticket counter, as the device left it (read after the launch finished).
    fn ticket(&self) -> u32 {
        let c = self.control.as_ref().expect("an entry kernel");
        c.word(TICKET).load(Ordering::SeqCst)
    }
}

impl Drop for Launcher {
    fn drop(&mut self) {
        // SAFETY: our objects; every command on them has finished (blocking reads).
        unsafe {
            clFinish(Cl::get().queue);
            clReleaseKernel(self.kernel);
            clReleaseMemObject(self.out);
            clReleaseMemObject(self.input);
        }
    }
}

/// When the host asks a launch to yield.
#[derive(Clone, Copy)]
enum When {
    /// This long after it was flushed to the device.
    After(Duration),
    /// Once this many virtual groups (of the application's launch) were handed out.
    Ticket(u32),
}

/// How a launch through the entry went.
#[derive(Default, Debug)]
struct Yields {
    /// Launches in all (the first and the relaunches).
    launches: u32,
    /// Launches stopped with some but not all virtual groups run.
    partial: u32,
}

/// Runs the application's launch `g` through the entry: the persistent grid, relaunched
/// with a new epoch after each yield until every virtual group has run. `when` says when
/// the host asks launch number `n` (with `done` virtual groups handed out before it) to
/// yield: `None`, never.
/// `geometry` is the launch geometry passed to the entry (the original's, unless a test
/// passes a wrong one on purpose).
fn run_entry(
    g: &Gen,
    l: &Launcher,
    geometry: ([usize; 3], [usize; 3]),
    mut when: impl FnMut(u32, u32) -> Option<When>,
) -> Yields {
    let control = l.control.as_ref().expect("an entry kernel");
    let total = g.groups();
    let base = g.ticket;
    let mut global = g.local;
    global[0] *= g.persistent;
    let mut y = Yields::default();
    let mut before = base;
    for epoch in 1u32.. {
        assert!(epoch < 10_000, "the launch does not finish");
        let arg = yield_geometry_arg(g.work_dim, geometry.0, geometry.1, g.local, epoch, base);
        set_arg(l.kernel, 4, arg.len(), arg.as_ptr() as *const c_void);
        l.enqueue(g.work_dim, &[0; 3], &global, &g.local);
        // SAFETY: a valid queue.
        ok(unsafe { clFlush(Cl::get().queue) }, "clFlush");
        if let Some(w) = when(y.launches, before.wrapping_sub(base)) {
            // Spun, not slept: sleeps are too coarse for launches of a millisecond.
            let start = Instant::now();
            let due = |now: Instant| match w {
                When::After(d) => now >= start + d,
                // Bounded, in case the launch ends first.
                When::Ticket(k) => {
                    control
                        .word(TICKET)
                        .load(Ordering::SeqCst)
                        .wrapping_sub(base)
                        >= k
                        || now >= start + Duration::from_secs(1)
                }
            };
            while !due(Instant::now()) {
                std::hint::spin_loop();
            }
            control.word(YIELD_WORD).store(epoch, Ordering::SeqCst);
        }
        // SAFETY: a valid queue.
        ok(unsafe { clFinish(Cl::get().queue) }, "clFinish");
        y.launches += 1;
        let ticket = l.ticket();
        let done = ticket.wrapping_sub(base);
        if done >= total {
            return y;
        }
        if ticket != before {
            y.partial += 1;
        }
        before = ticket;
    }
    unreachable!()
}

/// The outputs of (a) the original whole, (b) the entry unyielded, (c) the entry with
/// forced yields, and how (c) went.
fn check(seed: u64, yields: &mut Yields) {
    let g = generate(seed);
    let cl = Cl::get();
    let analysis = analyse(&g.source, &[]);
    let program: YieldProgram =
        yielding(&analysis).unwrap_or_else(|| panic!("seed {seed}: not rewritten:\n{}", g.source));
    assert!(
        program.skipped.is_empty(),
        "seed {seed}: {:?}",
        program.skipped
    );
    let k = &program.kernels[0];
    assert_eq!((k.name.as_str(), k.args), ("gen", 4), "seed {seed}");
    let original = cl
        .build(&g.source, &[], "")
        .unwrap_or_else(|log| panic!("seed {seed}: {log}"));
    let rewritten = cl.build(&program.source, &[], "").unwrap_or_else(|log| {
        panic!(
            "seed {seed}: the rewrite does not build:\n{log}\n{}",
            program.source
        )
    });
    let whole = {
        let l = Launcher::new(&g, original, "gen", false);
        l.enqueue(g.work_dim, &g.offset, &g.global, &g.local);
        l.output()
    };
    let what = format!(
        "seed {seed}: {}-D {:?}+{:?}/{:?}, {} persistent groups",
        g.work_dim, g.global, g.offset, g.local, g.persistent
    );

    // (b) No yield: one launch, and exactly total + P tickets taken.
    let l = Launcher::new(&g, rewritten, &k.entry, true);
    let unyielded = run_entry(&g, &l, (g.offset, g.global), |_, _| None);
    assert_eq!(unyielded.launches, 1, "{what}");
    assert_eq!(
        l.ticket().wrapping_sub(g.ticket),
        g.groups() + g.persistent as u32,
        "{what}: tickets of a full run"
    );
    same(&what, "entry, no yield", &l.output(), &whole);
    drop(l);

    // A wrong geometry (offset moved by one) must show: the comparison can fail. Timed,
    // for the moments of the yields below (the first launch of a local size compiles it).
    let l = Launcher::new(&g, rewritten, &k.entry, true);
    let mut wrong = g.offset;
    wrong[0] += 1;
    let started = Instant::now();
    run_entry(&g, &l, (wrong, g.global), |_, _| None);
    let took = started.elapsed();
    assert_ne!(
        l.output(),
        whole,
        "{what}: a wrong geometry gave the same output"
    );
    drop(l);

    // (c) Yields at random moments within about one unyielded run, a few times over.
    let mut rng = Rng(seed ^ 0x5DEE_CE66_D1CE_4E5B);
    let span = took.as_micros().max(50) as u64;
    for _ in 0..4 {
        let l = Launcher::new(&g, rewritten, &k.entry, true);
        let total = g.groups();
        let y = run_entry(&g, &l, (g.offset, g.global), |n, done| {
            // A random moment, or a random point of progress; now and then not at all, so
            // that every launch makes progress at last.
            match rng.below(5) {
                _ if n >= 200 => None,
                0 => None,
                1 | 2 => Some(When::After(Duration::from_micros(rng.next() % span))),
                _ => Some(When::Ticket(
                    done + 1 + rng.below((total - done) as usize) as u32,
                )),
            }
        });
        same(&what, "entry with yields", &l.output(), &whole);
        yields.launches += y.launches;
        yields.partial += y.partial;
    }
    // SAFETY: our programs, no longer used.
    unsafe {
        clReleaseProgram(original);
        clReleaseProgram(rewritten);
    }
}

/// Asserts equal outputs, showing the first differing word.
fn same(what: &str, how: &str, got: &[u32], want: &[u32]) {
    if let Some(j) = (0..want.len()).find(|&j| got[j] != want[j]) {
        panic!(
            "{what}: {how}: word {j} is {:#x}, not {:#x}",
            got[j], want[j]
        );
    }
}

/// Several seeds per test, so that each stays a few seconds on PoCL.
fn seeds(range: std::ops::Range<u64>) {
    let mut y = Yields::default();
    for seed in range.clone() {
        check(seed, &mut y);
    }
    eprintln!("seeds {range:?}: {y:?}");
    assert!(
        y.partial > 0 && y.launches > range.count() as u32,
        "no launch was stopped part way: the yields were not tested ({y:?})"
    );
}

#[test]
fn generated_kernels_seeds_0_to_6() {
    seeds(0..6);
}

#[test]
fn generated_kernels_seeds_6_to_12() {
    seeds(6..12);
}

#[test]
fn generated_kernels_seeds_12_to_18() {
    seeds(12..18);
}

/// Every program of the corpus that the rewrite accepts builds.
#[test]
fn corpus_rewrites_build() {
    use corpus::*;
    let programs: &[(&str, &str)] = &[
        ("REDUCE", REDUCE),
        ("GEMM", GEMM),
        ("BLUR", BLUR),
        ("HEAT", HEAT),
        ("HIST", HIST),
        ("HELPERS", HELPERS),
        ("LINEAR", LINEAR),
        ("DIMS", DIMS),
        ("ATTRS", ATTRS),
        ("MACROS", MACROS),
        ("NON_UNIFORM", NON_UNIFORM),
        ("REDUCE_INT", REDUCE_INT),
        ("SCAN", SCAN),
        ("GEMM_INT", GEMM_INT),
        ("TRANSPOSE", TRANSPOSE),
        ("STENCIL_1D", STENCIL_1D),
        ("LOCAL_HIST", LOCAL_HIST),
        ("GRID_STRIDE", GRID_STRIDE),
        ("GROUP_ATOMIC", GROUP_ATOMIC),
        ("BLOCK_ID_2D", BLOCK_ID_2D),
        ("CHAIN", CHAIN),
        ("MACRO_GROUP", MACRO_GROUP),
        ("MULTI", MULTI),
        ("REQD16", REQD16),
        ("OFFSETS", OFFSETS),
        ("COORDS", COORDS),
        ("MANDEL", MANDEL),
        ("GROUP_SORT", GROUP_SORT),
        ("ROW_SUM", ROW_SUM),
        ("LINEAR_2D", LINEAR_2D),
        ("GROUPS_3D", GROUPS_3D),
        ("MATVEC", MATVEC),
        ("WITH_STRUCT", WITH_STRUCT),
        ("VEC4", VEC4),
        ("FALLBACK_CONTROL", FALLBACK_CONTROL),
    ];
    let cl = Cl::get();
    let mut entries = 0;
    for (name, source) in programs {
        // OpenCL 2.0 builtins (get_global_linear_id, get_enqueued_local_size) need CL3.0.
        let options = "-cl-std=CL3.0";
        let p = yielding(&analyse(source, &[])).unwrap_or_else(|| panic!("{name}: not rewritten"));
        assert!(p.skipped.is_empty(), "{name}: {:?}", p.skipped);
        let program = cl
            .build(&p.source, &p.headers, options)
            .unwrap_or_else(|log| {
                panic!("{name}: the rewrite does not build:\n{log}\n{}", p.source)
            });
        for k in &p.kernels {
            let entry = CString::new(k.entry.as_str()).unwrap();
            let mut err = 0;
            // SAFETY: a built program and a NUL-terminated name.
            let kernel = unsafe { clCreateKernel(program, entry.as_ptr(), &mut err) };
            ok(err, "clCreateKernel (entry)");
            let mut n: cl_uint = 0;
            // SAFETY: a cl_uint out value.
            let rc = unsafe {
                clGetKernelInfo(
                    kernel,
                    CL_KERNEL_NUM_ARGS,
                    4,
                    &mut n as *mut cl_uint as *mut c_void,
                    null_mut(),
                )
            };
            ok(rc, "clGetKernelInfo");
            assert_eq!(n, k.args + 2, "{name}: {}", k.entry);
            // SAFETY: our kernel, no longer used.
            unsafe { clReleaseKernel(kernel) };
            entries += 1;
        }
        // SAFETY: our program, no longer used.
        unsafe { clReleaseProgram(program) };
    }
    assert!(entries >= programs.len(), "{entries} entries");
}
