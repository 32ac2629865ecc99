"""The per-command pipeline's request (`benches/pipeline.rs`, N = 4: a fill, the `plain` and
`geom` kernels, a blocking read) through pyopencl, on every platform the loader shows:
each command's device time (profiling events) and the request's host time, medians.
Shows whether a request costs more through SoftPreempt in the commands' execution (the
`geom` kernel is rewritten by the layer) or around it.

Run: OCL_ICD_VENDORS=DIR python3 scripts/pipeline-device-times.py, DIR holding
softpreempt.icd (the built library) and the vendor's .icd; SOFTPREEMPT_PRIORITY=high and
a private SOFTPREEMPT_SHM_DIR as the benchmark sets them. Needs pyopencl and numpy (the
client venv: `bash scripts/clients.sh --python`).
"""
import time

import numpy as np
import pyopencl as cl

SRC = """
__kernel void plain(__global int *a) { a[get_global_id(0)] += 1; }
__kernel void geom(__global int *a) {
    a[get_global_id(0)] += (int)(get_group_id(0) + get_num_groups(0));
}"""
ROUNDS, REQUESTS = 30, 50


def client(platform):
    ctx = cl.Context(platform.get_devices())
    q = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
    prg = cl.Program(ctx, SRC).build()
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 4096)
    kernels = [prg.plain, prg.geom]
    for k in kernels:
        k.set_arg(0, buf)
    return q, buf, kernels


def main():
    clients = [(p.name, *client(p)) for p in cl.get_platforms()]
    host = np.zeros(1024, np.int32)
    names = ["fill", "plain", "geom", "read"]
    times = {c[0]: {n: [] for n in names + ["request"]} for c in clients}
    # Rounds alternate between the platforms, so drift hits all alike; the first warms up.
    for rnd in range(ROUNDS):
        for name, q, buf, (plain, geom) in clients:
            for _ in range(REQUESTS):
                t = time.perf_counter()
                events = [
                    cl.enqueue_fill_buffer(q, buf, np.int32(7), 0, 4096),
                    cl.enqueue_nd_range_kernel(q, plain, (1024,), None),
                    cl.enqueue_nd_range_kernel(q, geom, (1024,), None),
                    cl.enqueue_copy(q, host, buf, is_blocking=True),
                ]
                took = time.perf_counter() - t
                if rnd > 0:
                    for n, e in zip(names, events):
                        times[name][n].append(e.profile.end - e.profile.start)
                    times[name]["request"].append(took * 1e9)
    print("µs (median): " + "  ".join(names + ["request"]))
    for name, t in times.items():
        print(f"{name:<30} " + "  ".join(f"{k} {np.median(v) / 1000:6.1f}" for k, v in t.items()))


if __name__ == "__main__":
    main()
