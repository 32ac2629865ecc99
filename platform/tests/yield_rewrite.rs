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
//! geometry must give other outputs, which shows the comparison can fail. The flat form
//! refuses a body with both a barrier and a `return`, and runs the same case less its
//! `return`s instead. The corpus of
//! `tests/rewrite_corpus/` must build after the rewrite.

use opencl_sys::*;
use softpreempt_transform::{
    analyse, analyse_with_options, flat_run_groups, tickets_taken, yield_geometry_arg, yielding,
    yielding_form_or_why, EntryForm, YieldProgram, TICKET, YIELD_WORD,
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
/// Barriers in a branch that every item of a group takes alike: on an argument, and on
/// the group.
const UNIFORM_BRANCH: &str = "
    if (salt % 2u == 1u) {
        scratch[l] = acc ^ 7u;
        barrier(CLK_LOCAL_MEM_FENCE);
        acc += scratch[(l + 3) % n];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (get_group_id(0) % 3u == 1u) {
        scratch[l] = acc ^ 9u;
        barrier(CLK_LOCAL_MEM_FENCE);
        acc ^= scratch[(l + 5) % n];
        barrier(CLK_LOCAL_MEM_FENCE);
    }";
/// A return after a barrier, in the same branch.
const BRANCH_RETURN: &str = "
    if (get_group_id(0) % 2u == 0u) {
        scratch[l] = acc ^ 7u;
        barrier(CLK_LOCAL_MEM_FENCE);
        acc += scratch[(l + 3) % n];
        if ((acc & 7u) == 2u)
            return;
    }";
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
const WRAP_OPEN: &str = "
#ifdef WRAP
#if SHIFT > 2";
const WRAPPED_PIECE: &str = "
#if defined(WRAP) && SHIFT > 1
    acc ^= acc >> SHIFT;
#else
    acc ^= 1u;
#endif";
const WRAP_CLOSE: &str = "#else
kernel void gen(global uint* out, global const uint* in, local uint* scratch, uint salt) { out[0] = salt; }
#endif
#endif
";
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
    /// Build options (the `-D`s that conditional groups read).
    options: &'static str,
    /// Virtual groups a ticket hands out.
    chunk: u32,
    /// The entries' form (a flat entry takes one virtual group a ticket).
    form: EntryForm,
}

/// The case of `seed`; with `returns` false, the same case less the pieces that hold a
/// `return` (the coins are tossed all the same, so the rest stays what it was).
fn generate(seed: u64, returns: bool) -> Gen {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    // At times the kernel sits in conditional groups, and has one in its body.
    let wrapped = rng.coin();
    let mut source = String::from(PRELUDE);
    if wrapped {
        source += WRAP_OPEN;
    }
    source += HEAD;
    let tile = rng.coin();
    if tile {
        source += TILE_DECL;
    }
    source += START;
    if rng.coin() {
        source += UNIFORM_BRANCH;
    }
    if rng.coin() {
        source += SCRATCH;
    }
    if tile {
        source += TILE;
    }
    if rng.coin() && returns {
        source += BRANCH_RETURN;
    }
    if rng.coin() && returns {
        source += LOOP_RETURN;
    }
    if rng.coin() && returns {
        source += SWITCH_RETURN;
    }
    if wrapped {
        source += WRAPPED_PIECE;
    }
    source += TAIL;
    if wrapped {
        source += WRAP_CLOSE;
    }
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
        options: if wrapped { "-DWRAP -DSHIFT=3" } else { "" },
        // Drawn last, so that each seed's kernel and geometry stay what they were.
        chunk: 1 + rng.below(4) as u32,
        form: EntryForm::Persistent,
    }
}

impl Gen {
    /// The case with entries of `form` (a flat entry takes one virtual group a ticket).
    fn in_form(mut self, form: EntryForm) -> Self {
        self.form = form;
        if form == EntryForm::Flat {
            self.chunk = 1;
        }
        self
    }

