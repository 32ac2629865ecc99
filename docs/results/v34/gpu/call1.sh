# Session 55's first GPU call (issue 24): the per-command cost of a lone HP on NVIDIA.
# 1. docs/results/v27/one.c (15 commands and a blocking read a request; modes f fill, r
#    read, p a plain kernel, g a geometry-reading one): bare, this build (new) and session
#    54's head (s54), in turns, 4 processes each, every layered one with its profile.
# 2. benches/kernel_cost.py, 5 pairs, this build, with profiles (which path each process's
#    launches took: session 53 saw 0.3-1.0 µs a launch in one run and 2.3-3.0 in the next).
# 3. The pipeline benchmark (this build). 4. OpenCV's lone HP in turns (hp-ab), new and s54.
set -u
. scripts/gpu-env.sh
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib
SPV=$OUT/one-vendors; mkdir -p $SPV
echo "### one.c"
for m in p g r f; do for i in 1 2 3 4; do
  OCL_ICD_FILENAMES=$NV carry/bin/one NVIDIA 2000 $m | sed "s/^/bare $i /"
  for v in new s54; do lib=carry/bin/libsoftpreempt.so; [ $v = new ] || lib=carry/bin/libsoftpreempt-$v.so
    SOFTPREEMPT_PROFILE=$OUT/one-prof-$v-$m-$i.jsonl SOFTPREEMPT_VENDORS=$NV SOFTPREEMPT_PRIORITY=high OCL_ICD_FILENAMES=$PWD/$lib carry/bin/one SoftPreempt 2000 $m | sed "s/^/$v $i /"
  done
done; done 2>&1 | tee $OUT/one.txt
PY=$(mktemp -d); for w in carry/wheels/{pyopencl,pytools,platformdirs,siphash24,typing_extensions}-*.whl; do python3 -m zipfile -e "$w" "$PY" >/dev/null; done
echo "### kernel cost"; SOFTPREEMPT_PROFILE=$OUT/kc-prof.jsonl PYTHONPATH=$PY timeout 200 python3 benches/kernel_cost.py --lib "$PWD/carry/bin/libsoftpreempt.so" --vendor-lib "$NV" --pairs 5 --json "$OUT/kernel_cost.json" 2>&1 | tail -8
echo "### pipeline"; timeout 200 carry/bin/pipeline --json $OUT/pipeline.json 2>&1 | tail -20
echo "### opencv"; JOBS='- hp-ab 30; s54 hp-ab 30' timeout 300 bash scripts/gpu/opencv-turns.sh 2>&1 | tail -8
