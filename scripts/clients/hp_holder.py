"""A high-priority client for the client runs: while the suite or workload under test runs
at priority low, this process holds a queue on the same device through SoftPreempt (run it
with SOFTPREEMPT_PRIORITY=high and the same arbiter directory), so every launch of the
client goes through the scheduler (software FIFO, grants, slicing), and it launches a small
kernel every PERIOD seconds, so the client also yields to it now and then.

    hp_holder.py READY_FILE PERIOD

Writes READY_FILE once its queue is registered; runs until SIGTERM (or until its parent
dies), then prints how many launches it made. Exits 1 if there is no SoftPreempt platform.
"""
import os
import signal
import sys
import time

import numpy as np
import pyopencl as cl

SRC = """
__kernel void tick(__global float *a) {
    size_t i = get_global_id(0);
    float x = a[i];
    for (int k = 0; k < 64; k++) x = x * 0.999f + 0.5f;
    a[i] = x;
}
"""


def main():
    ready, period = sys.argv[1], float(sys.argv[2])
    platforms = [p for p in cl.get_platforms() if p.name == "SoftPreempt"]
    if not platforms:
        sys.exit("hp_holder: no SoftPreempt platform (check OCL_ICD_VENDORS)")
    device = platforms[0].get_devices()[0]
    ctx = cl.Context([device])
    queue = cl.CommandQueue(ctx)
    prog = cl.Program(ctx, SRC).build()
    host = np.zeros(1 << 14, np.float32)
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=host)
    kernel = prog.tick
    kernel.set_arg(0, buf)

    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    parent = os.getppid()
    with open(ready, "w") as f:
        f.write(f"{os.getpid()}\n")
    launches = 0
    while not stop and os.getppid() == parent:
        cl.enqueue_nd_range_kernel(queue, kernel, host.shape, None)
        queue.finish()
        launches += 1
        time.sleep(period)
    print(f"hp_holder: {launches} high-priority launches on {device.name}", flush=True)


if __name__ == "__main__":
    main()
