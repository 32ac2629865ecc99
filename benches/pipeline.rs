//! What a request of N small commands costs through SoftPreempt, against the bare driver,
//! side by side in one run through the real ICD loader: the high-priority path's cost per
//! command (issue 24). A request is what an inference server or an OpenCV pipeline sends:
//! a write (a fill of the buffer), small kernels (one that reads no geometry and one that reads `get_group_id` and
//! `get_num_groups`, which the layer rewrites), non-blocking reads, and a blocking read at
//! the end. N = 1 is the blocking read alone.
//!
//! Two phases: the SoftPreempt queue (priority `high`) alone on its device, then with an
//! idle low-priority client registered on it (another process). In each phase bare and
//! SoftPreempt requests alternate in rounds, so drift hits both alike. Printed: p50 and p99
//! per request (µs) and the added µs per command at p50.
//!
//! Run: `cargo build --release -p softpreempt-icd && cargo bench --bench pipeline`
//! (`--json FILE` writes every figure; `--requests N` per round).

#[path = "../tests/common/mod.rs"]
mod common;

use common::*;
use opencl_sys::*;
use std::ffi::c_void;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::ptr::{null, null_mut};
use std::time::Instant;

const SRC: &str = "
__kernel void plain(__global int *a) { a[get_global_id(0)] += 1; }
__kernel void geom(__global int *a) {
    a[get_global_id(0)] += (int)(get_group_id(0) + get_num_groups(0));
}";
const ITEMS: usize = 1024;
/// What the request's write command (a fill) stores.
const PATTERN: i32 = 7;
const BYTES: usize = ITEMS * 4;
const SIZES: [usize; 3] = [1, 4, 16];
const ROUNDS: usize = 11;

struct Client {
    env: Env,
    prog: cl_program,
    kernels: [cl_kernel; 2],
    buf: cl_mem,
    host: Vec<i32>,
}

impl Client {
    fn new(env: Env) -> Client {
        let prog = env.program(SRC);
        let buf = env.buffer(BYTES);
        let kernels = ["plain", "geom"].map(|n| {
            let k = env.kernel(prog, n);
            // SAFETY: a valid kernel and a buffer of its context.
            ok(unsafe {
                clSetKernelArg(
                    k,
                    0,
                    std::mem::size_of::<cl_mem>(),
                    &buf as *const cl_mem as *const c_void,
                )
            });
            k
        });
        Client {
            env,
            prog,
            kernels,
            buf,
            host: vec![0; ITEMS],
        }
    }

    /// A kernel object for one launch: the kept one, or a new one with its argument set.
    fn kernel(&self, which: usize, per_call: bool) -> cl_kernel {
        if !per_call {
            return self.kernels[which];
        }
        let k = self.env.kernel(self.prog, ["plain", "geom"][which]);
        // SAFETY: a valid kernel and a buffer of its context.
        ok(unsafe {
            clSetKernelArg(
                k,
                0,
                std::mem::size_of::<cl_mem>(),
                &self.buf as *const cl_mem as *const c_void,
            )
        });
        k
    }

    /// One request of `n` commands; the last one is a blocking read.
    fn request(&mut self, n: usize, per_call: bool) {
        let q = self.env.queue;
        let ptr = self.host.as_mut_ptr() as *mut c_void;
        for i in 0..n - 1 {
            // SAFETY: valid queue, kernels and buffer; the host array outlives the
            // request, which ends with a blocking read on the same in-order queue. A
            // kernel made for the launch is released after it (the launch keeps it).
            let rc = unsafe {
                match i % 4 {
                    0 => clEnqueueFillBuffer(
                        q,
                        self.buf,
                        &PATTERN as *const i32 as *const c_void,
                        4,
                        0,
                        BYTES,
                        0,
                        null(),
                        null_mut(),
                    ),
                    3 => clEnqueueReadBuffer(
                        q,
                        self.buf,
                        CL_FALSE,
                        0,
                        BYTES,
                        ptr,
                        0,
                        null(),
                        null_mut(),
                    ),
                    w => {
                        let k = self.kernel(w - 1, per_call);
                        let rc = clEnqueueNDRangeKernel(
                            q,
                            k,
                            1,
                            null(),
                            &ITEMS,
                            null(),
                            0,
                            null(),
                            null_mut(),
                        );
                        if per_call {
                            ok(clReleaseKernel(k));
                        }
                        rc
                    }
                }
            };
            ok(rc);
        }
        // SAFETY: as above.
        ok(unsafe {
            clEnqueueReadBuffer(q, self.buf, CL_TRUE, 0, BYTES, ptr, 0, null(), null_mut())
        });
    }
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((p / 100.0 * v.len() as f64) as usize).min(v.len() - 1)]
}

