# Session 52's fourth GPU call: this session's final build (a CPU device's launch goes as
# its yielding entry only where that is not slower; on a GPU nothing changes) at the
# defaults, the real clients and the matrix rows: the README's headline table.
set -u
. scripts/gpu-env.sh
echo "### pyopencl"; PAIR_DURATION=6 timeout 170 bash scripts/gpu/pyopencl-run.sh 2>&1 | grep -E "^==|^(hp-alone|corun|lp-alone)"
echo "### tinygrad"; LIBS="-" REPS=1 DURATION=8 timeout 130 bash scripts/gpu/tinygrad-libs.sh 2>&1 | grep -E "^==|^(hp-alone|corun|lp-alone)"
echo "### matrix"; ROWS="compute memory gemm mandel" LIBS="-" REPS=1 DURATION=5 timeout 140 bash scripts/gpu/ab-rows.sh 2>&1 | grep -E "^==|^(hp-alone|corun)"
echo "### opencv"; JOBS='- corun-ab 50; - hp-ab 30' timeout 200 bash scripts/gpu/opencv-turns.sh 2>&1 | tail -10