    /// How far an unasked run moves the ticket counter.
    fn tickets(&self) -> u32 {
        match self.form {
            EntryForm::Persistent => {
                tickets_taken(u64::from(self.groups()), self.persistent as u64, self.chunk) as u32
            }
            EntryForm::Flat => tickets_taken(u64::from(self.groups()), 0, 1) as u32,
        }
    }

    /// Groups of the entry's next run, with `done` virtual groups handed out before it.
    fn run_groups(&self, done: u32) -> usize {
        match self.form {
            EntryForm::Persistent => self.persistent,
            EntryForm::Flat => flat_run_groups(u64::from(self.groups()), u64::from(done)) as usize,
        }
    }

    fn items(&self) -> usize {
        self.global.iter().product()
    }

    fn groups(&self) -> u32 {
        (0..3)
            .map(|d| self.global[d] / self.local[d])
            .product::<usize>() as u32
    }
}

/// The control words, where the running kernel sees the host's writes.
enum Control {
    /// Fine-grained SVM with atomics (PoCL): host and kernel share the words while it runs.
    Svm(*mut AtomicU32),
    /// A device buffer (NVIDIA has no fine-grained SVM): the yield word is written through
    /// a second queue of the context while the launch runs on the first.
    Buffer(cl_mem),
}

/// Whether the device has fine-grained SVM buffers with atomics.
fn fine_grained_svm() -> bool {
    let mut caps: cl_device_svm_capabilities = 0;
    // SAFETY: a valid device and an out value of the size passed.
    let rc = unsafe {
        clGetDeviceInfo(
            Cl::get().device,
            CL_DEVICE_SVM_CAPABILITIES,
            std::mem::size_of_val(&caps),
            &mut caps as *mut _ as *mut c_void,
            null_mut(),
        )
    };
    let want = CL_DEVICE_SVM_FINE_GRAIN_BUFFER | CL_DEVICE_SVM_ATOMICS;
    rc == CL_SUCCESS && caps & want == want
}

/// The second queue, for the yield word on devices without fine-grained SVM.
fn side_queue() -> cl_command_queue {
    struct Queue(cl_command_queue);
    // SAFETY: a command queue may be used from any thread.
    unsafe impl Send for Queue {}
    // SAFETY: as above.
    unsafe impl Sync for Queue {}
    static Q: std::sync::OnceLock<Queue> = std::sync::OnceLock::new();
    Q.get_or_init(|| {
        let cl = Cl::get();
        let mut err = 0;
        // SAFETY: a valid context and device, no properties.
        #[allow(deprecated)]
        let q = unsafe { clCreateCommandQueue(cl.context, cl.device, 0, &mut err) };
        ok(err, "clCreateCommandQueue (second)");
        Queue(q)
    })
    .0
}

impl Control {
    fn new(ticket: u32) -> Control {
        let mut init = [0u32; 16];
        init[TICKET] = ticket;
        if !fine_grained_svm() {
            let mem = buffer(CL_MEM_COPY_HOST_PTR, 64, init.as_mut_ptr() as *mut c_void);
            return Control::Buffer(mem);
        }
        let flags = CL_MEM_READ_WRITE | CL_MEM_SVM_FINE_GRAIN_BUFFER | CL_MEM_SVM_ATOMICS;
        // SAFETY: a valid context; 64 bytes at the default alignment.
        let p = unsafe { clSVMAlloc(Cl::get().context, flags, 64, 0) } as *mut AtomicU32;
        assert!(
            !p.is_null(),
            "clSVMAlloc (fine-grained, with atomics) failed"
        );
        for (i, v) in init.iter().enumerate() {
            // SAFETY: 16 words allocated above, not yet shared with any kernel.
            unsafe { p.add(i).write(AtomicU32::new(*v)) };
        }
        Control::Svm(p)
    }

