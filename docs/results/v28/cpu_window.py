# per-thread on-CPU time inside an HP request window, from `perf sched timehist`
import sys,subprocess,glob,time,re,collections
data,d,idx=sys.argv[1],sys.argv[2],[int(x) for x in sys.argv[3].split(',')]
off=time.clock_gettime_ns(time.CLOCK_REALTIME)-time.clock_gettime_ns(time.CLOCK_MONOTONIC)
hp=[tuple(map(int,l.split())) for l in open(glob.glob(d+'/tl/hp-layered-*.txt')[0])]
for i in idx:
    s,e=hp[i]; s=(s-off)/1e9; e=(e-off)/1e9
    out=subprocess.run(['perf','sched','timehist','-i',data,'--time',f'{s-0.01:.6f},{e+0.001:.6f}'],capture_output=True,text=True).stdout
    use=collections.Counter(); seq=[]
    for l in out.splitlines():
        m=re.match(r'\s*([\d.]+)\s+\[(\d+)\]\s+(\S.*?)\s{2,}([\d.]+)\s+([\d.]+)\s+([\d.]+)',l)
        if not m: continue
        t=float(m.group(1)); cpu=m.group(2); task=m.group(3).strip(); run=float(m.group(6))/1e3
        a=max(s,t-run); b=min(e,t)
        if b>a: use[(cpu,task)]+= (b-a)*1e3; seq.append((a,b,cpu,task))
    print(f"== HP #{i} {(e-s)*1e3:.3f} ms")
    for (cpu,task),ms in sorted(use.items()): print(f"   cpu{cpu} {task:40} {ms:7.3f} ms")
    for a,b,cpu,task in sorted(seq):
        if b-a>0.0002: print(f"      {1e3*(a-s):7.3f}-{1e3*(b-s):7.3f} cpu{cpu} {task}")
