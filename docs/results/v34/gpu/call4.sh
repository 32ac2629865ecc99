# Session 55's fourth GPU call: kcprobe.py (geom: kernel_cost's groups_2d, rewritten by the
# layer; plain: the same work from get_global_id, not rewritten), bare and this build in
# turns, 3 processes each; then each once under cltime with the calltime build
# (SOFTPREEMPT_CALLTIME: the vendor's own time inside the layer's entry points).
set -u
. scripts/gpu-env.sh
PY=$(mktemp -d); for w in carry/wheels/{pyopencl,pytools,platformdirs,siphash24,typing_extensions}-*.whl; do python3 -m zipfile -e "$w" "$PY" >/dev/null; done
REAL=$(ls $PY/pyopencl/.libs/libOpenCL*.so* | head -1)
VB=$OUT/vb; VS=$OUT/vs; VC=$OUT/vc; mkdir -p $VB $VS $VC; echo $NV > $VB/nv.icd; echo $PWD/carry/bin/libsoftpreempt.so > $VS/sp.icd; echo $PWD/carry/bin/libsoftpreempt-calltime.so > $VC/sp.icd
export SOFTPREEMPT_VENDORS=$NV SOFTPREEMPT_PRIORITY=high PYTHONPATH=$PY
for kk in geom plain; do for i in 1 2 3; do
  OCL_ICD_VENDORS=$VB python3 docs/results/v34/gpu/kcprobe.py $kk | sed 's/^/bare /'
  OCL_ICD_VENDORS=$VS python3 docs/results/v34/gpu/kcprobe.py $kk | sed 's/^/sp   /'
done; done
for kk in geom plain; do
  OCL_ICD_VENDORS=$VB CLTIME_REAL=$REAL CLTIME_OUT=$OUT/clt-bare-$kk.json LD_PRELOAD=$PWD/carry/bin/libcltime.so python3 docs/results/v34/gpu/kcprobe.py $kk | sed 's/^/bare cltime /'
  OCL_ICD_VENDORS=$VC SOFTPREEMPT_CALLTIME=$OUT/ct-$kk.json CLTIME_REAL=$REAL CLTIME_OUT=$OUT/clt-ct-$kk.json LD_PRELOAD=$PWD/carry/bin/libcltime.so python3 docs/results/v34/gpu/kcprobe.py $kk | sed 's/^/ct   cltime /'
  for f in clt-bare-$kk clt-ct-$kk ct-$kk; do echo "== $f"; python3 -c "
import json;d=json.load(open('$OUT/$f.json'))
for k,v in d.items():
  if any(x in k for x in ('NDRange','ReleaseEvent')): print(k,v, round(v[1]/v[0]/1e3,2),'us each')"; done
done