    fn set_arg(&self, kernel: cl_kernel, index: u32) {
        match self {
            Control::Svm(p) => {
                // SAFETY: an SVM pointer from clSVMAlloc of this context.
                let rc = unsafe { clSetKernelArgSVMPointer(kernel, index, *p as *const c_void) };
                ok(rc, "clSetKernelArgSVMPointer");
            }
            Control::Buffer(mem) => {
                set_arg(kernel, index, 8, mem as *const cl_mem as *const c_void)
            }
        }
    }

    /// The ticket counter while the launch runs, where the host can see it.
    fn progress(&self) -> Option<u32> {
        match self {
            // SAFETY: one of the 16 words allocated in `new`, alive as long as `self`;
            // fine-grained SVM with atomics may be accessed by host and kernel at once.
            Control::Svm(p) => Some(unsafe { &*p.add(TICKET) }.load(Ordering::SeqCst)),
            Control::Buffer(_) => None,
        }
    }

    /// The ticket counter, once the launch has finished.
    fn ticket(&self) -> u32 {
        match self {
            Control::Svm(_) => self.progress().unwrap_or(0),
            Control::Buffer(mem) => {
                let mut v = 0u32;
                // SAFETY: a blocking read of one word into `v`.
                let rc = unsafe {
                    clEnqueueReadBuffer(
                        Cl::get().queue,
                        *mem,
                        CL_TRUE,
                        TICKET * 4,
                        4,
                        &mut v as *mut u32 as *mut c_void,
                        0,
                        null(),
                        null_mut(),
                    )
                };
                ok(rc, "clEnqueueReadBuffer (ticket)");
                v
            }
        }
    }

