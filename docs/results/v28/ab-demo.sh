#!/bin/bash
# A/B of the demo between libs: ROUNDS x (each lib); prints one line per run
cd /work/main
ROUNDS=${ROUNDS:-6}; LIBS=${LIBS:-"head new"}
for r in $(seq 1 $ROUNDS); do for lib in $LIBS; do
  d=/tmp/ab/$lib-$r; rm -rf $d; mkdir -p $d/tl
  out=$(SOFTPREEMPT_LIB=/tmp/libs/$lib.so SOFTPREEMPT_DEMO_TIMELINE=$d/tl ./target/release/softpreempt demo 2>/dev/null)
  echo "$out" > $d/out.txt
  python3 - "$lib" "$r" "$d" <<'PY'
import sys,glob
lib,r,d=sys.argv[1:]
def lat(f): return sorted((e-s)/1e6 for s,e in (map(int,l.split()) for l in open(f)))
def p(x,q): return x[min(len(x)-1,int(round(q*(len(x)-1))))]
al=lat(glob.glob(d+'/tl/hp-bare-*.txt')[0]) if False else None
hb=[lat(f) for f in sorted(glob.glob(d+'/tl/hp-bare-*.txt'))]
hl=lat(glob.glob(d+'/tl/hp-layered-*.txt')[0])
out=open(d+'/out.txt').read().splitlines()
lp=[l for l in out if l.startswith('HP + LP')]
lpr=[float(l.split()[-1]) for l in lp]
alone,bare=hb[0],hb[1]
print(f"{lib:5} r{r} alone p50 {p(alone,.5):.2f} p99 {p(alone,.99):.2f} | bare p99 {p(bare,.99):.2f} | layered p50 {p(hl,.5):.2f} p99 {p(hl,.99):.2f} max {hl[-1]:.2f} n>3ms {sum(x>3 for x in hl)} alone n>3ms {sum(x>3 for x in alone)} | LP {lpr[1]/lpr[0]:.3f}",flush=True)
PY
done; done
