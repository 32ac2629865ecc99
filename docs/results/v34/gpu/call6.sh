# Session 55's sixth GPU call: deferred commands' user events set from a vendor callback
# only where the vendor waits for them (new), against session 54's head (s54).
# 1. kcprobe.py (pyopencl, groups_2d loop), new / s54 / bare in turns, 4 processes each.
# 2. kernel_cost.py, 3 pairs, each build.  3. pipeline (new).
# 4. the pyopencl pair (12 ms LP) with each build.  5. OpenCV lone HP in turns, each build.
set -u
. scripts/gpu-env.sh
PY=$(mktemp -d); for w in carry/wheels/{pyopencl,pytools,platformdirs,siphash24,typing_extensions}-*.whl; do python3 -m zipfile -e "$w" "$PY" >/dev/null; done
VB=$OUT/vb; mkdir -p $VB; echo $NV > $VB/nv.icd
for v in new s54; do mkdir -p $OUT/v-$v; done
echo $PWD/carry/bin/libsoftpreempt.so > $OUT/v-new/sp.icd; echo $PWD/carry/bin/libsoftpreempt-s54.so > $OUT/v-s54/sp.icd
echo "### kcprobe"
for i in 1 2 3 4; do
  SOFTPREEMPT_VENDORS=$NV SOFTPREEMPT_PRIORITY=high PYTHONPATH=$PY OCL_ICD_VENDORS=$VB python3 docs/results/v34/gpu/kcprobe.py 2>/dev/null | sed 's/^/bare /'
  for v in new s54; do SOFTPREEMPT_VENDORS=$NV SOFTPREEMPT_PRIORITY=high PYTHONPATH=$PY OCL_ICD_VENDORS=$OUT/v-$v python3 docs/results/v34/gpu/kcprobe.py 2>/dev/null | sed "s/^/$v  /"; done
done 2>&1 | tee $OUT/kcprobe.txt
for v in new s54; do lib=carry/bin/libsoftpreempt.so; [ $v = new ] || lib=carry/bin/libsoftpreempt-$v.so
  echo "### kernel cost $v"; PYTHONPATH=$PY timeout 200 python3 benches/kernel_cost.py --lib "$PWD/$lib" --vendor-lib "$NV" --pairs 3 --json "$OUT/kernel_cost-$v.json" 2>&1 | tail -5
done
echo "### pipeline"; timeout 200 carry/bin/pipeline --json $OUT/pipeline.json 2>&1 | tail -19
for v in new s54; do lib=carry/bin/libsoftpreempt.so; [ $v = new ] || lib=carry/bin/libsoftpreempt-$v.so
  echo "### pyopencl pair 12 ms $v"; PYTHONPATH=$PY timeout 200 python3 benches/pyopencl_pair.py --lib "$PWD/$lib" --vendor-lib "$NV" --duration 8 --lp-ms 12 --json "$OUT/pair-$v.json" 2>&1 | tail -9
done
echo "### opencv"; JOBS='- hp-ab 30; s54 hp-ab 30' timeout 300 bash scripts/gpu/opencv-turns.sh 2>&1 | tail -8
