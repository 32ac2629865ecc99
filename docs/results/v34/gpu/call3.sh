# Session 55's third GPU call: kernel_cost.py's groups_2d loop in pyopencl (kcprobe.py),
# bare and through this build, 3 processes each in turns, then once each under cltime
# (scripts/gpu/cltime.py's library, preloaded before pyopencl's bundled loader) to split
# a launch's time between the calls it makes.
set -u
. scripts/gpu-env.sh
PY=$(mktemp -d); for w in carry/wheels/{pyopencl,pytools,platformdirs,siphash24,typing_extensions}-*.whl; do python3 -m zipfile -e "$w" "$PY" >/dev/null; done
REAL=$(ls $PY/pyopencl.libs/libOpenCL*.so* $PY/pyopencl/.libs/libOpenCL*.so* 2>/dev/null | head -1); echo "loader: $REAL"
VB=$OUT/vb; VS=$OUT/vs; mkdir -p $VB $VS; echo $NV > $VB/nv.icd; echo $PWD/carry/bin/libsoftpreempt.so > $VS/sp.icd
run() { # plat [cltime-out]
  local V=$VB; [ $1 = sp ] && V=$VS
  if [ -n "${2:-}" ]; then
    SOFTPREEMPT_VENDORS=$NV SOFTPREEMPT_PRIORITY=high OCL_ICD_VENDORS=$V PYTHONPATH=$PY CLTIME_REAL=$REAL CLTIME_OUT=$2 LD_PRELOAD=$PWD/carry/bin/libcltime.so python3 docs/results/v34/gpu/kcprobe.py
  else
    SOFTPREEMPT_VENDORS=$NV SOFTPREEMPT_PRIORITY=high OCL_ICD_VENDORS=$V PYTHONPATH=$PY python3 docs/results/v34/gpu/kcprobe.py
  fi
}
for i in 1 2 3; do run bare; run sp; done
echo "### under cltime"; run bare $OUT/clt-bare.json; run sp $OUT/clt-sp.json
for p in bare sp; do echo "== $p"; python3 -c "
import json;d=json.load(open('$OUT/clt-$p.json'))
for k,v in sorted(d.items(), key=lambda kv:-kv[1][1])[:8]: print(k,v, round(v[1]/v[0]/1e3,2),'us each')"; done
