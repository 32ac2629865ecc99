"""Times on the bare driver (the first platform pyopencl finds) `k` of g2d.cl (benches/
kernel_cost.py's groups_2d) as written, its geometry rewrite and a variant of its flat
yielding entry (an unasked run): `python flatbench.py g2d-flat.cl` (the entry as
`cargo run -p softpreempt-transform --example rewrite -- --flat g2d.cl` prints it) or a
hand-edited variant (`patch -o g2d-v5.cl g2d-flat.cl g2d-v5.diff`; docs/benchmarks.md,
session 52)."""
import os
import pyopencl as cl, numpy as np, time, sys
src_flat = open(sys.argv[1]).read()
src_orig = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'g2d.cl')).read()
ctx = cl.Context(dev_type=cl.device_type.ALL); q = cl.CommandQueue(ctx)
print(ctx.devices[0].platform.name, ctx.devices[0].name)
N=1<<20
a = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, N*4); b = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, N*4)
cl.enqueue_fill_buffer(q, b, np.float32(1), 0, N*4)
ctl = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 64)
po = cl.Program(ctx, src_orig).build(); pf = cl.Program(ctx, src_flat).build()
def geom(epoch, base):
    v = np.zeros(16, dtype=np.uint64)
    v[3]=1024; v[4]=1024; v[5]=1; v[6]=16; v[7]=16; v[8]=1; v[9]=2; v[13]=64; v[14]=64; v[15]=1
    v[10]=epoch; v[11]=base; v[12]=1
    return v
ko = po.k; ko.set_args(a, b)
kr = pf.k; kr.set_args(a, b, geom(0,0))
ky = pf.__sp_y_k
def tm(f, n=20):
    for _ in range(3): f()
    q.finish(); ts=[]
    for _ in range(n):
        t=time.perf_counter(); f(); q.finish(); ts.append(time.perf_counter()-t)
    return sorted(ts)[n//2]*1e3
print("orig      %.2f ms" % tm(lambda: cl.enqueue_nd_range_kernel(q, ko, (1024,1024), (16,16))))
print("geometry  %.2f ms" % tm(lambda: cl.enqueue_nd_range_kernel(q, kr, (1024,1024), (16,16))))
state = {"base": 0}
def flat():
    # word 0 = 0, epoch 1 -> (0-1) < 0 -> not asked
    cl.enqueue_fill_buffer(q, ctl, np.uint32(0), 0, 64)
    ky.set_args(a, b, geom(1, 0), ctl)
    cl.enqueue_nd_range_kernel(q, ky, (1024,1024), (16,16))
print("flat      %.2f ms" % tm(flat))
print("orig      %.2f ms" % tm(lambda: cl.enqueue_nd_range_kernel(q, ko, (1024,1024), (16,16))))
