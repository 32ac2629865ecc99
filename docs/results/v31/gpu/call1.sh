# Session 52's first GPU call: main's head (681ebee: the launch-time bound with its quarter
# slack) at the defaults, the real clients and the matrix rows (after scripts/gpu/pack-yield.sh).
set -u
. scripts/gpu-env.sh
echo "### pyopencl"; PAIR_DURATION=6 timeout 170 bash scripts/gpu/pyopencl-run.sh 2>&1 | grep -E "^==|^(hp-alone|corun|lp-alone)"
echo "### tinygrad"; LIBS="-" REPS=1 DURATION=8 timeout 130 bash scripts/gpu/tinygrad-libs.sh 2>&1 | grep -E "^==|^(hp-alone|corun|lp-alone)"
echo "### matrix"; ROWS="compute memory gemm mandel" LIBS="-" REPS=1 DURATION=5 timeout 140 bash scripts/gpu/ab-rows.sh 2>&1 | grep -E "^==|^(hp-alone|corun)"
PY=$(mktemp -d); for w in carry/wheels/{pyopencl,pytools,platformdirs,siphash24,typing_extensions}-*.whl; do python3 -m zipfile -e "$w" "$PY" >/dev/null; done
echo "### kernel cost"; PYTHONPATH=$PY timeout 90 python3 benches/kernel_cost.py --lib "$PWD/carry/bin/libsoftpreempt.so" --vendor-lib "$NV" 2>&1 | tail -6
