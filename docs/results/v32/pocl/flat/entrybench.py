"""Times groups_2d (../../../v31/pocl/flat/g2d.cl) as written against flat entries of it, in
turns on the bare driver (the first platform pyopencl finds): `python3 entrybench.py
../../../v31/pocl/flat/g2d-flat.cl g2d-lid.cl`, where g2d-lid.cl is
`patch -o g2d-lid.cl ../../../v31/pocl/flat/g2d-flat.cl g2d-lid.diff` (the condition
FLAT_ONCE has since session 53). Session 53's figures: notes.txt."""
import os
from turns import time_in_turns
import pyopencl as cl, numpy as np, time, sys
srcs = sys.argv[1:]
orig = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'v31', 'pocl', 'flat', 'g2d.cl')).read()
ctx = cl.Context(dev_type=cl.device_type.ALL); q = cl.CommandQueue(ctx)
N=1<<20
a = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, N*4); b = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, N*4)
cl.enqueue_fill_buffer(q, b, np.float32(1), 0, N*4)
ctl = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 64)
def geom():
    v = np.zeros(16, dtype=np.uint64)
    v[3]=1024; v[4]=1024; v[5]=1; v[6]=16; v[7]=16; v[8]=1; v[9]=2; v[13]=0; v[14]=0; v[15]=0
    v[10]=1; v[11]=0; v[12]=1
    return v
po = cl.Program(ctx, orig).build(); ko = po.k; ko.set_args(a, b)
runs = [("orig", lambda: cl.enqueue_nd_range_kernel(q, ko, (1024,1024), (16,16)))]
for f in srcs:
    k = cl.Program(ctx, open(f).read()).build().__sp_y_k
    k.set_args(a, b, geom(), ctl)
    def run(k=k):
        cl.enqueue_fill_buffer(q, ctl, np.uint32(0), 0, 64)
        cl.enqueue_nd_range_kernel(q, k, (1024,1024), (16,16))
    runs.append((f, run))
time_in_turns(runs, q, 15)
