#!/usr/bin/env python3
"""What a persistent entry (a yielding launch's kernel) costs real kernels, on the bare
vendor (no layer): each kernel of FILES whole, and through its entry as the layer makes it
(`cargo run -p softpreempt-transform --example rewrite`), with two persistent groups a
compute unit and one group a ticket; medians of 20 launches, and the outputs compared.

    python3 benches/entry_cost.py benches/entry_cost/*.cl

The kernels in benches/entry_cost/ are tinygrad's (0.14, `DEBUG=4`) for the MLP of
benches/tinygrad_pair.py --small; their geometry is read from tinygrad's comments
(`gidxN = get_group_id(N); /* groups */`, `lidxN = get_local_id(N); /* items */`), and
every argument is a `dataN_SIZE` buffer. Needs pyopencl; the first platform is used
(OCL_ICD_VENDORS picks it). Session 36 found the entry's form made for CPU devices then
running tinygrad's matrix products 6-11 times slower than whole on PoCL (docs/design.md,
"One entry for every device")."""
import re
import subprocess
import sys
import time

import numpy as np
import pyopencl as cl


def entry_source(path):
    out = subprocess.run(["cargo", "run", "-q", "-p", "softpreempt-transform", "--example",
                          "rewrite", "--", "--yielding", path],
                         capture_output=True, text=True, check=True)
    return out.stdout


def main():
    ctx = cl.Context(cl.get_platforms()[0].get_devices())
    q = cl.CommandQueue(ctx)
    dev = ctx.devices[0]
    print(f"{dev.name.strip()} ({dev.platform.name}), {dev.max_compute_units} compute units")
    print(f"{'kernel':<28} {'groups':>10} {'local':>8} {'whole ms':>9} {'entry ms':>9} "
          f"{'ratio':>6}  output")
    for path in sys.argv[1:]:
        src = open(path).read()
        name = re.search(r"__kernel void (\w+)\(", src).group(1)
        head = src[:src.index("{")]
        params = re.findall(r"__global (\w+)\* data\d+_(\d+)", head)
        g = [int(n) for _, n in sorted(re.findall(r"gidx(\d) = get_group_id\(\d\); /\* (\d+) \*/", src))]
        lo = [int(n) for _, n in sorted(re.findall(r"lidx(\d) = get_local_id\(\d\); /\* (\d+) \*/", src))]
        dims = max(len(g), len(lo), 1)
        g += [1] * (dims - len(g))
        lo += [1] * (dims - len(lo))
        rng = np.random.default_rng(1)

        def buffers():
            out = []
            for t, n in params:
                a = (rng.integers(0, 5, int(n)).astype(np.int32) if t in ("int", "uint")
                     else rng.random(int(n), dtype=np.float32))
                out.append(cl.Buffer(ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR,
                                     hostbuf=a))
            return out

        words = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 64)
        geo = np.zeros(16, np.uint64)
        for d in range(3):
            geo[3 + d] = g[d] * lo[d] if d < dims else 1
            geo[6 + d] = lo[d] if d < dims else 1
        geo[9], geo[10], geo[12] = dims, 1, 1  # dims; epoch 1 (word 0: go on); chunk 1
        persistent = 2 * dev.max_compute_units

        def timed(kernel, args, gsize):
            kernel.set_args(*args)

            def once():
                cl.enqueue_fill_buffer(q, words, np.uint32(0), 0, 64)
                cl.enqueue_nd_range_kernel(q, kernel, gsize, tuple(lo))
                q.finish()
            for _ in range(3):
                once()
            ts = []
            for _ in range(20):
                t = time.perf_counter()
                once()
                ts.append(time.perf_counter() - t)
            return float(np.median(ts)) * 1e3

        whole_bufs = buffers()
        rng = np.random.default_rng(1)
        entry_bufs = buffers()
        whole = getattr(cl.Program(ctx, src).build(), name)
        entry = getattr(cl.Program(ctx, entry_source(path)).build(), "__sp_y_" + name)
        t_whole = timed(whole, whole_bufs, tuple(a * b for a, b in zip(g, lo)))
        t_entry = timed(entry, entry_bufs + [np.frombuffer(geo.tobytes(), np.uint8), words],
                        tuple([lo[0] * persistent] + lo[1:]))
        def read(b, n):
            out = np.empty(int(n), np.float32)
            cl.enqueue_copy(q, out, b)
            return out
        same = all(np.array_equal(read(a, n), read(b, n))
                   for (_, n), a, b in zip(params, whole_bufs, entry_bufs))
        print(f"{name:<28} {'x'.join(map(str, g)):>10} {'x'.join(map(str, lo)):>8} "
              f"{t_whole:>9.3f} {t_entry:>9.3f} {t_entry / t_whole:>6.2f}  "
              f"{'identical' if same else 'DIFFERS'}")


if __name__ == "__main__":
    main()
