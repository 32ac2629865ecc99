#!/usr/bin/env python3
"""An LP that starts next to an HP already busy: the HP (pyopencl, priority high) sends a
short kernel every --gap-ms and waits for it; --lead-s later the LP (pyopencl, priority
low) starts launching one of benches/kernel_cost.py's kernels back to back, scaled up
--scale times in each dimension so that its launches are long. Bare and SoftPreempt in
turn (--pairs times each), side by side in one run. Printed per platform: the LP's
launches a second (median of the runs) and the HP's p50/p99 while the LP ran, then the
ratios (SoftPreempt ÷ bare).

Where the rest of the matrix starts the LP first, this is the other order, in which a
CPU device's yielding runs are nearly all asked from the LP's first launch on: a flat
entry that runs slower than its kernel must still be found out then (`groups_2d` on an
AVX-512 PoCL: 0.20 of bare's LP rate before session 52).

    python3 benches/lp_arrival.py --lib target/release/libsoftpreempt.so \\
        --vendor-lib "$(head -n1 /etc/OpenCL/vendors/pocl.icd)"

Needs pyopencl and numpy. With SOFTPREEMPT_PROFILE set, the layered processes append their
profiles there (`entry_slower` counts the launches that went as the kernel). --json FILE
writes every figure.
"""
import argparse
import json
import os
import subprocess
import sys
import time

from pair_common import Work, finish
import kernel_cost

HP_SRC = """__kernel void h(__global float* a) {
  size_t i = get_global_id(0); float x = a[i];
  for (int r = 0; r < 200; r++) x = x * 0.99f + 1.0f;
  a[i] = x;
}"""


def lp_role(a):
    import numpy as np
    import pyopencl as cl
    src, sizes, glob, loc, off = kernel_cost.KERNELS[a.kernel]
    s = a.scale
    glob = tuple(g * s for g in glob)
    sizes = [n * s ** len(glob) if not isinstance(n, str) else n for n in sizes]
    # The first platform's devices: NVIDIA's driver refuses a context by type that names
    # no platform (INVALID_PLATFORM, session 52's first GPU call).
    ctx = cl.Context(cl.get_platforms()[0].get_devices())
    q = cl.CommandQueue(ctx)
    k = cl.Program(ctx, src).build().all_kernels()[0]
    rng = np.random.default_rng(3)
    args = []
    for n in sizes:
        if isinstance(n, str):
            args.append(np.int32(int(n.split(":")[1])))
        else:
            args.append(cl.Buffer(ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR,
                                  hostbuf=rng.random(n, dtype=np.float32)))
    k.set_args(*args)
    t0, n = time.perf_counter(), 0
    while time.perf_counter() - t0 < a.duration:
        cl.enqueue_nd_range_kernel(q, k, glob, loc, global_work_offset=off)
        q.finish()
        n += 1
    took = time.perf_counter() - t0
    print(json.dumps({"platform": ctx.devices[0].platform.name, "lps": n / took,
                      "start": t0 + time.time() - time.perf_counter(), "end": time.time()}),
          flush=True)


def hp_role(a):
    import numpy as np
    import pyopencl as cl
    # The first platform's devices: NVIDIA's driver refuses a context by type that names
    # no platform (INVALID_PLATFORM, session 52's first GPU call).
    ctx = cl.Context(cl.get_platforms()[0].get_devices())
    q = cl.CommandQueue(ctx)
    k = cl.Program(ctx, HP_SRC).build().h
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 4 * 4096)
    k.set_args(buf)
    cl.enqueue_fill_buffer(q, buf, np.float32(0), 0, 4 * 4096)
    samples = []
    end = time.time() + a.lead_s + a.duration + 1.0
    while time.time() < end:
        t = time.perf_counter()
        cl.enqueue_nd_range_kernel(q, k, (4096,), (64,))
        q.finish()
        samples.append((time.time(), time.perf_counter() - t))
        time.sleep(a.gap_ms / 1e3)
    print(json.dumps({"samples": samples}), flush=True)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p / 100))] if xs else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", required=True, help="libsoftpreempt.so")
    ap.add_argument("--vendor-lib", required=True, help="the vendor's ICD library")
    ap.add_argument("--kernel", default="groups_2d", choices=list(kernel_cost.KERNELS))
    ap.add_argument("--scale", type=int, default=2, help="the LP's range, times this a dimension")
    ap.add_argument("--duration", type=float, default=12.0, help="seconds the LP runs")
    ap.add_argument("--lead-s", type=float, default=1.5, help="the HP's head start, seconds")
    ap.add_argument("--gap-ms", type=float, default=20.0)
    ap.add_argument("--pairs", type=int, default=1, help="bare and layered runs, in turn")
    ap.add_argument("--role", help=argparse.SUPPRESS)
    ap.add_argument("--json")
    a = ap.parse_args()
    if a.role:
        return lp_role(a) if a.role == "lp" else hp_role(a)
    w = Work("lp-arrival-", a.lib, a.vendor_lib, sp_alone=True)
    runs = {"bare": [], "sp": []}
    for _ in range(a.pairs):
        for plat in ("bare", "sp"):
            env = dict(os.environ, OCL_ICD_VENDORS=w.vendors[plat][0],
                       OCL_ICD_FILENAMES=w.vendors[plat][1], SOFTPREEMPT_CONFIG=w.conf,
                       SOFTPREEMPT_VENDORS=a.vendor_lib, XDG_CACHE_HOME=w.path("xdg-" + plat))
            cmd = [sys.executable, __file__] + sys.argv[1:]
            hp = subprocess.Popen(cmd + ["--role", "hp"], stdout=subprocess.PIPE, text=True,
                                  env=dict(env, SOFTPREEMPT_PRIORITY="high"))
            time.sleep(a.lead_s)
            lp = subprocess.run(cmd + ["--role", "lp"], capture_output=True, text=True,
                                env=dict(env, SOFTPREEMPT_PRIORITY="low"))
            out, _ = hp.communicate()
            if lp.returncode or hp.returncode:
                sys.exit(f"{plat} failed:\n{lp.stderr[-2000:]}")
            r = json.loads(lp.stdout.strip().splitlines()[-1])
            if (r["platform"] == "SoftPreempt") != (plat == "sp"):
                sys.exit(f"the {plat} LP opened platform {r['platform']!r}")
            hs = json.loads(out.strip().splitlines()[-1])["samples"]
            during = [d * 1e3 for t, d in hs if r["start"] <= t <= r["end"]]
            runs[plat].append({"lps": r["lps"], "hp_p50": pct(during, 50),
                               "hp_p99": pct(during, 99), "hp_n": len(during)})
    med = {p: {k: sorted(x[k] for x in runs[p])[a.pairs // 2] for k in ("lps", "hp_p50", "hp_p99")}
           for p in runs}
    print(f"LP {a.kernel} x{a.scale} starts {a.lead_s} s after the HP; {a.pairs} run(s) a platform (median)")
    print(f"{'platform':<10} {'LP launches/s':>14} {'HP p50 ms':>10} {'HP p99 ms':>10}")
    for p in runs:
        print(f"{p:<10} {med[p]['lps']:14.2f} {med[p]['hp_p50']:10.3f} {med[p]['hp_p99']:10.3f}")
    print(f"SoftPreempt ÷ bare: LP {med['sp']['lps'] / med['bare']['lps']:.3f}, "
          f"HP p99 {med['sp']['hp_p99'] / med['bare']['hp_p99']:.3f}")
    finish(a.json, runs=runs, median=med, options=vars(a))


if __name__ == "__main__":
    main()
