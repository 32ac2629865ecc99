"""Times the demo's Mandelbrot kernel (cli/src/demo/mandel.cl) as written
(with the local size L and with none) against its flat entries, in turns on the bare driver:
`W=1024 IT=512 L=64,1 python3 mandelbench.py m-head.cl m-lid.cl`, the entries as
`cargo run -p softpreempt-transform --example rewrite -- --flat cli/src/demo/mandel.cl` prints them (m-head.cl
with the condition of session 52, `if (__sp_yt[0] != 0u)`). Figures: notes.txt."""
from turns import time_in_turns
import pyopencl as cl, numpy as np, time, sys, os
W=int(os.environ.get("W","1024")); IT=int(os.environ.get("IT","256")); L=tuple(int(x) for x in os.environ.get("L","16,16").split(","))
ctx = cl.Context(dev_type=cl.device_type.ALL); q = cl.CommandQueue(ctx)
a = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, W*W*4)
ctl = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 64)
def geom():
    v = np.zeros(16, dtype=np.uint64)
    v[3]=W; v[4]=W; v[5]=1; v[6]=L[0]; v[7]=L[1]; v[8]=1; v[9]=2; v[10]=1; v[11]=0; v[12]=1
    return v
ko = cl.Program(ctx, open(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', '..', '..', 'cli', 'src', 'demo', 'mandel.cl')).read()).build().mandel; ko.set_args(a, np.int32(W), np.int32(IT))
runs = [("orig-L", lambda: cl.enqueue_nd_range_kernel(q, ko, (W,W), L)), ("orig-null", lambda: cl.enqueue_nd_range_kernel(q, ko, (W,W), None))]
for f in sys.argv[1:]:
    k = getattr(cl.Program(ctx, open(f).read()).build(), "__sp_y_mandel")
    k.set_args(a, np.int32(W), np.int32(IT), geom(), ctl)
    def run(k=k):
        cl.enqueue_fill_buffer(q, ctl, np.uint32(0), 0, 64)
        cl.enqueue_nd_range_kernel(q, k, (W,W), L)
    runs.append((f, run))
time_in_turns(runs, q, 11)
