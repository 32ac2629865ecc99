# Session 51's third GPU call: this session's final build (568faf3) alone, at the defaults: the
# real clients and the matrix rows (after scripts/gpu/pack-yield.sh).
set -u
. scripts/gpu-env.sh
echo "### pyopencl"; PAIR_DURATION=6 timeout 170 bash scripts/gpu/pyopencl-run.sh 2>&1 | grep -E "^==|^(hp-alone|corun|lp-alone)"
echo "### tinygrad"; LIBS="-" REPS=1 DURATION=8 timeout 130 bash scripts/gpu/tinygrad-libs.sh 2>&1 | grep -E "^==|^(hp-alone|corun|lp-alone)"
echo "### opencv"; JOBS='- corun-ab 50; - hp-ab 20' timeout 110 bash scripts/gpu/opencv-turns.sh 2>&1 | tail -12
echo "### matrix"; ROWS="compute memory gemm mandel" LIBS="-" REPS=1 DURATION=3 timeout 100 bash scripts/gpu/ab-rows.sh 2>&1 | grep -E "^==|^(hp-alone|corun)"
