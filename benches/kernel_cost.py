#!/usr/bin/env python3
"""What a kernel's own execution costs through SoftPreempt: pyopencl launches of
geometry-reading kernels sent whole, back to back, bare against layered, alone (a lone
high-priority process: nothing to preempt, so any difference is the rewritten code's).

SoftPreempt builds a kernel that reads the launch geometry from rewritten source (rule 5),
and every launch runs that code, sliced or not. This measures it, per kernel:

- `tinygrad_matvec`: tinygrad's matrix-vector kernel `r_4_256_16_49` as it generates it
  (group ids, a `__local` reduction behind a barrier): PoCL kept its rewritten group id per
  work-item across the barrier (3.4x its bare time) until session 44;
- `groups_2d`: a 2-D kernel that reads group ids, group counts and the global size, no
  barrier;
- `linear_id`: `get_global_linear_id` per work-item, an offset launch;
- `mandel`: the demo's kernel (`cli/src/demo/mandel.cl`: long, uneven work-items, 2-D
  global ids, no local size given) at about the demo HP's size.

Each process runs the kernels in rounds (bare and layered processes alternate, so a
machine's drift hits both) and reports the median µs per launch of its rounds; the layered
column's ratio is ÷ bare. The results of both are compared bit for bit.

    python3 benches/kernel_cost.py --lib target/release/libsoftpreempt.so \\
        --vendor-lib "$(head -n1 /etc/OpenCL/vendors/pocl.icd)"

Needs pyopencl and numpy. --json FILE writes every figure.
"""
import argparse
import json
import os
import subprocess
import sys

from pair_common import Work, finish

KERNELS = {
    # tinygrad 0.14's code for a 4x784 by 784x256 product (an HP's first layer), as
    # printed with DEBUG=4.
    "tinygrad_matvec": ("""
__kernel void k(__global float* data0_1024, __global float* data1_256, __global float* data2_3136, __global float* data3_200704) {
  float buf0[1];
  float buf1[1];
  __attribute__ ((aligned (16))) __local float buf2[16];
  int gidx0 = get_group_id(0); /* 256 */
  int gidx1 = get_group_id(1); /* 4 */
  int lidx0 = get_local_id(0); /* 16 */
  *(buf0+0) = 0.0f;
  for (int Ridx0 = 0; Ridx0 < 49; Ridx0++) {
    int alu1 = ((lidx0*49)+Ridx0);
    float val0 = (*(data2_3136+(alu1+(gidx1*784))));
    float val1 = (*(data3_200704+(alu1+(gidx0*784))));
    *(buf0+0) = ((*(buf0+0))+(val0*((0.0714285746216774f*val1)+-0.0357142873108387f)));
  }
  *(buf2+lidx0) = (*(buf0+0));
  barrier(CLK_LOCAL_MEM_FENCE);
  *(buf1+0) = 0.0f;
  for (int Ridx103 = 0; Ridx103 < 16; Ridx103++) {
    float val2 = (*(buf2+Ridx103));
    *(buf1+0) = ((*(buf1+0))+val2);
  }
  float val3 = (*(data1_256+gidx0));
  float alu9 = ((0.0714285746216774f*val3)+(*(buf1+0))+-0.0357142873108387f);
  float alu10 = ((0.0f<alu9)?alu9:0.0f);
  if ((lidx0==0)) {
    *(data0_1024+(gidx0+(gidx1<<8))) = alu10;
  }
}""", [1024, 256, 3136, 200704], (4096, 4), (16, 1), None),
    "groups_2d": ("""
__kernel void k(__global float* out, __global const float* in) {
  size_t gx = get_group_id(0), gy = get_group_id(1);
  size_t i = get_global_id(1) * get_global_size(0) + get_global_id(0);
  float acc = in[i];
  for (int r = 0; r < 32; r++) acc = acc * 0.999f + (float)(gx * get_num_groups(1) + gy);
  out[i] = acc;
}""", [1 << 20, 1 << 20], (1024, 1024), (16, 16), None),
    "linear_id": ("""
__kernel void k(__global uint* out) {
  size_t l = get_global_linear_id();
  out[l] = (uint)(l * 2654435761u) ^ (uint)get_group_id(0);
}""", [1 << 20], (1 << 20,), (64,), (256,)),  # ids from 0: the offset is taken off
    "mandel": (open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli", "src",
                                 "demo", "mandel.cl")).read(),
               [128 * 128, "int:128", "int:256"], (128, 128), None, None),
}


