# Session 54's first GPU call: this build (`-`: whole launches cap a model's prediction,
# a recent piece's work compared without the fixed cost, slow start past short pieces)
# against main's head at the session's start (`head`, 94fe930), the real clients and
# the matrix rows, in turns.
set -u
. scripts/gpu-env.sh
echo "### pyopencl"; PAIR_DURATION=6 timeout 160 bash scripts/gpu/pyopencl-run.sh 2>&1 | grep -E "^==|^(hp-alone|corun|lp-alone)"
echo "### tinygrad"; LIBS="- head" REPS=1 DURATION=8 timeout 190 bash scripts/gpu/tinygrad-libs.sh 2>&1 | grep -E "^==|^(hp-alone|corun|lp-alone)"
echo "### matrix"; ROWS="compute memory gemm mandel" LIBS="- head" REPS=1 DURATION=5 timeout 220 bash scripts/gpu/ab-rows.sh 2>&1 | grep -E "^==|^(hp-alone|corun)"
