//! Added cost per forwarded call, SoftPreempt against the bare vendor, side by side in one
//! run through the real ICD loader. Prints a table; `--json FILE` also writes the numbers.
//!
//! Run: `cargo build --release -p softpreempt-icd && cargo bench --bench overhead`
//! (`-- --only TEXT` the rows whose name holds it, `--batch N` / `--rounds N` the calls
//! per batch and the batches, `--sched 'KEY = VALUE'` one more `[sched]` setting;
//! `scripts/layer-instructions.sh` counts the layer's own instructions per call with it).
//! The queue is alone on a private arbiter directory, at the default priority
//! (`--with-idle-lp`: next to an idle low-priority queue of another process).

#[path = "../tests/common/mod.rs"]
mod common;

use common::*;
use opencl_sys::*;
use std::ffi::c_void;
use std::time::Instant;

/// Calls per batch and batches (rounds) per row and platform; `--batch N` and
/// `--rounds N` change them (a few rounds of small batches under `valgrind --tool=callgrind`,
/// which counts each call's instructions exactly: docs/benchmarks.md).
const BATCH: usize = 2000;
const ROUNDS: usize = 31;

/// The value of option `name` (`--name N`), else `default`.
fn opt(name: &str, default: usize) -> usize {
    std::env::args()
        .skip_while(|a| a != name)
        .nth(1)
        .map_or(default, |v| v.parse().expect("a number"))
}

/// Median over rounds of the mean ns per call within a batch; rounds alternate between the
/// two platforms so drift on a noisy machine hits both alike.
fn measure(envs: &[&Env; 2], mut op: impl FnMut(&Env, usize)) -> [f64; 2] {
    let (batch, rounds) = (opt("--batch", BATCH), opt("--rounds", ROUNDS).max(2));
    let mut samples = [Vec::new(), Vec::new()];
    for round in 0..rounds {
        for (k, env) in envs.iter().enumerate() {
            let t = Instant::now();
            for i in 0..batch {
                op(env, i);
            }
            let ns = t.elapsed().as_nanos() as f64 / batch as f64;
            if round > 0 {
                samples[k].push(ns); // the first round warms caches and lazy paths up
            }
        }
    }
    samples.map(|mut s| {
        s.sort_by(|a, b| a.partial_cmp(b).unwrap());
        s[s.len() / 2]
    })
}

/// A 64-byte write or read between buffer `m` and host array `h` on queue `q`, no event.
fn transfer(
    q: cl_command_queue,
    m: cl_mem,
    h: *mut c_void,
    write: bool,
    blocking: cl_bool,
) -> cl_int {
    let none = (0, std::ptr::null(), std::ptr::null_mut());
    // SAFETY: a valid queue and 64-byte buffer of its context, and a 64-byte host array
    // that outlives the queue's work (the caller drains the queue).
    unsafe {
        if write {
            clEnqueueWriteBuffer(q, m, blocking, 0, 64, h, none.0, none.1, none.2)
        } else {
            clEnqueueReadBuffer(q, m, blocking, 0, 64, h, none.0, none.1, none.2)
        }
    }
}

/// The idle low-priority peer of `--with-idle-lp`: a queue on the SoftPreempt platform,
/// then nothing until standard input closes.
fn idle_lp() {
    let _env = Env::sp();
    println!("ready");
    let mut s = String::new();
    let _ = std::io::stdin().read_line(&mut s);
}

/// `--with-idle-lp`: starts the idle low-priority peer (another process, on this run's
/// arbiter directory) and waits until it counts as idle, so that every command measured
/// here is a higher client's next to a registered, idle lower one (issue 24's second
/// case). Dropping the child's standard input ends it.
fn start_idle_lp() -> std::process::Child {
    use std::io::BufRead;
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .arg("--idle-lp")
        .env("SOFTPREEMPT_PRIORITY", "low")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("idle LP");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready", "the idle LP did not start");
    // Idle, not just started: a client active within the last 500 ms counts as busy.
    std::thread::sleep(std::time::Duration::from_secs(1));
    child
}