def role(rounds, launches):
    """One platform's process: each kernel, `rounds` rounds of `launches` launches, then a
    checksum of the outputs. Prints one JSON line."""
    import time

    import numpy as np
    import pyopencl as cl
    # The first platform's devices: NVIDIA's driver refuses a context by type that names
    # no platform (INVALID_PLATFORM, session 52's first GPU call).
    ctx = cl.Context(cl.get_platforms()[0].get_devices())
    q = cl.CommandQueue(ctx)
    out = {"platform": ctx.devices[0].platform.name, "device": ctx.devices[0].name}
    for name, (src, sizes, glob, loc, offset) in KERNELS.items():
        k = cl.Program(ctx, src).build().all_kernels()[0]
        rng = np.random.default_rng(3)
        bufs, args = [], []
        for n in sizes:
            if isinstance(n, str):  # "int:V", a scalar argument
                args.append(np.int32(int(n.split(":")[1])))
                continue
            host = rng.random(n, dtype=np.float32)
            bufs.append(cl.Buffer(ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR,
                                  hostbuf=host))
            args.append(bufs[-1])
        for i, b in enumerate(args):
            k.set_arg(i, b)

        def launch():
            cl.enqueue_nd_range_kernel(q, k, glob, loc, global_work_offset=offset)

        for _ in range(5):  # warm: the vendor's first launches compile and load
            launch()
        q.finish()
        per = []
        for _ in range(rounds):
            t = time.perf_counter()
            for _ in range(launches):
                launch()
            q.finish()
            per.append((time.perf_counter() - t) / launches * 1e6)
        res = np.empty(bufs[0].size // 4, dtype=np.float32)
        cl.enqueue_copy(q, res, bufs[0])
        out[name] = {"us": sorted(per)[len(per) // 2],
                     "checksum": int(np.frombuffer(res.tobytes(), dtype=np.uint32)
                                     .astype(np.uint64).sum())}
    print(json.dumps(out), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", required=True, help="libsoftpreempt.so")
    ap.add_argument("--vendor-lib", required=True, help="the vendor's ICD library")
    ap.add_argument("--rounds", type=int, default=5, help="rounds per process")
    ap.add_argument("--launches", type=int, default=100, help="launches per round")
    ap.add_argument("--pairs", type=int, default=3, help="bare and layered processes, in turn")
    ap.add_argument("--sched", default="",
                    help="more [sched] lines for SoftPreempt (TOML text; default: none, the "
                         "defaults)")
    ap.add_argument("--kernels", default=",".join(KERNELS),
                    help="which kernels, comma-separated (default: all)")
    ap.add_argument("--json")
    a = ap.parse_args()
    for name in list(KERNELS):
        if name not in a.kernels.split(","):
            del KERNELS[name]
    if not KERNELS:
        sys.exit(f"--kernels: none of {a.kernels!r} is a kernel of this benchmark")
    if os.environ.get("KERNEL_COST_ROLE"):
        return role(a.rounds, a.launches)
    # The layered process sees SoftPreempt alone (pyopencl takes the first platform).
    w = Work("kernel-cost-", a.lib, a.vendor_lib, sp_alone=True, sched=a.sched)
    runs = {"bare": [], "sp": []}
    for _ in range(a.pairs):
        for plat in ("bare", "sp"):
            env = dict(os.environ, KERNEL_COST_ROLE="1", OCL_ICD_VENDORS=w.vendors[plat][0],
                       OCL_ICD_FILENAMES=w.vendors[plat][1], SOFTPREEMPT_CONFIG=w.conf,
                       SOFTPREEMPT_VENDORS=a.vendor_lib, SOFTPREEMPT_PRIORITY="high",
                       XDG_CACHE_HOME=w.path("xdg-" + plat))
            p = subprocess.run([sys.executable, __file__] + sys.argv[1:], env=env,
                               capture_output=True, text=True)
            if p.returncode:
                sys.exit(f"{plat} failed:\n{p.stderr}")
            r = json.loads(p.stdout.strip().splitlines()[-1])
            want = "SoftPreempt" if plat == "sp" else None
            if (r["platform"] == "SoftPreempt") != (want is not None):
                sys.exit(f"the {plat} process opened platform {r['platform']!r}")
            runs[plat].append(r)
    print(f"device: {runs['bare'][0]['device']}; {a.pairs} processes a platform, "
          f"{a.rounds} rounds of {a.launches} launches each (median)")
    print(f"{'kernel':<16} {'bare µs':>9} {'layered µs':>11} {'layered/bare':>13}")
    table = {}
    for name in KERNELS:
        med = {p: sorted(r[name]["us"] for r in runs[p])[a.pairs // 2] for p in runs}
        sums = {r[name]["checksum"] for p in runs for r in runs[p]}
        if len(sums) != 1:
            sys.exit(f"{name}: the outputs differ between bare and layered: {sums}")
        table[name] = {"bare_us": med["bare"], "sp_us": med["sp"],
                       "ratio": med["sp"] / med["bare"]}
        print(f"{name:<16} {med['bare']:9.1f} {med['sp']:11.1f} {table[name]['ratio']:13.3f}")
    finish(a.json, table=table, runs=runs, options=vars(a))


if __name__ == "__main__":
    main()
