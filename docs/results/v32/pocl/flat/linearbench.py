"""Times kernel_cost.py's linear_id kernel (lin.cl, no offset, 4M items in 64-item groups) as
written against flat entries of it, in turns on the bare driver: `python3 linearbench.py
lin-flat.cl lin-noat.cl` (lin-flat.cl as `rewrite --flat lin.cl` prints it, lin-noat.cl
patched with lin-noatomic.diff); `CH=16 python3 linearbench.py lin-chunk16.cl` for the
hand-written chunk of 16 virtual groups a group. Figures: notes.txt."""
from turns import time_in_turns
import pyopencl as cl, numpy as np, time, sys, os
S=int(os.environ.get("S", str(1<<22))); CH=int(os.environ.get("CH","1")); L=64
ctx = cl.Context(dev_type=cl.device_type.ALL); q = cl.CommandQueue(ctx)
a = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, S*4)
ctl = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 64)
def geom():
    v = np.zeros(16, dtype=np.uint64)
    v[3]=S; v[4]=1; v[5]=1; v[6]=L; v[7]=1; v[8]=1; v[9]=1; v[10]=1; v[11]=0; v[12]=1
    return v
ko = cl.Program(ctx, open('lin.cl').read()).build().k; ko.set_args(a)
runs = [("orig", lambda: cl.enqueue_nd_range_kernel(q, ko, (S,), (L,)))]
for f in sys.argv[1:]:
    k = cl.Program(ctx, open(f).read()).build().__sp_y_k
    k.set_args(a, geom(), ctl)
    def run(k=k):
        cl.enqueue_fill_buffer(q, ctl, np.uint32(0), 0, 64)
        cl.enqueue_nd_range_kernel(q, k, ((S//L+CH-1)//CH*L,), (L,))
    runs.append((f, run))
time_in_turns(runs, q, 15)