fn main() {
    if std::env::args().any(|a| a == "--idle-lp") {
        return idle_lp();
    }
    // The release library, when built, is what users install.
    let release =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/libsoftpreempt.so");
    if std::env::var_os("SOFTPREEMPT_LIB").is_none() && release.exists() {
        std::env::set_var("SOFTPREEMPT_LIB", &release);
    }
    let json = std::env::args().skip_while(|a| a != "--json").nth(1);
    // A memory reserve for a level above this process's (normal), so that every
    // allocation is counted *and* judged: the dearest path of the memory policy.
    let cfg =
        std::env::temp_dir().join(format!("softpreempt-overhead-{}.toml", std::process::id()));
    // `--sched 'KEY = VALUE'`: one more `[sched]` setting (the instruction count under
    // callgrind, `scripts/layer-instructions.sh`, lengthens the pieces: there a kernel runs
    // tens of times slower and would no longer count as short).
    let sched = std::env::args()
        .skip_while(|a| a != "--sched")
        .nth(1)
        .map_or(String::new(), |s| format!("[sched]\n{s}\n"));
    std::fs::write(
        &cfg,
        format!("version = 1\n[memory]\nreserve = {{ high = \"1%\" }}\n{sched}"),
    )
    .unwrap();
    std::env::set_var("SOFTPREEMPT_CONFIG", &cfg);
    std::env::remove_var("SOFTPREEMPT_PRIORITY");
    // A private arbiter directory: another process's queue on the machine's device (a
    // test, another user) would put this one on a different path.
    let shm = std::env::temp_dir().join(format!("softpreempt-overhead-{}", std::process::id()));
    std::fs::create_dir_all(&shm).unwrap();
    std::env::set_var("SOFTPREEMPT_SHM_DIR", &shm);
    let lp = std::env::args()
        .any(|a| a == "--with-idle-lp")
        .then(start_idle_lp);
    let bare = Env::new(bare_platform());
    let sp = Env::sp();
    // `geom` reads its group's geometry, so the layer rewrites it (a hidden geometry
    // argument, `core::rewritten`): its row shows what a rewritten kernel's launch costs.
    let src = "__kernel void empty(__global int *a) { }\n\
        __kernel void geom(__global int *a) \
        { a[get_global_id(0)] += (int)(get_group_id(0) + get_num_groups(0)); }";
    // A program of a few kernels, as OpenCV's are, of which one is made and released per
    // launch (OpenCV creates a kernel object for every call).
    let few = "__kernel void empty(__global int *a) { }\n\
        __kernel void scale(__global float *o, __global const float *i, float k) \
        { size_t g = get_global_id(0); o[g] = i[g] * k; }\n\
        __kernel void offset(__global float *o, __global const float *i, float k) \
        { size_t g = get_global_id(0); o[g] = i[g] + k; }\n";
    let scale = c"scale";
    let per_launch: Vec<(cl_program, cl_mem)> = [&bare, &sp]
        .iter()
        .map(|e| (e.program(few), e.buffer(64)))
        .collect();
    let prog = |e: &Env| per_launch[usize::from(!std::ptr::eq(e, &bare))];
    let kernels: Vec<(cl_kernel, cl_mem, cl_kernel)> = [&bare, &sp]
        .iter()
        .map(|e| {
            let p = e.program(src);
            let m = e.buffer(64);
            let [k, g] = ["empty", "geom"].map(|name| {
                let k = e.kernel(p, name);
                // SAFETY: a valid kernel and buffer of the same context.
                ok(unsafe {
                    clSetKernelArg(
                        k,
                        0,
                        std::mem::size_of::<cl_mem>(),
                        &m as *const cl_mem as *const c_void,
                    )
                });
                k
            });
            (k, m, g)
        })
        .collect();
    let kern = |e: &Env| {
        if std::ptr::eq(e, &bare) {
            kernels[0]
        } else {
            kernels[1]
        }
    };
    let envs = [&bare, &sp];
    let mut rows = Vec::new();
    // `--only TEXT`: only the rows whose name holds it (for profiling one call).
    let only = std::env::args().skip_while(|a| a != "--only").nth(1);
    // One row: ns per call, an iteration making `calls` calls.
    let mut row = |name: &'static str, calls: f64, op: &mut dyn FnMut(&Env, usize)| {
        if only.as_deref().is_none_or(|o| name.contains(o)) {
            rows.push((name, measure(&envs, op).map(|ns| ns / calls)));
        }
    };

    row("clGetKernelInfo(NUM_ARGS)", 1.0, &mut |e, _| {
        let mut n: cl_uint = 0;
        // SAFETY: a valid kernel and a cl_uint out value.
        unsafe {
            clGetKernelInfo(
                kern(e).0,
                CL_KERNEL_NUM_ARGS,
                4,
                &mut n as *mut _ as *mut c_void,
                std::ptr::null_mut(),
            )
        };
    });
    row("clSetKernelArg(cl_mem)", 1.0, &mut |e, _| {
        let (k, m, _) = kern(e);
        // SAFETY: as in set-up.
        unsafe {
            clSetKernelArg(
                k,
                0,
                std::mem::size_of::<cl_mem>(),
                &m as *const cl_mem as *const c_void,
            )
        };
    });
    // A kernel's first launches go through the FIFO (its timing model learns from them),
    // and so do the launches behind them until the FIFO is empty: a few launches, each
    // drained and given time to be learned from, come first, so that the row measures
    // the direct path whatever the submitter thread's pace (under callgrind it is slow).
    let launch = |e: &Env, k: cl_kernel| {
        let g = 1usize;
        // SAFETY: a valid queue and kernel with all arguments set.
        unsafe {
            clEnqueueNDRangeKernel(
                e.queue,
                k,
                1,
                std::ptr::null(),
                &g,
                std::ptr::null(),
                0,
                std::ptr::null(),
                std::ptr::null_mut(),
            )
        }
    };
    // Which kernel of a platform's (empty, buffer, geom) a row launches.
    type Pick = fn(&(cl_kernel, cl_mem, cl_kernel)) -> cl_kernel;
    let launch_rows: [(&'static str, Pick); 2] = [
        ("clEnqueueNDRangeKernel(empty)", |k| k.0),
        ("clEnqueueNDRangeKernel(geometry, rewritten)", |k| k.2),
    ];
    for (name, which) in launch_rows {
        if only.as_deref().is_some_and(|o| !name.contains(o)) {
            continue;
        }
        for _ in 0..3 {
            launch(&sp, which(&kern(&sp)));
            // SAFETY: a valid queue.
            unsafe { clFinish(sp.queue) };
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        row(name, 1.0, &mut |e, i| {
            launch(e, which(&kern(e)));
            if i % 256 == 255 {
                // SAFETY: a valid queue.
                unsafe { clFinish(e.queue) };
            }
        });
    }
    // The other commands of a request on the direct path (issue 24): each on a 64-byte
    // buffer, no event asked, the queue drained every 256 iterations (a blocking read
    // drains it itself).
    let bufs: Vec<cl_mem> = [&bare, &sp].iter().map(|e| e.buffer(64)).collect();
    let buf = |e: &Env| bufs[usize::from(!std::ptr::eq(e, &bare))];
    let mut host = [0u8; 64];
    let host = host.as_mut_ptr() as *mut c_void;
    type Enqueue = fn(cl_command_queue, cl_mem, *mut c_void) -> cl_int;
    let commands: [(&'static str, Enqueue); 5] = [
        // SAFETY: a valid queue and 64-byte buffer of its context.
        ("clEnqueueFillBuffer(4 B of 64)", |q, m, _| unsafe {
            let pattern = 7i32;
            clEnqueueFillBuffer(
                q,
                m,
                &pattern as *const i32 as *const c_void,
                4,
                0,
                64,
                0,
                std::ptr::null(),
                std::ptr::null_mut(),
            )
        }),
        ("clEnqueueWriteBuffer(64 B)", |q, m, h| {
            transfer(q, m, h, true, CL_FALSE)
        }),
        ("clEnqueueReadBuffer(64 B)", |q, m, h| {
            transfer(q, m, h, false, CL_FALSE)
        }),
        ("clEnqueueReadBuffer(64 B, blocking)", |q, m, h| {
            transfer(q, m, h, false, CL_TRUE)
        }),
        // SAFETY: a valid queue.
        ("clEnqueueMarkerWithWaitList", |q, _, _| unsafe {
            clEnqueueMarkerWithWaitList(q, 0, std::ptr::null(), std::ptr::null_mut())
        }),
    ];
    for (name, f) in commands {
        row(name, 1.0, &mut |e, i| {
            f(e.queue, buf(e), host);
            if i % 256 == 255 {
                // SAFETY: a valid queue.
                unsafe { clFinish(e.queue) };
            }
        });
    }
    // A kernel object per launch (issue 24): create it, set its three arguments, release
    // it. Reported per call (5 calls an iteration).
    const KERNEL_CALLS: f64 = 5.0;
    let made = |e: &Env| {
        let (p, m) = prog(e);
        let k_val = 2.0f32;
        let mut err = 0;
        // SAFETY: a built program of the same context as the buffer; the caller releases
        // the kernel.
        unsafe {
            let k = clCreateKernel(p, scale.as_ptr(), &mut err);
            let mem = &m as *const cl_mem as *const c_void;
            clSetKernelArg(k, 0, std::mem::size_of::<cl_mem>(), mem);
            clSetKernelArg(k, 1, std::mem::size_of::<cl_mem>(), mem);
            clSetKernelArg(k, 2, 4, &k_val as *const f32 as *const c_void);
            k
        }
    };
    row(
        "create+3 args+release (per call)",
        KERNEL_CALLS,
        // SAFETY: the kernel just made.
        &mut |e, _| unsafe {
            clReleaseKernel(made(e));
        },
    );
    // The same with the launch between, as OpenCV makes it (6 calls an iteration): the
    // kernel object's vendor kernel is still queued at release.
    row(
        "create+3 args+launch+release (per call)",
        KERNEL_CALLS + 1.0,
        &mut |e, i| {
            let g = 16usize;
            // SAFETY: the kernel just made, with its arguments set; the queue is drained
            // now and then so that it stays short.
            unsafe {
                let k = made(e);
                clEnqueueNDRangeKernel(
                    e.queue,
                    k,
                    1,
                    std::ptr::null(),
                    &g,
                    std::ptr::null(),
                    0,
                    std::ptr::null(),
                    std::ptr::null_mut(),
                );
                clReleaseKernel(k);
                if i % 256 == 255 {
                    clFinish(e.queue);
                }
            }
        },
    );
    // Device memory accounting (issue 25): a buffer counted in the device's segment at
    // creation and returned at release, against the bare create and release. The added
    // cost bounds the accounting's (it also holds the wrapper's own).
    row("clCreateBuffer+clRelease(4 KiB)", 1.0, &mut |e, _| {
        let mut err = 0;
        // SAFETY: a valid context; the buffer is released at once.
        unsafe {
            let m = clCreateBuffer(
                e.context,
                CL_MEM_READ_WRITE as cl_mem_flags,
                4096,
                std::ptr::null_mut(),
                &mut err,
            );
            clReleaseMemObject(m);
        }
    });
    row("clSVMAlloc+clSVMFree(4 KiB)", 1.0, &mut |e, _| {
        // SAFETY: a valid context; the allocation (if any) is freed at once.
        unsafe {
            let p = clSVMAlloc(e.context, CL_MEM_READ_WRITE as cl_svm_mem_flags, 4096, 0);
            clSVMFree(e.context, p);
        }
    });
    let _ = std::fs::remove_file(&cfg);
    if let Some(mut child) = lp {
        drop(child.stdin.take());
        let _ = child.wait();
    }
    let _ = std::fs::remove_dir_all(&shm);
    // SAFETY: drain both queues before reporting.
    unsafe {
        clFinish(bare.queue);
        clFinish(sp.queue);
    }

    println!(
        "Per-call cost through the ICD loader, median of {} rounds x {} calls (ns)",
        opt("--rounds", ROUNDS).max(2) - 1,
        opt("--batch", BATCH)
    );
    println!(
        "{:<32} {:>10} {:>12} {:>10} {:>8}",
        "call", "bare", "softpreempt", "added", "ratio"
    );
    let mut out = Vec::new();
    for (name, [b, s]) in &rows {
        println!(
            "{name:<32} {b:>10.1} {s:>12.1} {:>10.1} {:>8.3}",
            s - b,
            s / b
        );
        out.push(serde_json::json!({"call": name, "bare_ns": b, "softpreempt_ns": s, "added_ns": s - b, "ratio": s / b}));
    }
    if let Some(path) = json {
        std::fs::write(path, serde_json::to_string_pretty(&out).unwrap()).unwrap();
    }
}
