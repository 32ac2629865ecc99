//! Yielding launches (issue 23), through the real loader on PoCL. With `yielding =
//! "chaos"` every yielding launch is asked to stop at a random moment and resumes from its
//! ticket: the results must be exactly those of the whole launch, and the arbiter's
//! counters must show that yields happened (so the test cannot pass by never yielding).
//! Kernels that read the launch geometry through helpers, `__local` memory with barriers,
//! and 2-D ranges with an offset are covered.

mod common;
mod managed_common;

use common::{ok, Env};
use managed_common as mc;
use opencl_sys::*;
use std::time::{Duration, Instant};

const SCHED: &str = "yielding = \"chaos\"\nhp_linger_us = 0";

/// A kernel that reads its geometry through a helper and sums a tile in `__local`
/// memory behind barriers; each item's value depends on its group, its place in it and
/// the launch's offset, so a virtual group that ran with the wrong geometry, twice or not
/// at all shows in the output.
const SRC: &str = r#"
uint mix(uint x, uint n) {
    for (uint i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        x ^= x >> 13;
    }
    return x;
}
size_t flat_group(void) { return get_group_id(1) * get_num_groups(0) + get_group_id(0); }
__kernel void tiles(__global uint* out, uint iters) {
    __local uint tile[64];
    size_t l = get_local_id(1) * get_local_size(0) + get_local_id(0);
    tile[l] = mix((uint)(get_global_id(0) * 7 + get_global_id(1)), iters);
    barrier(CLK_LOCAL_MEM_FENCE);
    uint sum = 0;
    for (uint k = 0; k < 64; k++) sum += tile[k];
    barrier(CLK_LOCAL_MEM_FENCE);
    size_t w = get_global_size(0);
    size_t x = get_global_id(0) - get_global_offset(0), y = get_global_id(1) - get_global_offset(1);
    if (x % 3 == 2) return;
    out[y * w + x] = sum ^ (uint)flat_group();
}
"#;

const W: usize = 512;
const H: usize = 256;
const ITERS: u32 = 400;

fn expected(offset: [usize; 2]) -> Vec<u32> {
    let mut out = vec![0u32; W * H];
    let groups_x = W / 8;
    for gy in 0..H / 8 {
        for gx in 0..groups_x {
            let mut sum = 0u32;
            for ly in 0..8 {
                for lx in 0..8 {
                    let (x, y) = (offset[0] + gx * 8 + lx, offset[1] + gy * 8 + ly);
                    sum = sum.wrapping_add(mc::mix((x * 7 + y) as u32, ITERS));
                }
            }
            for ly in 0..8 {
                for lx in 0..8 {
                    let (x, y) = (gx * 8 + lx, gy * 8 + ly);
                    if x % 3 != 2 {
                        out[y * W + x] = sum ^ (gy * groups_x + gx) as u32;
                    }
                }
            }
        }
    }
    out
}

fn yields(dir: &std::path::Path) -> u64 {
    mc::clients_of(dir, std::process::id())
        .iter()
        .map(|c| c.yields_done)
        .sum()
}

#[test]
fn chaos_yields_and_resumes_give_exact_results() {
    let dir = mc::init(SCHED);
    let _g = mc::serial();
    let env = Env::sp();
    let low = mc::priority_queue(&env, CL_QUEUE_PRIORITY_LOW_KHR);
    // An idle high-priority queue: the low queue's launches go through its FIFO.
    let high = mc::priority_queue(&env, CL_QUEUE_PRIORITY_HIGH_KHR);
    let prog = mc::build(&env, SRC, "").unwrap_or_else(|e| panic!("{e}"));
    let k = env.kernel(prog, "tiles");
    let out = env.buffer(W * H * 4);
    let offset = [16usize, 8];
    let want = expected(offset);
    // The persistent entries build on a thread of the layer: the first launches go as
    // before, later ones yield. Each result is checked either way.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut launches = 0;
    while yields(dir) < 3 || launches < 4 {
        assert!(
            Instant::now() < deadline,
            "no yields after {launches} launches\n{}",
            mc::describe(dir)
        );
        let zero = vec![0u32; W * H];
        env.write(out, &zero);
        mc::arg(k, 0, out);
        mc::arg(k, 1, ITERS);
        ok(mc::enqueue(
            low,
            k,
            Some(&offset),
            &[W, H],
            Some(&[8, 8]),
            &[],
            None,
        ));
        mc::finish(low);
        // SAFETY: a blocking read of the test's buffer into a vector of its size.
        let got: Vec<u32> = {
            let mut v = vec![0u32; W * H];
            ok(unsafe {
                clEnqueueReadBuffer(
                    low,
                    out,
                    CL_TRUE,
                    0,
                    W * H * 4,
                    v.as_mut_ptr() as *mut std::ffi::c_void,
                    0,
                    std::ptr::null(),
                    std::ptr::null_mut(),
                )
            });
            v
        };
        assert_eq!(
            got,
            want,
            "launch {launches}: {}",
            mc::first_difference(&got, &want)
        );
        launches += 1;
    }
    for q in [high, low] {
        // SAFETY: queues the test owns.
        ok(unsafe { clReleaseCommandQueue(q) });
    }
}
