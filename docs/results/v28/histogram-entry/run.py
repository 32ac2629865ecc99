import pyopencl as cl, numpy as np, sys
ctx = cl.Context(dev_type=cl.device_type.CPU)
q = cl.CommandQueue(ctx)
src = open(sys.argv[1]).read()
opts = "-D BINS=256 -D HISTS_COUNT=2 -D WGS=4096 -D kercn=4 -D T=int -D HAVE_SRC_CONT"
prg = cl.Program(ctx, src).build(options=opts)
name = sys.argv[2]
img = (np.arange(640*480) % 251).astype(np.uint8)
mf = cl.mem_flags
d_src = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=img)
hist = np.zeros(2*256, np.int32); d_hist = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=hist)
k = getattr(prg, name)
args = [d_src, np.int32(640), np.int32(0), np.int32(480), np.int32(640), d_hist, np.int32(640*480)]
if name.startswith("__sp_y"):
    words = np.array([0,0,0,8192,1,1,4096,1,1,1,1,0,1,0,0,0], np.uint64)
    ctl = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=np.zeros(16, np.uint32))
    args += [words.view(np.uint64), ctl]
for i,a in enumerate(args):
    if isinstance(a, np.ndarray) and a.dtype == np.uint64: k.set_arg(i, a.tobytes())
    else: k.set_arg(i, a)
for r in range(int(sys.argv[3]) if len(sys.argv)>3 else 5):
    if name.startswith("__sp_y"):
        words[10] = r+1
        k.set_arg(7, words.tobytes())
        cl.enqueue_copy(q, ctl, np.zeros(16, np.uint32))
    cl.enqueue_nd_range_kernel(q, k, (8192,), (4096,)); q.finish()
out = np.empty_like(hist); cl.enqueue_copy(q, out, d_hist); q.finish()
print(name, "ok", out[:4], out.sum())
