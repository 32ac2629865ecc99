"""benches/kernel_cost.py's groups_2d loop alone (pyopencl, back to back launches of a
1024x1024 2-D kernel in 16x16 groups, 9 rounds of 100), printing the median µs a launch:
run under scripts/gpu/cltime.py's library to see which calls take the time."""
import sys, time
import numpy as np
import pyopencl as cl
ctx = cl.Context(cl.get_platforms()[0].get_devices()); q = cl.CommandQueue(ctx)
src = """__kernel void k(__global float* out, __global const float* in) {
  size_t gx = get_group_id(0), gy = get_group_id(1);
  size_t i = get_global_id(1) * get_global_size(0) + get_global_id(0);
  float acc = in[i];
  for (int r = 0; r < 32; r++) acc = acc * 0.999f + (float)(gx * get_num_groups(1) + gy);
  out[i] = acc;
}"""
if sys.argv[1:] == ["plain"]:  # the same work from get_global_id: not rewritten
    src = src.replace("get_group_id(0)", "(get_global_id(0) >> 4)").replace(
        "get_group_id(1)", "(get_global_id(1) >> 4)").replace(
        "get_global_size(0)", "1024").replace("get_num_groups(1)", "64")
k = cl.Program(ctx, src).build().all_kernels()[0]
n = 1 << 20
a = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 4 * n); b = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 4 * n)
k.set_arg(0, a); k.set_arg(1, b)
for _ in range(20):
    cl.enqueue_nd_range_kernel(q, k, (1024, 1024), (16, 16))
q.finish()
per = []
for _ in range(9):
    t = time.perf_counter()
    for _ in range(100):
        cl.enqueue_nd_range_kernel(q, k, (1024, 1024), (16, 16))
    q.finish()
    per.append((time.perf_counter() - t) / 100 * 1e6)
print(f"{ctx.devices[0].platform.name:<12} {(sys.argv[1:] or ['geom'])[0]:<6} {sorted(per)[4]:.2f} us/launch")