/// Per-request µs of `n` commands for each client, rounds alternating between them.
fn measure(clients: &mut [Client; 2], n: usize, per_call: bool, requests: usize) -> [Vec<f64>; 2] {
    let mut out = [Vec::new(), Vec::new()];
    for round in 0..ROUNDS {
        for (c, lat) in clients.iter_mut().zip(out.iter_mut()) {
            for _ in 0..requests {
                let t = Instant::now();
                c.request(n, per_call);
                if round > 0 {
                    lat.push(t.elapsed().as_secs_f64() * 1e6);
                }
            }
        }
    }
    out
}

/// The idle low-priority client: a queue on the SoftPreempt platform, then nothing until
/// standard input closes.
fn idle_lp() {
    let _env = Env::sp();
    println!("ready");
    let mut s = String::new();
    let _ = std::io::stdin().read_line(&mut s);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--idle-lp") {
        return idle_lp();
    }
    let release =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/libsoftpreempt.so");
    if std::env::var_os("SOFTPREEMPT_LIB").is_none() && release.exists() {
        std::env::set_var("SOFTPREEMPT_LIB", &release);
    }
    let opt = |name: &str| args.iter().skip_while(|a| *a != name).nth(1).cloned();
    let json = opt("--json");
    let requests: usize = opt("--requests").map_or(200, |v| v.parse().expect("--requests N"));
    // A private arbiter directory, so nothing else on the machine takes part.
    let shm = std::env::temp_dir().join(format!("softpreempt-pipeline-{}", std::process::id()));
    std::fs::create_dir_all(&shm).unwrap();
    std::env::set_var("SOFTPREEMPT_SHM_DIR", &shm);
    std::env::set_var("SOFTPREEMPT_PRIORITY", "high");

    let mut clients = [
        Client::new(Env::new(bare_platform())),
        Client::new(Env::sp()),
    ];
    let mut rows = Vec::new();
    println!(
        "Request of N commands (µs per request; {} rounds x {requests} requests each)",
        ROUNDS - 1
    );
    println!(
        "{:<8} {:<9} {:>4} {:>10} {:>10} {:>10} {:>10} {:>9} {:>12}",
        "phase",
        "kernels",
        "N",
        "bare p50",
        "sp p50",
        "bare p99",
        "sp p99",
        "p50 ratio",
        "added µs/cmd"
    );
    for phase in ["alone", "idle LP"] {
        let lp = (phase == "idle LP").then(|| {
            let mut cmd = Command::new(std::env::current_exe().unwrap());
            cmd.arg("--idle-lp")
                .env("SOFTPREEMPT_PRIORITY", "low")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped());
            let mut child = cmd.spawn().expect("idle LP");
            let mut line = String::new();
            BufReader::new(child.stdout.take().unwrap())
                .read_line(&mut line)
                .unwrap();
            assert_eq!(line.trim(), "ready", "the idle LP did not start");
            // Idle, not just started: a client that registered within the last 500 ms
            // counts as active (its work may be about to come).
            std::thread::sleep(std::time::Duration::from_secs(1));
            child
        });
        for (per_call, n) in [false, true]
            .into_iter()
            .flat_map(|p| SIZES.map(|n| (p, n)))
        {
            let style = if per_call { "per call" } else { "kept" };
            let [mut b, mut s] = measure(&mut clients, n, per_call, requests);
            let (b50, s50, b99, s99) = (
                pct(&mut b, 50.0),
                pct(&mut s, 50.0),
                pct(&mut b, 99.0),
                pct(&mut s, 99.0),
            );
            let per_cmd = (s50 - b50) / n as f64;
            println!(
                "{phase:<8} {style:<9} {n:>4} {b50:>10.1} {s50:>10.1} {b99:>10.1} {s99:>10.1} {:>9.3} {per_cmd:>12.2}",
                s50 / b50
            );
            rows.push(serde_json::json!({
                "phase": phase, "kernels": style, "n": n, "bare_p50_us": b50, "sp_p50_us": s50,
                "bare_p99_us": b99, "sp_p99_us": s99, "p50_ratio": s50 / b50,
                "p99_ratio": s99 / b99, "added_us_per_command": per_cmd,
                // Every request (sorted), so a bimodal request time shows.
                "bare_us": b, "sp_us": s,
            }));
        }
        if let Some(mut child) = lp {
            drop(child.stdin.take());
            let _ = child.wait();
        }
    }
    drop(clients);
    let _ = std::fs::remove_dir_all(&shm);
    if let Some(path) = json {
        std::fs::write(path, serde_json::to_string_pretty(&rows).unwrap()).unwrap();
    }
}