    fn request_yield(&self, epoch: u32) {
        match self {
            // SAFETY: as in `progress`.
            Control::Svm(p) => unsafe { &*p.add(YIELD_WORD) }.store(epoch, Ordering::SeqCst),
            Control::Buffer(mem) => {
                // SAFETY: a blocking write of one word from `epoch`, on the second queue.
                let rc = unsafe {
                    clEnqueueWriteBuffer(
                        side_queue(),
                        *mem,
                        CL_TRUE,
                        YIELD_WORD * 4,
                        4,
                        &epoch as *const u32 as *const c_void,
                        0,
                        null(),
                        null_mut(),
                    )
                };
                ok(rc, "clEnqueueWriteBuffer (yield word)");
            }
        }
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        // SAFETY: our allocation; the launcher finished its queue before dropping it.
        unsafe {
            match self {
                Control::Svm(p) => clSVMFree(Cl::get().context, *p as *mut c_void),
                Control::Buffer(mem) => {
                    clReleaseMemObject(*mem);
                }
            }
        }
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
            c.set_arg(kernel, 5);
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
        self.control.as_ref().expect("an entry kernel").ticket()
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
    /// Cases whose flat entry was refused (they ran persistent only).
    flat_refused: u32,
    /// Cases that also ran a flat second entry (`YieldKernel::alt_entry`).
    alt_entries: u32,
}

/// Runs the application's launch `g` through the entry: the persistent grid (flat: a group
/// for each virtual group left), relaunched with a new epoch after each yield until every
/// virtual group has run. `when` says when
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
    let mut y = Yields::default();
    let mut before = base;
    for epoch in 1u32.. {
        assert!(epoch < 10_000, "the launch does not finish");
        global[0] = g.local[0] * g.run_groups(before.wrapping_sub(base));
        let arg = yield_geometry_arg(
            g.work_dim, geometry.0, geometry.1, g.local, epoch, base, g.chunk,
        );
        set_arg(l.kernel, 4, arg.len(), arg.as_ptr() as *const c_void);
        l.enqueue(g.work_dim, &[0; 3], &global, &g.local);
        // SAFETY: a valid queue.
        ok(unsafe { clFlush(Cl::get().queue) }, "clFlush");
        let asked = when(y.launches, before.wrapping_sub(base));
        if let Some(w) = asked {
            // Spun, not slept: sleeps are too coarse for launches of a millisecond.
            let start = Instant::now();
            let due = |now: Instant| match w {
                When::After(d) => now >= start + d,
                // Bounded, in case the launch ends first.
                // Bounded, in case the launch ends first; where the host cannot see
                // the counter while the kernel runs, at once.
                When::Ticket(k) => {
                    control.progress().is_none_or(|t| t.wrapping_sub(base) >= k)
                        || now >= start + Duration::from_secs(1)
                }
            };
            while !due(Instant::now()) {
                std::hint::spin_loop();
            }
            control.request_yield(epoch);
        }
        // SAFETY: a valid queue.
        ok(unsafe { clFinish(Cl::get().queue) }, "clFinish");
        y.launches += 1;
        let ticket = l.ticket();
        let done = ticket.wrapping_sub(base);
        if done >= total {
            // A launch that ran to the end unasked leaves the counter at base + a ticket
            // per chunk + one per persistent group (flat: a ticket a group), after
            // earlier yields too (the host's protocol needs no read then).
            if asked.is_none() {
                assert_eq!(done, g.tickets(), "tickets after an unasked launch");
            }
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
fn check(seed: u64, form: EntryForm, yields: &mut Yields) {
    check_case(seed, generate(seed, true).in_form(form), yields);
}

fn check_case(seed: u64, g: Gen, yields: &mut Yields) {
    let form = g.form;
    let cl = Cl::get();
    let analysis = analyse_with_options(&g.source, &[], g.options);
    // A flat entry is refused where a body with a barrier has a `return` (no flat form
    // that PoCL 3.1 runs right was found): such a case runs persistent, and the flat form
    // runs the same case less its `return`s.
    if form == EntryForm::Flat {
        if let Err(why) = yielding_form_or_why(&analysis, form) {
            assert!(
                why.iter().all(|(_, w)| w.contains("flat entry")),
                "seed {seed}: {why:?}"
            );
            let without = generate(seed, false).in_form(form);
            assert_ne!(
                without.source, g.source,
                "seed {seed}: refused with no `return`"
            );
            yields.flat_refused += 1;
            return check_case(seed, without, yields);
        }
    }
    let program: YieldProgram = yielding_form_or_why(&analysis, g.form)
        .unwrap_or_else(|why| panic!("seed {seed}: not rewritten: {why:?}\n{}", g.source));
    assert!(
        program.skipped.is_empty(),
        "seed {seed}: {:?}",
        program.skipped
    );
    let k = &program.kernels[0];
    assert_eq!((k.name.as_str(), k.args), ("gen", 4), "seed {seed}");
    let original = cl
        .build(&g.source, &[], g.options)
        .unwrap_or_else(|log| panic!("seed {seed}: {log}"));
    let rewritten = cl
        .build(&program.source, &[], g.options)
        .unwrap_or_else(|log| {
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
        "seed {seed}: {}-D {:?}+{:?}/{:?}, {:?}, {} persistent groups, {} a ticket",
        g.work_dim, g.global, g.offset, g.local, g.form, g.persistent, g.chunk
    );

    // Each entry of the kernel: a body without barriers has a second flat one, whose
    // loops PoCL may compile differently (`FLAT_UNIFORM`).
    yields.alt_entries += u32::from(k.alt_entry.is_some());
    for entry in std::iter::once(&k.entry).chain(&k.alt_entry) {
        // (b) No yield: one launch, and exactly a ticket per chunk + P tickets taken.
        let l = Launcher::new(&g, rewritten, entry, true);
        let unyielded = run_entry(&g, &l, (g.offset, g.global), |_, _| None);
        assert_eq!(unyielded.launches, 1, "{what}");
        assert_eq!(
            l.ticket().wrapping_sub(g.ticket),
            g.tickets(),
            "{what}: tickets of a full run"
        );
        same(&what, &format!("{entry}, no yield"), &l.output(), &whole);
        drop(l);

        // A wrong geometry (offset moved by one) must show: the comparison can fail. Timed,
        // for the moments of the yields below (the first launch of a local size compiles it).
        let l = Launcher::new(&g, rewritten, entry, true);
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
        // Rounds until one was stopped part way (short launches often end before the host's
        // write lands), four at least, twelve at most.
        let mut partial = 0;
        for round in 0..12 {
            if round >= 4 && partial > 0 {
                break;
            }
            let l = Launcher::new(&g, rewritten, entry, true);
            let total = g.groups();
            let y = run_entry(&g, &l, (g.offset, g.global), |n, done| {
                // A random moment, or a random point of progress (mostly an early one, which a
                // short launch has not passed yet); now and then not at all, so that every
                // launch makes progress at last.
                let left = (total - done) as usize;
                match rng.below(8) {
                    _ if n >= 200 => None,
                    0 => None,
                    1 | 2 => Some(When::After(Duration::from_micros(rng.next() % span))),
                    3 => Some(When::Ticket(done + 1 + rng.below(left) as u32)),
                    _ => Some(When::Ticket(done + 1 + rng.below(left.min(3)) as u32)),
                }
            });
            same(&what, &format!("{entry} with yields"), &l.output(), &whole);
            yields.launches += y.launches;
            partial += y.partial;
        }
        yields.partial += partial;
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
        check(seed, EntryForm::Persistent, &mut y);
        check(seed, EntryForm::Flat, &mut y);
    }
    eprintln!("seeds {range:?}: {y:?}");
    assert!(
        y.partial > 0 && y.launches > range.count() as u32,
        "no launch was stopped part way: the yields were not tested ({y:?})"
    );
}

/// The flat second entry (`YieldKernel::alt_entry`) of generated cases whose body has no
/// barrier, which most cases have: the first few such seeds from 1000 on, each checked
/// as `seeds` checks every case (with and without yields, against the whole kernel).
#[test]
fn second_entries() {
    let mut y = Yields::default();
    let mut tried = 0;
    for seed in 1000..1200 {
        if y.alt_entries >= 4 {
            break;
        }
        let g = generate(seed, true).in_form(EntryForm::Flat);
        let a = analyse_with_options(&g.source, &[], g.options);
        if yielding_form_or_why(&a, EntryForm::Flat).is_ok_and(|p| p.kernels[0].alt_entry.is_some())
        {
            check_case(seed, g, &mut y);
        }
        tried += 1;
    }
    eprintln!("second entries, {tried} seeds: {y:?}");
    assert!(y.alt_entries >= 4, "too few cases without barriers ({y:?})");
    assert!(y.partial > 0, "no launch was stopped part way ({y:?})");
}

/// The tests, in pieces of a few seconds each on PoCL (its compiler takes most of it).
macro_rules! pieces {
    ($($name:ident: $run:ident($range:expr);)*) => {
        $(#[test] fn $name() { $run($range); })*
    };
}

pieces! {
    generated_kernels_0: seeds(0..3);
    generated_kernels_1: seeds(3..6);
    generated_kernels_2: seeds(6..9);
    generated_kernels_3: seeds(9..12);
    generated_kernels_4: seeds(12..15);
    generated_kernels_5: seeds(15..18);
    corpus_rewrites_build_0: corpus_builds(0..9);
    corpus_rewrites_build_1: corpus_builds(9..18);
    corpus_rewrites_build_2: corpus_builds(18..27);
    corpus_rewrites_build_3: corpus_builds(27..38);
}

/// The corpus's programs.
const CORPUS: &[(&str, &str)] = {
    use corpus::*;
    &[
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
        // With headers (compiled, then linked).
        ("WITH_HEADER", WITH_HEADER),
        ("COMPILED", COMPILED),
    ]
};

/// Every program of the corpus (those of `range`) that the vendor builds, builds after the
/// rewrite, with an entry for each kernel: every other program with persistent entries,
/// the rest with flat ones (both forms of each would double the suite's compile time).
fn corpus_builds(range: std::ops::Range<usize>) {
    let programs = &CORPUS[range.start..range.end.min(CORPUS.len())];
    let cl = Cl::get();
    let (mut entries, mut built) = (0, 0);
    for (i, (name, source)) in programs.iter().enumerate() {
        let form = if (range.start + i) % 2 == 0 {
            EntryForm::Persistent
        } else {
            EntryForm::Flat
        };
        // OpenCL 2.0 builtins (get_global_linear_id, get_enqueued_local_size) need CL3.0.
        let options = "-cl-std=CL3.0";
        let headers: Vec<(String, String)> = match *name {
            "WITH_HEADER" => vec![("geom.h".into(), corpus::GEOM_H.into())],
            "COMPILED" => vec![("groups.h".into(), corpus::GROUPS_H.into())],
            _ => Vec::new(),
        };
        let p = yielding_form_or_why(&analyse(source, &headers), form)
            .unwrap_or_else(|why| panic!("{name}: not rewritten: {why:?}"));
        assert!(p.skipped.is_empty(), "{name}: {:?}", p.skipped);
        // What the vendor cannot build (OpenCL 2.0 builtins on NVIDIA) proves nothing here.
        match cl.build(source, &headers, options) {
            // SAFETY: our program, no longer used.
            Ok(original) => unsafe { clReleaseProgram(original) },
            Err(_) => {
                eprintln!("{name}: the vendor does not build the original; skipped");
                continue;
            }
        };
        built += 1;
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
    assert!(
        built > 0 && entries >= built,
        "{entries} entries of {built} programs"
    );
}

/// A 16x16-tiled SGEMM (`__local` tiles, two barriers a tile), as in the yield probe.
const SGEMM: &str = "
#define TS 16
kernel __attribute__((reqd_work_group_size(TS, TS, 1)))
void sgemm(global const float* A, global const float* B, global float* C, int K) {
    local float As[TS][TS], Bs[TS][TS];
    const int r = get_local_id(0), c = get_local_id(1);
    const int M = get_global_size(0), N = get_global_size(1);
    const int gr = get_group_id(0) * TS + r, gc = get_group_id(1) * TS + c;
    float acc = 0.0f;
    for (int t = 0; t < K / TS; t++) {
        As[c][r] = A[(t * TS + c) * M + gr];
        Bs[c][r] = B[gc * K + t * TS + r];
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TS; k++)
            acc += As[k][r] * Bs[c][k];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    C[gc * M + gr] = acc;
}";

/// What the entry costs the kernel's body, measured (no assertion: speed targets live in
/// benchmarks). Run on the GPU machine: `yield_rewrite entry_cost --ignored --nocapture`
/// (`SOFTPREEMPT_COST_N`, default 2048, is M = N = K). Plain launches and entry launches
/// (8 persistent groups per compute unit, no yield) alternate; the medians are compared,
/// and the outputs must be equal.
#[test]
#[ignore]
fn entry_cost() {
    let cl = Cl::get();
    let n: usize = std::env::var("SOFTPREEMPT_COST_N").map_or(2048, |v| v.parse().unwrap());
    let source = SGEMM;
    let program = yielding(&analyse(source, &[])).expect("rewritten");
    assert_eq!(program.kernels[0].reqd_local, Some([16, 16, 1]));
    let original = cl.build(source, &[], "").expect("build");
    let rewritten = cl.build(&program.source, &[], "").expect("build rewrite");
    let mut units: cl_uint = 0;
    // SAFETY: a cl_uint out value.
    let rc = unsafe {
        clGetDeviceInfo(
            cl.device,
            CL_DEVICE_MAX_COMPUTE_UNITS,
            4,
            &mut units as *mut cl_uint as *mut c_void,
            null_mut(),
        )
    };
    ok(rc, "clGetDeviceInfo");
    let data: Vec<f32> = (0..n * n).map(|i| (i % 7) as f32).collect();
    let mem = |host: Option<&[f32]>| match host {
        Some(h) => buffer(CL_MEM_COPY_HOST_PTR, n * n * 4, h.as_ptr() as *mut c_void),
        None => buffer(CL_MEM_READ_WRITE, n * n * 4, null_mut()),
    };
    let (a, b) = (mem(Some(&data)), mem(Some(&data)));
    let kernel = |p: cl_program, name: &str, c: cl_mem| {
        let name = CString::new(name).unwrap();
        let mut err = 0;
        // SAFETY: a built program and a NUL-terminated name.
        let k = unsafe { clCreateKernel(p, name.as_ptr(), &mut err) };
        ok(err, "clCreateKernel");
        for (i, m) in [a, b, c].iter().enumerate() {
            set_arg(k, i as u32, 8, m as *const cl_mem as *const c_void);
        }
        set_arg(k, 3, 4, &(n as i32) as *const i32 as *const c_void);
        k
    };
    let (c_plain, c_entry) = (mem(None), mem(None));
    let plain = kernel(original, "sgemm", c_plain);
    let entry = kernel(rewritten, &program.kernels[0].entry, c_entry);
    let control = Control::new(0);
    control.set_arg(entry, 5);
    let persistent = 8 * units as usize;
    let groups = (n / 16) * (n / 16);
    let run = |k: cl_kernel, global: [usize; 3]| {
        let started = Instant::now();
        // SAFETY: three-element arrays; a valid queue.
        unsafe {
            ok(
                clEnqueueNDRangeKernel(
                    cl.queue,
                    k,
                    2,
                    null(),
                    global.as_ptr(),
                    [16, 16, 1].as_ptr(),
                    0,
                    null(),
                    null_mut(),
                ),
                "clEnqueueNDRangeKernel",
            );
            ok(clFinish(cl.queue), "clFinish");
        }
        started.elapsed().as_secs_f64()
    };
    let (mut t_plain, mut t_entry) = (Vec::new(), Vec::new());
    let mut base = 0u32;
    for round in 0..21 {
        let arg = yield_geometry_arg(2, [0; 3], [n, n, 1], [16, 16, 1], round + 1, base, 1);
        set_arg(entry, 4, arg.len(), arg.as_ptr() as *const c_void);
        t_plain.push(run(plain, [n, n, 1]));
        t_entry.push(run(entry, [16 * persistent, 16, 1]));
        base = base.wrapping_add((groups + persistent) as u32);
        assert_eq!(control.ticket(), base, "tickets of an unyielded run");
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (p, e) = (median(&mut t_plain), median(&mut t_entry));
    eprintln!(
        "sgemm {n}^3 ({groups} groups, {persistent} persistent): plain {:.3} ms, entry {:.3} ms, entry / plain {:.4}",
        p * 1e3,
        e * 1e3,
        e / p
    );
    let read = |m: cl_mem| {
        let mut v = vec![0f32; n * n];
        // SAFETY: a blocking read into a buffer of the size read.
        let rc = unsafe {
            clEnqueueReadBuffer(
                cl.queue,
                m,
                CL_TRUE,
                0,
                n * n * 4,
                v.as_mut_ptr() as *mut c_void,
                0,
                null(),
                null_mut(),
            )
        };
        ok(rc, "clEnqueueReadBuffer");
        v
    };
    assert!(read(c_plain) == read(c_entry), "the entry's output differs");
    // SAFETY: our objects, no longer used (the queue has finished).
    unsafe {
        for m in [a, b, c_plain, c_entry] {
            clReleaseMemObject(m);
        }
        clReleaseKernel(plain);
        clReleaseKernel(entry);
        clReleaseProgram(original);
        clReleaseProgram(rewritten);
    }
}
