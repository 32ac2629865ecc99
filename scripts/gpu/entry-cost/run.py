# What a persistent entry costs a kernel on a GPU, bare NVIDIA (no layer): the preemption
# benchmark's Mandelbrot and compute kernels (benches/preempt.rs) against their
# entries, with P = m x compute units persistent groups and c groups a ticket; medians of 7,
# interleaved. Here: `bash scripts/gpu/entry-cost/pack.sh` (writes carry/probe/); on the GPU
# machine, with pyopencl's wheels unpacked on PYTHONPATH (scripts/gpu/pyopencl-run.sh
# shows how) and OCL_ICD_VENDORS at NVIDIA's ICD: `python3 scripts/gpu/entry-cost/run.py`.
import sys, time, numpy as np, pyopencl as cl
plat = [p for p in cl.get_platforms() if "NVIDIA" in p.name][0]
dev = plat.get_devices()[0]; cu = dev.max_compute_units
ctx = cl.Context([dev]); q = cl.CommandQueue(ctx)
def geo(gl, lo, dims, chunk):
    v = np.zeros(16, np.uint64)
    for d in range(3):
        v[3 + d] = gl[d] if d < dims else 1; v[6 + d] = lo[d] if d < dims else 1
    v[9] = dims; v[10] = 1; v[11] = 0; v[12] = chunk
    return v.tobytes()
def run(name, src_plain, src_entry, gl, lo, args):
    dims = len(gl)
    pk = getattr(cl.Program(ctx, src_plain).build(), name)
    ek = getattr(cl.Program(ctx, open(src_entry).read()).build(), "__sp_y_" + name)
    ctl = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 64)
    pk.set_args(*args)
    variants = [("plain NULL", None), ("plain local", None)]
    for m in (8, 4, 16):
        for c in (1, 4, 16):
            variants.append((f"entry P={m}xCU chunk {c}", (m, c)))
    res = {v[0]: [] for v in variants}
    zero = np.zeros(16, np.uint32)
    for r in range(7):
        for label, mc in variants:
            if mc is None:
                l = None if label == "plain NULL" else tuple(lo)
                cl.enqueue_nd_range_kernel(q, pk, gl, l); q.finish()
                t = time.perf_counter(); cl.enqueue_nd_range_kernel(q, pk, gl, l); q.finish()
            else:
                m, c = mc
                g = [lo[0] * m * cu] + list(lo[1:dims])
                for rep in range(2):
                    cl.enqueue_copy(q, ctl, zero); q.finish()
                    ek.set_args(*args, geo(gl, lo, dims, c), ctl)
                    t = time.perf_counter(); cl.enqueue_nd_range_kernel(q, ek, g, lo[:dims]); q.finish()
            res[label].append(time.perf_counter() - t)
    base = np.median(res["plain NULL"])
    for label, _ in variants:
        m = np.median(res[label]); print(f"{name}: {label:24s} {m*1e3:8.3f} ms {m/base:.4f}")
MANDEL = open("carry/probe/mandel.cl").read()
out = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 4 << 24)
run("mandel", MANDEL, "carry/probe/mandel_entry.cl", (8192, 8192), (256, 1),
    [out, np.uint32(int(sys.argv[1]) if len(sys.argv) > 1 else 800), np.uint32((1 << 24) - 1), np.uint32(8192)])
SPIN = open("carry/probe/spin.cl").read()
run("spin", SPIN, "carry/probe/spin_entry.cl", (256 * 1056 * 4000,), (256,),
    [out, np.uint32(700), np.uint32((1 << 24) - 1)])
